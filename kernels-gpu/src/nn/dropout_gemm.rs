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
//! Outputs of at most 32 columns run on the streaming kernels below instead (x straight into
//! the A fragments, no barrier in the main loop; x in f32 or, for the f16 precision's stored
//! features, f16); with p = 0 they also serve the backend's narrow GEMMs (`ops::nn::gemm`).
//! Outputs of 33-64 columns on f16 features (GAT's 8 heads of 8) run on the wide kernels at
//! the end: f16 products forward, the weight gradient through `cp.async` stages, the mask
//! shared between them as bits.
//!
//! Weight gradient: dw (k x n) is a reduction over all rows. A block owns 64 rows of dw (64
//! columns of x) x 8 NT columns and the x rows of one split; each split writes its partial dw
//! to `partial[split]`, and `split_sum` adds the splits in a fixed order (deterministic, no
//! atomics).

use super::dropout::key_row;
use super::elu::elu1;
use crate::abi::dropout_gemm::{
    DG_BLOCK_K, DG_BLOCK_ROWS, DG_DW_STEP_ROWS, DG_THREADS, DG_WIDE_DW_STAGES, DG_WIDE_DW_THREADS, DG_WIDE_K_STEP, DropoutGemmArgs,
    DropoutGemmDwArgs, SplitSumArgs, keep_words_per_row,
};
use crate::ptx;
use crate::rng::DropoutStep;
use crate::translate::{div_or_zero, rem_or_zero};

/// k per forward chunk, and the x tile's shared stride (36: the A fragment's 8 rows x 4
/// columns fall in 32 distinct banks).
const BK: u32 = 32;
const X_STRIDE: u32 = BK + 4;
/// The weight gradient's x tile stride (72: its transposed A fragment reads 4 rows x 8
/// columns, 32 distinct banks).
const XT_STRIDE: u32 = DG_BLOCK_K + 8;

/// Four consecutive elements of x at (row, col) (col a multiple of 4), dropped out and
/// scaled: the dropout kernel's draw, element by element (`drop4`).
#[inline(always)]
unsafe fn load_dropped(x: *const f32, row: u32, col: u32, ldx: u32, key: DropKey, scale: f32) -> [f32; 4] {
    drop4(unsafe { ptx::ld_nc_v4_f32(x.add(row as usize * ldx as usize + col as usize)) }, row, col, ldx, key, scale)
}

/// What a product needs to redraw x's mask: (seed key, the step's draw, threshold, offset,
/// the rows' original ids or null: `DropoutGemmArgs::ids`).
type DropKey = (u64, DropoutStep, u32, u64, *const u32);

/// The mask of x (`rows` x `ldx`) for the streaming kernels: its `DropKey`, and whether every
/// index lies below 2^32 from an even offset (then an element's index is 32-bit arithmetic and
/// four elements cost two hashes, no span test: `DropoutStep::keep4_low`).
#[derive(Clone, Copy)]
struct StreamMask {
    key: DropKey,
    low: bool,
    /// ELU applied to x before the draw (the layer below's activation, on load).
    elu: bool,
    /// The ELU's output rounded to tf32 (f16 x: the kernels feed x's bits to the tensor cores
    /// unconverted, exact for f16 values but not for their ELU).
    round: bool,
}

impl StreamMask {
    #[inline(always)]
    fn new(key: (u64, *const u32, u32, u64, *const u32), rows: u32, ldx: u32) -> Self {
        let (seed_key, step, threshold, offset, ids) = key;
        let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
        // With row ids the largest key is not known here: the 64-bit path.
        let low = ids.is_null() && offset & 1 == 0 && offset + rows as u64 * ldx as u64 <= 1 << 32;
        StreamMask { key: (seed_key, draw, threshold, offset, ids), low, elu: false, round: false }
    }

    /// ELU on load when `elu`, for x of `V` (2: f16, whose ELU is rounded to tf32 here).
    #[inline(always)]
    fn with_elu<const V: usize>(self, elu: bool) -> Self {
        StreamMask { elu, round: elu && V == 2, ..self }
    }

    /// `drop4` of the four elements of x at (row, col) (col a multiple of 4).
    #[inline(always)]
    fn drop4_at(self, v: [f32; 4], row: u32, col: u32, ldx: u32, scale: f32) -> [f32; 4] {
        let v = if self.elu { v.map(elu1) } else { v };
        let v = if self.round { v.map(|e| f32::from_bits(ptx::cvt_tf32(e))) } else { v };
        let (seed_key, draw, threshold, offset, ids) = self.key;
        if threshold == 0 {
            return [v[0] * scale, v[1] * scale, v[2] * scale, v[3] * scale];
        }
        let keep = if self.low {
            draw.keep4_low((offset as u32).wrapping_add(row.wrapping_mul(ldx)).wrapping_add(col), threshold)
        } else {
            draw.keep4(seed_key, offset + key_row(ids, row) * ldx as u64 + col as u64, threshold)
        };
        let mut out = [0f32; 4];
        crate::unroll4!(e => {
            if keep[e] {
                out[e] = v[e] * scale;
            }
        });
        out
    }
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
    let v = unsafe {
        [
            ptx::ld_shared_f32(at(g, t)),
            ptx::ld_shared_f32(at(g + 8, t)),
            ptx::ld_shared_f32(at(g, t + 4)),
            ptx::ld_shared_f32(at(g + 8, t + 4)),
        ]
    };
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
        let v = if r0 + r < row_end && c0 + c < col_end {
            unsafe { ptx::ld_nc_v4_f32(m.add((r0 + r) as usize * ld as usize + (c0 + c) as usize)) }
        } else {
            [0.0; 4]
        };
        unsafe { ptx::st_shared_v4_f32(tile + 4 * (r * stride + c), v) };
        i += DG_THREADS;
    }
}

