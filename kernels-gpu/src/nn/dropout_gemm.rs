//! Input dropout fused with the first feature transform: y = dropout(x) w and
//! dw = dropout(x)ᵀ dy, the mask regenerated from the counter RNG (`crate::rng`, the same draw
//! as `nn/dropout.rs`: element (r, c) has index `offset + r * ldx + c`) while x streams through
//! shared memory, so the dropped copy of x and its mask are never written.
//!
//! Both products are tensor-core GEMMs with `mma.sync.m16n8k8` in tf32, or, for f32 precision
//! (`SPLIT`), 3xTF32: each operand split into a tf32 high part and a tf32 remainder, summed as
//! lo·hi + hi·lo + hi·hi (the lo·lo term is below f32 rounding), close to f32 accuracy on the
//! same tensor cores.
//!
//! Forward: a block owns 64 rows of x (4 warps of 16) and 8 NT columns of y; it walks k in
//! chunks of 32, loading the x chunk with coalesced float4s (dropout and scale applied on the
//! way into shared memory) and the w chunk beside it. w is narrow (16-256 columns): one column
//! tile for widths up to 64, so x is read from memory once; blocks of one row range are
//! adjacent in the grid, so wider w re-reads x from L2.
//!
//! Weight gradient: dw (k x n) is a reduction over all rows. A block owns 64 rows of dw (64
//! columns of x) x 8 NT columns and the x rows of one split; each split writes its partial dw
//! to `partial[split]`, and `split_sum` adds the splits in a fixed order (deterministic, no
//! atomics).

use crate::abi::dropout_gemm::{DG_BLOCK_K, DG_BLOCK_ROWS, DG_DW_STEP_ROWS, DG_THREADS, DropoutGemmArgs, DropoutGemmDwArgs, SplitSumArgs};
use crate::nn::grid_stride;
use crate::ptx;
use crate::rng::{dropout_hash_low, dropout_high_key, dropout_keep_keyed};
use crate::translate::{div_or_zero, rem_or_zero};

/// k per forward chunk, and the x tile's shared stride (36: the A fragment's 8 rows x 4
/// columns fall in 32 distinct banks).
const BK: u32 = 32;
const X_STRIDE: u32 = BK + 4;
/// The weight gradient's x tile stride (72: its transposed A fragment reads 4 rows x 8
/// columns, 32 distinct banks).
const XT_STRIDE: u32 = DG_BLOCK_K + 8;

/// Four consecutive elements of x from flat index `o` (a multiple of 4), dropped out and
/// scaled: the dropout kernel's draw, element by element.
#[inline(always)]
unsafe fn load_dropped(x: *const f32, o: u64, key: (u64, u32, u32, u64), scale: f32) -> [f32; 4] {
    let (seed_key, step, threshold, offset) = key;
    let v = unsafe { ptx::ld_nc_v4_f32(x.add(o as usize)) };
    let base = offset + o;
    let high_key = dropout_high_key(seed_key, base);
    let mut out = [0f32; 4];
    crate::unroll4!(e => {
        let index = base + e as u64;
        // The four share `high_key` unless they straddle a 2^32 boundary (an odd offset).
        let keep = if index >> 32 == base >> 32 {
            dropout_hash_low(high_key, step, index as u32) >= threshold
        } else {
            dropout_keep_keyed(seed_key, step, index, threshold)
        };
        if keep {
            out[e] = v[e] * scale;
        }
    });
    out
}

/// The tf32 parts of `v`: (high, remainder); the remainder is 0 unless `SPLIT`.
#[inline(always)]
fn parts<const SPLIT: bool>(v: f32) -> (u32, u32) {
    let hi = ptx::cvt_tf32(v);
    let lo = if SPLIT { ptx::cvt_tf32(v - f32::from_bits(hi)) } else { 0 };
    (hi, lo)
}

/// acc += a b, in tf32 or (SPLIT) 3xTF32; `a` and `b` as (high, remainder) fragments.
#[inline(always)]
fn mma<const SPLIT: bool>(a: ([u32; 4], [u32; 4]), b: ([u32; 2], [u32; 2]), acc: [f32; 4]) -> [f32; 4] {
    let mut c = acc;
    if SPLIT {
        c = ptx::mma_m16n8k8_tf32(a.1, b.0, c);
        c = ptx::mma_m16n8k8_tf32(a.0, b.1, c);
    }
    ptx::mma_m16n8k8_tf32(a.0, b.0, c)
}

/// The A fragment (16 x 8, row-major) from shared f32 `at(row, col)` addresses.
#[inline(always)]
unsafe fn a_fragment<const SPLIT: bool>(at: impl Fn(u32, u32) -> u32, g: u32, t: u32) -> ([u32; 4], [u32; 4]) {
    let v = unsafe { [ptx::ld_shared_f32(at(g, t)), ptx::ld_shared_f32(at(g + 8, t)), ptx::ld_shared_f32(at(g, t + 4)), ptx::ld_shared_f32(at(g + 8, t + 4))] };
    let p = [parts::<SPLIT>(v[0]), parts::<SPLIT>(v[1]), parts::<SPLIT>(v[2]), parts::<SPLIT>(v[3])];
    ([p[0].0, p[1].0, p[2].0, p[3].0], [p[0].1, p[1].1, p[2].1, p[3].1])
}

