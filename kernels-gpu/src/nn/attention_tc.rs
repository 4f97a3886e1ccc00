//! AGNN's fused attention on the tensor cores, forward and backward (f16 inputs, f32 sums; rows
//! of 32 features): a warp per window of 8 consecutive rows walks the window's unique
//! neighbours 16 at a time (a block; `host/ops/nn/attention_tc.rs` builds the lists), as
//! FlashAttention walks keys, with the sparse side swapped into the MMAs' N (FlashSparse's
//! 8-row windows: a tile of 16 neighbours x 8 rows holds twice the edges a 16-row window's
//! 16 x 8 tile does, and the softmax's scalar work is per slot, edge or not).
//!
//! Forward: a block's scores Sᵀ (16 neighbours x 8 rows) = N_blk N_winᵀ in two m16n8k16 MMAs,
//! masked to the window's edges, the rows' running softmax (max, sum) updated, and outᵀ
//! (32 features x 8 rows) += H_blkᵀ Pᵀ in two more (one per 16 features), Pᵀ's B fragments made
//! from the score accumulators by `movmatrix` (an 8 x 8 transpose in registers). Backward, the
//! same two passes as the CUDA-core kernels (`fused_attention.rs`, whose module comment has the
//! maths and why there are two): the row pass over S's windows (cos and dout_i . n_j from two
//! score products sharing their A operand, ds, and sum_j ds_ij n_j), the column pass over Sᵀ's
//! windows (a window of nodes j, blocks of their sources i: cos and dout_i . n_j, alpha and ds
//! from the sources' statistics and D, then sum_i ds_ij n_i and sum_i alpha_ij dout_i).
//!
//! Operands (g = lane / 4, t = lane % 4). A sum over features does not care which feature a k
//! position holds as long as A and B agree, so lane t holds features 8t .. 8t + 8 of a row (one
//! 16-byte load): k positions {2t, 2t + 1} of k-step s are features 8t + 4s + {0, 1},
//! {2t + 8, 2t + 9} features 8t + 4s + {2, 3}. Scores' A: the block's neighbours g and g + 8;
//! B: the window's row g (loaded once per window). Weighted sums' A (features x neighbours) is
//! the scores' A transposed, 8 x 8 at a time by `movmatrix` (no second load of the rows: the
//! gathers bound the first version at 75 % of L1): m-tile s is k-step s, its row g feature
//! 8 (g / 2) + 4s + g % 2 and row g + 8 that + 2, so lane (g, t) ends with features
//! 8 (g / 2) + g % 2 + {0, 2, 4, 6} of rows 2t and 2t + 1.
//!
//! n (the normalised rows) is gathered, not h: cosines of unit vectors stay well inside f16;
//! h_j = n_j / inv_norm_j where a pass needs h. Rows of at least the host's `row_max` entries
//! are left out of the windows (their mask bits are zero and their outputs are not written): the
//! CUDA-core kernels take them (a hub row would serialise its window).

use super::global_warp;
use crate::abi::attention::{AttentionTcColGradArgs, AttentionTcForwardArgs, AttentionTcRowGradArgs, TcWindows};
use crate::ptx;

/// The u32 words (f16 pairs) of a gathered row: 32 features.
const ROW_WORDS: usize = 16;
/// Rows of a window, neighbours of a block (the host's `WINDOW_ROWS`, `BLOCK_COLS`).
const WIN: u32 = 8;
const BLK: u32 = 16;
/// Blocks a step: one word of ids a lane covers two blocks (the column pass takes one at a
/// time: two blocks' sources held 130 registers, one block of warps an SM).
const STEP: usize = 2;

/// A lane's place in the MMA layouts: g = lane / 4, t = lane % 4 (see the module comment).
#[derive(Clone, Copy)]
struct Quad {
    lane: u32,
    g: u32,
    t: u32,
}

