//! Binary cross entropy with logits, fused with its gradient: a thread per entry, grid-stride,
//! one `BlockSums` flush of the loss per block (stats zeroed by the launcher). Entries whose
//! target is 0 (no pair: the padding of a layout) add nothing and get a zero gradient.

use super::{BlockSums, grid_stride};
use crate::abi::nn::BceLogitsArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn bce_logits(a: BceLogitsArgs) {
    let BceLogitsArgs { n, scores, targets, inv_n, grad, stats } = a;
    let sums = BlockSums::<1>::new();
    let mut loss = 0f32;
    for i in grid_stride(n as u64) {
        let i = i as usize;
        let (s, y) = unsafe { (ptx::ld_nc_f32(scores.add(i)), ptx::ld_nc_f32(targets.add(i))) };
        let g = if y == 0.0 {
            0.0
        } else {
            let t = if y > 0.0 { 1.0 } else { 0.0 };
            // Stable in both tails: exp of a non-positive number only.
            let e = ptx::exp(-s.abs());
            loss += (s.max(0.0) - s * t + ptx::ln(1.0 + e)) * inv_n;
            let sig = if s >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) };
            (sig - t) * inv_n
        };
        unsafe { ptx::st_f32(grad.add(i), g) };
    }
    unsafe { sums.flush([loss], stats) };
}
