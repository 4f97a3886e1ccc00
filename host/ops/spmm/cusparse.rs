//! cuSPARSE behind the same `spmm_device` entry as our kernels: a handle and the uploaded
//! matrix per graph, and per (X, Y) buffer pair a plan with the algorithm that measured
//! fastest on first use. It lets `Impl::Auto` fall back to the vendor library where none of our
//! kernels is faster, so Auto is never slower than cuSPARSE.
//!
//! Per-call values (CSR order, f32) are swapped into the sparse descriptor before each run
//! (`cusparseSpMatSetValues`): descriptors, plans, workspaces and preprocessing stay as built.
//! f16 features need f16 values: per-call values are then cast on the device into an f16 buffer
//! the state keeps (allocated on first use).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::gpu::cusparse::{DataType, Handle, Layout, SparseMatrix, SpmmAlg, SpmmPlan};
use crate::gpu::timing::time_gpu;
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::{FeaturesRef, GraphHandle, ValueOrder};

/// Plans are bound to buffer addresses and shapes.
type PlanKey = (u64, u64, usize, usize, DataType);

struct CusparseState {
    handle: Arc<Handle>,
    matrices: Mutex<HashMap<(DataType, Layout), Arc<SparseMatrix>>>,
    plans: Mutex<HashMap<PlanKey, SpmmPlan>>,
    /// Per-call f32 values cast to f16 for f16 features (nnz values, allocated on first use).
    f16_values: Mutex<Option<DeviceVec<half::f16>>>,
}

impl CusparseState {
    fn matrix(&self, g: &GraphHandle, gpu: &Arc<Gpu>, dtype: DataType, layout: Layout) -> Result<Arc<SparseMatrix>> {
        let mut m = self.matrices.lock().expect("cuSPARSE cache poisoned");
        if let Some(a) = m.get(&(dtype, layout)) {
            return Ok(a.clone());
        }
        let a = Arc::new(SparseMatrix::upload(gpu, g.csr(), layout, dtype)?);
        m.insert((dtype, layout), a.clone());
        Ok(a)
    }
}

/// Build a plan for every algorithm, time each a few times, keep the fastest. `values` as for
/// [`SpmmPlan::run_with_values`]: the values every run (preprocessing included) reads.
///
/// # Safety
/// As for [`crate::gpu::cusparse::SparseMatrix::set_values`] (the caller holds the plans lock).
unsafe fn fastest_plan<T: crate::gpu::memory::Element>(
    st: &CusparseState,
    g: &GraphHandle,
    gpu: &Arc<Gpu>,
    x: &DeviceMatrix<T>,
    dtype: DataType,
    y: &mut DeviceMatrix<f32>,
    values: Option<u64>,
) -> Result<SpmmPlan> {
    let mut best: Option<(f64, SpmmPlan)> = None;
    let mut last_err = None;
    for alg in SpmmAlg::ALL {
        let attempt = st
            .matrix(g, gpu, dtype, alg.layout())
            .and_then(|a| unsafe { a.set_values(values) }.map(|_| a))
            .and_then(|a| SpmmPlan::new(&st.handle, &a, x, dtype, y, alg))
            .and_then(|mut plan| Ok((time_gpu(gpu, 1, 3, || unsafe { plan.run_with_values(values) })?.median_ms, plan)));
        match attempt {
            Ok((ms, plan)) if best.as_ref().is_none_or(|(b, _)| ms < *b) => best = Some((ms, plan)),
            Ok(_) => {}
            Err(e) => last_err = Some(e),
        }
    }
    best.map(|(_, p)| p).ok_or_else(|| last_err.unwrap_or_else(|| Error::Unsupported("no cuSPARSE SpMM algorithm".into())))
}

pub fn spmm_cusparse(g: &GraphHandle, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_cusparse_values(g, None, x, y)
}

/// [`spmm_cusparse`] with per-call values in CSR order (`None`: the handle's).
pub fn spmm_cusparse_values(g: &GraphHandle, values: Option<&DeviceVec<f32>>, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    let gpu = g.gpu()?;
    if let Some(v) = values {
        crate::ops::values::check_len("cuSPARSE SpMM: the edge values", v.len(), g.csr().nnz(), ValueOrder::Csr)?;
    }
    let st = g.cached(0, || {
        Ok(CusparseState {
            handle: Arc::new(Handle::new(gpu)?),
            matrices: Mutex::default(),
            plans: Mutex::default(),
            f16_values: Mutex::default(),
        })
    })?;
    let (x_ptr, x_rows, x_ld, dtype) = match x {
        FeaturesRef::F32(m) => (m.ptr(), m.rows, m.ld, DataType::F32),
        FeaturesRef::F16(m) => (m.ptr(), m.rows, m.ld, DataType::F16),
    };
    let key = (x_ptr, y.ptr(), x_rows, x_ld, dtype);
    let mut plans = st.plans.lock().expect("cuSPARSE plans poisoned");
    // Hold the f16 buffer's lock until the SpMM is enqueued: the descriptor points into it.
    let mut f16_values = st.f16_values.lock().expect("cuSPARSE f16 values poisoned");
    let values_ptr = match (values, dtype) {
        (None, _) => None,
        (Some(v), DataType::F32) => Some(v.ptr(gpu)),
        (Some(v), DataType::F16) => {
            if f16_values.is_none() {
                *f16_values = Some(DeviceVec::zeros(gpu, v.len())?);
            }
            let buf = f16_values.as_mut().expect("allocated above");
            crate::ops::values::cast_to_f16(gpu, v, buf)?;
            Some(buf.ptr(gpu))
        }
    };
    let plan = match plans.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        // SAFETY (both): `values_ptr` is None or nnz values of `dtype` in CSR order (length
        // checked above; f16 ones in the state's buffer), alive until these calls return and
        // the enqueued work runs (the caller's borrow and the stream order); the plans lock
        // serialises the descriptor swap and the runs.
        std::collections::hash_map::Entry::Vacant(e) => e.insert(match x {
            FeaturesRef::F32(m) => unsafe { fastest_plan(&st, g, gpu, m, dtype, y, values_ptr)? },
            FeaturesRef::F16(m) => unsafe { fastest_plan(&st, g, gpu, m, dtype, y, values_ptr)? },
        }),
    };
    // SAFETY: as above.
    unsafe { plan.run_with_values(values_ptr) }
}
