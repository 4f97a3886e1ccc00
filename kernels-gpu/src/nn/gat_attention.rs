//! Fused multi-head GAT attention on CUDA cores: per layer, the edge logits, the per-head edge
//! softmax, attention dropout and the aggregation of every head in one pass over each row's
//! edges (forward), and the backward in two passes. No per-edge value is stored: the forward
//! keeps per row and head the softmax's (max, sum); the backward recomputes alpha from them and
//! regenerates the dropout mask from the counter RNG.
//!
//! Lanes: a warp takes one row; its lanes split into groups of `G = 1 << shift >= dim` lanes,
//! one head per group (lane `sub` of a group holds column `sub` of its head's `dim`), and `C`
//! chunks of `32 / G` heads each cover all heads. Loops are uniform over the warp, so every
//! lane reaches every shuffle.
//!
//! Maths, per head h (dropping h): z_ij = s_dst_i + s_src_j, e = LeakyReLU(z), alpha =
//! softmax_j(e), alpha' = alpha m_ij / (1 - p), out_i = sum_j alpha'_ij Wh_j + b. Backward with
//! dout: da'_ij = dout_i . Wh_j, da = da' m / (1 - p), D_i = sum_j alpha_ij da_ij, dz_ij =
//! alpha_ij (da_ij - D_i) lk'_ij (lk' = 1 for z > 0, else the slope); ds_dst_i = sum_j dz_ij =
//! A_i - D_i B_i with A = sum alpha da lk', B = sum alpha lk' (one pass over the row: the row
//! pass, which also writes D); ds_src_j = sum_i dz_ij and dWh_j = sum_i alpha'_ij dout_i run
//! over the in-edges of j (the column pass walks Sᵀ and recomputes alpha, da and dz there with
//! the source rows' statistics and D): D_i is a reduction over all of row i, hence two passes.

use super::global_warp;
use crate::abi::gat_attention::GatAttentionArgs;
use crate::ptx;
use crate::rng::dropout_keep_keyed;

/// This lane's place: its head in chunk k is `k * per_chunk + grp`, its column in that head `sub`.
#[derive(Clone, Copy)]
struct HeadLanes {
    sub: u32,
    grp: u32,
    per_chunk: u32,
    lanes: u32,
}

impl HeadLanes {
    #[inline(always)]
    fn new(a: &GatAttentionArgs) -> Self {
        let lane = ptx::lane_id();
        HeadLanes { sub: lane & ((1 << a.shift) - 1), grp: lane >> a.shift, per_chunk: 32 >> a.shift, lanes: 1 << a.shift }
    }
    /// Head of chunk k, if it exists.
    #[inline(always)]
    fn head(&self, a: &GatAttentionArgs, k: usize) -> Option<u32> {
        let h = k as u32 * self.per_chunk + self.grp;
        (h < a.heads).then_some(h)
    }
    /// Column of chunk k in an n x (heads dim) matrix, if this lane holds one.
    #[inline(always)]
    fn col(&self, a: &GatAttentionArgs, k: usize) -> Option<u32> {
        self.head(a, k).filter(|_| self.sub < a.dim).map(|h| h * a.dim + self.sub)
    }
}

