//! Launcher of `kernels-gpu/src/spmm/csr.rs`: CSR on CUDA cores, f32 or f16 features (f32
//! values, accumulation and Y), a group of lanes a row sized to the feature width.

use crate::error::{Error, Result};
use crate::gpu::abi::spmm::{CsrSpmmArgs, spmm_csr_f16, spmm_csr_f32};
use crate::gpu::launch::Shape;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::values::check_len;
use crate::ops::{FeaturesRef, GraphHandle, ValueOrder};

use crate::shared::config;

pub fn spmm_csr<'a>(g: &GraphHandle, x: impl Into<FeaturesRef<'a>>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_csr_values(g, None, x.into(), y)
}

/// log2 of the lanes the kernel gives a row: the power of two covering the row's 16-byte chunks
/// (`ld` elements of `elem_bytes`), at most a warp.
pub fn group_log2(ld: usize, elem_bytes: usize) -> u32 {
    let chunks = (ld * elem_bytes).div_ceil(16).max(1);
    chunks.next_power_of_two().trailing_zeros().min(5)
}

/// [`spmm_csr`] with per-call values in CSR order (`None`: the handle's).
pub fn spmm_csr_values(g: &GraphHandle, values: Option<&DeviceVec<f32>>, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let values = match values {
        Some(v) => {
            check_len("CSR SpMM: the edge values", v.len(), g.csr().nnz(), ValueOrder::Csr)?;
            v
        }
        None => &csr.values,
    };
    let (x_arg, ld, elem_bytes, kernel) = match x {
        FeaturesRef::F32(m) => (m.arg().cast(), m.ld, 4, spmm_csr_f32),
        FeaturesRef::F16(m) => (m.arg().cast(), m.ld, 2, spmm_csr_f16),
    };
    if ld != y.ld || ld % 8 != 0 {
        return Err(Error::Shape(format!("CSR SpMM: X's row stride {ld} and Y's {} must be one multiple of 8", y.ld)));
    }
    let n = g.csr().n_rows() as u32;
    if n == 0 {
        return Ok(());
    }
    let log2 = group_log2(ld, elem_bytes);
    let rows_per_block = (32 >> log2) * config::CSR_SPMM_WARPS;
    let body_blocks = n.div_ceil(rows_per_block);
    // One more block per hub row (the body's warps skip them).
    let shape = Shape::linear(body_blocks + csr.n_hubs as u32, 32 * config::CSR_SPMM_WARPS, config::CSR_SPMM_SMEM_BYTES);
    let args = CsrSpmmArgs {
        n_rows: n,
        ld: ld as u32,
        group_log2: log2,
        row_ptr: csr.row_ptr.arg(gpu),
        col_idx: csr.col_idx.arg(gpu),
        values: values.arg(gpu),
        x: x_arg,
        y: y.arg_mut(),
        hub_rows: csr.hub_rows.arg(gpu),
        n_hubs: csr.n_hubs as u32,
        body_blocks,
    };
    // SAFETY: the CSR arrays, the nnz values and X, Y are live device buffers sized by the
    // validated graph and the shape checks in `ops::spmm` (X: n_cols rows, Y: n_rows rows), X
    // of the kernel's element type, and X and Y share the padded stride `ld` (a multiple of 8,
    // checked above, so the 16-byte accesses stay aligned); `hub_rows` holds `n_hubs` row ids
    // below n (made from the same CSR), one block each after the body's, with the shared memory
    // their partial sums need.
    unsafe { kernel.launch(gpu, shape, &args) }
}

#[cfg(test)]
mod tests {
    use super::group_log2;

    #[test]
    fn a_row_gets_the_lanes_covering_its_chunks() {
        // f16: 8 columns a chunk.
        assert_eq!(group_log2(8, 2), 0);
        assert_eq!(group_log2(16, 2), 1);
        assert_eq!(group_log2(24, 2), 2);
        assert_eq!(group_log2(64, 2), 3);
        assert_eq!(group_log2(104, 2), 4);
        assert_eq!(group_log2(256, 2), 5);
        assert_eq!(group_log2(504, 2), 5);
        // f32: 4 columns a chunk.
        assert_eq!(group_log2(8, 4), 1);
        assert_eq!(group_log2(16, 4), 2);
        assert_eq!(group_log2(128, 4), 5);
        assert_eq!(group_log2(504, 4), 5);
    }
}
