//! TC8 SpMM (FlashSparse swap-and-transpose) on ME-BCRS with k = 8 vectors per block.
//!
//! Y^T = X^T S^T: the 8-row sparse block is the B operand of `mma.m16n8k8` (its row-major
//! 8 x kb values are exactly B's column-major layout) and 16 feature dimensions of X gathered
//! at the block's 8 vector columns are the A operand; D is a 16-dim x 8-row tile of Y^T.
//!
//! Memory-efficient mapping: MMA row m = g (lane / 4) of tile q stands for feature dim
//! `2*NT*g + 2q` and m = g + 8 for the dim after it, so each lane reads 2*NT consecutive
//! features of a gathered X row with one or two vector loads (8 lanes cover 16*NT contiguous
//! dims of that row) and writes 2*NT consecutive outputs of Y rows 2t and 2t+1.
//!
//! A warp runs one work item (a window, or a run of at most `max_blocks` blocks of a long
//! window) for one 16*NT-wide slice of K (grid.y). Items that cover part of a window add into
//! Y atomically (those windows' rows are cleared first by `tc8_zero_windows`); the others store.

use crate::config::{TC8_BLOCK_VECTORS as KV, TC8_WARPS};
use crate::abi::spmm::{Tc8SpmmArgs, ZeroWindowsArgs};
use crate::ptx;

/// Blocks whose loads are issued together (4 x 8 vectors = one column per lane).
const GROUP: usize = 4;

/// One precision of the TC8 kernel, in two steps so the main loop can load block b+1 while
/// the tensor cores work on block b: `load` gathers this lane's X words and block values into
/// a fragment, `mma` issues the NT tile products.
pub trait Tc8Precision {
    /// What one lane holds of one block.
    type Frag: Copy + Default;
    /// The two vector slots (0..8) whose X rows and values this lane supplies.
    fn slots(lane: u32) -> (u32, u32);
    /// Gather X rows `rows` (for slots below `kb`) at feature offset `dim` (when `dim_ok`) and
    /// the block's values for window row `lane / 4`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn load<const NT: usize>(x: *const u32, ld: u32, rows: (u32, u32), dim: u32, dim_ok: bool, values: *const u32, v0: u32, kb: u32, lane: u32) -> Self::Frag;
    /// acc[q] += A_q B for the NT tiles.
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], f: &Self::Frag);
}

pub struct F16;
pub struct Tf32;

