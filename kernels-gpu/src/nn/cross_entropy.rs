//! Cross-entropy (log-softmax + NLL over the train mask) fused with its gradient and the
//! accuracy counts: a warp per row (grid-stride over rows), lanes over the classes.
//! stats (zeroed by the launcher): [0] loss, [1 + b] correct rows with mask bit b set
//! (b = 0 train, 1 val, 2 test); per-lane partials, one atomic per block and stat
//! (16 bytes of dynamic shared memory). A label outside [0, cols) is never dereferenced: the row
//! counts as incorrect and gets no loss and a zero gradient.

use super::{BlockSums, global_warp};
use crate::ptx;

#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cross_entropy_f32(
    rows: u32,
    cols: u32,
    ld: u32,
    logits: *const f32,
    labels: *const i32,
    mask_bits: *const u8,
    inv_n_train: f32,
    dlogits: *mut f32,
    stats: *mut f32,
) {
    let sums = BlockSums::<4>::new();
    let lane = ptx::lane_id();
    let mut part = [0f32; 4];
    let (mut row, n_warps) = global_warp();
    while row < rows {
        let base = row as usize * ld as usize;
        let x = |c: u32| unsafe { ptx::ld_nc_f32(logits.add(base + c as usize)) };
        // Max and first argmax: each lane scans its classes in increasing order.
        let (mut best, mut arg) = if lane < cols { (x(lane), lane) } else { (f32::NEG_INFINITY, u32::MAX) };
        let mut c = lane + 32;
        while c < cols {
            let v = x(c);
            if v > best {
                best = v;
                arg = c;
            }
            c += 32;
        }
        for m in [16, 8, 4, 2, 1] {
            let (ob, oa) = (ptx::shfl_xor_f32(best, m), ptx::shfl_xor_u32(arg, m));
            if ob > best || (ob == best && oa < arg) {
                best = ob;
                arg = oa;
            }
        }
        let max = best;
        let mut sum = 0f32;
        let mut c = lane;
        while c < cols {
            sum += ptx::exp(x(c) - max);
            c += 32;
        }
        let sum = ptx::warp_sum(sum);
        let label = unsafe { ptx::ld_nc_u32(labels.add(row as usize) as *const u32) }; // < 0 -> huge
        let bits = unsafe { ptx::ld_nc_u8(mask_bits.add(row as usize)) };
        let valid = label < cols;
        let train = valid && bits & 1 != 0;
        let inv_sum = 1.0 / sum;
        let mut c = lane;
        while c < ld {
            let g = if train && c < cols {
                let p = ptx::exp(x(c) - max) * inv_sum;
                (if c == label { p - 1.0 } else { p }) * inv_n_train
            } else {
                0.0
            };
            unsafe { ptx::st_f32(dlogits.add(base + c as usize), g) };
            c += 32;
        }
        if lane == 0 {
            if train {
                part[0] -= (x(label) - max - ptx::ln(sum)) * inv_n_train;
            }
            if valid && arg == label {
                for b in 0..3 {
                    if bits & (1 << b) != 0 {
                        part[1 + b] += 1.0;
                    }
                }
            }
        }
        row += n_warps;
    }
    unsafe { sums.flush(part, stats) };
}
