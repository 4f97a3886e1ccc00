//! TC8 SpMM, pipelined: the same work items and swap-and-transpose product as `tc8`, with the X
//! gathers and block values brought into shared memory by `cp.async` several groups ahead.
//!
//! Why: the register version holds a group's gathered X chunks in registers until its MMAs, so
//! each warp has at most one group (4 KB) in flight, and only between its column load and its
//! MMAs; ncu showed 67% of warp time waiting on loads with L2 at 40% of its throughput. Copies
//! into shared memory hold no registers, so a warp keeps `STAGES - 1` groups in flight while it
//! multiplies the oldest, and the next group's columns are loaded one iteration early.
//!
//! Per warp and stage: 32 vectors x 128 bytes of X (one K slice of 16*NT dims: f16 NT = 4,
//! tf32 NT = 2) in XOR-swizzled rows (`layout::tc8_smem_chunk`), then the group's values.

use crate::config::{TC8_BLOCK_VECTORS as KV, tc8_async_stage_bytes};
use crate::layout::tc8_smem_chunk;
use crate::abi::spmm::Tc8SpmmArgs;
use crate::ptx;
use crate::spmm::tc8::{WorkItem, write_tile};

/// Vectors per group (4 blocks): one column per lane.
const GROUP_VECTORS: u32 = 32;
/// Bytes of one vector's X slice in shared memory (8 chunks of 16 bytes).
const ROW_BYTES: u32 = 128;
/// X bytes of one stage (the values follow; `config::tc8_async_stage_bytes` is the whole stage).
const X_STAGE_BYTES: u32 = GROUP_VECTORS * ROW_BYTES;

/// One precision: how B fragments come from the staged values and A fragments from the
/// staged X rows.
pub trait AsyncPrecision {
    const TF32: bool;
    /// Bytes per value and per X element.
    const VALUE_BYTES: u32;
    type B: Copy + Default;
    /// B fragment of the block at group vector `vo` (kb vectors) for window row `lane / 4`.
    unsafe fn load_b(vals: u32, vo: u32, kb: u32, lane: u32) -> Self::B;
    /// acc[q] += A_q B for group block `block`, A read from the staged rows at `xs`.
    unsafe fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], xs: u32, block: u32, b: Self::B, lane: u32);
}

pub struct F16;
pub struct Tf32;

/// Shared address of chunk g of group vector v.
#[inline(always)]
fn chunk_addr(xs: u32, v: u32, g: u32, tf32: bool) -> u32 {
    xs + v * ROW_BYTES + 16 * tc8_smem_chunk(v, g, tf32)
}

impl AsyncPrecision for F16 {
    const TF32: bool = false;
    const VALUE_BYTES: u32 = 2;
    type B = u32;

    #[inline(always)]
    unsafe fn load_b(vals: u32, vo: u32, kb: u32, lane: u32) -> u32 {
        let (g, t) = (lane / 4, lane % 4);
        if kb == KV {
            unsafe { ptx::ld_shared_u32(vals + 2 * (8 * vo + g * KV) + 4 * t) }
        } else {
            let base = vals + 2 * (8 * vo + g * kb);
            let lo = if 2 * t < kb { unsafe { ptx::ld_shared_u16(base + 4 * t) } } else { 0 };
            let hi = if 2 * t + 1 < kb { unsafe { ptx::ld_shared_u16(base + 4 * t + 2) } } else { 0 };
            ptx::pack_u16x2(lo, hi)
        }
    }

    #[inline(always)]
    unsafe fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], xs: u32, block: u32, b: u32, lane: u32) {
        let (g, t) = (lane / 4, lane % 4);
        let va = KV * block + 2 * t;
        let xa = unsafe { ptx::ld_shared_v4_u32(chunk_addr(xs, va, g, false)) };
        let xb = unsafe { ptx::ld_shared_v4_u32(chunk_addr(xs, va + 1, g, false)) };
        let mut q = 0;
        while q < NT {
            let a = [ptx::lo_halves(xa[q], xb[q]), ptx::hi_halves(xa[q], xb[q])];
            acc[q] = ptx::mma_m16n8k8_f16(a, b, acc[q]);
            q += 1;
        }
    }
}

impl AsyncPrecision for Tf32 {
    const TF32: bool = true;
    const VALUE_BYTES: u32 = 4;
    type B = [u32; 2];

    #[inline(always)]
    unsafe fn load_b(vals: u32, vo: u32, kb: u32, lane: u32) -> [u32; 2] {
        let (g, t) = (lane / 4, lane % 4);
        let base = vals + 4 * (8 * vo + g * kb);
        let b0 = if t < kb { unsafe { ptx::ld_shared_u32(base + 4 * t) } } else { 0 };
        let b1 = if t + 4 < kb { unsafe { ptx::ld_shared_u32(base + 4 * (t + 4)) } } else { 0 };
        [ptx::cvt_tf32(f32::from_bits(b0)), ptx::cvt_tf32(f32::from_bits(b1))]
    }

    #[inline(always)]
    unsafe fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], xs: u32, block: u32, b: [u32; 2], lane: u32) {
        let (g, t) = (lane / 4, lane % 4);
        let va = KV * block + t;
        let xa = unsafe { ptx::ld_shared_v4_u32(chunk_addr(xs, va, g, true)) };
        let xb = unsafe { ptx::ld_shared_v4_u32(chunk_addr(xs, va + 4, g, true)) };
        let mut q = 0;
        while q < NT {
            let cv = |w: u32| ptx::cvt_tf32(f32::from_bits(w));
            let a = [cv(xa[2 * q]), cv(xa[2 * q + 1]), cv(xb[2 * q]), cv(xb[2 * q + 1])];
            acc[q] = ptx::mma_m16n8k8_tf32(a, b, acc[q]);
            q += 1;
        }
    }
}

