//! Launcher of `kernels-gpu/src/spmm/csr.rs`: a warp per row, f32.

use crate::error::Result;
use crate::gpu::abi::spmm::{CsrSpmmArgs, spmm_csr_f32};
use crate::gpu::launch::Shape;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::values::check_len;
use crate::ops::{GraphHandle, ValueOrder};

use crate::shared::config;

pub fn spmm_csr(g: &GraphHandle, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_csr_values(g, None, x, y)
}

/// [`spmm_csr`] with per-call values in CSR order (`None`: the handle's).
pub fn spmm_csr_values(g: &GraphHandle, values: Option<&DeviceVec<f32>>, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let values = match values {
        Some(v) => {
            check_len("CSR SpMM: the edge values", v.len(), g.csr().nnz(), ValueOrder::Csr)?;
            v
        }
        None => &csr.values,
    };
    let n = g.csr().n_rows() as u32;
    debug_assert_eq!(x.ld, y.ld);
    let shape = Shape::linear(n.div_ceil(config::CSR_SPMM_WARPS), 32 * config::CSR_SPMM_WARPS, 0);
    let args = CsrSpmmArgs {
        n_rows: n,
        ld: x.ld as u32,
        row_ptr: csr.row_ptr.arg(gpu),
        col_idx: csr.col_idx.arg(gpu),
        values: values.arg(gpu),
        x: x.arg(),
        y: y.arg_mut(),
    };
    // SAFETY: the CSR arrays, the nnz values and X, Y are live device buffers sized by the
    // validated graph and the shape checks in `ops::spmm`, and X and Y share the padded stride
    // `ld` (a multiple of 8, so the float4 accesses stay aligned).
    unsafe { spmm_csr_f32.launch(gpu, shape, &args) }
}
