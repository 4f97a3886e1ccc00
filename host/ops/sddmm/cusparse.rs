//! cuSPARSE SDDMM behind `sddmm_device` (f32, CSR order): a plan per (A, B, out) buffer
//! triple, built on first use. cuSPARSE samples the pattern without S's values, so this path
//! accepts only unit-valued graphs (the attention case) rather than return a different function.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::gpu::cusparse::{Handle, SddmmPlan};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::GraphHandle;

struct CusparseSddmm {
    handle: Arc<Handle>,
    plans: Mutex<HashMap<(u64, u64, u64, usize), SddmmPlan>>,
}

/// C = (A B^T) .* spy(S). Refuses graphs whose values are not all 1, since cuSPARSE would
/// silently drop them.
pub fn sddmm_cusparse(g: &GraphHandle, a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, out: &mut DeviceVec<f32>) -> Result<()> {
    if !super::has_unit_values(g)? {
        return Err(Error::Unsupported("cuSPARSE SDDMM samples the pattern only; use a unit-valued graph".into()));
    }
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let st = g.cached(1, || Ok(CusparseSddmm { handle: Arc::new(Handle::new(gpu)?), plans: Mutex::default() }))?;
    let key = (a.ptr(), b.ptr(), out.ptr(gpu), a.ld);
    let mut plans = st.plans.lock().expect("cuSPARSE SDDMM plans poisoned");
    let plan = match plans.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            let shape = (g.csr().n_rows(), g.csr().n_cols(), g.csr().nnz());
            let out_ptr = out.ptr_mut(gpu);
            e.insert(SddmmPlan::new(&st.handle, shape, csr.row_ptr.ptr(gpu), csr.col_idx.ptr(gpu), out_ptr, a, b)?)
        }
    };
    plan.run()
}
