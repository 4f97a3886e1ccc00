//! AGNN's fused attention on the tensor cores, forward and backward (f16 inputs, f32 sums; rows
//! of 32 features): a warp per window of 16 consecutive rows walks the window's unique
//! neighbours 8 at a time (a block; `host/ops/nn/attention_tc.rs` builds the lists), as
//! FlashAttention walks keys. Forward: the block's 16 x 8 scores S = beta N_win N_blkᵀ in two
//! m16n8k16 products, masked to the window's edges, the rows' running softmax (max, sum)
//! updated, and the weighted sum of the block's rows added in four m16n8k8 products whose A
//! operand is the scores' accumulator layout, unchanged (FlashAttention 2's observation).
//! Backward, the same two passes as the CUDA-core kernels (`fused_attention.rs`, whose module
//! comment has the maths and why there are two): the row pass over S's windows (cos and
//! dalpha = dout_i . h_j from two score products, ds, and sum_j ds_ij n_j), the column pass
//! over Sᵀ's windows (a window of nodes j, blocks of their sources i: cos, dalpha, alpha and ds
//! recomputed from the forward's statistics and D, then sum_i ds_ij n_i and sum_i alpha_ij
//! dout_i). The dot products and weighted sums are MMAs and the gathered rows f16, but the
//! softmax's scalar work (mask, exp, rescale, pack) is per slot of the 16 x 8 tile, edge or not:
//! the kernels pay off only where a window's tiles are dense (the host uses them on request).
//!
//! Operands (g = lane / 4, t = lane % 4). The sums over features do not care which feature a
//! k position holds as long as A and B agree, so lane t holds features 8t .. 8t + 8 of a row
//! (one 16-byte load): k positions {2t, 2t + 1} of k-step s are features 8t + 4s + {0, 1},
//! {2t + 8, 2t + 9} features 8t + 4s + {2, 3}. Scores' A: the window's rows g and g + 8
//! (loaded once per window), B: the block's neighbour g. Products' B (8 neighbours x 8 output
//! columns per n-tile q): column g of n-tile q is feature 4g + q, so lane (g, t) loads features
//! 4g .. 4g + 4 of neighbours 2t and 2t + 1 (8 bytes each) and pairs their halves; its
//! accumulators then hold features 8t + q and 8t + 4 + q of rows g and g + 8 — two float4s a
//! row at the end.
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

/// A lane's place in the MMA layouts: g = lane / 4 (rows g and g + 8, the scores' neighbour
/// g), t = lane % 4 (features 8t .. 8t + 8, neighbours 2t and 2t + 1).
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

/// A step's ids, one word a lane: lane L holds column L % 8 of block L / 8, and lanes 0..16
/// the step's 16 mask words (4 a block: a byte a row). Blocks past the window's end read
/// column 0 with mask 0. One coalesced load a step, issued a step ahead: a block at a time
/// left each warp waiting on two dependent L2 round trips a block.
#[derive(Clone, Copy)]
struct StepIds {
    col: u32,
    mask: u32,
}

#[inline(always)]
unsafe fn load_ids(w: &TcWindows, b: u32, b1: u32, lane: u32) -> StepIds {
    let blk = b + lane / 8;
    let col = if blk < b1 { unsafe { ptx::ld_nc_u32(w.blk_cols.add((8 * b + lane) as usize)) } } else { 0 };
    let mblk = b + (lane & 15) / 4;
    let mask = if lane < 16 && mblk < b1 { unsafe { ptx::ld_nc_u32(w.blk_mask.cast::<u32>().add((4 * b + lane) as usize)) } } else { 0 };
    StepIds { col, mask }
}

/// Block `u` of a step as a lane sees it: the scores' neighbour g, the products' neighbours 2t
/// and 2t + 1, and the mask bits of rows g and g + 8 (bit c: neighbour c).
#[derive(Clone, Copy, Default)]
struct BlockIds {
    jg: u32,
    j0: u32,
    j1: u32,
    mask_g: u32,
    mask_g8: u32,
}