/// y = dropout(x) w: block = 64 rows x 8 NT columns (see the module note).
#[inline(always)]
pub unsafe fn forward<const NT: usize, const SPLIT: bool>(args: DropoutGemmArgs) {
    let DropoutGemmArgs {
        rows,
        k,
        ldx,
        ldw,
        ldb: _,
        n: _,
        w_trans: _,
        col_tiles,
        threshold,
        x,
        w,
        y,
        scale,
        seed_key,
        step,
        offset,
        keep_bits: _,
        elu: _,
        ids,
    } = args;
    let bn = 8 * NT as u32;
    let w_stride = bn + 8;
    let (row0, col0) = (div_or_zero(ptx::ctaid_x(), col_tiles) * DG_BLOCK_ROWS, rem_or_zero(ptx::ctaid_x(), col_tiles) * bn);
    let tid = ptx::tid_x();
    let (warp, g, t) = (tid / 32, (tid % 32) / 4, tid % 4);
    let key = (seed_key, DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) }), threshold, offset, ids);
    let xs = ptx::dyn_smem_base();
    let ws = xs + 4 * DG_BLOCK_ROWS * X_STRIDE;
    let mut acc = [[0f32; 4]; NT];
    let mut k0 = 0;
    while k0 < ldx {
        // x chunk: 64 rows x 32 columns, dropped out on the way in (columns past ldx are 0).
        let mut i = tid;
        while i < DG_BLOCK_ROWS * BK / 4 {
            let (r, c) = (i / (BK / 4), 4 * (i % (BK / 4)));
            let v = if row0 + r < rows && k0 + c < ldx { unsafe { load_dropped(x, row0 + r, k0 + c, ldx, key, scale) } } else { [0.0; 4] };
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
    let DropoutGemmDwArgs {
        rows,
        k,
        ldx,
        ldw,
        k_tiles,
        col_tiles,
        rows_per_split,
        threshold,
        x,
        dy,
        partial,
        scale,
        seed_key,
        step,
        offset,
        keep_bits: _,
        elu: _,
        ids,
    } = args;
    let bn = 8 * NT as u32;
    let d_stride = bn + 8;
    let b = ptx::ctaid_x();
    // Runtime divisors through div_or_zero / rem_or_zero: a plain `/` links a panic path the
    // device cannot resolve (the PTX would not load).
    let split = div_or_zero(b, k_tiles * col_tiles);
    let (kc0, col0) = (rem_or_zero(div_or_zero(b, col_tiles), k_tiles) * DG_BLOCK_K, rem_or_zero(b, col_tiles) * bn);
    let tid = ptx::tid_x();
    let (warp, g, t) = (tid / 32, (tid % 32) / 4, tid % 4);
    let key = (seed_key, DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) }), threshold, offset, ids);
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
            let v = if r0 + r < r_end && kc0 + c < ldx { unsafe { load_dropped(x, r0 + r, kc0 + c, ldx, key, scale) } } else { [0.0; 4] };
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

/// out[i] = Σ_s partial[s n + i] in a fixed order (deterministic for a fixed block size): a
/// block per 32 consecutive outputs (a warp's loads one 128-byte run), its warps over the
/// splits (warp w adds splits w, w + W, ... into four running sums, W the block's warps), then
/// the warps' sums in warp order. A warp per output with its lanes over the splits read one
/// 4-byte word per 32-byte sector (the output layer's 64 x 8 weight gradient over ~2000 splits
/// took 16 us under ncu).
#[inline(always)]
pub unsafe fn split_sum(args: SplitSumArgs) {
    let SplitSumArgs { n, splits, partial, out } = args;
    let (lane, w, warps) = (ptx::lane_id(), ptx::tid_x() / 32, ptx::ntid_x() / 32);
    let sums = ptx::dyn_smem_base();
    let at = |sp: u32, i: u32| unsafe { ptx::ld_nc_f32(partial.add(sp as usize * n as usize + i as usize)) };
    let mut chunk = ptx::ctaid_x();
    while 32 * chunk < n {
        let i = 32 * chunk + lane;
        let mut acc = [0f32; 4];
        if i < n {
            let mut sp = w;
            while sp + 3 * warps < splits {
                let v = [at(sp, i), at(sp + warps, i), at(sp + 2 * warps, i), at(sp + 3 * warps, i)];
                crate::unroll4!(k => { acc[k] += v[k]; });
                sp += 4 * warps;
            }
            while sp < splits {
                acc[0] += at(sp, i);
                sp += warps;
            }
        }
        unsafe { ptx::st_shared_f32(sums + 4 * (32 * w + lane), (acc[0] + acc[1]) + (acc[2] + acc[3])) };
        ptx::sync_threads();
        if w == 0 && i < n {
            let mut total = 0f32;
            for k in 0..warps {
                total += unsafe { ptx::ld_shared_f32(sums + 4 * (32 * k + lane)) };
            }
            unsafe { ptx::st_f32(out.add(i as usize), total) };
        }
        ptx::sync_threads();
        chunk += ptx::nctaid_x();
    }
}

// -- Streaming products for narrow outputs (≤ 32 columns: GCN's, AGNN's first layer) --
//
// The tiled kernels above stage x through shared memory between two barriers per chunk, with
// one float4 in flight per thread: they read x at about half of copy bandwidth. These read x
// straight into the tensor cores' A fragments, several 16-byte loads in flight per thread and
// no barrier in the main loop. The reduction index of a GEMM may be taken in any order, so each
// thread's fragment entries are chosen to be whole 16-byte runs of x (the B operand follows the
// same order): a warp's loads cover whole 64-byte runs of a row.
//
// x is f32 (`V` = 1: a load holds 4 elements) or f16 (`V` = 2: 8 elements, features stored
// in f16 once). A load is taken apart into V "units" of 4 consecutive elements, converted to
// f32 (exact in tf32 for f16), dropped out and fed to the same tf32 products: f16 storage
// halves the bytes read, the arithmetic is unchanged.

/// Unit `u` (4 consecutive elements) of 16-byte loads `raw` of x: `raw[u / V]`'s floats (V = 1)
/// or halves 4 (u % 2).. (V = 2), as f32.
#[inline(always)]
fn unit<const V: usize>(raw: [u32; 4], u: usize) -> [f32; 4] {
    if V == 1 {
        [f32::from_bits(raw[0]), f32::from_bits(raw[1]), f32::from_bits(raw[2]), f32::from_bits(raw[3])]
    } else {
        let (a, b) = (raw[2 * (u % 2)], raw[2 * (u % 2) + 1]);
        [ptx::f16_to_f32(a as u16), ptx::f16_to_f32((a >> 16) as u16), ptx::f16_to_f32(b as u16), ptx::f16_to_f32((b >> 16) as u16)]
    }
}

