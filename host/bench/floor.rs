//! The memory floor: the fewest bytes an op must move over the measured copy bandwidth.

use crate::error::{Error, Result};
use crate::gpu::timing::time_gpu;
use crate::gpu::{DeviceVec, Gpu};

/// Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (the same
/// way the floor counts them), on a 1 GiB buffer well beyond L2.
pub fn copy_bandwidth_gbs(gpu: &Gpu) -> Result<f64> {
    let n = 256 << 20; // 256 Mi floats = 1 GiB
    let src = DeviceVec::<f32>::zeros(gpu, n)?;
    let mut dst = DeviceVec::<f32>::zeros(gpu, n)?;
    let t = time_gpu(gpu, 3, 20, || {
        gpu.stream.memcpy_dtod(src.slice(), dst.slice_mut()).map_err(|e| Error::cuda("memcpy_dtod", e))
    })?;
    Ok(2.0 * (n * 4) as f64 / (t.median_ms * 1e-3) / 1e9)
}

/// SpMM bytes: each nonzero's column index and value, X read once, Y written once.
pub fn spmm_bytes(n_rows: usize, n_cols: usize, nnz: usize, k: usize, value_bytes: usize, feature_bytes: usize) -> f64 {
    (nnz * (4 + value_bytes) + n_cols * k * feature_bytes + n_rows * k * 4) as f64
}

/// SDDMM bytes: each nonzero's row and column index and value read, one output value written,
/// A and B rows read once each.
pub fn sddmm_bytes(n_rows: usize, n_cols: usize, nnz: usize, k: usize, feature_bytes: usize) -> f64 {
    (nnz * (4 + 4 + 4 + 4) + (n_rows + n_cols) * k * feature_bytes) as f64
}

/// Floor time in ms for `bytes` at `gbs`.
pub fn floor_ms(bytes: f64, gbs: f64) -> f64 {
    bytes / (gbs * 1e9) * 1e3
}