/// Sum over this lane's head group (every lane of the warp calls it).
#[inline(always)]
fn head_sum(mut v: f32, lanes: u32) -> f32 {
    let mut m = lanes >> 1;
    while m > 0 {
        v += ptx::shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

#[inline(always)]
unsafe fn at(p: *const f32, row: u32, ld: u32, col: u32) -> f32 {
    unsafe { ptx::ld_nc_f32(p.add(row as usize * ld as usize + col as usize)) }
}

/// The dropout factor of edge `e`, head `h`: `keep_scale` if kept, else 0 (1 without dropout).
#[inline(always)]
fn keep(a: &GatAttentionArgs, step: u32, e: u32, h: u32) -> f32 {
    if a.threshold == 0 {
        return 1.0;
    }
    let index = (a.first_edge + e as u64) * a.heads as u64 + h as u64;
    if dropout_keep_keyed(a.seed_key, step, index, a.threshold) { a.keep_scale } else { 0.0 }
}

/// LeakyReLU and its derivative at z.
#[inline(always)]
fn leaky(z: f32, slope: f32) -> (f32, f32) {
    if z > 0.0 { (z, 1.0) } else { (z * slope, slope) }
}

/// The forward: out (the heads' columns) and stats ((0, 0) and out = bias for an empty row).
#[inline(always)]
pub unsafe fn forward<const C: usize>(a: GatAttentionArgs) {
    let ln = HeadLanes::new(&a);
    let step = if a.threshold == 0 { 0 } else { unsafe { *a.step } };
    let (mut i, warps) = global_warp();
    while i < a.n_rows {
        let (start, end) = unsafe { (*a.row_ptr.add(i as usize), *a.row_ptr.add(i as usize + 1)) };
        let mut sd = [0f32; C];
        let mut m = [f32::NEG_INFINITY; C];
        let mut l = [0f32; C];
        let mut acc = [0f32; C];
        for k in 0..C {
            if let Some(h) = ln.head(&a, k) {
                sd[k] = unsafe { at(a.s_dst, i, a.hld, h) };
            }
        }
        let mut e = start;
        while e < end {
            let j = unsafe { ptx::ld_nc_u32(a.col_idx.add(e as usize)) };
            for k in 0..C {
                if let Some(h) = ln.head(&a, k) {
                    let (lg, _) = leaky(sd[k] + unsafe { at(a.s_src, j, a.hld, h) }, a.slope);
                    let new_m = if lg > m[k] { lg } else { m[k] };
                    let scale = ptx::exp(m[k] - new_m);
                    let p = ptx::exp(lg - new_m);
                    l[k] = l[k] * scale + p;
                    let w = p * keep(&a, step, e, h);
                    let x = match ln.col(&a, k) {
                        Some(c) => unsafe { at(a.wh, j, a.ld, c) },
                        None => 0.0,
                    };
                    acc[k] = acc[k] * scale + w * x;
                    m[k] = new_m;
                }
            }
            e += 1;
        }
        for k in 0..C {
            if let Some(c) = ln.col(&a, k) {
                let v = if l[k] > 0.0 { acc[k] / l[k] } else { 0.0 };
                unsafe { ptx::st_f32(a.out.add(i as usize * a.ld as usize + c as usize), v + ptx::ld_nc_f32(a.bias.add(c as usize))) };
            }
            if let Some(h) = ln.head(&a, k).filter(|_| ln.sub == 0) {
                let s = unsafe { a.stats.add(i as usize * a.sld as usize + 2 * h as usize) };
                let empty = start == end;
                unsafe {
                    ptx::st_f32(s, if empty { 0.0 } else { m[k] });
                    ptx::st_f32(s.add(1), if empty { 0.0 } else { l[k] });
                }
            }
        }
        i += warps;
    }
}

/// alpha_ijh of an edge from the row's statistics (max, sum), and LeakyReLU' there.
#[inline(always)]
unsafe fn alpha(a: &GatAttentionArgs, i: u32, h: u32, z: f32) -> (f32, f32) {
    let s = unsafe { a.stats.add(i as usize * a.sld as usize + 2 * h as usize) } as *const f32;
    let (m, l) = unsafe { (ptx::ld_nc_f32(s), ptx::ld_nc_f32(s.add(1))) };
    let (lg, d) = leaky(z, a.slope);
    (ptx::exp(lg - m) / l, d)
}

/// The row pass: D_i and ds_dst_i per head.
#[inline(always)]
pub unsafe fn row_grad<const C: usize>(a: GatAttentionArgs) {
    let ln = HeadLanes::new(&a);
    let step = if a.threshold == 0 { 0 } else { unsafe { *a.step } };
    let (mut i, warps) = global_warp();
    while i < a.n_rows {
        let (start, end) = unsafe { (*a.row_ptr.add(i as usize), *a.row_ptr.add(i as usize + 1)) };
        let mut sd = [0f32; C];
        let mut g = [0f32; C];
        let (mut d, mut sa, mut sb) = ([0f32; C], [0f32; C], [0f32; C]);
        for k in 0..C {
            if let Some(h) = ln.head(&a, k) {
                sd[k] = unsafe { at(a.s_dst, i, a.hld, h) };
            }
            if let Some(c) = ln.col(&a, k) {
                g[k] = unsafe { at(a.dout, i, a.ld, c) };
            }
        }
        let mut e = start;
        while e < end {
            let j = unsafe { ptx::ld_nc_u32(a.col_idx.add(e as usize)) };
            for k in 0..C {
                let x = match ln.col(&a, k) {
                    Some(c) => unsafe { at(a.wh, j, a.ld, c) },
                    None => 0.0,
                };
                let da_p = head_sum(g[k] * x, ln.lanes);
                if let Some(h) = ln.head(&a, k) {
                    let (al, lk) = unsafe { alpha(&a, i, h, sd[k] + at(a.s_src, j, a.hld, h)) };
                    let da = da_p * keep(&a, step, e, h);
                    d[k] += al * da;
                    sa[k] += al * da * lk;
                    sb[k] += al * lk;
                }
            }
            e += 1;
        }
        for k in 0..C {
            if let Some(h) = ln.head(&a, k).filter(|_| ln.sub == 0) {
                let o = i as usize * a.hld as usize + h as usize;
                unsafe {
                    ptx::st_f32(a.d_row.add(o), d[k]);
                    ptx::st_f32(a.ds_dst.add(o), sa[k] - d[k] * sb[k]);
                }
            }
        }
        i += warps;
    }
}

/// The column pass: per node j over its in-edges (rows of Sᵀ), ds_src_j and dWh_j.
#[inline(always)]
pub unsafe fn col_grad<const C: usize>(a: GatAttentionArgs) {
    let ln = HeadLanes::new(&a);
    let step = if a.threshold == 0 { 0 } else { unsafe { *a.step } };
    let (mut j, warps) = global_warp();
    while j < a.n_rows {
        let (start, end) = unsafe { (*a.t_ptr.add(j as usize), *a.t_ptr.add(j as usize + 1)) };
        let mut ss = [0f32; C];
        let mut w = [0f32; C];
        let (mut dsrc, mut dw) = ([0f32; C], [0f32; C]);
        for k in 0..C {
            if let Some(h) = ln.head(&a, k) {
                ss[k] = unsafe { at(a.s_src, j, a.hld, h) };
            }
            if let Some(c) = ln.col(&a, k) {
                w[k] = unsafe { at(a.wh, j, a.ld, c) };
            }
        }
        let mut q = start;
        while q < end {
            let (i, e) = unsafe { (ptx::ld_nc_u32(a.t_cols.add(q as usize)), ptx::ld_nc_u32(a.t_of.add(q as usize))) };
            for k in 0..C {
                let g = match ln.col(&a, k) {
                    Some(c) => unsafe { at(a.dout, i, a.ld, c) },
                    None => 0.0,
                };
                let da_p = head_sum(g * w[k], ln.lanes);
                if let Some(h) = ln.head(&a, k) {
                    let (al, lk) = unsafe { alpha(&a, i, h, at(a.s_dst, i, a.hld, h) + ss[k]) };
                    let mk = keep(&a, step, e, h);
                    let di = unsafe { ptx::ld_nc_f32(a.d_row.add(i as usize * a.hld as usize + h as usize)) };
                    dsrc[k] += al * (da_p * mk - di) * lk;
                    dw[k] += al * mk * g;
                }
            }
            q += 1;
        }
        for k in 0..C {
            if let Some(c) = ln.col(&a, k) {
                unsafe { ptx::st_f32(a.dwh.add(j as usize * a.ld as usize + c as usize), dw[k]) };
            }
            if let Some(h) = ln.head(&a, k).filter(|_| ln.sub == 0) {
                unsafe { ptx::st_f32(a.ds_src.add(j as usize * a.hld as usize + h as usize), dsrc[k]) };
            }
        }
        j += warps;
    }
}