/// The B fragment (8 x 8) of rows k0.. and column `col` of a shared row-major tile.
#[inline(always)]
unsafe fn b_fragment<const SPLIT: bool>(tile: u32, stride: u32, k0: u32, col: u32, t: u32) -> ([u32; 2], [u32; 2]) {
    let at = |k: u32| tile + 4 * (k * stride + col);
    let v = unsafe { [ptx::ld_shared_f32(at(k0 + t)), ptx::ld_shared_f32(at(k0 + t + 4))] };
    let p = [parts::<SPLIT>(v[0]), parts::<SPLIT>(v[1])];
    ([p[0].0, p[1].0], [p[0].1, p[1].1])
}

/// Copies the `rows x (4 per_row)` tile of a row-major matrix at (r0, c0) into shared memory
/// at `tile` (stride `stride`), float4 by float4; entries outside rows < `row_end` and
/// columns < `col_end` are zero (`col_end` a multiple of 4).
#[inline(always)]
unsafe fn load_tile(m: *const f32, ld: u32, r0: u32, row_end: u32, c0: u32, col_end: u32, rows: u32, per_row: u32, tile: u32, stride: u32) {
    let mut i = ptx::tid_x();
    while i < rows * per_row {
        let (r, c) = (div_or_zero(i, per_row), 4 * rem_or_zero(i, per_row));
        let v = if r0 + r < row_end && c0 + c < col_end { unsafe { ptx::ld_nc_v4_f32(m.add((r0 + r) as usize * ld as usize + (c0 + c) as usize)) } } else { [0.0; 4] };
        unsafe { ptx::st_shared_v4_f32(tile + 4 * (r * stride + c), v) };
        i += DG_THREADS;
    }
}

/// y = dropout(x) w: block = 64 rows x 8 NT columns (see the module note).
#[inline(always)]
pub unsafe fn forward<const NT: usize, const SPLIT: bool>(args: DropoutGemmArgs) {
    let DropoutGemmArgs { rows, k, ldx, ldw, col_tiles, threshold, x, w, y, scale, seed_key, step, offset } = args;
    let bn = 8 * NT as u32;
    let w_stride = bn + 8;
    let (row0, col0) = (div_or_zero(ptx::ctaid_x(), col_tiles) * DG_BLOCK_ROWS, rem_or_zero(ptx::ctaid_x(), col_tiles) * bn);
    let tid = ptx::tid_x();
    let (warp, g, t) = (tid / 32, (tid % 32) / 4, tid % 4);
    let key = (seed_key, unsafe { ptx::ld_nc_u32(step) }, threshold, offset);
    let xs = ptx::dyn_smem_base();
    let ws = xs + 4 * DG_BLOCK_ROWS * X_STRIDE;
    let mut acc = [[0f32; 4]; NT];
    let mut k0 = 0;
    while k0 < ldx {
        // x chunk: 64 rows x 32 columns, dropped out on the way in (columns past ldx are 0).
        let mut i = tid;
        while i < DG_BLOCK_ROWS * BK / 4 {
            let (r, c) = (i / (BK / 4), 4 * (i % (BK / 4)));
            let v = if row0 + r < rows && k0 + c < ldx {
                unsafe { load_dropped(x, (row0 + r) as u64 * ldx as u64 + (k0 + c) as u64, key, scale) }
            } else {
                [0.0; 4]
            };
            unsafe { ptx::st_shared_v4_f32(xs + 4 * (r * X_STRIDE + c), v) };
            i += DG_THREADS;
        }
        // w chunk: 32 rows x bn columns (rows past k are 0).
        unsafe { load_tile(w, ldw, k0, k, col0, ldw, BK, bn / 4, ws, w_stride) };
        ptx::sync_threads();
        let mut kk = 0;
        while kk < BK {
            let a = unsafe { a_fragment::<SPLIT>(|r, c| xs + 4 * ((warp * 16 + r) * X_STRIDE + kk + c), g, t) };
            for (j, acc_j) in acc.iter_mut().enumerate() {
                let b = unsafe { b_fragment::<SPLIT>(ws, w_stride, kk, 8 * j as u32 + g, t) };
                *acc_j = mma::<SPLIT>(a, b, *acc_j);
            }
            kk += 8;
        }
        ptx::sync_threads();
        k0 += BK;
    }
    let r = row0 + warp * 16 + g;
    for (j, acc_j) in acc.iter().enumerate() {
        let c = col0 + 8 * j as u32 + 2 * t;
        if c < ldw {
            if r < rows {
                unsafe { ptx::st_v2_f32(y.add(r as usize * ldw as usize + c as usize), [acc_j[0], acc_j[1]]) };
            }
            if r + 8 < rows {
                unsafe { ptx::st_v2_f32(y.add((r + 8) as usize * ldw as usize + c as usize), [acc_j[2], acc_j[3]]) };
            }
        }
    }
}