/// Applies the dropout draw to four consecutive elements of x at flat index `o` (a multiple
/// of 4), scaled (p = 0: scaled only, no hash). Apart from the load, so that the streaming
/// kernels issue every load of an iteration before the first hash.
#[inline(always)]
fn drop4(v: [f32; 4], row: u32, col: u32, ldx: u32, key: DropKey, scale: f32) -> [f32; 4] {
    let (seed_key, draw, threshold, offset, ids) = key;
    if threshold == 0 {
        return [v[0] * scale, v[1] * scale, v[2] * scale, v[3] * scale];
    }
    let keep = draw.keep4(seed_key, offset + key_row(ids, row) * ldx as u64 + col as u64, threshold);
    let mut out = [0f32; 4];
    crate::unroll4!(e => {
        if keep[e] {
            out[e] = v[e] * scale;
        }
    });
    out
}

/// The 16 bytes of x at (row, col) (4 f32 or 8 f16 elements, `V` = 1 / 2), or zeros outside
/// rows x ldx (ldx a multiple of 8: a load is inside or outside whole).
#[inline(always)]
unsafe fn x16<const V: usize>(x: *const f32, rows: u32, ldx: u32, row: u32, col: u32) -> [u32; 4] {
    if row < rows && col < ldx {
        let bytes = (row as usize * ldx as usize + col as usize) * (4 / V);
        unsafe { ptx::ld_nc_v4_u32((x as *const u8).add(bytes) as *const u32) }
    } else {
        [0; 4]
    }
}

/// Column (within a forward iteration starting at chunk `c`) of load `q` of lane column
/// group `t`: V = 1 takes columns 4t.. and 16 + 4t.. of two chunks, V = 2 columns 8t.. of
/// four chunks. Unit u of the iteration (load u / V) is chunk c + u / 2's k = t (u even) or
/// k = t + 4 (u odd) run.
#[inline(always)]
fn load_col<const V: usize>(c: u32, q: u32, t: u32) -> u32 {
    if V == 1 { 32 * (c + q / 2) + 16 * (q % 2) + 4 * t } else { 32 * (c + q) + 8 * t }
}

/// w's element (r, col) as the fragment stagers read it: zero past k rows and n columns, w
/// stored n x k (stride ldb) when transposed.
#[inline(always)]
unsafe fn w_at(a: &DropoutGemmArgs, r: u32, col: u32) -> f32 {
    if r >= a.k || col >= a.n {
        0.0
    } else if a.w_trans != 0 {
        unsafe { ptx::ld_nc_f32(a.w.add(col as usize * a.ldb as usize + r as usize)) }
    } else {
        unsafe { ptx::ld_nc_f32(a.w.add(r as usize * a.ldb as usize + col as usize)) }
    }
}

/// w in the forward's B-fragment order, in shared memory: fragment (chunk c, step s, n8 tile
/// j) is 32 lanes' float2s, lane (g, t) holding w[lo][8j + g] and w[hi][8j + g] with lo the
/// chunk's column of k = t at step s (32c + 4t + s for V = 1, 32c + 8t + s for V = 2) and hi
/// that of k = t + 4 (lo + 16, lo + 4); zeros past k rows and n columns. `chunks` is a
/// multiple of 2V. A transposed w (stored n x k, stride ldb) is read as wᵀ.
#[inline(always)]
unsafe fn stage_w_fragments<const NT: usize, const V: usize>(a: &DropoutGemmArgs, chunks: u32, ws: u32) {
    let mut i = ptx::tid_x();
    while i < chunks * 4 * NT as u32 * 32 {
        let (lane, f) = (i % 32, i / 32);
        let (j, cs) = (f % NT as u32, f / NT as u32);
        let (s, c) = (cs % 4, cs / 4);
        let (g, t) = (lane / 4, lane % 4);
        let (lo, col) = (32 * c + 4 * V as u32 * t + s, 8 * j + g);
        let hi = lo + if V == 1 { 16 } else { 4 };
        let at = |r: u32| unsafe { w_at(a, r, col) };
        let pair = (at(lo).to_bits() as u64) | ((at(hi).to_bits() as u64) << 32);
        unsafe { ptx::st_shared_u64(ws + 8 * i, pair) };
        i += ptx::ntid_x();
    }
}

/// The tf32 parts of an element of x: f16 x (V = 2, unscaled) is already exact in tf32.
#[inline(always)]
fn x_parts<const SPLIT: bool, const V: usize>(v: f32) -> (u32, u32) {
    if V == 2 { (v.to_bits(), 0) } else { parts::<SPLIT>(v) }
}

