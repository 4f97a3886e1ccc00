//! Step 2: window pointers from per-window counts, by one block (windows are N / 8 or N / 16,
//! few enough for one block to sweep twice). Each thread owns a contiguous run of windows: it
//! sums its run, the block scans the sums, and the run is written with the thread's offset.

use crate::abi::format::WindowScanArgs;
use crate::format::block::block_scan_u32;
use crate::ptx;
use crate::smem::SmemCarver;
use crate::translate::{SCAN_THREADS, blocks_of};

/// `win_ptr[w] = sum of counts[..w]` for w <= n; if `blk_ptr` is not null, also
/// `blk_ptr[w] = sum of ceil(counts[..w] / block_w)`. One block of `SCAN_THREADS`; shared memory 2 x 32 u32.
#[inline(always)]
pub unsafe fn window_scan(args: WindowScanArgs) {
    let WindowScanArgs { n, counts, block_w, win_ptr, blk_ptr } = args;
    let mut smem = SmemCarver::new();
    let (s_u, s_b) = (smem.take(4 * 32), smem.take(4 * 32));
    let per = n.div_ceil(SCAN_THREADS);
    let first = ptx::tid_x() * per;
    let last = if first + per < n { first + per } else { n };
    let has_blk = !blk_ptr.is_null();
    let (mut su, mut sb) = (0u32, 0u32);
    let mut w = first;
    while w < last {
        let c = unsafe { *counts.add(w as usize) };
        su += c;
        if has_blk {
            sb += blocks_of(c, block_w);
        }
        w += 1;
    }
    let (mut u, total_u) = unsafe { block_scan_u32(su, s_u) };
    let (mut b, total_b) = unsafe { block_scan_u32(sb, s_b) };
    let mut w = first;
    while w < last {
        let c = unsafe { *counts.add(w as usize) };
        unsafe { *win_ptr.add(w as usize) = u };
        u += c;
        if has_blk {
            unsafe { *blk_ptr.add(w as usize) = b };
            b += blocks_of(c, block_w);
        }
        w += 1;
    }
    if ptx::tid_x() == 0 {
        unsafe { *win_ptr.add(n as usize) = total_u };
        if has_blk {
            unsafe { *blk_ptr.add(n as usize) = total_b };
        }
    }
}