impl Quad {
    #[inline(always)]
    fn new() -> Self {
        let lane = ptx::lane_id();
        Quad { lane, g: lane >> 2, t: lane & 3 }
    }
}

/// A step's ids, one word a lane: lane L holds neighbour L % 16 of block L / 16, and lanes 0..8
/// the step's 8 mask words (4 a block: a byte a neighbour, bit r its edge to window row r).
/// Blocks past the window's end read neighbour 0 with mask 0. One coalesced load a step, issued
/// a step ahead (a block at a time left each warp waiting on two dependent L2 round trips).
#[derive(Clone, Copy)]
struct StepIds {
    col: u32,
    mask: u32,
}

#[inline(always)]
unsafe fn load_ids(w: &TcWindows, b: u32, b1: u32, lane: u32) -> StepIds {
    let col = if b + lane / BLK < b1 { unsafe { ptx::ld_nc_u32(w.blk_cols.add((BLK * b + lane) as usize)) } } else { 0 };
    let mask =
        if lane < 8 && b + lane / 4 < b1 { unsafe { ptx::ld_nc_u32(w.blk_mask.cast::<u32>().add((4 * b + lane) as usize)) } } else { 0 };
    StepIds { col, mask }
}

/// Block `u` of a step as a lane sees it: neighbours g and g + 8 and their mask bytes.
#[derive(Clone, Copy, Default)]
struct BlockIds {
    sg: [u32; 2],
    mask: [u32; 2],
}

impl BlockIds {
    #[inline(always)]
    fn of(ids: &StepIds, u: u32, q: &Quad) -> Self {
        let at = |c: u32| ptx::shfl_idx_u32(ids.col, BLK * u + c);
        let byte = |w: u32| (w >> (8 * (q.g & 3))) & 0xff;
        BlockIds {
            sg: [at(q.g), at(q.g + 8)],
            mask: [byte(ptx::shfl_idx_u32(ids.mask, 4 * u + q.g / 4)), byte(ptx::shfl_idx_u32(ids.mask, 4 * u + q.g / 4 + 2))],
        }
    }

    /// Whether score accumulator `v` (neighbour g for v < 2, else g + 8; row 2t + v % 2) is an
    /// edge.
    #[inline(always)]
    fn edge(&self, v: usize, t: u32) -> bool {
        (self.mask[v / 2] >> (2 * t + (v as u32 & 1))) & 1 != 0
    }
}

/// Features 8t .. 8t + 8 of row j of an f16 matrix (as four f16 pairs).
#[inline(always)]
unsafe fn eight(p: *const u32, j: u32, q: &Quad) -> [u32; 4] {
    unsafe { ptx::ld_nc_v4_u32(p.add(j as usize * ROW_WORDS + 4 * q.t as usize)) }
}

/// The scores' A fragments (two k-steps) of neighbours g and g + 8.
#[inline(always)]
unsafe fn score_a(p: *const u32, id: &BlockIds, q: &Quad) -> [[u32; 4]; 2] {
    let (y0, y1) = unsafe { (eight(p, id.sg[0], q), eight(p, id.sg[1], q)) };
    [[y0[0], y1[0], y0[1], y1[1]], [y0[2], y1[2], y0[3], y1[3]]]
}

/// The scores' B fragments (two k-steps) of the window's row g (zero past the graph).
#[inline(always)]
unsafe fn score_b(p: *const u32, r0: u32, n_rows: u32, q: &Quad) -> [[u32; 2]; 2] {
    let x = if r0 + q.g < n_rows { unsafe { eight(p, r0 + q.g, q) } } else { [0; 4] };
    [[x[0], x[1]], [x[2], x[3]]]
}

