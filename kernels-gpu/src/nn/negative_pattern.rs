//! An epoch's training negatives as a symmetric pair pattern, built on the device from the
//! slots `negative_sample` drew (pairs interleaved, `u32::MAX` for an empty slot): every pair
//! (u, v) is entry `v << 1` of row u and entry `u << 1 | 1` of row v (the low bit: which end
//! the row is, so that a drawn (u, v) and a drawn (v, u) stay two pairs), rows sorted by key.
//! Three kernels around a scan of the row counts (the host's `negative_pattern` launcher):
//! `count` (two row counts a pair), `fill` (each pair's two entries at any free place of their
//! rows), `sort` (a warp a row sorts it, then marks every repeat of a key: a pair drawn twice
//! in the epoch is scored once, as the CPU's sort and dedup). The result does not depend on
//! the order of the atomics: a sorted row is a function of its keys.

use super::{global_thread, global_warp, grid_threads};
use crate::abi::nn::NegativePatternArgs;
use crate::ptx;
use crate::warp_sort::warp_sort;

/// counts[u] += 1 and counts[v] += 1 for every drawn (non-empty) slot.
#[inline(always)]
pub unsafe fn count(a: NegativePatternArgs) {
    let mut i = global_thread();
    while i < a.count {
        let (u, v) = unsafe { (ptx::ld_nc_u32(a.slots.add(2 * i as usize)), ptx::ld_nc_u32(a.slots.add(2 * i as usize + 1))) };
        if u != u32::MAX {
            unsafe {
                ptx::red_add_u32(a.counts.add(u as usize), 1);
                ptx::red_add_u32(a.counts.add(v as usize), 1);
            }
        }
        i += grid_threads();
    }
}

/// Each drawn pair's two entries into free places of rows u and v: `counts` (the rows'
/// lengths, which the scan into `row_ptr` read) count down to 0 as the places are taken.
#[inline(always)]
pub unsafe fn fill(a: NegativePatternArgs) {
    let mut i = global_thread();
    while i < a.count {
        let (u, v) = unsafe { (ptx::ld_nc_u32(a.slots.add(2 * i as usize)), ptx::ld_nc_u32(a.slots.add(2 * i as usize + 1))) };
        if u != u32::MAX {
            unsafe {
                let q = *a.row_ptr.add(u as usize) + ptx::atom_add_u32(a.counts.add(u as usize), u32::MAX) - 1;
                *a.keys.add(q as usize) = v << 1;
                let q = *a.row_ptr.add(v as usize) + ptx::atom_add_u32(a.counts.add(v as usize), u32::MAX) - 1;
                *a.keys.add(q as usize) = (u << 1) | 1;
            }
        }
        i += grid_threads();
    }
}

/// A warp a row: sorts the row's keys ascending, then writes each entry's target (-1: a
/// negative, 0: a repeat of the entry before it, skipped by the loss) and counts the row's
/// distinct pairs seen from their first end (low bit 0: each pair once); a warp adds its rows'
/// count to `distinct[0]` once, after its last row (one atomic a row on one address serialised
/// a million of them on a 1M-node graph).
#[inline(always)]
pub unsafe fn sort(a: NegativePatternArgs) {
    let lane = ptx::lane_id();
    let (mut r, warps) = global_warp();
    let mut firsts = 0u32;
    while r < a.n {
        let (lo, hi) = unsafe { (*a.row_ptr.add(r as usize), *a.row_ptr.add(r as usize + 1)) };
        let len = hi - lo;
        let keys = unsafe { a.keys.add(lo as usize) };
        if len <= 32 {
            // In registers: each lane's key goes to its rank (ties by lane: equal keys are
            // equal values, any order of them is the same row).
            let k = if lane < len { unsafe { *keys.add(lane as usize) } } else { u32::MAX };
            let mut rank = 0u32;
            for m in 0..len {
                let o = ptx::shfl_idx_u32(k, m);
                rank += (o < k || (o == k && m < lane)) as u32;
            }
            ptx::sync_warp();
            if lane < len {
                unsafe { *keys.add(rank as usize) = k };
            }
        } else {
            unsafe { warp_sort(keys, len) };
        }
        ptx::sync_warp();
        let mut e = lane;
        while e < len {
            let k = unsafe { *keys.add(e as usize) };
            let repeat = e > 0 && unsafe { *keys.add(e as usize - 1) } == k;
            unsafe { ptx::st_f32(a.targets.add((lo + e) as usize), if repeat { 0.0 } else { -1.0 }) };
            firsts += (!repeat && k & 1 == 0) as u32;
            e += 32;
        }
        ptx::sync_warp();
        r += warps;
    }
    // Lane sums by shuffles (every lane takes part: the row loop's bounds are warp-uniform).
    let mut m = 16;
    while m > 0 {
        firsts += ptx::shfl_xor_u32(firsts, m);
        m >>= 1;
    }
    if lane == 0 && firsts > 0 {
        unsafe { ptx::red_add_u32(a.distinct, firsts) };
    }
}
