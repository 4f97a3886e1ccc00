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
    let t = time_gpu(gpu, 3, 20, || gpu.stream.memcpy_dtod(src.slice(), dst.slice_mut()).map_err(|e| Error::cuda("memcpy_dtod", e)))?;
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

/// L2 read bandwidth in GB/s: the probe kernel reads a buffer of a quarter of L2 many times
/// over with every SM busy (the first pass brings it in; it is timed with the rest, a 1 / passes
/// error on the safe side). Neighbour-row gathers of a product are charged at this rate.
pub fn l2_bandwidth_gbs(gpu: &std::sync::Arc<Gpu>) -> Result<f64> {
    use crate::gpu::abi::probe::{L2ReadArgs, probe_l2_read};
    use crate::gpu::launch::Shape;
    let n4 = (gpu.info().l2_bytes as usize / 4 / 16).max(1024);
    let passes = 50u32;
    let (blocks, threads) = (gpu.info().sm_count * 8, 256u32);
    let x = DeviceVec::<f32>::zeros(gpu, 4 * n4)?;
    let mut out = DeviceVec::<f32>::zeros(gpu, (blocks * threads) as usize)?;
    let args = L2ReadArgs { n4: n4 as u32, passes, x: x.arg(gpu), out: out.arg_mut(gpu) };
    let t = time_gpu(gpu, 3, 20, || {
        // SAFETY: x holds 4 * n4 floats, out one float per thread of the grid.
        unsafe { probe_l2_read.launch(gpu, Shape::linear(blocks, threads, 0), &args) }
    })?;
    Ok(passes as f64 * (n4 * 16) as f64 / (t.median_ms * 1e-3) / 1e9)
}

/// Floor time in ms of a step moving `t` over `copy_gbs` (DRAM) and `l2_gbs` (gathers).
pub fn step_floor_ms(t: &crate::nn::models::traffic::StepTraffic, copy_gbs: f64, l2_gbs: f64) -> f64 {
    floor_ms(t.dram_bytes, copy_gbs) + floor_ms(t.l2_bytes, l2_gbs)
}
