//! Cross-entropy (log-softmax + NLL over the train mask) fused with its gradient and the
//! accuracy counts: one group of `1 << shift` lanes per row (the classes rounded up to a power
//! of two, at most a warp; narrower rows share a warp), groups over the rows grid-stride on
//! warp-uniform bounds, lanes over the classes.
//! stats (zeroed by the launcher): [0] loss, [1 + b] correct rows with mask bit b set
//! (b = 0 train, 1 val, 2 test); per-lane partials, one atomic per block and stat
//! (16 bytes of dynamic shared memory). A label outside [0, cols) is never dereferenced: the row
//! counts as incorrect and gets no loss and a zero gradient.

use super::{BlockSums, global_warp, group_sum, row_group};
use crate::abi::nn::CrossEntropyArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn cross_entropy(args: CrossEntropyArgs) {
    let CrossEntropyArgs { rows, cols, ld, shift, logits, labels, mask_bits, inv_n_train, dlogits, stats } = args;
    let sums = BlockSums::<4>::new();
    let (grp, sub, lanes, per_warp) = row_group(shift);
    let mut part = [0f32; 4];
    let (w, n_warps) = global_warp();
    let mut row0 = w * per_warp;
    while row0 < rows {
        let row = row0 + grp;
        let active = row < rows;
        let base = row as usize * ld as usize;
        let x = |c: u32| unsafe { ptx::ld_nc_f32(logits.add(base + c as usize)) };
        // Max and first argmax: each lane scans its classes in increasing order, then the
        // group keeps the larger value, the smaller class on ties.
        let (mut best, mut arg) = if active && sub < cols { (x(sub), sub) } else { (f32::NEG_INFINITY, u32::MAX) };
        let mut c = sub + lanes;
        while active && c < cols {
            let v = x(c);
            if v > best {
                best = v;
                arg = c;
            }
            c += lanes;
        }
        let mut m = lanes >> 1;
        while m > 0 {
            let (ob, oa) = (ptx::shfl_xor_f32(best, m), ptx::shfl_xor_u32(arg, m));
            if ob > best || (ob == best && oa < arg) {
                best = ob;
                arg = oa;
            }
            m >>= 1;
        }
        let max = best;
        let mut sum = 0f32;
        let mut c = sub;
        while active && c < cols {
            sum += ptx::exp(x(c) - max);
            c += lanes;
        }
        let sum = group_sum(sum, lanes);
        if active {
            let label = unsafe { ptx::ld_nc_u32(labels.add(row as usize) as *const u32) }; // < 0 -> huge
            let bits = unsafe { ptx::ld_nc_u8(mask_bits.add(row as usize)) };
            let valid = label < cols;
            let train = valid && bits & 1 != 0;
            let inv_sum = 1.0 / sum;
            let mut c = sub;
            while c < ld {
                let g = if train && c < cols {
                    let p = ptx::exp(x(c) - max) * inv_sum;
                    (if c == label { p - 1.0 } else { p }) * inv_n_train
                } else {
                    0.0
                };
                unsafe { ptx::st_f32(dlogits.add(base + c as usize), g) };
                c += lanes;
            }
            if sub == 0 {
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
        }
        row0 += n_warps * per_warp;
    }
    unsafe { sums.flush(part, stats) };
}

/// The same for rows of `LD` ≤ 16 floats (ld = LD): a thread per row holding it in registers
/// (LD / 4 float4 loads and stores, no shuffles). A group of lanes per row left a warp a long
/// dependent chain of shuffles per 4 rows of 8 classes, three times this kernel's time (NOTES,
/// 2026-11-27 morning).
#[inline(always)]
pub unsafe fn cross_entropy_rows<const LD: usize>(args: CrossEntropyArgs) {
    let CrossEntropyArgs { rows, cols, logits, labels, mask_bits, inv_n_train, dlogits, stats, .. } = args;
    let sums = BlockSums::<4>::new();
    let mut part = [0f32; 4];
    for row in super::grid_stride(rows as u64) {
        let base = row as usize * LD;
        let mut v = [0f32; LD];
        crate::unroll4!(q => {
            if 4 * q < LD {
                let f = unsafe { ptx::ld_nc_v4_f32(logits.add(base + 4 * q)) };
                crate::unroll4!(e => { v[4 * q + e] = f[e]; });
            }
        });
        // Max and first argmax over the classes (padding columns excluded).
        let (mut max, mut arg) = (v[0], 0u32);
        crate::unroll4!(q => {
            crate::unroll4!(e => {
                let c = 4 * q + e;
                if c < LD && (c as u32) < cols && v[c] > max {
                    max = v[c];
                    arg = c as u32;
                }
            });
        });
        let label = unsafe { ptx::ld_nc_u32(labels.add(row as usize) as *const u32) }; // < 0 -> huge
        let bits = unsafe { ptx::ld_nc_u8(mask_bits.add(row as usize)) };
        // exp(x - max) in place; the label's x - max kept for the loss.
        let (mut sum, mut x_label) = (0f32, 0f32);
        crate::unroll4!(q => {
            crate::unroll4!(e => {
                let c = 4 * q + e;
                if c < LD && (c as u32) < cols {
                    if c as u32 == label {
                        x_label = v[c] - max;
                    }
                    v[c] = ptx::exp(v[c] - max);
                    sum += v[c];
                }
            });
        });
        let valid = label < cols;
        let train = valid && bits & 1 != 0;
        let inv_sum = 1.0 / sum;
        crate::unroll4!(q => {
            if 4 * q < LD {
                let mut g = [0f32; 4];
                crate::unroll4!(e => {
                    let c = 4 * q + e;
                    if train && (c as u32) < cols {
                        let p = v[c] * inv_sum;
                        g[e] = (if c as u32 == label { p - 1.0 } else { p }) * inv_n_train;
                    }
                });
                unsafe { ptx::st_v4_f32(dlogits.add(base + 4 * q), g) };
            }
        });
        if train {
            part[0] -= (x_label - ptx::ln(sum)) * inv_n_train;
        }
        if valid && arg == label {
            for b in 0..3 {
                if bits & (1 << b) != 0 {
                    part[1 + b] += 1.0;
                }
            }
        }
    }
    unsafe { sums.flush(part, stats) };
}