/// y = dropout(x) w for outputs of 8 NT ≤ 32 columns, x f32 (V = 1) or f16 (V = 2): a
/// persistent grid; each warp takes 16-row tiles in turn and walks all of k, 2V chunks of 32
/// columns an iteration (8 loads of 16 bytes in flight per thread, 16 with `PF`: the next
/// iteration's prefetched); w waits in shared memory in fragment order.
#[inline(always)]
pub unsafe fn forward_stream<const NT: usize, const SPLIT: bool, const V: usize, const PF: bool>(args: DropoutGemmArgs) {
    let step_chunks = 2 * V as u32;
    let chunks = args.ldx.div_ceil(32 * step_chunks) * step_chunks;
    let ws = ptx::dyn_smem_base();
    unsafe { stage_w_fragments::<NT, V>(&args, chunks, ws) };
    let DropoutGemmArgs { rows, ldx, ldw, threshold, x, y, scale, seed_key, step, offset, elu, ids, .. } = args;
    // f16 x (V = 2) is exact in tf32 as stored: kept elements enter the products unscaled and
    // unrounded, the sums are scaled once at the end.
    let x_scale = if V == 2 { 1.0 } else { scale };
    ptx::sync_threads();
    let mask = StreamMask::new((seed_key, step, threshold, offset, ids), rows, ldx).with_elu::<V>(elu != 0);
    let lane = ptx::tid_x() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let warps = ptx::ntid_x() / 32;
    let tiles = rows.div_ceil(16);
    let stride = ptx::nctaid_x() * warps;
    // Rows 16 tile + g and + 8, four loads each at iteration c: 8 loads of 16 bytes in flight
    // (rows past x load nothing). With `PF` the next iteration's — after a tile's last, the
    // next tile's first — are issued before this one's hashes and products (the draw made the
    // loop compute-bound; a narrow x is one iteration a tile, and a warp walked its tiles one
    // dependent load-multiply-store chain at a time), at 32 more registers a thread.
    let load = |tile: u32, c: u32| {
        let (ra, rb) = (16 * tile + g, 16 * tile + g + 8);
        let mut raw = [[0u32; 4]; 8];
        crate::unroll4!(q => {
            let col = load_col::<V>(c, q as u32, t);
            raw[2 * q] = unsafe { x16::<V>(x, rows, ldx, ra, col) };
            raw[2 * q + 1] = unsafe { x16::<V>(x, rows, ldx, rb, col) };
        });
        raw
    };
    let mut tile = ptx::ctaid_x() * warps + ptx::tid_x() / 32;
    let mut raw = load(tile, 0);
    while tile < tiles {
        let (ra, rb) = (16 * tile + g, 16 * tile + g + 8);
        let mut acc = [[0f32; 4]; NT];
        let mut c = 0;
        while c < chunks {
            let (next_tile, next_c) = if c + step_chunks < chunks { (tile, c + step_chunks) } else { (tile + stride, 0) };
            let next = if PF { load(next_tile, next_c) } else { [[0u32; 4]; 8] };
            crate::unroll4!(h => {
                // Chunks past x's columns (the last iteration of a narrow x) hold only zeros.
                if h < 2 * V && 32 * (c + h as u32) < ldx {
                    // Chunk c + h: units 2h (k = t) and 2h + 1 (k = t + 4) of both rows.
                    let (ul, uh) = (2 * h, 2 * h + 1);
                    let col = |u: usize| load_col::<V>(c, (u / V) as u32, t) + 4 * (u % V) as u32;
                    let (cl, ch) = (col(ul), col(uh));
                    let al = mask.drop4_at(unit::<V>(raw[2 * (ul / V)], ul), ra, cl, ldx, x_scale);
                    let bl = mask.drop4_at(unit::<V>(raw[2 * (ul / V) + 1], ul), rb, cl, ldx, x_scale);
                    let ah = mask.drop4_at(unit::<V>(raw[2 * (uh / V)], uh), ra, ch, ldx, x_scale);
                    let bh = mask.drop4_at(unit::<V>(raw[2 * (uh / V) + 1], uh), rb, ch, ldx, x_scale);
                    crate::unroll4!(s => {
                        let p = [x_parts::<SPLIT, V>(al[s]), x_parts::<SPLIT, V>(bl[s]), x_parts::<SPLIT, V>(ah[s]), x_parts::<SPLIT, V>(bh[s])];
                        let a = ([p[0].0, p[1].0, p[2].0, p[3].0], [p[0].1, p[1].1, p[2].1, p[3].1]);
                        let f = ((c + h as u32) * 4 + s as u32) * NT as u32;
                        for (j, acc_j) in acc.iter_mut().enumerate() {
                            let pair = unsafe { ptx::ld_shared_u64(ws + 8 * ((f + j as u32) * 32 + lane)) };
                            let q = [parts::<SPLIT>(f32::from_bits(pair as u32)), parts::<SPLIT>(f32::from_bits((pair >> 32) as u32))];
                            *acc_j = mma::<SPLIT>(a, ([q[0].0, q[1].0], [q[0].1, q[1].1]), *acc_j);
                        }
                    });
                }
            });
            c += step_chunks;
            raw = if PF { next } else { load(next_tile, next_c) };
        }
        if V == 2 {
            acc.iter_mut().for_each(|a| *a = a.map(|v| v * scale));
        }
        for (j, acc_j) in acc.iter().enumerate() {
            let col = 8 * j as u32 + 2 * t;
            if col < ldw {
                if ra < rows {
                    unsafe { ptx::st_v2_f32(y.add(ra as usize * ldw as usize + col as usize), [acc_j[0], acc_j[1]]) };
                }
                if rb < rows {
                    unsafe { ptx::st_v2_f32(y.add(rb as usize * ldw as usize + col as usize), [acc_j[2], acc_j[3]]) };
                }
            }
        }
        tile += stride;
    }
}

/// The NT values of dy's row `row` at columns NT g.. (zeros outside rows x ldw; ldw is a
/// multiple of 8, so a run of NT ∈ {2, 4, 8} is inside or outside whole).
#[inline(always)]
unsafe fn dy_run<const NT: usize>(dy: *const f32, rows: u32, ldw: u32, row: u32, g: u32) -> [f32; NT] {
    let mut out = [0f32; NT];
    let col = NT as u32 * g;
    if row < rows && col < ldw {
        let p = unsafe { dy.add(row as usize * ldw as usize + col as usize) };
        if NT == 4 || NT == 8 {
            for h in 0..NT / 4 {
                let v = unsafe { ptx::ld_nc_v4_f32(p.add(4 * h)) };
                out[4 * h..4 * h + 4].iter_mut().zip(v).for_each(|(o, a)| *o = a);
            }
        } else {
            for (j, o) in out.iter_mut().enumerate() {
                *o = unsafe { ptx::ld_nc_f32(p.add(j)) };
            }
        }
    }
    out
}

