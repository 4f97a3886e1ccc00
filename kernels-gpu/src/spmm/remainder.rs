//! The CUDA-core remainder of the hybrid SpMM (FTC-GNN on 8x1 vectors, `ops::spmm::hybrid`):
//! Y += S_cc X after TC8 wrote Y = S_tc X, or Y = S_cc X when the tensor-core part is empty.
//!
//! S_cc is what the tensor cores leave: on power-law graphs mostly singleton vectors, rows of a
//! few nonzeros each, every one a gather of a whole X row. The kernel is built for memory-level
//! parallelism on such rows:
//!
//! - a group of lanes per work item (a row, or a run of at most a few hundred nonzeros of a long
//!   row), one 16-byte chunk of the X row per lane: an f32 row of K = 128 takes the whole warp,
//!   an f16 row of K = 128 half of it (twice the rows in flight per warp: f16 rows are half the
//!   bytes), K = 32 a quarter (f32) or an eighth (f16);
//! - the group loads up to `group` (column, value) pairs with one coalesced load (the next batch's
//!   pairs are loaded a batch ahead), then `U` gathers at a time are issued (columns and values
//!   handed round by shuffles) before their FMAs;
//! - in accumulate mode the group's read of Y (the tensor-core part) is issued before the gathers
//!   so it is in flight with them; a row owned by one item is then stored with plain 16-byte
//!   stores, and only a row cut into several items (by nonzero count, on the host) takes
//!   `red.global.add.f32`;
//! - f16: 8 features per lane, converted to f32 and accumulated in f32 (f32 output).
//!
//! Loops are warp-uniform (the longest item of the warp sets the trip count; shorter items are
//! masked), so the shuffles always see the full warp.

use crate::abi::hybrid::{CcSpmmArgs, CcZeroRowsArgs, HYBRID_CC_SPLIT_ROW, HYBRID_CC_WARPS};
use crate::ptx;

/// The feature (and value) storage of one kernel instance: what a 16-byte chunk of an X row holds.
pub trait CcFeature {
    /// f32 outputs per 16-byte chunk of X: 4 (f32 features) or 8 (f16 features).
    const OUT: usize;
    /// The value of nonzero `e` as f32.
    unsafe fn value(values: *const u32, e: u32) -> f32;
    /// `acc[..OUT] += v * chunk`.
    fn fma(acc: &mut [f32; 8], v: f32, chunk: [u32; 4]);
}

/// f32 features and values.
pub struct F32;
/// f16 features and values, f32 accumulation.
pub struct F16;

impl CcFeature for F32 {
    const OUT: usize = 4;
    #[inline(always)]
    unsafe fn value(values: *const u32, e: u32) -> f32 {
        unsafe { ptx::ld_nc_f32((values as *const f32).add(e as usize)) }
    }
    #[inline(always)]
    fn fma(acc: &mut [f32; 8], v: f32, chunk: [u32; 4]) {
        crate::unroll4!(q => {
            acc[q] = ptx::fma_f32(v, f32::from_bits(chunk[q]), acc[q]);
        });
    }
}

impl CcFeature for F16 {
    const OUT: usize = 8;
    #[inline(always)]
    unsafe fn value(values: *const u32, e: u32) -> f32 {
        unsafe { ptx::f16_to_f32(ptx::ld_nc_u16((values as *const u16).add(e as usize))) }
    }
    #[inline(always)]
    fn fma(acc: &mut [f32; 8], v: f32, chunk: [u32; 4]) {
        crate::unroll4!(q => {
            acc[2 * q] = ptx::fma_f32(v, ptx::f16_to_f32(chunk[q] as u16), acc[2 * q]);
            acc[2 * q + 1] = ptx::fma_f32(v, ptx::f16_to_f32((chunk[q] >> 16) as u16), acc[2 * q + 1]);
        });
    }
}

/// Repeat a block for `$u` = 0..U (U = 4 or 8) as literal constants: the register arrays must
/// never be indexed by a loop variable, or they move to local memory.
macro_rules! for_each_u {
    ($u_max:expr, $u:ident => $body:block) => {{
        crate::unroll4!(i => {
            let $u: usize = i;
            $body
        });
        if $u_max > 4 {
            crate::unroll4!(i => {
                let $u: usize = 4 + i;
                $body
            });
        }
    }};
}

/// Maximum over the 32 lanes (every lane gets it).
#[inline(always)]
fn warp_max_u32(mut v: u32) -> u32 {
    let mut m = 16;
    while m > 0 {
        let o = ptx::shfl_xor_u32(v, m);
        if o > v {
            v = o;
        }
        m >>= 1;
    }
    v
}