/// The scores' B fragments of the window's row g of an f32 matrix, rounded to f16 as the cast
/// rounds, and stored as row g of the f16 copy `copy` (the row pass makes dout's copy for the
/// column pass, which gathers it: no cast of its own). Every window is walked, so every row is
/// copied.
#[inline(always)]
unsafe fn score_b_copied(src: *const f32, copy: *mut u32, r0: u32, n_rows: u32, q: &Quad) -> [[u32; 2]; 2] {
    let j = r0 + q.g;
    if j >= n_rows {
        return [[0; 2]; 2];
    }
    let off = j as usize * 32 + 8 * q.t as usize;
    let (x0, x1) = unsafe { (ptx::ld_nc_v4_f32(src.add(off)), ptx::ld_nc_v4_f32(src.add(off + 4))) };
    let x = [ptx::pack_f16x2(x0[0], x0[1]), ptx::pack_f16x2(x0[2], x0[3]), ptx::pack_f16x2(x1[0], x1[1]), ptx::pack_f16x2(x1[2], x1[3])];
    unsafe { ptx::st_v4_u32(copy.add(off / 2), x) };
    [[x[0], x[1]], [x[2], x[3]]]
}

/// Sᵀ (16 neighbours x 8 rows) of a block: accumulators (neighbour g, rows 2t, 2t + 1),
/// (neighbour g + 8, rows 2t, 2t + 1).
#[inline(always)]
fn scores(a: &[[u32; 4]; 2], b: &[[u32; 2]; 2]) -> [f32; 4] {
    let c = ptx::mma_m16n8k16_f16(a[0], b[0], [0.0; 4]);
    ptx::mma_m16n8k16_f16(a[1], b[1], c)
}

/// The weighted sums' A fragments (features x neighbours, one m-tile per k-step) from the
/// scores' A fragments: each 8 x 8 quarter transposed (the scores' rows g and g + 8 become
/// the k positions 2t.. and 2t + 8.., their k positions 2t.. and 2t + 8.. the rows g and g + 8).
#[inline(always)]
fn rows_a(sa: &[[u32; 4]; 2]) -> [[u32; 4]; 2] {
    let t = |s: usize| {
        [ptx::movmatrix_trans(sa[s][0]), ptx::movmatrix_trans(sa[s][2]), ptx::movmatrix_trans(sa[s][1]), ptx::movmatrix_trans(sa[s][3])]
    };
    [t(0), t(1)]
}

/// accᵀ (32 features x 8 rows, two m-tiles) += A (features x the block's 16 neighbours) Pᵀ, P in
/// the scores' accumulator layout (`p[0..2]` neighbour g, `p[2..4]` neighbour g + 8).
#[inline(always)]
fn add_rows(acc: &mut [[f32; 4]; 2], a: &[[u32; 4]; 2], p: [f32; 4]) {
    let b = [ptx::movmatrix_trans(ptx::pack_f16x2(p[0], p[1])), ptx::movmatrix_trans(ptx::pack_f16x2(p[2], p[3]))];
    acc[0] = ptx::mma_m16n8k16_f16(a[0], b, acc[0]);
    acc[1] = ptx::mma_m16n8k16_f16(a[1], b, acc[1]);
}

/// This lane's 4 features of row 2t + `e` (`feature(q, k)`) from the weighted sums'
/// accumulators.
#[inline(always)]
fn row_of(acc: &[[f32; 4]; 2], e: usize) -> [f32; 4] {
    [acc[0][e], acc[0][e + 2], acc[1][e], acc[1][e + 2]]
}

/// Scales the accumulators of row 2t by `s0`, of row 2t + 1 by `s1`.
#[inline(always)]
fn scale_rows(acc: &mut [[f32; 4]; 2], s0: f32, s1: f32) {
    for a in acc.iter_mut() {
        a[0] *= s0;
        a[2] *= s0;
        a[1] *= s1;
        a[3] *= s1;
    }
}

/// Feature k (of 4) of a lane's row accumulators: 8 (g / 2) + g % 2 + 2k.
#[inline(always)]
fn feature(q: &Quad, k: usize) -> usize {
    (8 * (q.g / 2) + (q.g & 1)) as usize + 2 * k
}

