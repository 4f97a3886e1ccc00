//! TC16 SpMM (TC-GNN, Alg. 2) on SGT: windows of 16 rows, TC blocks of 8 unique columns; the
//! block is the A operand of m16n8k8 (M = window rows, K = block columns), X gathered at the
//! block's columns is B, and D is a 16 x 8 tile of Y. A thread block runs one work item (a
//! window, or a run of blocks of a long window) and its warps split K; per step it stages
//! `TC16_GROUP` blocks as dense 16 x 8 f32 tiles in shared memory (zero, scatter the SGT edges
//! with shared atomics, which also sums duplicates) and each warp reads its A fragments from
//! there (TC-GNN's way; a bitmap variant that read A straight into registers measured 1.5-3x
//! slower and was removed).
//!
//! The group's X rows are gathered before the MMAs (lane i holds the group's unique column i).
//! N remap (`layout::tc16_dim`): column n of tile q is dim n*NT + q, so lane (g, t) reads NT
//! consecutive dims of each X row it supplies, and writes 2*NT consecutive dims of rows g and
//! g + 8. Items covering part of a window add into Y atomically (after `tc16_zero_windows`).

use crate::abi::spmm::Tc16SpmmArgs;
use crate::config::{TC16_BLOCK_W as BW, TC16_GROUP, TC16_WINDOW};
use crate::layout::{frag_a_f16, frag_a_tf32, tc16_dim};
use crate::ptx;
use crate::smem::SmemCarver;

const GROUP: usize = TC16_GROUP as usize;
/// f32 elements of one dense tile.
const TILE: u32 = TC16_WINDOW * BW;

/// One precision of TC16: which block columns a lane supplies, its X gathers, its A fragment
/// from the staged tile, and the NT tile products.
pub trait Tc16Precision {
    type A: Copy + Default;
    type B: Copy + Default;
    /// The two block columns (k of the MMA) whose X rows this lane supplies.
    fn slots(lane: u32) -> (u32, u32);
    /// NT consecutive dims at `dim` of X rows `rows` (zero where `ok` is false).
    unsafe fn load_b<const NT: usize>(x: *const u32, ld: u32, rows: (u32, u32), ok: (bool, bool), dim: u32) -> Self::B;
    /// (row, col) in the 16 x 8 block of this lane's A element `i` (0..4).
    fn a_pos(lane: u32, i: u32) -> (u32, u32);
    /// The A fragment from this lane's four elements (in `a_pos` order).
    fn pack_a(v: [f32; 4]) -> Self::A;
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], a: &Self::A, b: &Self::B);
}

pub struct F16;
pub struct Tf32;

/// This lane's A fragment of the staged dense tile at shared address `tile`.
#[inline(always)]
unsafe fn load_a<P: Tc16Precision>(tile: u32, lane: u32) -> P::A {
    let mut v = [0.0f32; 4];
    let mut i = 0;
    while i < 4 {
        let (r, c) = P::a_pos(lane, i as u32);
        v[i] = unsafe { ptx::ld_shared_f32(tile + 4 * (r * BW + c)) };
        i += 1;
    }
    P::pack_a(v)
}

/// `W` consecutive 32-bit words (W in 1, 2, 4, 8) with the widest aligned loads.
#[inline(always)]
unsafe fn load_words<const W: usize>(p: *const u32) -> [u32; 8] {
    let mut w = [0u32; 8];
    unsafe {
        if W == 1 {
            w[0] = ptx::ld_nc_u32(p);
        } else if W == 2 {
            let v = ptx::ld_nc_v2_u32(p);
            w[0] = v[0];
            w[1] = v[1];
        } else {
            let mut i = 0;
            while i < W {
                let v = ptx::ld_nc_v4_u32(p.add(i));
                w[i] = v[0];
                w[i + 1] = v[1];
                w[i + 2] = v[2];
                w[i + 3] = v[3];
                i += 4;
            }
        }
    }
    w
}

/// `NT` consecutive f16 (NT in 4, 8) as NT / 2 words.
#[inline(always)]
unsafe fn load_halves<const NT: usize>(p: *const u32) -> [u32; 8] {
    if NT == 4 { unsafe { load_words::<2>(p) } } else { unsafe { load_words::<4>(p) } }
}

/// f16: lane (g, t) supplies columns 2t and 2t+1 (one f16x2 B register per tile).
#[derive(Clone, Copy, Default)]
pub struct F16B {
    xa: [u32; 4],
    xb: [u32; 4],
}

impl Tc16Precision for F16 {
    type A = [u32; 2];
    type B = F16B;

    #[inline(always)]
    fn slots(lane: u32) -> (u32, u32) {
        (2 * (lane % 4), 2 * (lane % 4) + 1)
    }

