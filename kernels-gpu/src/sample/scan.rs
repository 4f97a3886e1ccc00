//! Exclusive prefix sums of u32 arrays of any length, in tiles of `SCAN_TILE` (one block of `SCAN_BLOCK` each):
//! `tile_sums` sums every tile, the one-block `window_scan` (`format/scan.rs`) turns the sums into
//! tile offsets, and `tile_apply` scans each tile from its offset. With `compact` it also lists
//! the positions of the nonzero inputs in order (a node set's members, by id: their local ids
//! are the prefix).

use crate::abi::sample::{ScanApplyArgs, ScanSumsArgs};
use crate::format::block::block_scan_u32;
use crate::ptx;
use crate::smem::SmemCarver;

use crate::config::{SCAN_ITEMS, SCAN_TILE};

/// This thread's items: `SCAN_ITEMS` consecutive ones of its block's tile.
#[inline(always)]
fn first_item() -> u32 {
    ptx::ctaid_x() * SCAN_TILE + ptx::tid_x() * SCAN_ITEMS
}

#[inline(always)]
unsafe fn thread_sum(input: *const u32, n: u32) -> u32 {
    let first = first_item();
    let mut s = 0;
    let mut i = 0;
    while i < SCAN_ITEMS {
        if first + i < n {
            s += unsafe { *input.add((first + i) as usize) };
        }
        i += 1;
    }
    s
}

/// `sums[b]` = the sum of tile b. Blocks of `SCAN_BLOCK`; 32 u32 of shared memory.
#[inline(always)]
pub unsafe fn tile_sums(args: ScanSumsArgs) {
    let ScanSumsArgs { n, input, sums } = args;
    let mut smem = SmemCarver::new();
    let scratch = smem.take(4 * 32);
    let s = unsafe { thread_sum(input, n) };
    let (_, total) = unsafe { block_scan_u32(s, scratch) };
    if ptx::tid_x() == 0 {
        unsafe { *sums.add(ptx::ctaid_x() as usize) = total };
    }
}

/// `out[i]` = the sum of `input[..i]` for i <= n (`out[n]` the total), from the tile offsets;
/// `compact[out[i]] = i` where `input[i] != 0` (if not null). Blocks of `SCAN_BLOCK`.
#[inline(always)]
pub unsafe fn tile_apply(args: ScanApplyArgs) {
    let ScanApplyArgs { n, input, tile_offsets, out, compact } = args;
    let mut smem = SmemCarver::new();
    let scratch = smem.take(4 * 32);
    let s = unsafe { thread_sum(input, n) };
    let (before, _) = unsafe { block_scan_u32(s, scratch) };
    let mut at = unsafe { *tile_offsets.add(ptx::ctaid_x() as usize) } + before;
    let first = first_item();
    let mut i = 0;
    while i < SCAN_ITEMS {
        let k = first + i;
        if k < n {
            let x = unsafe { *input.add(k as usize) };
            unsafe { *out.add(k as usize) = at };
            if x != 0 && !compact.is_null() {
                unsafe { *compact.add(at as usize) = k };
            }
            at += x;
        }
        if k == n {
            unsafe { *out.add(n as usize) = at };
        }
        i += 1;
    }
}