/// This lane's 4 features of row `i` of an f32 matrix of stride 32 (zeros past the graph).
#[inline(always)]
unsafe fn load4(p: *const f32, i: u32, n_rows: u32, q: &Quad) -> [f32; 4] {
    if i >= n_rows {
        return [0.0; 4];
    }
    let row = unsafe { p.add(i as usize * 32) };
    core::array::from_fn(|k| unsafe { ptx::ld_nc_f32(row.add(feature(q, k))) })
}

#[inline(always)]
unsafe fn store4(p: *mut f32, i: u32, q: &Quad, v: [f32; 4]) {
    let row = unsafe { p.add(i as usize * 32) };
    for (k, x) in v.iter().enumerate() {
        unsafe { ptx::st_f32(row.add(feature(q, k)), *x) };
    }
}

/// Adds `v` over the 8 lanes that share this lane's t (the lanes holding one row's features).
#[inline(always)]
fn row_sum(mut v: f32) -> f32 {
    v += ptx::shfl_xor_f32(v, 4);
    v += ptx::shfl_xor_f32(v, 8);
    v + ptx::shfl_xor_f32(v, 16)
}

/// The dot product of two rows held as 4 features by each of their 8 lanes.
#[inline(always)]
fn row_dot(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let mut s = 0f32;
    for k in 0..4 {
        s = ptx::fma_f32(a[k], b[k], s);
    }
    row_sum(s)
}

/// Whether row `i` is one of the windows' (exists and is shorter than `row_max`).
#[inline(always)]
unsafe fn window_row(w: &TcWindows, i: u32) -> bool {
    i < w.n_rows && unsafe { ptx::ld_nc_u32(w.row_ptr.add(i as usize + 1)) - ptx::ld_nc_u32(w.row_ptr.add(i as usize)) } < w.row_max
}

/// Walks this warp's windows: `f(first row, blocks b0 .. b1)`, heaviest windows first.
#[inline(always)]
unsafe fn windows(w: &TcWindows, mut f: impl FnMut(u32, u32, u32)) {
    let (mut k, warps) = global_warp();
    while k < w.n_windows {
        let win = unsafe { ptx::ld_nc_u32(w.order.add(k as usize)) };
        let (b0, b1) = unsafe { (ptx::ld_nc_u32(w.win_ptr.add(win as usize)), ptx::ld_nc_u32(w.win_ptr.add(win as usize + 1))) };
        f(WIN * win, b0, b1);
        k += warps;
    }
}

/// Walks blocks b0 .. b1 `S` (1 or 2) at a time: `load(ids of block u)` for each block of a step
/// before `use_(ids, loaded)` sees them (a block past b1 is loaded with neighbour 0 and no mask
/// bit).
#[inline(always)]
unsafe fn steps<B: Copy + Default, const S: usize>(
    w: &TcWindows,
    b0: u32,
    b1: u32,
    q: &Quad,
    mut load: impl FnMut(&BlockIds) -> B,
    mut use_: impl FnMut(&[BlockIds; S], &[B; S]),
) {
    let mut next = unsafe { load_ids(w, b0, b1, q.lane) };
    let mut b = b0;
    while b < b1 {
        let ids = next;
        // The next step's ids in flight while this one loads and computes.
        if b + (S as u32) < b1 {
            next = unsafe { load_ids(w, b + S as u32, b1, q.lane) };
        }
        let mut bid = [BlockIds::default(); S];
        let mut blk = [B::default(); S];
        crate::unroll2!(u => {
            if u < S {
                bid[u] = BlockIds::of(&ids, u as u32, q);
                blk[u] = load(&bid[u]);
            }
        });
        use_(&bid, &blk);
        b += S as u32;
    }
}

/// A window row's running softmax: max, this lane's part of the sum (its two neighbours of each
/// block; the lanes of a row share the max, so the parts add up at the end).
#[derive(Clone, Copy)]
struct RowState {
    m: f32,
    l: f32,
}

