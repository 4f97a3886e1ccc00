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
//! Work: items are windows, or runs of at most `max_blocks` blocks of a long window (those add
//! into Y atomically; their windows' rows are cleared first by `spmm::windows::zero_windows`). Warp w of the
//! grid takes items w, w + W, w + 2W, ... (W = warps in the grid: one item per warp when the grid
//! covers the list, several when the host launches a persistent grid), one 16*NT-wide K slice per
//! grid.y, in groups of 4 blocks (32 vectors: one column per lane). The gather source runs
//! `DEPTH` groups ahead of the MMAs across item boundaries, so short windows (a few groups, the
//! common case on large sparse graphs) do not drain the pipeline at every item.

pub mod output;
pub mod precision;
pub mod quantize;
pub mod source;
pub mod work;

pub use output::{F16Out, F32Out, Tc8Output};
pub use precision::{E4m3, F16, Tc8Precision, Tf32};
pub use source::{Bulk, CpAsync, GatherSource, Registers};
pub use work::{Cursor, Items, WorkItem};

use crate::abi::spmm::Tc8SpmmArgs;
use crate::config::{TC8_BLOCK_VECTORS as KV, TC8_WARPS};
use crate::ptx;

/// Blocks per group: 4 x 8 vectors, one vector column per lane.
pub const GROUP: u32 = 4;
/// Vectors per group.
pub const GROUP_VECTORS: u32 = GROUP * KV;

/// What stays fixed for a warp: the dense operands and its place in K.
pub struct Operands {
    pub x: *const u32,
    /// Row stride of Y (and of X but for e4m3), in elements.
    pub ld: u32,
    /// Row stride of X in elements.
    pub x_ld: u32,
    /// e4m3: each X row's scale, and 1 / the global scale that B values are divided by.
    pub x_scales: *const f32,
    pub inv_scale: f32,
    pub vec_col: *const u32,
    pub values: *const u32,
    pub lane: u32,
    /// First feature dim of the warp's K slice (16 * NT dims).
    pub slice: u32,
    /// First of the 2 * NT dims this lane multiplies and writes.
    pub dim: u32,
}

/// The main loop of every TC8 SpMM instance (`abi::spmm` lists them).
#[inline(always)]
pub unsafe fn tc8_spmm<P: Tc8Precision, S: GatherSource<P, NT>, O: Tc8Output, const NT: usize>(args: Tc8SpmmArgs) {
    let Tc8SpmmArgs { n_items, n_rows, ld, win_ptr, vec_col, values, item_win, item_blocks, x, y, x_ld, value_max, x_scales, scale_max } =
        args;
    let warp = ptx::ctaid_x() * TC8_WARPS + ptx::warp_id();
    if warp >= n_items {
        return;
    }
    let items = Items { n_items, win_ptr, item_win, item_blocks, stride: ptx::nctaid_x() * TC8_WARPS };
    let lane = ptx::lane_id();
    let slice = ptx::ctaid_y() * 16 * NT as u32;
    // e4m3: B values v * s[col] / scale stay within e4m3's 448; Y is scaled back at the end.
    let scale = if P::SCALED { value_max * f32::from_bits(unsafe { ptx::ld_nc_u32(scale_max) }) / 448.0 } else { 1.0 };
    let inv_scale = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    let ops = Operands { x, ld, x_ld, x_scales, inv_scale, vec_col, values, lane, slice, dim: slice + 2 * NT as u32 * (lane / 4) };

    let mut source = unsafe { S::new(&ops) };
    // The producer walks the same (item, group) stream DEPTH groups ahead of the MMAs.
    let mut producer = unsafe { Cursor::start(&items, &ops, warp, S::DEPTH > 0) };
    let mut k = 0;
    while k < S::DEPTH {
        unsafe { source.issue_next(&ops, &items, &mut producer) };
        k += 1;
    }

    let mut item_index = warp;
    let mut seq = 0;
    while item_index < n_items {
        let item = unsafe { items.load(item_index) };
        let n_groups = item.n_groups();
        let mut acc = [[0.0f32; 4]; NT];
        let mut gi = 0;
        while gi < n_groups {
            unsafe { source.issue_next(&ops, &items, &mut producer) };
            let stage = unsafe { source.acquire(&ops, &item, gi, seq) };
            unsafe { P::group_mma::<S, NT>(&mut acc, &source, &ops, &item, &stage, gi) };
            source.release();
            seq += 1;
            gi += 1;
        }
        if P::SCALED {
            let mut q = 0;
            while q < NT {
                acc[q] = [acc[q][0] * scale, acc[q][1] * scale, acc[q][2] * scale, acc[q][3] * scale];
                q += 1;
            }
        }
        if ops.dim < ld {
            unsafe { O::write::<NT>(y, ld, n_rows, 8 * item.win, ops.dim, &acc, !item.whole_window) };
        }
        item_index += items.stride;
    }
}
