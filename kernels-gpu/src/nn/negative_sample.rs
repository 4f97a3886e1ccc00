//! Link prediction's training negatives: a thread per slot, grid-stride; each slot tries its
//! candidate pairs (`rng::negative_candidate`) in order and keeps the first non-edge of two
//! distinct nodes, found by a binary search of u's sorted row. The host's
//! `negative_sample_cpu` runs the same function per slot: the same pairs, bit for bit.

use super::grid_stride;
use crate::abi::nn::NegativeSampleArgs;
use crate::ptx;
use crate::rng::{NEG_ATTEMPTS, negative_candidate};

/// Whether `v` is in the sorted `col_idx[lo..hi]`.
#[inline(always)]
unsafe fn row_has(col_idx: *const u32, mut lo: u32, mut hi: u32, v: u32) -> bool {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let c = unsafe { ptx::ld_nc_u32(col_idx.add(mid as usize)) };
        if c == v {
            return true;
        }
        if c < v {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    false
}

#[inline(always)]
pub unsafe fn negative_sample(a: NegativeSampleArgs) {
    let NegativeSampleArgs { count, n, key, row_ptr, col_idx, out } = a;
    for i in grid_stride(count as u64) {
        let (mut pu, mut pv) = (u32::MAX, u32::MAX);
        let mut t = 0;
        while t < NEG_ATTEMPTS {
            let (u, v) = negative_candidate(key, n as u64, i, t);
            if u != v {
                let (lo, hi) = unsafe { (ptx::ld_nc_u32(row_ptr.add(u as usize)), ptx::ld_nc_u32(row_ptr.add(u as usize + 1))) };
                if !unsafe { row_has(col_idx, lo, hi, v) } {
                    (pu, pv) = (u, v);
                    break;
                }
            }
            t += 1;
        }
        unsafe {
            ptx::st_u32(out.add(2 * i as usize), pu);
            ptx::st_u32(out.add(2 * i as usize + 1), pv);
        }
    }
}
