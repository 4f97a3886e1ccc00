//! A warp sorting a short run of u32s in global memory together: the per-row sorts of the
//! neighbour sampler's blocks and of the link task's negative pair pattern.

use crate::ptx;

/// Sorts the `len` u32s at `p` ascending, the whole warp together, in place: a bitonic network
/// whose merges start by comparing mirrored positions, so every comparator puts the smaller value
/// first and the positions past `len` act as +inf (their comparators are skipped). Equal values
/// are fine. Lanes own disjoint comparators within a stage; `bar.warp.sync` orders the global
/// accesses between stages. Every lane of the warp must call it with the same `p` and `len`.
///
/// # Safety
/// `p` must point to `len` u32s that only this warp reads or writes during the call.
#[inline(always)]
pub unsafe fn warp_sort(p: *mut u32, len: u32) {
    let lane = ptx::lane_id();
    let swap_if = |i: u32, j: u32| {
        if j < len {
            let (x, y) = unsafe { (*p.add(i as usize), *p.add(j as usize)) };
            if x > y {
                unsafe {
                    *p.add(i as usize) = y;
                    *p.add(j as usize) = x;
                }
            }
        }
    };
    let mut k = 2u32;
    while k / 2 < len {
        let mut i = lane;
        while i < len {
            if i & (k / 2) == 0 {
                swap_if(i, i ^ (k - 1));
            }
            i += 32;
        }
        ptx::sync_warp();
        let mut j = k / 4;
        while j > 0 {
            let mut i = lane;
            while i < len {
                if i & j == 0 {
                    swap_if(i, i | j);
                }
                i += 32;
            }
            ptx::sync_warp();
            j /= 2;
        }
        k *= 2;
    }
}