/// Issue the copies of one group: lane l copies chunk l % 8 of vectors 4j + l / 8 (a quarter-warp
/// one whole row), then 16-byte pieces of the group's values. Vectors past `v_end` and chunks
/// past `ld` are zero-filled, so the MMAs never read stale or uninitialised shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn issue_group<P: AsyncPrecision>(x: *const u32, ld: u32, my_col: u32, vg: u32, v_end: u32, copy_dim: u32, copy_ok: bool, values: *const u32, stage: u32, lane: u32) {
    let c = lane % 8;
    let mut j = 0;
    while j < GROUP_VECTORS / 4 {
        let v = 4 * j + lane / 8;
        let col = ptx::shfl_idx_u32(my_col, v);
        let ok = vg + v < v_end && copy_ok;
        // Word offset of (col, copy_dim): f16 packs two elements per word.
        let word = (col as usize * ld as usize + copy_dim as usize) * P::VALUE_BYTES as usize / 4;
        let src = if ok { unsafe { x.add(word) } } else { x };
        unsafe { ptx::cp_async_16(stage + v * ROW_BYTES + 16 * tc8_smem_chunk(v, c, P::TF32), src, if ok { 16 } else { 0 }) };
        j += 1;
    }
    // Values: 8 per vector, contiguous over the group; 16-byte pieces, lane-strided.
    let per_piece = 16 / P::VALUE_BYTES;
    let pieces = GROUP_VECTORS * KV / per_piece;
    let vals = stage + X_STAGE_BYTES;
    let mut p = lane;
    while p < pieces {
        let elem = 8 * vg + p * per_piece;
        let ok = elem < 8 * v_end;
        let src = if ok { unsafe { values.add(elem as usize * P::VALUE_BYTES as usize / 4) } } else { values };
        unsafe { ptx::cp_async_16(vals + 16 * p, src, if ok { 16 } else { 0 }) };
        p += 32;
    }
}

/// The main loop shared by every instance (`abi::spmm` lists them).
#[inline(always)]
pub unsafe fn tc8_async_spmm<P: AsyncPrecision, const NT: usize, const STAGES: u32>(a: Tc8SpmmArgs) {
    let Tc8SpmmArgs { n_items, n_rows, ld, win_ptr, vec_col, values, item_win, item_blocks, x, y } = a;
    let Some(WorkItem { win: w, v_begin, v_end, whole_window }) = (unsafe { WorkItem::load(n_items, win_ptr, item_win, item_blocks) }) else {
        return;
    };
    let lane = ptx::lane_id();
    let slice = ptx::ctaid_y() * 16 * NT as u32;
    let dim = slice + 2 * NT as u32 * (lane / 4);
    let dim_ok = dim < ld;
    let copy_dim = slice + 2 * NT as u32 * (lane % 8);
    let copy_ok = copy_dim < ld;

    let n_groups = (v_end - v_begin).div_ceil(GROUP_VECTORS);
    let stage_bytes = tc8_async_stage_bytes(P::VALUE_BYTES);
    let warp_smem = ptx::dyn_smem_base() + ptx::warp_id() * STAGES * stage_bytes;
    let load_cols = |gi: u32| {
        let v = v_begin + GROUP_VECTORS * gi + lane;
        if v < v_end { unsafe { ptx::ld_nc_u32(vec_col.add(v as usize)) } } else { 0 }
    };

    // Prologue: the first STAGES - 1 groups in flight.
    let mut gi = 0;
    while gi < STAGES - 1 {
        if gi < n_groups {
            let cols = load_cols(gi);
            unsafe { issue_group::<P>(x, ld, cols, v_begin + GROUP_VECTORS * gi, v_end, copy_dim, copy_ok, values, warp_smem + gi * stage_bytes, lane) };
        }
        ptx::cp_async_commit();
        gi += 1;
    }
    let mut cols_next = if STAGES - 1 < n_groups { load_cols(STAGES - 1) } else { 0 };

    let mut acc = [[0.0f32; 4]; NT];
    let mut gi = 0;
    while gi < n_groups {
        let ahead = gi + STAGES - 1;
        if ahead < n_groups {
            unsafe { issue_group::<P>(x, ld, cols_next, v_begin + GROUP_VECTORS * ahead, v_end, copy_dim, copy_ok, values, warp_smem + (ahead % STAGES) * stage_bytes, lane) };
        }
        ptx::cp_async_commit();
        if ahead + 1 < n_groups {
            cols_next = load_cols(ahead + 1);
        }
        // Group gi is the oldest of the STAGES in flight.
        if STAGES <= 2 { ptx::cp_async_wait::<1>() } else { ptx::cp_async_wait::<2>() }
        ptx::sync_warp();
        let stage = warp_smem + (gi % STAGES) * stage_bytes;
        let vg = v_begin + GROUP_VECTORS * gi;
        crate::unroll4!(i => {
            let v0 = vg + KV * i as u32;
            if v0 < v_end {
                let kb = if v_end - v0 < KV { v_end - v0 } else { KV };
                let b = unsafe { P::load_b(stage + X_STAGE_BYTES, KV * i as u32, kb, lane) };
                unsafe { P::mma::<NT>(&mut acc, stage, i as u32, b, lane) };
            }
        });
        // Every lane has read the stage before any lane refills it.
        ptx::sync_warp();
        gi += 1;
    }
    if dim_ok {
        unsafe { write_tile::<NT>(y, ld, n_rows, 8 * w, dim, &acc, !whole_window) };
    }
}