impl BlockIds {
    #[inline(always)]
    fn of(ids: &StepIds, u: u32, q: &Quad) -> Self {
        let byte = |w: u32| (w >> (8 * (q.g & 3))) & 0xff;
        BlockIds {
            jg: ptx::shfl_idx_u32(ids.col, 8 * u + q.g),
            j0: ptx::shfl_idx_u32(ids.col, 8 * u + 2 * q.t),
            j1: ptx::shfl_idx_u32(ids.col, 8 * u + 2 * q.t + 1),
            mask_g: byte(ptx::shfl_idx_u32(ids.mask, 4 * u + q.g / 4)),
            mask_g8: byte(ptx::shfl_idx_u32(ids.mask, 4 * u + q.g / 4 + 2)),
        }
    }

    /// Whether the accumulator value `v` (rows g, g, g + 8, g + 8 at columns 2t, 2t + 1, 2t,
    /// 2t + 1) is an edge.
    #[inline(always)]
    fn edge(&self, v: usize, t: u32) -> bool {
        let m = if v < 2 { self.mask_g } else { self.mask_g8 };
        (m >> (2 * t + (v as u32 & 1))) & 1 != 0
    }
}

/// A gathered row's scores' B fragment (features 8t .. 8t + 8 of row j).
#[inline(always)]
unsafe fn score_b(p: *const u32, j: u32, q: &Quad) -> [u32; 4] {
    unsafe { ptx::ld_nc_v4_u32(p.add(j as usize * ROW_WORDS + 4 * q.t as usize)) }
}

/// The products' B material: features 4g .. 4g + 4 of rows j0 and j1.
#[inline(always)]
unsafe fn pairs(p: *const u32, j0: u32, j1: u32, q: &Quad) -> [[u32; 2]; 2] {
    unsafe { [ptx::ld_nc_v2_u32(p.add(j0 as usize * ROW_WORDS + 2 * q.g as usize)), ptx::ld_nc_v2_u32(p.add(j1 as usize * ROW_WORDS + 2 * q.g as usize))] }
}

/// A window's rows g and g + 8 as the scores' A fragments for the two k-steps (zero past the
/// graph: their scores are masked anyway).
#[inline(always)]
unsafe fn score_a(p: *const u32, r0: u32, n_rows: u32, q: &Quad) -> [[u32; 4]; 2] {
    let own = |r: u32| if r < n_rows { unsafe { score_b(p, r, q) } } else { [0; 4] };
    let (x0, x1) = (own(r0), own(r0 + 8));
    [[x0[0], x1[0], x0[1], x1[1]], [x0[2], x1[2], x0[3], x1[3]]]
}

/// The 16 x 8 dot products of the window's rows with a block's rows.
#[inline(always)]
fn scores(a: &[[u32; 4]; 2], b: &[u32; 4]) -> [f32; 4] {
    let c = ptx::mma_m16n8k16_f16(a[0], [b[0], b[1]], [0.0; 4]);
    ptx::mma_m16n8k16_f16(a[1], [b[2], b[3]], c)
}

/// acc (16 rows x 32 features, four n-tiles) += P (16 x 8, in the scores' layout: `p[0..2]` row
/// g, `p[2..4]` row g + 8, columns 2t, 2t + 1) times the block's 8 rows (`pairs`).
#[inline(always)]
fn add_rows(acc: &mut [[f32; 4]; 4], p: [f32; 4], pr: &[[u32; 2]; 2]) {
    let pa = [ptx::pack_f16x2(p[0], p[1]), ptx::pack_f16x2(p[2], p[3])];
    let pb = [ptx::lo_halves(pr[0][0], pr[1][0]), ptx::hi_halves(pr[0][0], pr[1][0]), ptx::lo_halves(pr[0][1], pr[1][1]), ptx::hi_halves(pr[0][1], pr[1][1])];
    crate::unroll4!(q => {
        acc[q] = ptx::mma_m16n8k8_f16(pa, pb[q], acc[q]);
    });
}

/// Features 8t .. 8t + 8 of an accumulated row (`lo` 0: row g, 2: row g + 8).
#[inline(always)]
fn row_of(acc: &[[f32; 4]; 4], lo: usize) -> [f32; 8] {
    [acc[0][lo], acc[1][lo], acc[2][lo], acc[3][lo], acc[0][lo + 1], acc[1][lo + 1], acc[2][lo + 1], acc[3][lo + 1]]
}