/// `W` consecutive 32-bit words of a row, with the widest aligned loads (W in 2, 4, 8).
#[inline(always)]
unsafe fn load_words<const W: usize>(p: *const u32) -> [u32; 8] {
    let mut w = [0u32; 8];
    unsafe {
        if W == 2 {
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

/// f16: lane (g, t) supplies vectors 2t and 2t+1; its X words hold two f16 dims each.
#[derive(Clone, Copy, Default)]
pub struct F16Frag {
    xa: [u32; 4],
    xb: [u32; 4],
    b: u32,
}

impl Tc8Precision for F16 {
    type Frag = F16Frag;

    #[inline(always)]
    fn slots(lane: u32) -> (u32, u32) {
        let t = lane % 4;
        (2 * t, 2 * t + 1)
    }

    #[inline(always)]
    unsafe fn load<const NT: usize>(x: *const u32, ld: u32, rows: (u32, u32), dim: u32, dim_ok: bool, values: *const u32, v0: u32, kb: u32, lane: u32) -> F16Frag {
        let (g, t) = (lane / 4, lane % 4);
        let (j0, j1) = Self::slots(lane);
        // X rows as f16: ld halves per row, so the word offset is (row * ld + dim) / 2.
        let zero = [0u32; 8];
        let xa = if j0 < kb && dim_ok { unsafe { load_words::<NT>(x.add((rows.0 as usize * ld as usize + dim as usize) / 2)) } } else { zero };
        let xb = if j1 < kb && dim_ok { unsafe { load_words::<NT>(x.add((rows.1 as usize * ld as usize + dim as usize) / 2)) } } else { zero };
        let b = if kb == KV {
            // A full block: S[g][2t..2t+2] is one aligned 32-bit word.
            unsafe { ptx::ld_nc_u32(values.add(((8 * v0 + g * KV) / 2 + t) as usize)) }
        } else {
            let vals = values as *const u16;
            let base = 8 * v0 + g * kb;
            let lo = if j0 < kb { unsafe { ptx::ld_nc_u16(vals.add((base + j0) as usize)) } } else { 0 };
            let hi = if j1 < kb { unsafe { ptx::ld_nc_u16(vals.add((base + j1) as usize)) } } else { 0 };
            ptx::pack_u16x2(lo, hi)
        };
        F16Frag { xa: [xa[0], xa[1], xa[2], xa[3]], xb: [xb[0], xb[1], xb[2], xb[3]], b }
    }

    #[inline(always)]
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], f: &F16Frag) {
        let mut q = 0;
        while q < NT {
            // Row m = g is dim 2q of the lane's run, m = g + 8 dim 2q + 1; k = vectors 2t, 2t+1.
            let a = [ptx::lo_halves(f.xa[q], f.xb[q]), ptx::hi_halves(f.xa[q], f.xb[q])];
            acc[q] = ptx::mma_m16n8k8_f16(a, f.b, acc[q]);
            q += 1;
        }
    }
}

/// tf32: lane (g, t) supplies vectors t and t+4; X words are f32 dims.
#[derive(Clone, Copy, Default)]
pub struct Tf32Frag {
    xa: [u32; 8],
    xb: [u32; 8],
    b: [u32; 2],
}

impl Tc8Precision for Tf32 {
    type Frag = Tf32Frag;

    #[inline(always)]
    fn slots(lane: u32) -> (u32, u32) {
        let t = lane % 4;
        (t, t + 4)
    }

    #[inline(always)]
    unsafe fn load<const NT: usize>(x: *const u32, ld: u32, rows: (u32, u32), dim: u32, dim_ok: bool, values: *const u32, v0: u32, kb: u32, lane: u32) -> Tf32Frag {
        let g = lane / 4;
        let (j0, j1) = Self::slots(lane);
        let zero = [0u32; 8];
        let xa = if j0 < kb && dim_ok { unsafe { load_tf32_words::<NT>(x.add(rows.0 as usize * ld as usize + dim as usize)) } } else { zero };
        let xb = if j1 < kb && dim_ok { unsafe { load_tf32_words::<NT>(x.add(rows.1 as usize * ld as usize + dim as usize)) } } else { zero };
        let base = 8 * v0 + g * kb;
        let b0 = if j0 < kb { unsafe { ptx::ld_nc_u32(values.add((base + j0) as usize)) } } else { 0 };
        let b1 = if j1 < kb { unsafe { ptx::ld_nc_u32(values.add((base + j1) as usize)) } } else { 0 };
        Tf32Frag { xa, xb, b: [ptx::cvt_tf32(f32::from_bits(b0)), ptx::cvt_tf32(f32::from_bits(b1))] }
    }

    #[inline(always)]
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], f: &Tf32Frag) {
        let mut q = 0;
        while q < NT {
            let a = [
                ptx::cvt_tf32(f32::from_bits(f.xa[2 * q])),
                ptx::cvt_tf32(f32::from_bits(f.xa[2 * q + 1])),
                ptx::cvt_tf32(f32::from_bits(f.xb[2 * q])),
                ptx::cvt_tf32(f32::from_bits(f.xb[2 * q + 1])),
            ];
            acc[q] = ptx::mma_m16n8k8_tf32(a, f.b, acc[q]);
            q += 1;
        }
    }
}

/// 2*NT f32 words (NT = 2: one v4; NT = 4: two v4).
#[inline(always)]
unsafe fn load_tf32_words<const NT: usize>(p: *const u32) -> [u32; 8] {
    if NT == 2 { unsafe { load_words::<4>(p) } } else { unsafe { load_words::<8>(p) } }
}

