//! TC8 SpMM (FlashSparse swap-and-transpose) on ME-BCRS with k = 8 vectors per block: one main
//! loop, composed of a precision (the MMA atom and its operand packing), a gather source (how X
//! rows reach the tensor cores) and an output writer. A new variant is a new instance in
//! `abi/spmm.rs`, not a new kernel.
//!
//! Y^T = X^T S^T: the 8-row sparse block is the B operand of `mma.m16n8k8` (its row-major
//! 8 x kb values are exactly B's column-major layout) and 16 feature dimensions of X gathered
//! at the block's 8 vector columns are the A operand; D is a 16-dim x 8-row tile of Y^T.
//!
//! Memory-efficient mapping: MMA row m = g (lane / 4) of tile q stands for feature dim
//! `2*NT*g + 2q` and m = g + 8 for the dim after it, so each lane reads 2*NT consecutive
//! features of a gathered X row (one 8-32 byte piece) and writes 2*NT consecutive outputs of Y
//! rows 2t and 2t+1.
//!
//! A warp runs one work item (a window, or a run of at most `max_blocks` blocks of a long
//! window) for one 16*NT-wide slice of K (grid.y), in groups of 4 blocks (32 vectors: one
//! column per lane). Items that cover part of a window add into Y atomically (those windows'
//! rows are cleared first by `zero_windows`); the others store.

pub mod output;
pub mod precision;
pub mod source;
pub mod work;

pub use output::{F16Out, F32Out, Tc8Output};
pub use precision::{F16, Tc8Precision, Tf32};
pub use source::{Bulk, CpAsync, GatherSource, Registers};
pub use work::{WorkItem, zero_windows};

use crate::abi::spmm::Tc8SpmmArgs;
use crate::config::TC8_BLOCK_VECTORS as KV;
use crate::ptx;

/// Blocks per group: 4 x 8 vectors, one vector column per lane.
pub const GROUP: u32 = 4;
/// Vectors per group.
pub const GROUP_VECTORS: u32 = GROUP * KV;

/// What a gather source sees of the warp's work: the arrays, its vector range and its K slice.
pub struct Item {
    pub x: *const u32,
    pub ld: u32,
    pub vec_col: *const u32,
    pub values: *const u32,
    pub v_begin: u32,
    pub v_end: u32,
    pub lane: u32,
    /// First feature dim of the warp's K slice (16 * NT dims).
    pub slice: u32,
    /// First of the 2 * NT dims this lane multiplies and writes.
    pub dim: u32,
}

impl Item {
    pub fn n_groups(&self) -> u32 {
        (self.v_end - self.v_begin).div_ceil(GROUP_VECTORS)
    }
    /// First vector of group `gi`.
    pub fn group_start(&self, gi: u32) -> u32 {
        self.v_begin + GROUP_VECTORS * gi
    }
    /// The column of vector `lane` of group `gi` (0 past the item's end).
    #[inline(always)]
    pub unsafe fn lane_col(&self, gi: u32) -> u32 {
        let v = self.group_start(gi) + self.lane;
        if v < self.v_end { unsafe { ptx::ld_nc_u32(self.vec_col.add(v as usize)) } } else { 0 }
    }
    /// Vectors of block `i` of group `gi` (0 past the item's end).
    #[inline(always)]
    pub fn block_vectors(&self, gi: u32, i: u32) -> u32 {
        let v0 = self.group_start(gi) + KV * i;
        if v0 >= self.v_end { 0 } else if self.v_end - v0 < KV { self.v_end - v0 } else { KV }
    }
}

/// The main loop of every TC8 SpMM instance (`abi::spmm` lists them).
#[inline(always)]
pub unsafe fn tc8_spmm<P: Tc8Precision, S: GatherSource<P, NT>, O: Tc8Output, const NT: usize>(args: Tc8SpmmArgs) {
    let Tc8SpmmArgs { n_items, n_rows, ld, win_ptr, vec_col, values, item_win, item_blocks, x, y } = args;
    let Some(WorkItem { win, v_begin, v_end, whole_window }) = (unsafe { WorkItem::load(n_items, win_ptr, item_win, item_blocks) }) else {
        return;
    };
    let lane = ptx::lane_id();
    let slice = ptx::ctaid_y() * 16 * NT as u32;
    let item = Item { x, ld, vec_col, values, v_begin, v_end, lane, slice, dim: slice + 2 * NT as u32 * (lane / 4) };
    let n_groups = item.n_groups();

    let mut source = unsafe { S::begin(&item) };
    let mut acc = [[0.0f32; 4]; NT];
    let mut gi = 0;
    while gi < n_groups {
        let stage = unsafe { source.acquire(&item, gi) };
        crate::unroll4!(i => {
            let kb = item.block_vectors(gi, i as u32);
            if kb > 0 {
                let (xa, xb, b) = unsafe { source.block(&item, &stage, i as u32, kb) };
                P::mma::<NT>(&mut acc, &xa, &xb, b);
            }
        });
        source.release();
        gi += 1;
    }
    if item.dim < ld {
        unsafe { O::write::<NT>(y, ld, n_rows, 8 * win, item.dim, &acc, !whole_window) };
    }
}