    #[inline(always)]
    unsafe fn load_b<const NT: usize>(x: *const u32, ld: u32, rows: (u32, u32), ok: (bool, bool), dim: u32) -> F16B {
        // f16 rows of ld halves: word offset (row * ld + dim) / 2, NT / 2 words.
        let zero = [0u32; 8];
        let at = |r: u32| unsafe { x.add((r as usize * ld as usize + dim as usize) / 2) };
        let xa = if ok.0 { unsafe { load_halves::<NT>(at(rows.0)) } } else { zero };
        let xb = if ok.1 { unsafe { load_halves::<NT>(at(rows.1)) } } else { zero };
        F16B { xa: [xa[0], xa[1], xa[2], xa[3]], xb: [xb[0], xb[1], xb[2], xb[3]] }
    }

    #[inline(always)]
    fn a_pos(lane: u32, i: u32) -> (u32, u32) {
        frag_a_f16(lane, i)
    }

    #[inline(always)]
    fn pack_a(v: [f32; 4]) -> [u32; 2] {
        [ptx::pack_f16x2(v[0], v[1]), ptx::pack_f16x2(v[2], v[3])]
    }

    #[inline(always)]
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], a: &[u32; 2], b: &F16B) {
        let mut q = 0;
        while q < NT {
            // Dim q of the lane's run: half q % 2 of word q / 2; k = 2t in the low half.
            let (wa, wb) = (b.xa[q / 2], b.xb[q / 2]);
            let bq = if q % 2 == 0 { ptx::lo_halves(wa, wb) } else { ptx::hi_halves(wa, wb) };
            acc[q] = ptx::mma_m16n8k8_f16(*a, bq, acc[q]);
            q += 1;
        }
    }
}

/// tf32: lane (g, t) supplies columns t and t+4.
#[derive(Clone, Copy, Default)]
pub struct Tf32B {
    xa: [u32; 8],
    xb: [u32; 8],
}

impl Tc16Precision for Tf32 {
    type A = [u32; 4];
    type B = Tf32B;

    #[inline(always)]
    fn slots(lane: u32) -> (u32, u32) {
        (lane % 4, lane % 4 + 4)
    }

    #[inline(always)]
    unsafe fn load_b<const NT: usize>(x: *const u32, ld: u32, rows: (u32, u32), ok: (bool, bool), dim: u32) -> Tf32B {
        let zero = [0u32; 8];
        let at = |r: u32| unsafe { x.add(r as usize * ld as usize + dim as usize) };
        let xa = if ok.0 { unsafe { load_words::<NT>(at(rows.0)) } } else { zero };
        let xb = if ok.1 { unsafe { load_words::<NT>(at(rows.1)) } } else { zero };
        Tf32B { xa, xb }
    }

    #[inline(always)]
    fn a_pos(lane: u32, i: u32) -> (u32, u32) {
        frag_a_tf32(lane, i)
    }

    #[inline(always)]
    fn pack_a(v: [f32; 4]) -> [u32; 4] {
        [ptx::cvt_tf32(v[0]), ptx::cvt_tf32(v[1]), ptx::cvt_tf32(v[2]), ptx::cvt_tf32(v[3])]
    }

    #[inline(always)]
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], a: &[u32; 4], b: &Tf32B) {
        let mut q = 0;
        while q < NT {
            let bq = [ptx::cvt_tf32(f32::from_bits(b.xa[q])), ptx::cvt_tf32(f32::from_bits(b.xb[q]))];
            acc[q] = ptx::mma_m16n8k8_tf32(*a, bq, acc[q]);
            q += 1;
        }
    }
}

/// Zero the block's GROUP staged tiles.
#[inline(always)]
unsafe fn zero_tiles(tiles: u32) {
    let mut i = ptx::tid_x();
    while i < TILE * TC16_GROUP / 4 {
        unsafe { ptx::st_shared_v4_f32(tiles + 16 * i, [0.0; 4]) };
        i += ptx::ntid_x();
    }
}

/// Add the edges of blocks `b0 .. b0 + nb` (global ids) into the staged tiles. Edges are sorted
/// by block, so an edge's tile is the number of group boundaries at or below it.
#[inline(always)]
unsafe fn scatter_edges(tiles: u32, blk_edge_ptr: *const u32, pos: *const u8, val: *const f32, b0: u32, nb: u32) {
    let mut bound = [u32::MAX; GROUP];
    let mut i = 1;
    while i < GROUP {
        if (i as u32) < nb {
            bound[i] = unsafe { ptx::ld_nc_u32(blk_edge_ptr.add((b0 + i as u32) as usize)) };
        }
        i += 1;
    }
    let e0 = unsafe { ptx::ld_nc_u32(blk_edge_ptr.add(b0 as usize)) };
    let e1 = unsafe { ptx::ld_nc_u32(blk_edge_ptr.add((b0 + nb) as usize)) };
    let mut e = e0 + ptx::tid_x();
    while e < e1 {
        let j = (e >= bound[1]) as u32 + (e >= bound[2]) as u32 + (e >= bound[3]) as u32;
        let (p, v) = unsafe { (ptx::ld_nc_u8(pos.add(e as usize)), ptx::ld_nc_f32(val.add(e as usize))) };
        unsafe { ptx::red_shared_add_f32(tiles + 4 * (j * TILE + p), v) };
        e += ptx::ntid_x();
    }
}