/// partial[split] = dropout(x)ᵀ dy over the split's rows, for dy of 8 NT ≤ 32 columns, x f32
/// (V = 1) or f16 (V = 2): a warp owns a panel of 32 V columns of x (32 V rows of dw) and walks
/// the split's rows 32 at a time, no shared memory. In the A fragment (m = a column of x, k =
/// a row), lane (g, t) holds the 16 bytes of columns 4Vg.. of rows t and t + 4: m tile I (2V
/// of them) gets columns 4Vg + 2I (m = g) and 4Vg + 2I + 1 (m = g + 8). dw's column n of n8
/// tile j is NT n + j, so B's entries are one run of dy's row per lane.
#[inline(always)]
pub unsafe fn weight_grad_stream<const NT: usize, const SPLIT: bool, const V: usize>(args: DropoutGemmDwArgs) {
    let DropoutGemmDwArgs {
        rows,
        k,
        ldx,
        ldw,
        k_tiles: panel_groups,
        col_tiles: _,
        rows_per_split,
        threshold,
        x,
        dy,
        partial,
        scale,
        seed_key,
        step,
        offset,
        keep_bits: _,
        elu,
        ids,
    } = args;
    let b = ptx::ctaid_x();
    let (split, group) = (div_or_zero(b, panel_groups), rem_or_zero(b, panel_groups));
    let warps = ptx::ntid_x() / 32;
    let col0 = 32 * V as u32 * (group * warps + ptx::tid_x() / 32);
    if col0 >= ldx {
        return;
    }
    let lane = ptx::tid_x() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let mask = StreamMask::new((seed_key, step, threshold, offset, ids), rows, ldx).with_elu::<V>(elu != 0);
    let r_begin = split * rows_per_split;
    let r_end = rows.min(r_begin.saturating_add(rows_per_split));
    let col = col0 + 4 * V as u32 * g;
    // As the forward's: f16 x enters unscaled and unrounded, the sums are scaled at the end.
    let x_scale = if V == 2 { 1.0 } else { scale };
    // m tiles 0..2V in use (the rest stay zero and are never written).
    let mut acc = [[[0f32; 4]; NT]; 4];
    // Four steps of 8 rows: rows r0 + 8q + t and + 4, 8 loads of x (16 bytes) and 8 runs of dy
    // in flight. (Prefetching the next 32 rows' was slower: fewer blocks an SM, NOTES
    // 2026-11-27 morning.)
    let load = |r0: u32| {
        let mut raw = [[0u32; 4]; 8];
        let mut d = [[0f32; NT]; 8];
        crate::unroll4!(q => {
            let (ra, rb) = (r0 + 8 * q as u32 + t, r0 + 8 * q as u32 + t + 4);
            raw[2 * q] = unsafe { x16::<V>(x, r_end, ldx, ra, col) };
            raw[2 * q + 1] = unsafe { x16::<V>(x, r_end, ldx, rb, col) };
            d[2 * q] = unsafe { dy_run::<NT>(dy, r_end, ldw, ra, g) };
            d[2 * q + 1] = unsafe { dy_run::<NT>(dy, r_end, ldw, rb, g) };
        });
        (raw, d)
    };
    let none = ([[0u32; 4]; 8], [[0f32; NT]; 8]);
    let mut r0 = r_begin;
    let mut cur = if r0 < r_end { load(r0) } else { none };
    while r0 < r_end {
        let (raw, d) = cur;
        crate::unroll4!(q => {
            let (ra, rb) = (r0 + 8 * q as u32 + t, r0 + 8 * q as u32 + t + 4);
            crate::unroll2!(u => {
                if u < V {
                    let cu = col + 4 * u as u32;
                    let va = mask.drop4_at(unit::<V>(raw[2 * q], u), ra, cu, ldx, x_scale);
                    let vb = mask.drop4_at(unit::<V>(raw[2 * q + 1], u), rb, cu, ldx, x_scale);
                    crate::unroll2!(i => {
                        let p = [x_parts::<SPLIT, V>(va[2 * i]), x_parts::<SPLIT, V>(va[2 * i + 1]), x_parts::<SPLIT, V>(vb[2 * i]), x_parts::<SPLIT, V>(vb[2 * i + 1])];
                        let a = ([p[0].0, p[1].0, p[2].0, p[3].0], [p[0].1, p[1].1, p[2].1, p[3].1]);
                        for (j, acc_ij) in acc[2 * u + i].iter_mut().enumerate() {
                            let bq = [parts::<SPLIT>(d[2 * q][j]), parts::<SPLIT>(d[2 * q + 1][j])];
                            *acc_ij = mma::<SPLIT>(a, ([bq[0].0, bq[1].0], [bq[0].1, bq[1].1]), *acc_ij);
                        }
                    });
                }
            });
        });
        r0 += 32;
        cur = if r0 < r_end { load(r0) } else { none };
    }
    if V == 2 {
        acc.iter_mut().for_each(|m| m.iter_mut().for_each(|a| *a = a.map(|v| v * scale)));
    }
    // D(m, n) of m tile I: m = g / g + 8 → dw row col + 2I / col + 2I + 1; n = 2t / 2t + 1 →
    // NT n + j.
    let out = unsafe { partial.add(split as usize * k as usize * ldw as usize) };
    crate::unroll4!(m_tile => {
        if m_tile < 2 * V {
            for (j, d) in acc[m_tile].iter().enumerate() {
                let (ra, rb) = (col + 2 * m_tile as u32, col + 2 * m_tile as u32 + 1);
                let (ca, cb) = (NT as u32 * 2 * t + j as u32, NT as u32 * (2 * t + 1) + j as u32);
                let put = |r: u32, c: u32, val: f32| {
                    if r < k && c < ldw {
                        unsafe { ptx::st_f32(out.add(r as usize * ldw as usize + c as usize), val) };
                    }
                };
                put(ra, ca, d[0]);
                put(ra, cb, d[1]);
                put(rb, ca, d[2]);
                put(rb, cb, d[3]);
            }
        }
    });
}

// -- The wide forward in f16 (33-64 output columns: GAT's 8 heads of 8) --
//
// The streaming forward's tf32 w fragments for 64 output columns take 128 KB of shared memory
// (one block an SM: slower than dropout + cuBLAS, NOTES 2026-11-27 night). Here x (stored in
// f16) and w (rounded to f16 when staged: the same 10-bit significand as tf32) meet on
// m16n8k16 with f32 accumulators, and w's fragments take half the room. Lane (g, t) loads the
// 16 bytes at columns 8t.. of a 32-column chunk of rows g and g + 8; the chunk's two k-steps
// take words 0-1 and 2-3 of each load (the reduction order permuted; w staged in the same
// order). Kept elements enter unscaled (exact in f16), the sums are scaled once. With `BITS`
// the forward also writes the mask, a bit an element (`keep_bits`: row r's word w holds columns
// 32w.. from bit 0; `keep_words_per_row` words a row), for the weight gradient to read instead
// of drawing it again (the draw was a quarter of its time).

