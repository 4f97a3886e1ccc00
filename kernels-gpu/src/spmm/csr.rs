//! CSR SpMM on CUDA cores, one kernel generic over the feature type (f32 or f16 X; f32 edge
//! values, f32 accumulation, f32 Y).
//!
//! Why it exists beside the tensor-core kernels: on very sparse graphs whose neighbours are
//! scattered (random SBM, average degree ~10) an 8-row ME-BCRS window holds about one non-zero
//! per 8x1 vector, so TC8 reads several times the CSR's bytes for its vectors and gathers as many
//! X rows as there are non-zeros anyway. Here each non-zero costs its column id and value once,
//! and its X row is gathered once, at exactly the width of the features.
//!
//! The layout follows the feature width rather than the row, so narrow features keep every
//! lane busy: a row of X is cut into 16-byte chunks (8 f16 or 4 f32 columns) and a row of S is
//! given a group of `g` lanes, the power of two covering its chunks (at most 32: wider rows loop
//! over column passes). A warp therefore runs `32 / g` consecutive rows (16 columns of f16: two
//! lanes a row, sixteen rows a warp). Lanes load column ids and values of their group's row `U`
//! at a time, coalesced, once per batch of edges, and pass them around the group with `shfl`;
//! each step every lane gathers one 16-byte chunk of `U` different X rows (`U` loads in flight)
//! and accumulates in f32. Y is written with 16-byte stores, every padded column included
//! (padding of X is zero, so is Y's).
//!
//! The warp steps as long as its longest row: rows of one warp are neighbours in the CSR and of
//! similar length on the graphs this kernel is for. Where one row is far longer than the rest
//! (a hub of a power-law graph), the warp instead takes its rows one at a time with all 32 lanes:
//! each of the `32 / g` groups sums a strided share of the row's edges and the groups' partial
//! sums are added with `shfl_xor`, so a long row is spread over the whole warp rather than walked
//! by one group. A hub (more than `CSR_SPMM_HUB_ROW` entries: a power-law graph's largest rows)
//! would still keep its warp, and so the whole launch, busy long after the rest: each is given a
//! block of its own, appended to the grid, whose warps sum contiguous pieces of it and add their
//! sums in shared memory in warp order (no atomics: every launch adds in the same order).

use crate::abi::spmm::CsrSpmmArgs;
use crate::config::{CSR_SPMM_HUB_COLS, CSR_SPMM_HUB_ROW, CSR_SPMM_LONG_ROW, CSR_SPMM_SMEM_BYTES, CSR_SPMM_WARPS};
use crate::ptx;
use crate::smem::SmemCarver;

/// Edges each lane loads per batch: also the X gathers in flight per lane in each step.
const U: usize = 4;

/// One feature type: how a 16-byte chunk of an X row becomes f32.
pub trait CsrFeature {
    /// Elements in a 16-byte chunk (and f32 outputs of a lane per column pass).
    const PER_CHUNK: usize;
    /// The chunk's elements as f32, in the first `PER_CHUNK` entries.
    fn unpack(w: [u32; 4]) -> [f32; 8];
}

pub struct F32;
pub struct F16;

impl CsrFeature for F32 {
    const PER_CHUNK: usize = 4;
    #[inline(always)]
    fn unpack(w: [u32; 4]) -> [f32; 8] {
        [f32::from_bits(w[0]), f32::from_bits(w[1]), f32::from_bits(w[2]), f32::from_bits(w[3]), 0.0, 0.0, 0.0, 0.0]
    }
}

impl CsrFeature for F16 {
    const PER_CHUNK: usize = 8;
    #[inline(always)]
    fn unpack(w: [u32; 4]) -> [f32; 8] {
        let mut r = [0.0f32; 8];
        let mut i = 0;
        while i < 4 {
            r[2 * i] = ptx::f16_to_f32(w[i] as u16);
            r[2 * i + 1] = ptx::f16_to_f32((w[i] >> 16) as u16);
            i += 1;
        }
        r
    }
}

/// Where a lane's edges and X chunk are (warp-uniform fields except `start`, `len`, `base`,
/// `chunk`, `active`).
#[derive(Clone, Copy)]
struct Pass {
    col_idx: *const u32,
    values: *const f32,
    x: *const u32,
    /// 32-bit words per X row.
    row_words: u32,
    /// The row this lane's group sums: its first edge and edge count.
    start: u32,
    len: u32,
    /// Warp-uniform: the steps cover edge offsets `0..steps_len` (the longest row in play).
    steps_len: u32,
    /// Lane whose first loaded edge is offset 0 of a batch (the group's first lane, or lane 0
    /// when the whole warp loads one row).
    load_base: u32,
    /// Offset between a lane's `U` loaded edges (the lanes loading the row).
    stride: u32,
    /// This lane's group: first lane and size.
    base: u32,
    g: u32,
    /// This lane's 16-byte chunk of the X rows, and whether it is inside the row.
    chunk: u32,
    active: bool,
}

