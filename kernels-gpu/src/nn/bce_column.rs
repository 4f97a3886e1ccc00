//! Binary cross entropy with logits of a link step's scores as a `rows x 1` column, targets
//! implied by position (the step's positives lead its pairs): a thread a row, grid-stride,
//! fused with the gradient, one `BlockSums` flush of the loss per block. Rows past the step's
//! pairs (the capacity's padding) add nothing and get a zero gradient.

use super::{BlockSums, grid_stride};
use crate::abi::nn::BceColumnArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn bce_column(a: BceColumnArgs) {
    let BceColumnArgs { rows, ld, pairs, positives, grad_scale, loss_scale, x, grad, stats } = a;
    let sums = BlockSums::<1>::new();
    let mut loss = 0f32;
    for r in grid_stride(rows as u64) {
        let r = r as u32;
        let g = if r < pairs {
            let s = unsafe { ptx::ld_nc_f32(x.add(r as usize * ld as usize)) };
            let t = if r < positives { 1.0 } else { 0.0 };
            // Stable in both tails: exp of a non-positive number only.
            let e = ptx::exp(-s.abs());
            loss += (s.max(0.0) - s * t + ptx::ln(1.0 + e)) * loss_scale;
            let sig = if s >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) };
            (sig - t) * grad_scale
        } else {
            0.0
        };
        // The row whole: the gradient, then its padding columns 0 (ld is a multiple of 4).
        let row = unsafe { grad.add(r as usize * ld as usize) };
        let mut c = 0;
        while c < ld {
            unsafe { ptx::st_v4_f32(row.add(c as usize), [if c == 0 { g } else { 0.0 }, 0.0, 0.0, 0.0]) };
            c += 4;
        }
    }
    unsafe { sums.flush([loss], stats) };
}