/// Chunks of 32 columns a wide-forward iteration loads (4 loads of 16 bytes a row).
const WIDE_ITER: u32 = DG_WIDE_K_STEP / 32;

/// w (k x n, n ≤ 64) as the wide forward's f16 B fragments: fragment (chunk c, step s, n8
/// tile j) is 32 lanes' 8 bytes, lane (g, t) holding (w[r][col], w[r + 1][col]) and (w[r +
/// 2][col], w[r + 3][col]) with r = 32c + 8t + 4s and col = 8j + g; zeros past k and n.
#[inline(always)]
unsafe fn stage_w_h16(a: &DropoutGemmArgs, chunks: u32, ws: u32) {
    let (n, nt) = (chunks * 2 * 8 * 32, ptx::ntid_x());
    // Entry i's (r, col), and its four elements of w.
    let place = |i: u32| {
        let (lane, f) = (i % 32, i / 32);
        let (j, cs) = (f % 8, f / 8);
        let (s, c) = (cs % 2, cs / 2);
        let (g, t) = (lane / 4, lane % 4);
        (32 * c + 8 * t + 4 * s, 8 * j + g)
    };
    let load = |i: u32| {
        let (r, col) = place(i);
        let at = |r: u32| unsafe { w_at(a, r, col) };
        if i < n { [at(r), at(r + 1), at(r + 2), at(r + 3)] } else { [0.0; 4] }
    };
    // Four entries' loads in flight a thread before any is stored (entry by entry, each
    // block's staging was a chain of L2 latencies before its first product).
    let mut i = ptx::tid_x();
    while i < n {
        let v = [load(i), load(i + nt), load(i + 2 * nt), load(i + 3 * nt)];
        crate::unroll4!(u => {
            let e = i + u as u32 * nt;
            if e < n {
                let w = v[u];
                let (b0, b1) = (ptx::pack_f16x2(w[0], w[1]), ptx::pack_f16x2(w[2], w[3]));
                unsafe { ptx::st_shared_u64(ws + 8 * e, b0 as u64 | (b1 as u64) << 32) };
            }
        });
        i += 4 * nt;
    }
}

impl StreamMask {
    /// The eight f16 elements of x at (row, col) (col a multiple of 8) as loaded (`raw`),
    /// dropped elements zeroed, kept ones unscaled, and their keep bits (bit e: column col + e).
    #[inline(always)]
    fn drop8_h16(self, raw: [u32; 4], row: u32, col: u32, ldx: u32) -> ([u32; 4], u32) {
        let (seed_key, draw, threshold, offset, ids) = self.key;
        if threshold == 0 {
            return (raw, 0xFF);
        }
        let krow = if self.low { row as u64 } else { key_row(ids, row) };
        let keep = |c: u32| {
            if self.low {
                draw.keep4_low((offset as u32).wrapping_add(row.wrapping_mul(ldx)).wrapping_add(c), threshold)
            } else {
                draw.keep4(seed_key, offset + krow * ldx as u64 + c as u64, threshold)
            }
        };
        let (lo, hi) = (keep(col), keep(col + 4));
        let word = |k0: bool, k1: bool| (if k0 { 0xFFFF } else { 0 }) | (if k1 { 0xFFFF_0000 } else { 0 });
        let mut bits = 0;
        crate::unroll4!(e => {
            bits |= (lo[e] as u32) << e | (hi[e] as u32) << (e + 4);
        });
        ([raw[0] & word(lo[0], lo[1]), raw[1] & word(lo[2], lo[3]), raw[2] & word(hi[0], hi[1]), raw[3] & word(hi[2], hi[3])], bits)
    }
}