/// Store (or add) `NT` consecutive outputs at `p` from `acc[q][i]`, q = 0..NT.
#[inline(always)]
unsafe fn store_run<const NT: usize>(p: *mut f32, acc: &[[f32; 4]; NT], i: usize, atomic: bool) {
    let mut q = 0;
    if atomic {
        while q < NT {
            unsafe { ptx::red_add_f32(p.add(q), acc[q][i]) };
            q += 1;
        }
    } else if NT == 2 {
        unsafe { ptx::st_v2_f32(p, [acc[0][i], acc[1][i]]) };
    } else {
        while q + 4 <= NT {
            unsafe { ptx::st_v4_f32(p.add(q), [acc[q][i], acc[q + 1][i], acc[q + 2][i], acc[q + 3][i]]) };
            q += 4;
        }
    }
}

/// Write this lane's outputs: rows g and g+8 of the window, columns 2t and 2t+1 of every tile.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn write_tile<const NT: usize>(y: *mut f32, ld: u32, n_rows: u32, row0: u32, slice: u32, acc: &[[f32; 4]; NT], atomic: bool) {
    let lane = ptx::lane_id();
    let (g, t) = (lane / 4, lane % 4);
    let mut half = 0;
    while half < 2 {
        let row = row0 + g + 8 * half;
        let mut j = 0;
        while j < 2 {
            let dim = slice + tc16_dim(2 * t + j, 0, NT as u32);
            if row < n_rows && dim < ld {
                let p = unsafe { y.add(row as usize * ld as usize + dim as usize) };
                unsafe { store_run::<NT>(p, acc, (2 * half + j) as usize, atomic) };
            }
            j += 1;
        }
        half += 1;
    }
}

/// The main loop shared by every instance (`abi::spmm` lists them).
#[inline(always)]
pub unsafe fn tc16_spmm<P: Tc16Precision, const NT: usize>(args: Tc16SpmmArgs) {
    let Tc16SpmmArgs { n_rows, ld, win_ptr, win_cols, blk_ptr, blk_edge_ptr, blk_edge_pos, blk_edge_val, item_win, item_blocks, x, y } =
        args;
    let item = ptx::ctaid_x();
    let lane = ptx::lane_id();
    let warps = ptx::ntid_x() / 32;
    let w = unsafe { ptx::ld_nc_u32(item_win.add(item as usize)) };
    let blocks = unsafe { ptx::ld_nc_v2_u32(item_blocks.add(2 * item as usize)) };
    let (c_begin, c_end) = unsafe { (ptx::ld_nc_u32(win_ptr.add(w as usize)), ptx::ld_nc_u32(win_ptr.add(w as usize + 1))) };
    let (bw_begin, bw_end) = unsafe { (ptx::ld_nc_u32(blk_ptr.add(w as usize)), ptx::ld_nc_u32(blk_ptr.add(w as usize + 1))) };
    let whole_window = blocks[0] == 0 && bw_begin + blocks[1] >= bw_end;
    // This warp's K slice and this lane's dims in it.
    let slice = (ptx::ctaid_y() * warps + ptx::warp_id()) * 8 * NT as u32;
    let dim = slice + tc16_dim(lane / 4, 0, NT as u32);
    let dim_ok = dim < ld;
    let (k0, k1) = P::slots(lane);
    let tiles = SmemCarver::new().take(TC16_GROUP * TILE * 4);

    let mut acc = [[0.0f32; 4]; NT];
    let mut b = blocks[0];
    while b < blocks[1] {
        let nb = if blocks[1] - b < TC16_GROUP { blocks[1] - b } else { TC16_GROUP };
        unsafe { zero_tiles(tiles) };
        ptx::sync_threads();
        unsafe { scatter_edges(tiles, blk_edge_ptr, blk_edge_pos, blk_edge_val, bw_begin + b, nb) };
        ptx::sync_threads();
        // Lane i holds unique column i of the group (GROUP * 8 = 32 columns).
        let c = c_begin + b * BW + lane;
        let my_col = if c < c_end { unsafe { ptx::ld_nc_u32(win_cols.add(c as usize)) } } else { 0 };
        let mut a = [P::A::default(); GROUP];
        let mut bf = [P::B::default(); GROUP];
        crate::unroll4!(i => {
            let first = c_begin + (b + i as u32) * BW;
            let r0 = ptx::shfl_idx_u32(my_col, BW * i as u32 + k0);
            let r1 = ptx::shfl_idx_u32(my_col, BW * i as u32 + k1);
            if (i as u32) < nb {
                let ok = (dim_ok && first + k0 < c_end, dim_ok && first + k1 < c_end);
                bf[i] = unsafe { P::load_b::<NT>(x, ld, (r0, r1), ok, dim) };
                a[i] = unsafe { load_a::<P>(tiles + 4 * TILE * i as u32, lane) };
            }
        });
        crate::unroll4!(i => {
            if (i as u32) < nb {
                P::mma::<NT>(&mut acc, &a[i], &bf[i]);
            }
        });
        ptx::sync_threads();
        b += TC16_GROUP;
    }
    if slice < ld {
        unsafe { write_tile::<NT>(y, ld, n_rows, TC16_WINDOW * w, slice, &acc, !whole_window) };
    }
}