/// Write this lane's outputs: rows 2t and 2t+1 of the window, 2*NT consecutive dims each.
#[inline(always)]
pub unsafe fn write_tile<const NT: usize>(y: *mut f32, ld: u32, n_rows: u32, row0: u32, dim: u32, acc: &[[f32; 4]; NT], atomic: bool) {
    let t = ptx::lane_id() % 4;
    let mut half = 0;
    while half < 2 {
        let row = row0 + 2 * t + half;
        if row < n_rows {
            let p = unsafe { y.add(row as usize * ld as usize + dim as usize) };
            // c0/c1 are rows 2t/2t+1 of dim 2q, c2/c3 of dim 2q+1: two tiles make one float4.
            let mut q = 0;
            while q < NT {
                let v = [acc[q][half as usize], acc[q][2 + half as usize], acc[q + 1][half as usize], acc[q + 1][2 + half as usize]];
                unsafe {
                    if atomic {
                        for (i, e) in v.iter().enumerate() {
                            ptx::red_add_f32(p.add(2 * q + i), *e);
                        }
                    } else {
                        ptx::st_v4_f32(p.add(2 * q), v);
                    }
                }
                q += 2;
            }
        }
        half += 1;
    }
}

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

/// The main loop shared by every instance (`abi::spmm` lists them).
#[inline(always)]
pub unsafe fn tc8_spmm<P: Tc8Precision, const NT: usize>(a: Tc8SpmmArgs) {
    let Tc8SpmmArgs { n_items, n_rows, ld, win_ptr, vec_col, values, item_win, item_blocks, x, y } = a;
    let Some(WorkItem { win: w, v_begin, v_end, whole_window }) = (unsafe { WorkItem::load(n_items, win_ptr, item_win, item_blocks) }) else {
        return;
    };
    let lane = ptx::lane_id();
    let dim = ptx::ctaid_y() * 16 * NT as u32 + 2 * NT as u32 * (lane / 4);
    let dim_ok = dim < ld;
    let (j0, j1) = P::slots(lane);

    // Groups of GROUP blocks: one coalesced load brings the group's 8 * GROUP vector columns
    // (lane i holds column i, handed out by shuffles), then every block's X gathers and values
    // are issued before the first MMA, so GROUP blocks of loads are in flight per warp.
    let mut acc = [[0.0f32; 4]; NT];
    let mut vg = v_begin;
    while vg < v_end {
        let my_col = if vg + lane < v_end { unsafe { ptx::ld_nc_u32(vec_col.add((vg + lane) as usize)) } } else { 0 };
        let mut frags = [P::Frag::default(); GROUP];
        crate::unroll4!(i => {
            let v0 = vg + KV * i as u32;
            let kb = if v0 >= v_end { 0 } else if v_end - v0 < KV { v_end - v0 } else { KV };
            let c0 = ptx::shfl_idx_u32(my_col, KV * i as u32 + j0);
            let c1 = ptx::shfl_idx_u32(my_col, KV * i as u32 + j1);
            frags[i] = unsafe { P::load::<NT>(x, ld, (c0, c1), dim, dim_ok, values, v0, kb, lane) };
        });
        crate::unroll4!(i => {
            if vg + KV * (i as u32) < v_end {
                P::mma::<NT>(&mut acc, &frags[i]);
            }
        });
        vg += KV * GROUP as u32;
    }
    if dim_ok {
        unsafe { write_tile::<NT>(y, ld, n_rows, 8 * w, dim, &acc, !whole_window) };
    }
}

/// Clear the 8 rows of each listed window (those whose items add atomically). One block per
/// window, threads over the 8 * ld floats.
#[inline(always)]
pub unsafe fn zero_windows(a: ZeroWindowsArgs) {
    let ZeroWindowsArgs { windows, n_rows, ld, y } = a;
    let w = unsafe { ptx::ld_nc_u32(windows.add(ptx::ctaid_x() as usize)) };
    let row0 = 8 * w;
    let rows = if n_rows - row0 < 8 { n_rows - row0 } else { 8 };
    let mut i = ptx::tid_x();
    while i < rows * ld {
        unsafe { *y.add(row0 as usize * ld as usize + i as usize) = 0.0 };
        i += ptx::ntid_x();
    }
}