/// Y (+)= S_cc X with `U` (4 or 8) gathers in flight per lane (see the module notes). `ld` a
/// multiple of 8, X and Y 16-byte aligned, items as built by `ops::spmm::hybrid::cc_items`.
#[inline(always)]
pub unsafe fn cc_spmm<P: CcFeature, const U: usize>(a: CcSpmmArgs) {
    let CcSpmmArgs { n_items, group_shift, chunks, ld, accumulate, item_ptr, item_row, col_idx, values, x, y } = a;
    let lane = ptx::lane_id();
    let group = 1u32 << group_shift;
    let in_group = lane & (group - 1);
    // The warp's first item; the whole warp leaves together or not at all.
    let first = (ptx::ctaid_x() * HYBRID_CC_WARPS + ptx::warp_id()) << (5 - group_shift);
    if first >= n_items {
        return;
    }
    let item = first + (lane >> group_shift);
    let has_item = item < n_items;
    let (e0, e1, row_word) = if has_item {
        unsafe {
            (
                ptx::ld_nc_u32(item_ptr.add(item as usize)),
                ptx::ld_nc_u32(item_ptr.add(item as usize + 1)),
                ptx::ld_nc_u32(item_row.add(item as usize)),
            )
        }
    } else {
        (0, 0, 0)
    };
    let row = row_word & !HYBRID_CC_SPLIT_ROW;
    let split = row_word & HYBRID_CC_SPLIT_ROW != 0;
    let chunk = ptx::ctaid_y() * group + in_group;
    let active = has_item && chunk < chunks;
    // This lane's chunk of X row 0 (in 32-bit words) and of Y's row.
    let x_lane = x.wrapping_add(4 * chunk as usize);
    let row_words = 4 * chunks;
    let y_lane = y.wrapping_add(row as usize * ld as usize + P::OUT * chunk as usize);

    // Accumulate mode, row owned by this item: start from the tensor-core part, read now so that
    // the load is in flight together with the gathers below.
    let mut acc = [0f32; 8];
    if active && accumulate != 0 && !split {
        let lo = unsafe { ptx::ld_v4_f32(y_lane) };
        crate::unroll4!(q => {
            acc[q] = lo[q];
        });
        if P::OUT == 8 {
            let hi = unsafe { ptx::ld_v4_f32(y_lane.add(4)) };
            crate::unroll4!(q => {
                acc[4 + q] = hi[q];
            });
        }
    }

    let len = e1 - e0;
    let max_len = warp_max_u32(len);
    let src0 = lane - in_group; // the group's first lane
    // One coalesced load of the group's `group` (column, value) pairs from nonzero e on.
    let pairs = |e: u32| if e < e1 { unsafe { (ptx::ld_nc_u32(col_idx.add(e as usize)), P::value(values, e)) } } else { (0, 0.0) };
    let mut next = pairs(e0 + in_group);
    let mut base = 0u32;
    while base < max_len {
        let (my_col, my_val) = next;
        // The following batch's pairs, in flight while this batch's gathers run.
        next = pairs(e0 + base + group + in_group);
        // Nonzeros of this batch for this group, and the warp's most (the trip count).
        let n = if len > base { (len - base).min(group) } else { 0 };
        let steps = (max_len - base).min(group);
        let mut j = 0u32;
        while j < steps {
            let mut cols = [0u32; 8];
            let mut vals = [0f32; 8];
            for_each_u!(U, u => {
                let src = src0 + ((j + u as u32) & (group - 1));
                cols[u] = ptx::shfl_idx_u32(my_col, src);
                vals[u] = ptx::shfl_idx_f32(my_val, src);
            });
            // All U gathers issued before the first FMA needs one.
            let mut xs = [[0u32; 4]; 8];
            for_each_u!(U, u => {
                if active && j + (u as u32) < n {
                    xs[u] = unsafe { ptx::ld_nc_v4_u32(x_lane.add(cols[u] as usize * row_words as usize)) };
                }
            });
            for_each_u!(U, u => {
                let v = if j + (u as u32) < n { vals[u] } else { 0.0 };
                P::fma(&mut acc, v, xs[u]);
            });
            j += U as u32;
        }
        base += group;
    }

    if !active {
        return;
    }
    if split {
        crate::unroll4!(q => {
            unsafe { ptx::red_add_f32(y_lane.add(q), acc[q]) };
        });
        if P::OUT == 8 {
            crate::unroll4!(q => {
                unsafe { ptx::red_add_f32(y_lane.add(4 + q), acc[4 + q]) };
            });
        }
    } else {
        unsafe { ptx::st_v4_f32(y_lane, [acc[0], acc[1], acc[2], acc[3]]) };
        if P::OUT == 8 {
            unsafe { ptx::st_v4_f32(y_lane.add(4), [acc[4], acc[5], acc[6], acc[7]]) };
        }
    }
}

/// Clear row `rows[blockIdx.x]` of Y (`ld` a multiple of 8).
pub unsafe fn zero_rows(a: CcZeroRowsArgs) {
    let CcZeroRowsArgs { rows, ld, y } = a;
    let row = unsafe { ptx::ld_nc_u32(rows.add(ptx::ctaid_x() as usize)) };
    let p = y.wrapping_add(row as usize * ld as usize);
    let mut i = ptx::tid_x();
    while 4 * i < ld {
        unsafe { ptx::st_v4_f32(p.add(4 * i as usize), [0.0; 4]) };
        i += ptx::ntid_x();
    }
}