/// This lane's chunk of `sum_e value[e] * X[col[e]]` over the edges of its group's share of the
/// row (all of it in the per-group layout; offsets `base - load_base + j + stride * u` of each
/// batch when the warp shares one row).
#[inline(always)]
unsafe fn accumulate<E: CsrFeature>(p: Pass) -> [f32; 8] {
    let lane = ptx::lane_id();
    let my_off = lane - p.load_base;
    let mut acc = [0.0f32; 8];
    let mut e = 0;
    while e < p.steps_len {
        let mut cols = [0u32; U];
        let mut vals = [0.0f32; U];
        let mut u = 0;
        while u < U {
            let o = e + my_off + p.stride * u as u32;
            if o < p.len {
                let i = (p.start + o) as usize;
                unsafe {
                    cols[u] = ptx::ld_nc_u32(p.col_idx.add(i));
                    vals[u] = ptx::ld_nc_f32(p.values.add(i));
                }
            }
            u += 1;
        }
        // Warp-uniform bound: no lane's group needs a source lane past it.
        let j_end = p.g.min(p.steps_len - e);
        let mut j = 0;
        while j < j_end {
            let src = p.base + j;
            let mut xs = [[0u32; 4]; U];
            let mut vs = [0.0f32; U];
            let mut u = 0;
            while u < U {
                let col = ptx::shfl_idx_u32(cols[u], src);
                vs[u] = ptx::shfl_idx_f32(vals[u], src);
                let o = e + (src - p.load_base) + p.stride * u as u32;
                if p.active && o < p.len {
                    xs[u] = unsafe { ptx::ld_nc_v4_u32(p.x.add(col as usize * p.row_words as usize + 4 * p.chunk as usize)) };
                }
                u += 1;
            }
            let mut u = 0;
            while u < U {
                let xv = E::unpack(xs[u]);
                let mut q = 0;
                while q < E::PER_CHUNK {
                    acc[q] = ptx::fma_f32(vs[u], xv[q], acc[q]);
                    q += 1;
                }
                u += 1;
            }
            j += 1;
        }
        e += p.stride * U as u32;
    }
    acc
}

/// Y's chunk `chunk` of `row` (f32, 16-byte stores).
#[inline(always)]
unsafe fn store<E: CsrFeature>(y: *mut f32, ld: u32, row: u32, chunk: u32, acc: [f32; 8]) {
    let p = unsafe { y.add(row as usize * ld as usize + chunk as usize * E::PER_CHUNK) };
    let mut h = 0;
    while h < E::PER_CHUNK {
        unsafe { ptx::st_v4_f32(p.add(h), [acc[h], acc[h + 1], acc[h + 2], acc[h + 3]]) };
        h += 4;
    }
}

/// The sum over the warp's `32 / g` lane groups of each lane's chunk sums (lane `l` of every
/// group ends with the sum of the groups' lane `l`): where the whole warp shares one row.
#[inline(always)]
fn add_across_groups<E: CsrFeature>(mut acc: [f32; 8], g: u32) -> [f32; 8] {
    let mut off = g;
    while off < 32 {
        let mut q = 0;
        while q < E::PER_CHUNK {
            acc[q] += ptx::shfl_xor_f32(acc[q], off);
            q += 1;
        }
        off *= 2;
    }
    acc
}

#[inline(always)]
fn warp_max_u32(mut v: u32) -> u32 {
    let mut off = 16;
    while off > 0 {
        v = v.max(ptx::shfl_xor_u32(v, off));
        off /= 2;
    }
    v
}