impl RowState {
    const EMPTY: RowState = RowState { m: f32::NEG_INFINITY, l: 0.0 };

    /// Takes the largest of this lane's scores of the row in a step (-inf: none): the new max
    /// over the row's lanes, and the factor the running sums are rescaled by.
    #[inline(always)]
    fn rescale(&mut self, mx: f32) -> f32 {
        let mut mx = mx.max(ptx::shfl_xor_f32(mx, 4));
        mx = mx.max(ptx::shfl_xor_f32(mx, 8));
        mx = mx.max(ptx::shfl_xor_f32(mx, 16));
        let m_new = self.m.max(mx);
        if m_new == f32::NEG_INFINITY {
            // No edge of the row so far: nothing to rescale.
            return 1.0;
        }
        let scale = ptx::exp(self.m - m_new);
        self.l *= scale;
        self.m = m_new;
        scale
    }

    /// A score's weight (0 for -inf, which also covers a row without edges so far).
    #[inline(always)]
    fn weight(&self, s: f32) -> f32 {
        if s == f32::NEG_INFINITY { 0.0 } else { ptx::exp(s - self.m) }
    }
}

/// What a forward or row-pass block brings: the scores' A fragments and the inv_norms of
/// neighbours g and g + 8.
#[derive(Clone, Copy, Default)]
struct NeighbourBlock {
    sa: [[u32; 4]; 2],
    /// 1 / inv_norm (the norm) of neighbours g and g + 8: h_j = n_j norm_j.
    norm: [f32; 2],
}

#[inline(always)]
unsafe fn neighbour_block(n16: *const u32, inv_norm: *const f32, id: &BlockIds, q: &Quad) -> NeighbourBlock {
    let inv = unsafe { [ptx::ld_nc_f32(inv_norm.add(id.sg[0] as usize)), ptx::ld_nc_f32(inv_norm.add(id.sg[1] as usize))] };
    NeighbourBlock { sa: unsafe { score_a(n16, id, q) }, norm: inv.map(ptx::rcp_approx) }
}

/// The forward (see the module comment).
#[inline(always)]
pub unsafe fn forward_tc(a: AttentionTcForwardArgs) {
    let q = Quad::new();
    let w = &a.win;
    let beta = unsafe { ptx::ld_nc_f32(a.beta) };
    unsafe {
        windows(w, |r0, b0, b1| {
            let sb = score_b(a.n16, r0, w.n_rows, &q);
            // Rows 2t and 2t + 1.
            let mut st = [RowState::EMPTY; 2];
            let mut acc = [[0f32; 4]; 2];
            steps::<_, STEP>(
                w,
                b0,
                b1,
                &q,
                |id| neighbour_block(a.n16, a.inv_norm, id, &q),
                |ids, blk| {
                    // The step's scores (-inf off the edges), one rescale of the running state.
                    let mut s = [[0f32; 4]; STEP];
                    let mut mx = [f32::NEG_INFINITY; 2];
                    crate::unroll2!(u => {
                        let c = scores(&blk[u].sa, &sb);
                        for v in 0..4 {
                            s[u][v] = if ids[u].edge(v, q.t) { beta * c[v] } else { f32::NEG_INFINITY };
                            mx[v & 1] = mx[v & 1].max(s[u][v]);
                        }
                    });
                    let (sc0, sc1) = (st[0].rescale(mx[0]), st[1].rescale(mx[1]));
                    scale_rows(&mut acc, sc0, sc1);
                    crate::unroll2!(u => {
                        let mut p = [0f32; 4];
                        for v in 0..4 {
                            p[v] = st[v & 1].weight(s[u][v]);
                            st[v & 1].l += p[v];
                            // Times the neighbour's norm (n_j / inv_norm_j = h_j).
                            p[v] *= blk[u].norm[v / 2];
                        }
                        add_rows(&mut acc, &rows_a(&blk[u].sa), p);
                    });
                },
            );
            for e in 0..2 {
                // The sum's shuffles before the branch (every lane takes part).
                let l = row_sum(st[e].l);
                let i = r0 + 2 * q.t + e as u32;
                if window_row(w, i) {
                    let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
                    store4(a.out, i, &q, row_of(&acc, e).map(|v| v * inv));
                    if q.g == 0 {
                        let (m, l) = if l > 0.0 { (st[e].m, l) } else { (0.0, 0.0) };
                        ptx::st_f32(a.stats.add(2 * i as usize), m);
                        ptx::st_f32(a.stats.add(2 * i as usize + 1), l);
                    }
                }
            }
        })
    }
}

