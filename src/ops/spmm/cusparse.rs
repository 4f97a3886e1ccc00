//! cuSPARSE behind the same `spmm_device` entry as our kernels: a handle and the uploaded
//! matrix per graph, and per (X, Y) buffer pair a plan with the algorithm that measured
//! fastest on first use. It lets `Impl::Auto` fall back to the vendor library where none of our
//! kernels is faster, so Auto is never slower than cuSPARSE.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::gpu::cusparse::{DataType, Handle, Layout, SparseMatrix, SpmmAlg, SpmmPlan};
use crate::gpu::timing::time_gpu;
use crate::gpu::{DeviceMatrix, Gpu};
use crate::ops::{DeviceFeatures, GraphHandle};

/// Plans are bound to buffer addresses and shapes.
type PlanKey = (u64, u64, usize, usize, DataType);

struct CusparseState {
    handle: Arc<Handle>,
    matrices: Mutex<HashMap<(DataType, Layout), Arc<SparseMatrix>>>,
    plans: Mutex<HashMap<PlanKey, SpmmPlan>>,
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

/// Build a plan for every algorithm, time each a few times, keep the fastest.
fn fastest_plan<T: crate::gpu::memory::Element>(
    st: &CusparseState,
    g: &GraphHandle,
    gpu: &Arc<Gpu>,
    x: &DeviceMatrix<T>,
    dtype: DataType,
    y: &mut DeviceMatrix<f32>,
) -> Result<SpmmPlan> {
    let mut best: Option<(f64, SpmmPlan)> = None;
    let mut last_err = None;
    for alg in SpmmAlg::ALL {
        let attempt = st
            .matrix(g, gpu, dtype, alg.layout())
            .and_then(|a| SpmmPlan::new(&st.handle, &a, x, dtype, y, alg))
            .and_then(|mut plan| Ok((time_gpu(gpu, 1, 3, || plan.run())?.median_ms, plan)));
        match attempt {
            Ok((ms, plan)) if best.as_ref().is_none_or(|(b, _)| ms < *b) => best = Some((ms, plan)),
            Ok(_) => {}
            Err(e) => last_err = Some(e),
        }
    }
    best.map(|(_, p)| p).ok_or_else(|| last_err.unwrap_or_else(|| Error::Unsupported("no cuSPARSE SpMM algorithm".into())))
}

pub fn spmm_cusparse(g: &GraphHandle, x: &DeviceFeatures, y: &mut DeviceMatrix<f32>) -> Result<()> {
    let gpu = g.gpu()?;
    let st = g.cached(0, || {
        Ok(CusparseState { handle: Arc::new(Handle::new(gpu)?), matrices: Mutex::default(), plans: Mutex::default() })
    })?;
    let (x_ptr, x_rows, x_ld, dtype) = match x {
        DeviceFeatures::F32(m) => (m.ptr(), m.rows, m.ld, DataType::F32),
        DeviceFeatures::F16(m) => (m.ptr(), m.rows, m.ld, DataType::F16),
    };
    let key = (x_ptr, y.ptr(), x_rows, x_ld, dtype);
    let mut plans = st.plans.lock().expect("cuSPARSE plans poisoned");
    let plan = match plans.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert(match x {
            DeviceFeatures::F32(m) => fastest_plan(&st, g, gpu, m, dtype, y)?,
            DeviceFeatures::F16(m) => fastest_plan(&st, g, gpu, m, dtype, y)?,
        }),
    };
    plan.run()
}
