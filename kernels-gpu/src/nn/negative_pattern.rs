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
/// negative, 0: a repeat of the entry before it, skipped by the loss) and adds the row's
/// distinct pairs seen from their first end (low bit 0: each pair once) to `distinct[0]`.
#[inline(always)]
pub unsafe fn sort(a: NegativePatternArgs) {
    let lane = ptx::lane_id();
    let (mut r, warps) = global_warp();
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
            unsafe { warp_bitonic(keys, len) };
        }
        ptx::sync_warp();
        let mut firsts = 0u32;
        let mut e = lane;
        while e < len {
            let k = unsafe { *keys.add(e as usize) };
            let repeat = e > 0 && unsafe { *keys.add(e as usize - 1) } == k;
            unsafe { ptx::st_f32(a.targets.add((lo + e) as usize), if repeat { 0.0 } else { -1.0 }) };
            firsts += (!repeat && k & 1 == 0) as u32;
            e += 32;
        }
        // Lane sums by shuffles (every lane takes part: the loop bounds are warp-uniform).
        let mut m = 16;
        while m > 0 {
            firsts += ptx::shfl_xor_u32(firsts, m);
            m >>= 1;
        }
        if lane == 0 && firsts > 0 {
            unsafe { ptx::red_add_u32(a.distinct, firsts) };
        }
        ptx::sync_warp();
        r += warps;
    }
}

/// Sorts the `len` u32s at `p` ascending, the warp together, in place (global memory): a
/// bitonic network whose merges start by comparing mirrored positions, so every comparator
/// puts the smaller value first and the positions past `len` act as +inf (their comparators
/// are skipped). Lanes own disjoint comparators within a stage; `bar.warp.sync` orders the
/// stages' memory accesses.
#[inline(always)]
unsafe fn warp_bitonic(p: *mut u32, len: u32) {
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