/// partial[split] = dropout(x)ᵀ dy over the split's rows: block = 64 rows of dw x 8 NT columns.
#[inline(always)]
pub unsafe fn weight_grad<const NT: usize, const SPLIT: bool>(args: DropoutGemmDwArgs) {
    let DropoutGemmDwArgs { rows, k, ldx, ldw, k_tiles, col_tiles, rows_per_split, threshold, x, dy, partial, scale, seed_key, step, offset } = args;
    let bn = 8 * NT as u32;
    let d_stride = bn + 8;
    let b = ptx::ctaid_x();
    // Runtime divisors through div_or_zero / rem_or_zero: a plain `/` links a panic path the
    // device cannot resolve (the PTX would not load).
    let split = div_or_zero(b, k_tiles * col_tiles);
    let (kc0, col0) = (rem_or_zero(div_or_zero(b, col_tiles), k_tiles) * DG_BLOCK_K, rem_or_zero(b, col_tiles) * bn);
    let tid = ptx::tid_x();
    let (warp, g, t) = (tid / 32, (tid % 32) / 4, tid % 4);
    let key = (seed_key, unsafe { ptx::ld_nc_u32(step) }, threshold, offset);
    let xs = ptx::dyn_smem_base();
    let ds = xs + 4 * DG_DW_STEP_ROWS * XT_STRIDE;
    let r_begin = split * rows_per_split;
    let r_end = rows.min(r_begin.saturating_add(rows_per_split));
    let mut acc = [[0f32; 4]; NT];
    let mut r0 = r_begin;
    while r0 < r_end {
        // x tile: 32 rows x 64 columns, dropped out on the way in.
        let mut i = tid;
        while i < DG_DW_STEP_ROWS * DG_BLOCK_K / 4 {
            let (r, c) = (i / (DG_BLOCK_K / 4), 4 * (i % (DG_BLOCK_K / 4)));
            let v = if r0 + r < r_end && kc0 + c < ldx {
                unsafe { load_dropped(x, (r0 + r) as u64 * ldx as u64 + (kc0 + c) as u64, key, scale) }
            } else {
                [0.0; 4]
            };
            unsafe { ptx::st_shared_v4_f32(xs + 4 * (r * XT_STRIDE + c), v) };
            i += DG_THREADS;
        }
        // dy tile: 32 rows x bn columns.
        unsafe { load_tile(dy, ldw, r0, r_end, col0, ldw, DG_DW_STEP_ROWS, bn / 4, ds, d_stride) };
        ptx::sync_threads();
        let mut kk = 0;
        while kk < DG_DW_STEP_ROWS {
            // A = x tileᵀ: A(m, k) is x tile (row kk + k, column warp * 16 + m).
            let a = unsafe { a_fragment::<SPLIT>(|m, kx| xs + 4 * ((kk + kx) * XT_STRIDE + warp * 16 + m), g, t) };
            for (j, acc_j) in acc.iter_mut().enumerate() {
                let bf = unsafe { b_fragment::<SPLIT>(ds, d_stride, kk, 8 * j as u32 + g, t) };
                *acc_j = mma::<SPLIT>(a, bf, *acc_j);
            }
            kk += 8;
        }
        ptx::sync_threads();
        r0 += DG_DW_STEP_ROWS;
    }
    // Every split writes its whole tile (zeros for an empty one): split_sum reads them all.
    let out = unsafe { partial.add(split as usize * k as usize * ldw as usize) };
    let r = kc0 + warp * 16 + g;
    for (j, acc_j) in acc.iter().enumerate() {
        let c = col0 + 8 * j as u32 + 2 * t;
        if c < ldw {
            if r < k {
                unsafe { ptx::st_v2_f32(out.add(r as usize * ldw as usize + c as usize), [acc_j[0], acc_j[1]]) };
            }
            if r + 8 < k {
                unsafe { ptx::st_v2_f32(out.add((r + 8) as usize * ldw as usize + c as usize), [acc_j[2], acc_j[3]]) };
            }
        }
    }
}

/// out[i] = Σ_s partial[s n + i], s ascending.
#[inline(always)]
pub unsafe fn split_sum(args: SplitSumArgs) {
    let SplitSumArgs { n, splits, partial, out } = args;
    for i in grid_stride(n as u64) {
        let mut s = 0f32;
        for sp in 0..splits {
            s += unsafe { ptx::ld_nc_f32(partial.add(sp as usize * n as usize + i as usize)) };
        }
        unsafe { ptx::st_f32(out.add(i as usize), s) };
    }
}
