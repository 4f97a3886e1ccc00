//! Work items and a warp's walk over them.

use super::{GROUP_VECTORS, Operands};
use crate::config::TC8_BLOCK_VECTORS as KV;
use crate::ptx;

/// The work list: item i covers blocks [item_blocks[2i], item_blocks[2i+1]) of window
/// item_win[i]; warp w takes items w, w + stride, ...
pub struct Items {
    pub n_items: u32,
    pub win_ptr: *const u32,
    pub item_win: *const u32,
    pub item_blocks: *const u32,
    pub stride: u32,
}

/// One work item: its window, the window's vectors it covers and whether that is the whole
/// window (else it adds into cleared rows).
#[derive(Clone, Copy)]
pub struct WorkItem {
    pub win: u32,
    pub v_begin: u32,
    pub v_end: u32,
    pub whole_window: bool,
}

impl Items {
    #[inline(always)]
    pub unsafe fn load(&self, item: u32) -> WorkItem {
        let win = unsafe { ptx::ld_nc_u32(self.item_win.add(item as usize)) };
        let blocks = unsafe { ptx::ld_nc_v2_u32(self.item_blocks.add(2 * item as usize)) };
        let (vw0, vw1) = unsafe { (ptx::ld_nc_u32(self.win_ptr.add(win as usize)), ptx::ld_nc_u32(self.win_ptr.add(win as usize + 1))) };
        let v_end = if vw0 + blocks[1] * KV < vw1 { vw0 + blocks[1] * KV } else { vw1 };
        WorkItem { win, v_begin: vw0 + blocks[0] * KV, v_end, whole_window: blocks[0] == 0 && vw0 + blocks[1] * KV >= vw1 }
    }
}

impl WorkItem {
    #[inline(always)]
    pub fn n_groups(&self) -> u32 {
        (self.v_end - self.v_begin).div_ceil(GROUP_VECTORS)
    }
    /// First vector of group `gi`.
    #[inline(always)]
    pub fn group_start(&self, gi: u32) -> u32 {
        self.v_begin + GROUP_VECTORS * gi
    }
    /// Vectors in group `gi` (32 but in the last group).
    #[inline(always)]
    pub fn group_vectors(&self, gi: u32) -> u32 {
        let left = self.v_end - self.group_start(gi);
        if left < GROUP_VECTORS { left } else { GROUP_VECTORS }
    }
    /// Vectors of block `i` of group `gi` (0 past the item's end).
    #[inline(always)]
    pub fn block_vectors(&self, gi: u32, i: u32) -> u32 {
        let v0 = self.group_start(gi) + KV * i;
        if v0 >= self.v_end {
            0
        } else if self.v_end - v0 < KV {
            self.v_end - v0
        } else {
            KV
        }
    }
    /// The column of vector `lane` of group `gi` (0 past the item's end).
    #[inline(always)]
    pub unsafe fn lane_col(&self, ops: &Operands, gi: u32) -> u32 {
        let v = self.group_start(gi) + ops.lane;
        if v < self.v_end { unsafe { ptx::ld_nc_u32(ops.vec_col.add(v as usize)) } } else { 0 }
    }
}

/// A position in a warp's stream of (item, group) pairs, skipping items without vectors, with
/// the lane's column of that group already loaded (the gathers depend on it).
pub struct Cursor {
    pub item_index: u32,
    pub item: WorkItem,
    pub gi: u32,
    pub cols: u32,
}

impl Cursor {
    /// The first group of the items from `first` on; an exhausted cursor if `walk` is false (a
    /// source that issues nothing ahead never moves it, and must not pay its loads).
    #[inline(always)]
    pub unsafe fn start(items: &Items, ops: &Operands, first: u32, walk: bool) -> Cursor {
        let empty = WorkItem { win: 0, v_begin: 0, v_end: 0, whole_window: true };
        let mut c = Cursor { item_index: if walk { first } else { items.n_items }, item: empty, gi: 0, cols: 0 };
        unsafe { c.settle(items, ops) };
        c
    }

    #[inline(always)]
    pub fn valid(&self, items: &Items) -> bool {
        self.item_index < items.n_items
    }

    /// Move to the next group of the stream.
    #[inline(always)]
    pub unsafe fn advance(&mut self, items: &Items, ops: &Operands) {
        self.gi += 1;
        if self.gi < self.item.n_groups() {
            self.cols = unsafe { self.item.lane_col(ops, self.gi) };
        } else {
            self.item_index += items.stride;
            self.gi = 0;
            unsafe { self.settle(items, ops) };
        }
    }

    /// From item `item_index`, group 0: skip empty items, load the first group's columns.
    #[inline(always)]
    unsafe fn settle(&mut self, items: &Items, ops: &Operands) {
        while self.item_index < items.n_items {
            self.item = unsafe { items.load(self.item_index) };
            if self.item.v_end > self.item.v_begin {
                self.cols = unsafe { self.item.lane_col(ops, 0) };
                return;
            }
            self.item_index += items.stride;
        }
    }
}
