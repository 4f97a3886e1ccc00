//! A warp's work item and the clearing of windows whose items add atomically.

use crate::abi::spmm::ZeroWindowsArgs;
use crate::config::{TC8_BLOCK_VECTORS as KV, TC8_WARPS};
use crate::ptx;

/// This warp's work item (one per warp, `TC8_WARPS` per block): its window, the window's
/// vectors it covers and whether that is the whole window (else it adds into cleared rows).
pub struct WorkItem {
    pub win: u32,
    pub v_begin: u32,
    pub v_end: u32,
    pub whole_window: bool,
}

impl WorkItem {
    /// None for the warps past the last item.
    #[inline(always)]
    pub unsafe fn load(n_items: u32, win_ptr: *const u32, item_win: *const u32, item_blocks: *const u32) -> Option<WorkItem> {
        let item = ptx::ctaid_x() * TC8_WARPS + ptx::warp_id();
        if item >= n_items {
            return None;
        }
        let win = unsafe { ptx::ld_nc_u32(item_win.add(item as usize)) };
        let blocks = unsafe { ptx::ld_nc_v2_u32(item_blocks.add(2 * item as usize)) };
        let (vw0, vw1) = unsafe { (ptx::ld_nc_u32(win_ptr.add(win as usize)), ptx::ld_nc_u32(win_ptr.add(win as usize + 1))) };
        let v_end = if vw0 + blocks[1] * KV < vw1 { vw0 + blocks[1] * KV } else { vw1 };
        Some(WorkItem { win, v_begin: vw0 + blocks[0] * KV, v_end, whole_window: blocks[0] == 0 && vw0 + blocks[1] * KV >= vw1 })
    }
}

/// Clear the 8 rows of each listed window (those whose items add atomically). One block per
/// window, threads over the rows' 32-bit words (f32 or f16 pairs).
#[inline(always)]
pub unsafe fn zero_windows(args: ZeroWindowsArgs) {
    let ZeroWindowsArgs { windows, n_rows, row_words, y } = args;
    let w = unsafe { ptx::ld_nc_u32(windows.add(ptx::ctaid_x() as usize)) };
    let row0 = 8 * w;
    let rows = if n_rows - row0 < 8 { n_rows - row0 } else { 8 };
    let mut i = ptx::tid_x();
    while i < rows * row_words {
        unsafe { *y.add(row0 as usize * row_words as usize + i as usize) = 0 };
        i += ptx::ntid_x();
    }
}
