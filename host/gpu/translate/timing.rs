//! Times of the GPU translations with the CSR already on the device (what a graph handle that
//! holds the CSR there pays), for `tcgnn info` and the benchmarks.

use std::sync::Arc;

use crate::error::Result;
use crate::gpu::Gpu;
use crate::gpu::csr::DeviceCsr;
use crate::gpu::timing::time_gpu;
use crate::gpu::translate::{mebcrs_on_device, sgt_on_device};
use crate::graph::Csr;

/// Median GPU milliseconds (event timing, 2 warm-up runs, `reps` timed) of SGT 16x8, SGT 16x16
/// and ME-BCRS 8x8, each including its one or two small read-backs and the allocations.
pub fn gpu_translate_ms(gpu: &Arc<Gpu>, csr: &Csr, reps: usize) -> Result<Vec<(&'static str, f64)>> {
    let d = DeviceCsr::upload(gpu, csr)?;
    let mut out = Vec::new();
    for (name, bw) in [("SGT 16x8 (SpMM)", 8), ("SGT 16x16 (SDDMM)", 16)] {
        let t = time_gpu(gpu, 2, reps, || sgt_on_device(gpu, csr, &d, bw).map(drop))?;
        out.push((name, t.median_ms));
    }
    let t = time_gpu(gpu, 2, reps, || mebcrs_on_device(gpu, csr, &d, 8).map(drop))?;
    out.push(("ME-BCRS 8x8 (tf32/f16)", t.median_ms));
    Ok(out)
}