/// y = dropout(x) w for x in f16 and outputs of 33-64 columns (8 n8 tiles), and with `BITS`
/// the mask's bits into `args.keep_bits`: a persistent grid, each warp a 16-row tile at a time
/// walking all of k; w waits in shared memory in fragment order. The loads roll: a lane holds
/// `WIDE_ITER` chunks' loads (8 of 16 bytes), and as soon as a chunk's pair is taken apart
/// its registers are refilled with the chunk `WIDE_ITER` ahead — the next tile's first
/// chunks at a tile's end — so 6-8 loads stay in flight through the products and the
/// epilogue (loaded an iteration at a time, then used, 16 warps an SM kept DRAM 40 % busy).
#[inline(always)]
pub unsafe fn forward_wide_h16<const BITS: bool>(args: DropoutGemmArgs) {
    let chunks = args.ldx.div_ceil(32 * WIDE_ITER) * WIDE_ITER;
    let ws = ptx::dyn_smem_base();
    unsafe { stage_w_h16(&args, chunks, ws) };
    let DropoutGemmArgs { rows, ldx, ldw, threshold, x, y, keep_bits, scale, seed_key, step, offset, ids, .. } = args;
    let words = keep_words_per_row(ldx);
    ptx::sync_threads();
    let mask = StreamMask::new((seed_key, step, threshold, offset, ids), rows, ldx);
    let lane = ptx::tid_x() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let warps = ptx::ntid_x() / 32;
    let tiles = rows.div_ceil(16);
    let stride = ptx::nctaid_x() * warps;
    let mut tile = ptx::ctaid_x() * warps + ptx::tid_x() / 32;
    if tile >= tiles {
        return;
    }
    // Chunk `c` of tile `tl`: rows 16 tl + g and 16 tl + g + 8, columns 32 c + 8t.. (zeros past
    // the rows: the last tile's refills).
    let load = |tl: u32, c: u32| unsafe {
        (x16::<2>(x, rows, ldx, 16 * tl + g, 32 * c + 8 * t), x16::<2>(x, rows, ldx, 16 * tl + g + 8, 32 * c + 8 * t))
    };
    let mut raw = [[0u32; 4]; 8];
    crate::unroll4!(q => {
        (raw[2 * q], raw[2 * q + 1]) = load(tile, q as u32);
    });
    let mut acc = [[0f32; 4]; 8];
    let mut c = 0;
    loop {
        let (ra, rb) = (16 * tile + g, 16 * tile + g + 8);
        // Where the refills of this iteration come from.
        let (next_tile, next_c) = if c + WIDE_ITER < chunks { (tile, c + WIDE_ITER) } else { (tile + stride, 0) };
        crate::unroll4!(q => {
            // Chunks past x's columns (the last iteration's) hold only zeros.
            let live = 32 * (c + q as u32) < ldx;
            let col = 32 * (c + q as u32) + 8 * t;
            let (xa, ka) = if live { mask.drop8_h16(raw[2 * q], ra, col, ldx) } else { ([0; 4], 0) };
            let (xb, kb) = if live { mask.drop8_h16(raw[2 * q + 1], rb, col, ldx) } else { ([0; 4], 0) };
            (raw[2 * q], raw[2 * q + 1]) = load(next_tile, next_c + q as u32);
            if live {
                if BITS {
                    // A row's word of this chunk: lane t's 8 bits at 8t, gathered over the
                    // quad; lane 0 writes row ra's, lane 1 row rb's.
                    let (mut wa, mut wb) = (ka << (8 * t), kb << (8 * t));
                    wa |= ptx::shfl_xor_u32(wa, 1);
                    wa |= ptx::shfl_xor_u32(wa, 2);
                    wb |= ptx::shfl_xor_u32(wb, 1);
                    wb |= ptx::shfl_xor_u32(wb, 2);
                    let (row, w) = if t == 0 { (ra, wa) } else { (rb, wb) };
                    if t < 2 && row < rows {
                        unsafe { ptx::st_u32(keep_bits.add(row as usize * words as usize + (c + q as u32) as usize), w) };
                    }
                }
                crate::unroll2!(s => {
                    let a = [xa[2 * s], xb[2 * s], xa[2 * s + 1], xb[2 * s + 1]];
                    let f = ((c + q as u32) * 2 + s as u32) * 8;
                    for (j, acc_j) in acc.iter_mut().enumerate() {
                        let pair = unsafe { ptx::ld_shared_u64(ws + 8 * ((f + j as u32) * 32 + lane)) };
                        *acc_j = ptx::mma_m16n8k16_f16(a, [pair as u32, (pair >> 32) as u32], *acc_j);
                    }
                });
            }
        });
        c = next_c;
        if c == 0 {
            // The tile's rows are summed: written while the next tile's loads fly.
            for (j, acc_j) in acc.iter_mut().enumerate() {
                let col = 8 * j as u32 + 2 * t;
                if col < ldw {
                    if ra < rows {
                        unsafe { ptx::st_v2_f32(y.add(ra as usize * ldw as usize + col as usize), [acc_j[0] * scale, acc_j[1] * scale]) };
                    }
                    if rb < rows {
                        unsafe { ptx::st_v2_f32(y.add(rb as usize * ldw as usize + col as usize), [acc_j[2] * scale, acc_j[3] * scale]) };
                    }
                }
                *acc_j = [0.0; 4];
            }
            tile = next_tile;
            if tile >= tiles {
                return;
            }
        }
    }
}

/// Four f16 elements (two words, low half first) as f32.
#[inline(always)]
fn widen4([a, b]: [u32; 2]) -> [f32; 4] {
    [ptx::f16_to_f32(a as u16), ptx::f16_to_f32((a >> 16) as u16), ptx::f16_to_f32(b as u16), ptx::f16_to_f32((b >> 16) as u16)]
}

/// Bytes of a row of the wide weight gradient's x stage: 128 f16 columns and 32 bytes of
/// padding, so that a warp's 8-byte fragment reads (rows t, columns 4g..) hit distinct banks.
const WDW_X_STRIDE: u32 = 288;
/// Bytes of a row of its dy stage: 64 f32 columns and 16 bytes of padding.
const WDW_DY_STRIDE: u32 = 272;