/// Features 8t .. 8t + 8 of row `i` of an f32 matrix of stride 32 (zeros for `i` past the
/// graph).
#[inline(always)]
unsafe fn load8(p: *const f32, i: u32, n_rows: u32, q: &Quad) -> [f32; 8] {
    if i >= n_rows {
        return [0.0; 8];
    }
    let at = unsafe { p.add(i as usize * 32 + 8 * q.t as usize) };
    let (a, b) = unsafe { (ptx::ld_nc_v4_f32(at), ptx::ld_nc_v4_f32(at.add(4))) };
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
}

#[inline(always)]
unsafe fn store8(p: *mut f32, i: u32, q: &Quad, v: [f32; 8]) {
    let at = unsafe { p.add(i as usize * 32 + 8 * q.t as usize) };
    unsafe {
        ptx::st_v4_f32(at, [v[0], v[1], v[2], v[3]]);
        ptx::st_v4_f32(at.add(4), [v[4], v[5], v[6], v[7]]);
    }
}

/// The dot product of two rows held as four lanes' 8 features (every lane of the quad gets it).
#[inline(always)]
fn quad_dot(a: &[f32; 8], b: &[f32; 8]) -> f32 {
    let mut s = 0f32;
    for k in 0..8 {
        s = ptx::fma_f32(a[k], b[k], s);
    }
    s += ptx::shfl_xor_f32(s, 1);
    s + ptx::shfl_xor_f32(s, 2)
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
        f(16 * win, b0, b1);
        k += warps;
    }
}

/// Walks blocks b0 .. b1 a step of `S` (2 or 4) at a time: `load(ids of block u)` for each block
/// of the step before `use_(loaded)` sees them all (blocks past b1 are loaded with column 0 and
/// no mask bit).
#[inline(always)]
unsafe fn steps<B: Copy + Default, const S: usize>(w: &TcWindows, b0: u32, b1: u32, q: &Quad, mut load: impl FnMut(&BlockIds) -> B, mut use_: impl FnMut(&[BlockIds; S], &[B; S])) {
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
        crate::unroll4!(u => {
            if u < S {
                bid[u] = BlockIds::of(&ids, u as u32, q);
                blk[u] = load(&bid[u]);
            }
        });
        use_(&bid, &blk);
        b += S as u32;
    }
}

/// A window row's running softmax: max, this lane's part of the sum (its two columns of each
/// block; the lanes of a row share the max, so the parts add up at the end).
#[derive(Clone, Copy)]
struct RowState {
    m: f32,
    l: f32,
}

impl RowState {
    const EMPTY: RowState = RowState { m: f32::NEG_INFINITY, l: 0.0 };