/// The backward's pass over S's windows: D_i = dout_i . out_i, dn's row part beta sum_j ds_ij
/// n_j, and dbeta's share (one atomic a warp).
#[inline(always)]
pub unsafe fn row_grad_tc(a: AttentionTcRowGradArgs) {
    let q = Quad::new();
    let w = &a.win;
    let beta = unsafe { ptx::ld_nc_f32(a.beta) };
    let mut dbeta_part = 0f32;
    unsafe {
        windows(w, |r0, b0, b1| {
            let (sb, gb) = (score_b(a.n16, r0, w.n_rows, &q), score_b_copied(a.dout, a.dout16, r0, w.n_rows, &q));
            // Per row 2t + e: D (rows past the graph 0), and the softmax's max and 1 / sum (rows
            // not the windows' have no mask bits: their values are never used).
            let mut d = [0f32; 2];
            let mut ml = [(0f32, 0f32); 2];
            for e in 0..2 {
                let i = r0 + 2 * q.t + e as u32;
                d[e] = row_dot(&load4(a.dout, i, w.n_rows, &q), &load4(a.out, i, w.n_rows, &q));
                if i < w.n_rows {
                    let s = ptx::ld_nc_v2_f32(a.stats.add(2 * i as usize));
                    ml[e] = (s[0], if s[1] > 0.0 { 1.0 / s[1] } else { 0.0 });
                }
            }
            let mut acc = [[0f32; 4]; 2];
            steps::<_, STEP>(
                w,
                b0,
                b1,
                &q,
                |id| neighbour_block(a.n16, a.inv_norm, id, &q),
                |ids, blk| {
                    crate::unroll2!(u => {
                        let cos = scores(&blk[u].sa, &sb);
                        // dout_i . n_j, times norm_j: dalpha = dout_i . h_j.
                        let gn = scores(&blk[u].sa, &gb);
                        let mut ds = [0f32; 4];
                        for v in 0..4 {
                            let (m, rl) = ml[v & 1];
                            let x = ptx::exp(beta * cos[v] - m) * rl * ptx::fma_f32(gn[v], blk[u].norm[v / 2], -d[v & 1]);
                            ds[v] = if ids[u].edge(v, q.t) { x } else { 0.0 };
                            dbeta_part = ptx::fma_f32(ds[v], cos[v], dbeta_part);
                        }
                        add_rows(&mut acc, &rows_a(&blk[u].sa), ds);
                    });
                },
            );
            for e in 0..2 {
                let i = r0 + 2 * q.t + e as u32;
                if window_row(w, i) {
                    store4(a.dn, i, &q, row_of(&acc, e).map(|v| v * beta));
                    if q.g == 0 {
                        ptx::st_f32(a.d_row.add(i as usize), d[e]);
                    }
                }
            }
        })
    };
    let total = ptx::warp_sum(dbeta_part);
    if q.lane == 0 {
        unsafe { ptx::red_add_f32(a.dbeta, total) };
    }
}

/// What a column-pass block brings: the sources' n and dout (scores' A fragments), and the
/// softmax (max, sum) and D of sources g and g + 8.
#[derive(Clone, Copy, Default)]
struct SourceBlock {
    sa_n: [[u32; 4]; 2],
    sa_d: [[u32; 4]; 2],
    ml: [[f32; 2]; 2],
    d: [f32; 2],
}