/// `ld` a multiple of 8; X and Y 16-byte aligned with row stride `ld` (elements of their types);
/// `group_log2` = log2 of the lanes a row (0..=5, covering `ld / PER_CHUNK` chunks or 32).
#[inline(always)]
pub unsafe fn csr_spmm<E: CsrFeature>(args: CsrSpmmArgs) {
    if ptx::ctaid_x() >= args.body_blocks {
        let row = unsafe { ptx::ld_nc_u32(args.hub_rows.add((ptx::ctaid_x() - args.body_blocks) as usize)) };
        unsafe { hub_row::<E>(&args, row) };
        return;
    }
    let CsrSpmmArgs { n_rows, ld, group_log2, row_ptr, col_idx, values, x, y, .. } = args;
    let g = 1u32 << group_log2;
    let rows_per_warp = 32 >> group_log2;
    let first = (ptx::ctaid_x() * CSR_SPMM_WARPS + ptx::warp_id()) * rows_per_warp;
    if first >= n_rows {
        return; // whole warp: the shuffles below need every lane
    }
    let lane = ptx::lane_id();
    let sub = lane >> group_log2;
    let base = sub << group_log2;
    let l = lane - base;
    let chunks = ld / E::PER_CHUNK as u32;
    let passes = chunks.div_ceil(g);
    let row = first + sub;
    let (start, mut len) = if row < n_rows {
        let s = unsafe { ptx::ld_nc_u32(row_ptr.add(row as usize)) };
        (s, unsafe { ptx::ld_nc_u32(row_ptr.add(row as usize + 1)) } - s)
    } else {
        (0, 0)
    };
    // A hub is its own block's: this group neither sums nor stores it.
    let hub = len > CSR_SPMM_HUB_ROW;
    if hub {
        len = 0;
    }
    let max_len = warp_max_u32(len);
    let pass = |chunk: u32| Pass {
        col_idx,
        values,
        x,
        row_words: 4 * chunks,
        start,
        len,
        steps_len: max_len,
        load_base: base,
        stride: g,
        base,
        g,
        chunk,
        active: chunk < chunks,
    };
    if rows_per_warp == 1 || max_len <= CSR_SPMM_LONG_ROW {
        // A group per row.
        let mut c = 0;
        while c < passes {
            let p = pass(l + c * g);
            let acc = unsafe { accumulate::<E>(p) };
            if row < n_rows && p.active && !hub {
                unsafe { store::<E>(y, ld, row, p.chunk, acc) };
            }
            c += 1;
        }
        return;
    }
    // A long row in this warp: every row of it with all 32 lanes, one after the other.
    let mut r = 0;
    while r < rows_per_warp && first + r < n_rows {
        let rr = first + r;
        let s = unsafe { ptx::ld_nc_u32(row_ptr.add(rr as usize)) };
        let n = unsafe { ptx::ld_nc_u32(row_ptr.add(rr as usize + 1)) } - s;
        let mut c = 0;
        // Warp-uniform: a hub is its own block's.
        let passes = if n > CSR_SPMM_HUB_ROW { 0 } else { passes };
        while c < passes {
            let p = Pass { start: s, len: n, steps_len: n, load_base: 0, stride: 32, ..pass(l + c * g) };
            let acc = add_across_groups::<E>(unsafe { accumulate::<E>(p) }, g);
            if sub == 0 && p.active {
                unsafe { store::<E>(y, ld, rr, p.chunk, acc) };
            }
            c += 1;
        }
        r += 1;
    }
}

/// Row `row` (a hub) summed by the whole block: warp `w` takes the `w`-th of `CSR_SPMM_WARPS`
/// contiguous pieces of its entries with all 32 lanes (the long-row layout: each lane group a
/// strided share, added with `shfl_xor`); per column pass the warps' sums meet in shared memory
/// and thread `t` adds column `t` of them in warp order.
#[inline(always)]
unsafe fn hub_row<E: CsrFeature>(args: &CsrSpmmArgs, row: u32) {
    let log2 = args.group_log2;
    let g = 1u32 << log2;
    let lane = ptx::lane_id();
    let w = ptx::warp_id();
    let sub = lane >> log2;
    let base = sub << log2;
    let l = lane - base;
    let chunks = args.ld / E::PER_CHUNK as u32;
    let passes = chunks.div_ceil(g);
    let s = unsafe { ptx::ld_nc_u32(args.row_ptr.add(row as usize)) };
    let n = unsafe { ptx::ld_nc_u32(args.row_ptr.add(row as usize + 1)) } - s;
    let piece = n.div_ceil(CSR_SPMM_WARPS);
    let from = (w * piece).min(n);
    let len = (from + piece).min(n) - from;
    let partials = SmemCarver::new().take(CSR_SPMM_SMEM_BYTES);
    // Columns of one pass: g chunks (at most 32 x 8 f16 or 32 x 4 f32 = CSR_SPMM_HUB_COLS).
    let pass_cols = g * E::PER_CHUNK as u32;
    let t = w * 32 + lane;
    let mut c = 0;
    while c < passes {
        let chunk = l + c * g;
        let p = Pass {
            col_idx: args.col_idx,
            values: args.values,
            x: args.x,
            row_words: 4 * chunks,
            start: s + from,
            len,
            steps_len: len,
            load_base: 0,
            stride: 32,
            base,
            g,
            chunk,
            active: chunk < chunks,
        };
        let acc = add_across_groups::<E>(unsafe { accumulate::<E>(p) }, g);
        if sub == 0 {
            let mut q = 0;
            while q < E::PER_CHUNK {
                unsafe { ptx::st_shared_f32(partials + 4 * (w * CSR_SPMM_HUB_COLS + l * E::PER_CHUNK as u32 + q as u32), acc[q]) };
                q += 1;
            }
        }
        ptx::sync_threads();
        let col = c * pass_cols + t;
        if t < pass_cols && col < args.ld {
            let mut sum = 0.0f32;
            let mut v = 0;
            while v < CSR_SPMM_WARPS {
                sum += unsafe { ptx::ld_shared_f32(partials + 4 * (v * CSR_SPMM_HUB_COLS + t)) };
                v += 1;
            }
            unsafe { args.y.add(row as usize * args.ld as usize + col as usize).write(sum) };
        }
        ptx::sync_threads();
        c += 1;
    }
}