    /// Takes the largest of this lane's scores of a step (-inf: none): the new max over the
    /// row's lanes, and the factor the running sums are rescaled by.
    #[inline(always)]
    fn rescale(&mut self, mx: f32) -> f32 {
        let mut mx = mx.max(ptx::shfl_xor_f32(mx, 1));
        mx = mx.max(ptx::shfl_xor_f32(mx, 2));
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

    /// The row's whole sum (over its four lanes).
    #[inline(always)]
    fn total(&self) -> f32 {
        let l = self.l + ptx::shfl_xor_f32(self.l, 1);
        l + ptx::shfl_xor_f32(l, 2)
    }
}

/// What a forward (and row-pass) block brings: the scores' B fragment, the products' pairs, and
/// the inv_norms of neighbours 2t and 2t + 1.
#[derive(Clone, Copy, Default)]
struct NeighbourBlock {
    sb: [u32; 4],
    pr: [[u32; 2]; 2],
    inv: [f32; 2],
}

#[inline(always)]
unsafe fn neighbour_block(n16: *const u32, inv_norm: *const f32, id: &BlockIds, q: &Quad) -> NeighbourBlock {
    unsafe { NeighbourBlock { sb: score_b(n16, id.jg, q), pr: pairs(n16, id.j0, id.j1, q), inv: [ptx::ld_nc_f32(inv_norm.add(id.j0 as usize)), ptx::ld_nc_f32(inv_norm.add(id.j1 as usize))] } }
}

/// The forward (see the module comment).
#[inline(always)]
pub unsafe fn forward_tc(a: AttentionTcForwardArgs) {
    let q = Quad::new();
    let w = &a.win;
    let beta = unsafe { ptx::ld_nc_f32(a.beta) };
    unsafe {
        windows(w, |r, b0, b1| {
            let sa = score_a(a.n16, r + q.g, w.n_rows, &q);
            let (mut st0, mut st1) = (RowState::EMPTY, RowState::EMPTY);
            let mut acc = [[0f32; 4]; 4];
            steps::<_, 4>(w, b0, b1, &q, |id| neighbour_block(a.n16, a.inv_norm, id, &q), |ids, blk| {
                // The step's scores (-inf off the edges), one rescale of the running state.
                let mut s = [[0f32; 4]; 4];
                let (mut mx0, mut mx1) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
                crate::unroll4!(u => {
                    let c = scores(&sa, &blk[u].sb);
                    for v in 0..4 {
                        s[u][v] = if ids[u].edge(v, q.t) { beta * c[v] } else { f32::NEG_INFINITY };
                    }
                    mx0 = mx0.max(s[u][0].max(s[u][1]));
                    mx1 = mx1.max(s[u][2].max(s[u][3]));
                });
                let (sc0, sc1) = (st0.rescale(mx0), st1.rescale(mx1));
                for acc_q in acc.iter_mut() {
                    acc_q[0] *= sc0;
                    acc_q[1] *= sc0;
                    acc_q[2] *= sc1;
                    acc_q[3] *= sc1;
                }
                crate::unroll4!(u => {
                    let p = [st0.weight(s[u][0]), st0.weight(s[u][1]), st1.weight(s[u][2]), st1.weight(s[u][3])];
                    st0.l += p[0] + p[1];
                    st1.l += p[2] + p[3];
                    // Weights times the neighbours' norms (n_j / inv_norm_j = h_j).
                    let (n0, n1) = (ptx::rcp_approx(blk[u].inv[0]), ptx::rcp_approx(blk[u].inv[1]));
                    add_rows(&mut acc, [p[0] * n0, p[1] * n1, p[2] * n0, p[3] * n1], &blk[u].pr);
                });
            });
            // The sums' shuffles before the branches (every lane takes part).
            let ls = [st0.total(), st1.total()];
            for (half, st) in [st0, st1].iter().enumerate() {
                let i = r + q.g + 8 * half as u32;
                if window_row(w, i) {
                    let l = ls[half];
                    let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
                    store8(a.out, i, &q, row_of(&acc, 2 * half).map(|v| v * inv));
                    if q.t == 0 {
                        let (m, l) = if l > 0.0 { (st.m, l) } else { (0.0, 0.0) };
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
        windows(w, |r, b0, b1| {
            let (sa, sg) = (score_a(a.n16, r + q.g, w.n_rows, &q), score_a(a.dout16, r + q.g, w.n_rows, &q));
            // Per row (g, g + 8): D, and the softmax's max and 1 / sum (rows not the windows'
            // have no mask bits; their values are never used).
            let mut d = [0f32; 2];
            let mut ml = [(0f32, 0f32); 2];
            for half in 0..2 {
                let i = r + q.g + 8 * half as u32;
                d[half] = quad_dot(&load8(a.dout, i, w.n_rows, &q), &load8(a.out, i, w.n_rows, &q));
                if i < w.n_rows {
                    let s = ptx::ld_nc_v2_f32(a.stats.add(2 * i as usize));
                    ml[half] = (s[0], if s[1] > 0.0 { 1.0 / s[1] } else { 0.0 });
                }
            }
            let mut acc = [[0f32; 4]; 4];
            steps::<_, 4>(w, b0, b1, &q, |id| neighbour_block(a.n16, a.inv_norm, id, &q), |ids, blk| {
                crate::unroll4!(u => {
                    let cos = scores(&sa, &blk[u].sb);
                    // dout_i . n_j, times norm_j below: dalpha = dout_i . h_j.
                    let gn = scores(&sg, &blk[u].sb);
                    let norm = [ptx::rcp_approx(blk[u].inv[0]), ptx::rcp_approx(blk[u].inv[1])];
                    let mut ds = [0f32; 4];
                    for v in 0..4 {
                        let (m, rl) = ml[v / 2];
                        let e = ptx::exp(beta * cos[v] - m) * rl * ptx::fma_f32(gn[v], norm[v & 1], -d[v / 2]);
                        ds[v] = if ids[u].edge(v, q.t) { e } else { 0.0 };
                        dbeta_part = ptx::fma_f32(ds[v], cos[v], dbeta_part);
                    }
                    add_rows(&mut acc, ds, &blk[u].pr);
                });
            });
            for half in 0..2 {
                let i = r + q.g + 8 * half as u32;
                if window_row(w, i) {
                    store8(a.dn, i, &q, row_of(&acc, 2 * half).map(|v| v * beta));
                    if q.t == 0 {
                        ptx::st_f32(a.d_row.add(i as usize), d[half]);
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

/// What a column-pass block brings: sources i's n and dout (scores' B fragments and products'
/// pairs), and for sources 2t and 2t + 1 their softmax (max, sum) and D.
#[derive(Clone, Copy, Default)]
struct SourceBlock {
    sb_n: [u32; 4],
    sb_d: [u32; 4],
    pr_n: [[u32; 2]; 2],
    pr_d: [[u32; 2]; 2],
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
        windows(w, |r, b0, b1| {
            let sa = score_a(a.n16, r + q.g, w.n_rows, &q);
            // norm_j of rows g and g + 8 (dalpha_ij = dout_i . h_j = norm_j dout_i . n_j).
            let mut norm = [0f32; 2];
            for half in 0..2 {
                let j = r + q.g + 8 * half as u32;
                if j < w.n_rows {
                    norm[half] = ptx::rcp_approx(ptx::ld_nc_f32(a.inv_norm.add(j as usize)));
                }
            }
            let (mut acc_dn, mut acc_dh) = ([[0f32; 4]; 4], [[0f32; 4]; 4]);
            steps::<_, 2>(
                w,
                b0,
                b1,
                &q,
                |id| SourceBlock {
                    sb_n: score_b(a.n16, id.jg, &q),
                    sb_d: score_b(a.dout16, id.jg, &q),
                    pr_n: pairs(a.n16, id.j0, id.j1, &q),
                    pr_d: pairs(a.dout16, id.j0, id.j1, &q),
                    ml: [ptx::ld_nc_v2_f32(a.stats.add(2 * id.j0 as usize)), ptx::ld_nc_v2_f32(a.stats.add(2 * id.j1 as usize))],
                    d: [ptx::ld_nc_f32(a.d_row.add(id.j0 as usize)), ptx::ld_nc_f32(a.d_row.add(id.j1 as usize))],
                },
                |ids, blk| {
                    crate::unroll2!(u => {
                        let cos = scores(&sa, &blk[u].sb_n);
                        let gn = scores(&sa, &blk[u].sb_d);
                        let (mut al, mut ds) = ([0f32; 4], [0f32; 4]);
                        for v in 0..4 {
                            let (ml, di) = (blk[u].ml[v & 1], blk[u].d[v & 1]);
                            let e = ptx::exp(beta * cos[v] - ml[0]) * ptx::rcp_approx(ml[1]);
                            al[v] = if ids[u].edge(v, q.t) { e } else { 0.0 };
                            ds[v] = al[v] * ptx::fma_f32(gn[v], norm[v / 2], -di);
                        }
                        add_rows(&mut acc_dn, ds, &blk[u].pr_n);
                        add_rows(&mut acc_dh, al, &blk[u].pr_d);
                    });
                },
            );
            // dn_j in full, then dh_j = acc_dh + (dn_j - n_j (n_j . dn_j)) inv_j; the dot's
            // shuffles before the branch.
            for half in 0..2 {
                let j = r + q.g + 8 * half as u32;
                let (nj, part) = (load8(a.n, j, w.n_rows, &q), load8(a.dn, j, w.n_rows, &q));
                let acc = row_of(&acc_dn, 2 * half);
                let mut dn = [0f32; 8];
                for k in 0..8 {
                    dn[k] = ptx::fma_f32(beta, acc[k], part[k]);
                }
                let nd = quad_dot(&nj, &dn);
                if window_row(w, j) {
                    let inv = ptx::ld_nc_f32(a.inv_norm.add(j as usize));
                    let dh = row_of(&acc_dh, 2 * half);
                    let mut out = [0f32; 8];
                    for k in 0..8 {
                        out[k] = ptx::fma_f32(dn[k] - nj[k] * nd, inv, dh[k]);
                    }
                    store8(a.dh, j, &q, out);
                }
            }
        })
    }
}