/// The backward's pass over Sᵀ's windows: node j's in-edges (i, j); writes
/// dh_j = sum_i alpha_ij dout_i + the normalisation's backward of dn_j (the row pass's part plus
/// beta sum_i ds_ij n_i).
#[inline(always)]
pub unsafe fn col_grad_tc(a: AttentionTcColGradArgs) {
    let q = Quad::new();
    let w = &a.win;
    let beta = unsafe { ptx::ld_nc_f32(a.beta) };
    unsafe {
        windows(w, |r0, b0, b1| {
            let sb = score_b(a.n16, r0, w.n_rows, &q);
            // norm_j of rows 2t and 2t + 1 (dalpha_ij = dout_i . h_j = norm_j dout_i . n_j).
            let mut norm = [0f32; 2];
            for e in 0..2 {
                let j = r0 + 2 * q.t + e as u32;
                if j < w.n_rows {
                    norm[e] = ptx::rcp_approx(ptx::ld_nc_f32(a.inv_norm.add(j as usize)));
                }
            }
            let (mut acc_dn, mut acc_dh) = ([[0f32; 4]; 2], [[0f32; 4]; 2]);
            steps::<_, 1>(
                w,
                b0,
                b1,
                &q,
                |id| SourceBlock {
                    sa_n: score_a(a.n16, id, &q),
                    sa_d: score_a(a.dout16, id, &q),
                    ml: [ptx::ld_nc_v2_f32(a.stats.add(2 * id.sg[0] as usize)), ptx::ld_nc_v2_f32(a.stats.add(2 * id.sg[1] as usize))],
                    d: [ptx::ld_nc_f32(a.d_row.add(id.sg[0] as usize)), ptx::ld_nc_f32(a.d_row.add(id.sg[1] as usize))],
                },
                |ids, blk| {
                    let u = 0;
                    let cos = scores(&blk[u].sa_n, &sb);
                    let gn = scores(&blk[u].sa_d, &sb);
                    let (mut al, mut ds) = ([0f32; 4], [0f32; 4]);
                    for v in 0..4 {
                        let (ml, di) = (blk[u].ml[v / 2], blk[u].d[v / 2]);
                        let x = ptx::exp(beta * cos[v] - ml[0]) * ptx::rcp_approx(ml[1]);
                        al[v] = if ids[u].edge(v, q.t) { x } else { 0.0 };
                        ds[v] = al[v] * ptx::fma_f32(gn[v], norm[v & 1], -di);
                    }
                    add_rows(&mut acc_dn, &rows_a(&blk[u].sa_n), ds);
                    add_rows(&mut acc_dh, &rows_a(&blk[u].sa_d), al);
                },
            );
            // dn_j in full, then dh_j = acc_dh + (dn_j - n_j (n_j . dn_j)) inv_j; the dot's
            // shuffles before the branch.
            for e in 0..2 {
                let j = r0 + 2 * q.t + e as u32;
                let (nj, part) = (load4(a.n, j, w.n_rows, &q), load4(a.dn, j, w.n_rows, &q));
                let acc = row_of(&acc_dn, e);
                let mut dn = [0f32; 4];
                for k in 0..4 {
                    dn[k] = ptx::fma_f32(beta, acc[k], part[k]);
                }
                let nd = row_dot(&nj, &dn);
                if window_row(w, j) {
                    let inv = ptx::ld_nc_f32(a.inv_norm.add(j as usize));
                    let dh = row_of(&acc_dh, e);
                    let mut out = [0f32; 4];
                    for k in 0..4 {
                        out[k] = ptx::fma_f32(dn[k] - nj[k] * nd, inv, dh[k]);
                    }
                    store4(a.dh, j, &q, out);
                }
            }
        })
    }
}