/// partial[split] = dropout(x)ᵀ dy over the split's rows for x in f16 and dy of 33-64 columns
/// (8 n8 tiles), tf32 products (f16 x is exact in tf32): the wide forward's weight gradient,
/// so that no dropped copy is written. A block of 4 warps owns 128 columns of x, a warp a
/// panel of 32 (32 rows of dw, 64 accumulators a lane: 64 columns took 128 and spilled), and
/// walks the split's rows 32 at a time. Rows come through shared memory in
/// `DG_WIDE_DW_STAGES` stages copied with `cp.async` (x's 128 columns and dy's 64 for 32
/// rows a stage): the copies in flight hold no registers (loaded into registers, 8-byte loads
/// of x at 12 warps an SM kept too few bytes in flight: 0.38 ms for 2^18 x 500 -> 64). In the A
/// fragment (m = a column of x, k = a row) lane (g, t) holds columns 4g.. of rows t and t + 4
/// (m tile I: columns 4g + 2I and 4g + 2I + 1); B takes dy's columns 8g.. of the same rows (dw's
/// column n of n8 tile j is 8n + j). The mask comes from the forward's keep bits where given
/// (`keep_bits` not null), else it is drawn again.
#[inline(always)]
pub unsafe fn weight_grad_wide_h16(args: DropoutGemmDwArgs) {
    let DropoutGemmDwArgs {
        rows,
        k,
        ldx,
        ldw,
        k_tiles: groups,
        rows_per_split,
        threshold,
        x,
        dy,
        partial,
        scale,
        seed_key,
        step,
        offset,
        keep_bits,
        ids,
        ..
    } = args;
    const STAGES: u32 = DG_WIDE_DW_STAGES;
    const R: u32 = DG_DW_STEP_ROWS;
    let b = ptx::ctaid_x();
    let (split, group) = (div_or_zero(b, groups), rem_or_zero(b, groups));
    let tid = ptx::tid_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    let mask = StreamMask::new((seed_key, step, threshold, offset, ids), rows, ldx);
    let r_begin = split * rows_per_split;
    let r_end = rows.min(r_begin.saturating_add(rows_per_split));
    let iters = if r_end > r_begin { (r_end - r_begin).div_ceil(R) } else { 0 };
    let x0 = 128 * group;
    let col = x0 + 32 * warp + 4 * g;
    let xs = ptx::dyn_smem_base();
    let ds = xs + STAGES * R * WDW_X_STRIDE;
    // The forward's keep bits where it left them (4 words a row for this block's 128 columns:
    // 16 bytes a row a stage), else the mask is drawn again.
    let bs = ds + STAGES * R * WDW_DY_STRIDE;
    let (bits, words) = (!keep_bits.is_null() && threshold != 0, keep_words_per_row(ldx));
    let xh = x as *const u16;
    // Stage i: rows r_begin + 32i.. of x's 128 columns and of dy, 16-byte chunks (zeros past
    // the split's rows, x's columns and dy's), 4 of each a thread.
    let issue = |i: u32| {
        let (r0, buf) = (r_begin + R * i, i % STAGES);
        crate::unroll4!(q => {
            let c = tid + DG_WIDE_DW_THREADS * q as u32;
            let (r, cc) = (c / 16, c % 16);
            let row = r0 + r;
            let (xc, ok) = (x0 + 8 * cc, row < r_end);
            let src = if ok && xc < ldx { unsafe { xh.add(row as usize * ldx as usize + xc as usize) } } else { xh };
            unsafe { ptx::cp_async_16(xs + (buf * R + r) * WDW_X_STRIDE + 16 * cc, src as *const u32, if ok && xc < ldx { 16 } else { 0 }) };
            let dc = 4 * cc;
            let src = if ok && dc < ldw { unsafe { dy.add(row as usize * ldw as usize + dc as usize) } } else { dy };
            unsafe { ptx::cp_async_16(ds + (buf * R + r) * WDW_DY_STRIDE + 16 * cc, src as *const u32, if ok && dc < ldw { 16 } else { 0 }) };
        });
        if bits && tid < R {
            let row = r0 + tid;
            let src = if row < r_end { unsafe { keep_bits.add(row as usize * words as usize + 4 * group as usize) } } else { keep_bits };
            unsafe { ptx::cp_async_16(bs + (buf * R + tid) * 16, src, if row < r_end { 16 } else { 0 }) };
        }
    };
    let mut acc = [[[0f32; 4]; 8]; 2];
    let mut i = 0;
    while i < STAGES - 1 {
        if i < iters {
            issue(i);
        }
        ptx::cp_async_commit();
        i += 1;
    }
    let mut i = 0;
    while i < iters {
        ptx::cp_async_wait::<{ DG_WIDE_DW_STAGES - 2 }>();
        ptx::sync_threads();
        // The buffer refilled here was read in iteration i - 1, which every warp has finished.
        if i + STAGES - 1 < iters {
            issue(i + STAGES - 1);
        }
        ptx::cp_async_commit();
        let (r0, buf) = (r_begin + R * i, i % STAGES);
        crate::unroll4!(q => {
            let (la, lb) = (8 * q as u32 + t, 8 * q as u32 + t + 4);
            let xa = |l: u32| {
                let w = unsafe { ptx::ld_shared_u64(xs + (buf * R + l) * WDW_X_STRIDE + 2 * (32 * warp + 4 * g)) };
                let v = widen4([w as u32, (w >> 32) as u32]);
                if bits {
                    let kept = unsafe { ptx::ld_shared_u32(bs + (buf * R + l) * 16 + 4 * warp) } >> (4 * g);
                    let mut out = [0f32; 4];
                    crate::unroll4!(e => {
                        if kept & (1 << e) != 0 {
                            out[e] = v[e];
                        }
                    });
                    out
                } else {
                    mask.drop4_at(v, r0 + l, col, ldx, 1.0)
                }
            };
            let (va, vb) = (xa(la), xa(lb));
            let dyr = |l: u32| {
                let at = ds + (buf * R + l) * WDW_DY_STRIDE + 32 * g;
                unsafe { [ptx::ld_shared_v4_u32(at), ptx::ld_shared_v4_u32(at + 16)] }
            };
            let (da, db) = (dyr(la), dyr(lb));
            crate::unroll2!(m => {
                let a = [va[2 * m].to_bits(), va[2 * m + 1].to_bits(), vb[2 * m].to_bits(), vb[2 * m + 1].to_bits()];
                // (Unrolled by hand: a rolled loop of 8 put the accumulators in local memory.)
                crate::unroll2!(jh => {
                    crate::unroll4!(jl => {
                        let j = 4 * jh + jl;
                        let bf = [ptx::cvt_tf32(f32::from_bits(da[jh][jl])), ptx::cvt_tf32(f32::from_bits(db[jh][jl]))];
                        acc[m][j] = ptx::mma_m16n8k8_tf32(a, bf, acc[m][j]);
                    });
                });
            });
        });
        i += 1;
    }
    ptx::cp_async_wait::<0>();
    // D(m, n) of m tile I: m = g / g + 8 → dw row col + 2I / col + 2I + 1; n = 2t / 2t + 1 →
    // 8n + j.
    let out = unsafe { partial.add(split as usize * k as usize * ldw as usize) };
    crate::unroll2!(m_tile => {
        crate::unroll2!(jh => { crate::unroll4!(jl => {
            let j = 4 * jh + jl;
            let d = acc[m_tile][j];
            let (ra, rb) = (col + 2 * m_tile as u32, col + 2 * m_tile as u32 + 1);
            let (ca, cb) = (16 * t + j as u32, 8 * (2 * t + 1) + j as u32);
            let put = |r: u32, c: u32, val: f32| {
                if r < k && c < ldw {
                    unsafe { ptx::st_f32(out.add(r as usize * ldw as usize + c as usize), val * scale) };
                }
            };
            put(ra, ca, d[0]);
            put(ra, cb, d[1]);
            put(rb, ca, d[2]);
            put(rb, cb, d[3]);
        }); });
    });
}
