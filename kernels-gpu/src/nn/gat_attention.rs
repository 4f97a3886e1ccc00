//! Fused multi-head GAT attention on CUDA cores: per layer, the edge logits, the per-head edge
//! softmax, attention dropout and the aggregation of every head in one pass over each row's
//! edges (forward), and the backward in two kernels. No per-edge value is stored: the forward
//! keeps per row and head the softmax's (max, sum); the backward recomputes alpha from them and
//! regenerates the dropout mask from the counter RNG.
//!
//! Lanes: a warp takes one row; its lanes split into groups of `G = 1 << shift >= dim` lanes,
//! one head per group (lane `sub` of a group holds column `sub` of its head's `dim`), and `C`
//! chunks of `32 / G` heads each cover all heads. A row's column ids are read 32 at a time (one
//! coalesced load, then broadcast), and the neighbour data of `U` edges is gathered before any
//! of it is used, so `U` gathers are in flight (`walk`). Rows of at least `long_min` edges are
//! skipped by the warp launch and taken by a second launch, a block per listed row: its warps
//! split the row's edges into contiguous runs and meet in shared memory (a fixed order:
//! deterministic). Loops are uniform over the warp (block), so every lane reaches every shuffle
//! and barrier.
//!
//! Maths, per head h (dropping h): z_ij = s_dst_i + s_src_j, e = LeakyReLU(z), alpha =
//! softmax_j(e), alpha' = alpha m_ij / (1 - p), out_i = sum_j alpha'_ij Wh_j + b. Backward with
//! dout: da'_ij = dout_i . Wh_j, da = da' m / (1 - p), D_i = sum_j alpha_ij da_ij, dz_ij =
//! alpha_ij (da_ij - D_i) lk'_ij (lk' = 1 for z > 0, else the slope). The row pass walks row i
//! twice: D_i first, then ds_dst_i = sum_j dz_ij (subtracting D per edge, as the unfused path,
//! rather than sum alpha da lk' - D sum alpha lk', which cancels badly on hub rows in tf32). The
//! column pass walks Sᵀ: ds_src_j = sum_i dz_ij and dWh_j = sum_i alpha'_ij dout_i, recomputing
//! alpha, da and dz there from the source rows' statistics and D: D_i is a reduction over all of
//! row i, hence two kernels.

use super::global_warp;
use crate::abi::gat_attention::GatAttentionArgs;
use crate::ptx;
use crate::rng::dropout_keep_keyed;

/// Edges whose neighbour data is gathered together.
const U: usize = 4;

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

/// Per chunk: `f(head, column)` where this lane holds them (0 elsewhere).
#[inline(always)]
fn per_chunk<const C: usize>(a: &GatAttentionArgs, ln: &HeadLanes, f: impl Fn(u32, Option<u32>) -> f32) -> [f32; C] {
    core::array::from_fn(|k| match ln.head(a, k) {
        Some(h) => f(h, ln.col(a, k)),
        None => 0.0,
    })
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

/// Entries [lo, hi) of a pattern row: `cols[q]` the neighbour, `ofs[q]` the edge's index in S
/// (null: q itself). Column ids come 32 at a time; `load(neighbour)` runs for `U` entries before
/// `use_(edge, neighbour, loaded)` runs for each in order. Uniform over the warp.
#[inline(always)]
unsafe fn walk<L: Copy>(cols: *const u32, ofs: *const u32, lo: u32, hi: u32, mut load: impl FnMut(u32) -> L, mut use_: impl FnMut(u32, u32, L)) {
    let lane = ptx::lane_id();
    let mut base = lo;
    while base < hi {
        let n = if hi - base < 32 { hi - base } else { 32 };
        let (my_j, my_e) = if lane < n {
            let q = (base + lane) as usize;
            unsafe { (ptx::ld_nc_u32(cols.add(q)), if ofs.is_null() { base + lane } else { ptx::ld_nc_u32(ofs.add(q)) }) }
        } else {
            (0, 0)
        };
        let mut t = 0;
        while t < n {
            let js: [u32; U] = core::array::from_fn(|u| ptx::shfl_idx_u32(my_j, (t + u as u32) & 31));
            let es: [u32; U] = core::array::from_fn(|u| ptx::shfl_idx_u32(my_e, (t + u as u32) & 31));
            let loaded: [L; U] = core::array::from_fn(|u| load(js[u]));
            for u in 0..U {
                if t + (u as u32) < n {
                    use_(es[u], js[u], loaded[u]);
                }
            }
            t += U as u32;
        }
        base += 32;
    }
}

/// The rows this launch takes and, per row, the run of its entries this warp walks: the warp
/// launch takes rows shorter than `long_min` whole, a warp per row; the block launch a listed
/// row per block, each warp a contiguous run. `f(row, lo, hi, warp)`; returns nothing: block
/// kernels sync inside `f`.
#[inline(always)]
unsafe fn rows(a: &GatAttentionArgs, row_ptr: *const u32, mut f: impl FnMut(u32, u32, u32, u32, bool)) {
    if a.long_rows.is_null() {
        let (mut i, warps) = global_warp();
        while i < a.n_rows {
            let (start, end) = unsafe { (*row_ptr.add(i as usize), *row_ptr.add(i as usize + 1)) };
            if end - start < a.long_min {
                f(i, start, end, 0, false);
            }
            i += warps;
        }
    } else {
        let i = unsafe { *a.long_rows.add(ptx::ctaid_x() as usize) };
        let (start, end) = unsafe { (*row_ptr.add(i as usize), *row_ptr.add(i as usize + 1)) };
        let warps = ptx::ntid_x() / 32;
        let w = ptx::warp_id();
        // (`div_or_zero`: no panic path in the PTX; a block has at least one warp.)
        let run = crate::translate::div_or_zero(end - start + warps - 1, warps);
        let lo = start + (w * run).min(end - start);
        let hi = start + ((w + 1) * run).min(end - start);
        f(i, lo, hi, w, true);
    }
}

/// Shared-memory slot of (warp, chunk, lane, field) for `fields` values per lane.
#[inline(always)]
fn slot<const C: usize>(w: u32, k: usize, field: u32, fields: u32) -> u32 {
    ptx::dyn_smem_base() + 4 * (((w * C as u32 + k as u32) * 32 + ptx::lane_id()) * fields + field)
}

/// This warp's per-lane values into shared memory, a barrier, then the sum over the block's
/// warps in warp order (every warp gets it).
#[inline(always)]
unsafe fn block_sum<const C: usize, const F: usize>(v: [[f32; C]; F]) -> [[f32; C]; F] {
    let w = ptx::warp_id();
    for (f, vf) in v.iter().enumerate() {
        for (k, x) in vf.iter().enumerate() {
            unsafe { ptx::st_shared_f32(slot::<C>(w, k, f as u32, F as u32), *x) };
        }
    }
    ptx::sync_threads();
    let mut out = [[0f32; C]; F];
    for src in 0..ptx::ntid_x() / 32 {
        for (f, of) in out.iter_mut().enumerate() {
            for (k, o) in of.iter_mut().enumerate() {
                *o += unsafe { ptx::ld_shared_f32(slot::<C>(src, k, f as u32, F as u32)) };
            }
        }
    }
    ptx::sync_threads();
    out
}

/// The forward: out (the heads' columns) and stats ((0, 0) and out = bias for an empty row).
#[inline(always)]
pub unsafe fn forward<const C: usize>(a: GatAttentionArgs) {
    let ln = HeadLanes::new(&a);
    let step = if a.threshold == 0 { 0 } else { unsafe { *a.step } };
    unsafe {
        rows(&a, a.row_ptr, |i, lo, hi, w, block| {
            let sd: [f32; C] = per_chunk(&a, &ln, |h, _| at(a.s_dst, i, a.hld, h));
            let (mut m, mut l, mut acc) = ([f32::NEG_INFINITY; C], [0f32; C], [0f32; C]);
            walk(
                a.col_idx,
                core::ptr::null(),
                lo,
                hi,
                |j| -> ([f32; C], [f32; C]) {
                    (per_chunk(&a, &ln, |h, _| at(a.s_src, j, a.hld, h)), per_chunk(&a, &ln, |_, c| c.map_or(0.0, |c| at(a.wh, j, a.ld, c))))
                },
                |e, _, (ss, x)| {
                    for k in 0..C {
                        if let Some(h) = ln.head(&a, k) {
                            let (lg, _) = leaky(sd[k] + ss[k], a.slope);
                            let new_m = if lg > m[k] { lg } else { m[k] };
                            let scale = ptx::exp(m[k] - new_m);
                            let p = ptx::exp(lg - new_m);
                            l[k] = l[k] * scale + p;
                            acc[k] = acc[k] * scale + p * keep(&a, step, e, h) * x[k];
                            m[k] = new_m;
                        }
                    }
                },
            );
            if block {
                // Each warp's state, then warp 0 merges them in warp order.
                for k in 0..C {
                    ptx::st_shared_f32(slot::<C>(w, k, 0, 3), m[k]);
                    ptx::st_shared_f32(slot::<C>(w, k, 1, 3), l[k]);
                    ptx::st_shared_f32(slot::<C>(w, k, 2, 3), acc[k]);
                }
                ptx::sync_threads();
                if w == 0 {
                    for src in 1..ptx::ntid_x() / 32 {
                        for k in 0..C {
                            let (m2, l2, a2) = (ptx::ld_shared_f32(slot::<C>(src, k, 0, 3)), ptx::ld_shared_f32(slot::<C>(src, k, 1, 3)), ptx::ld_shared_f32(slot::<C>(src, k, 2, 3)));
                            let new_m = if m2 > m[k] { m2 } else { m[k] };
                            if new_m != f32::NEG_INFINITY {
                                let (s1, s2) = (ptx::exp(m[k] - new_m), ptx::exp(m2 - new_m));
                                l[k] = l[k] * s1 + l2 * s2;
                                acc[k] = acc[k] * s1 + a2 * s2;
                                m[k] = new_m;
                            }
                        }
                    }
                }
                if w != 0 {
                    return;
                }
            }
            let empty = !block && lo == hi;
            for k in 0..C {
                if let Some(c) = ln.col(&a, k) {
                    let v = if l[k] > 0.0 { acc[k] / l[k] } else { 0.0 };
                    ptx::st_f32(a.out.add(i as usize * a.ld as usize + c as usize), v + ptx::ld_nc_f32(a.bias.add(c as usize)));
                }
                if let Some(h) = ln.head(&a, k).filter(|_| ln.sub == 0) {
                    let s = a.stats.add(i as usize * a.sld as usize + 2 * h as usize);
                    ptx::st_f32(s, if empty { 0.0 } else { m[k] });
                    ptx::st_f32(s.add(1), if empty { 0.0 } else { l[k] });
                }
            }
        })
    }
}

/// alpha_ijh of an edge from the source row's statistics (max, sum), and LeakyReLU' there.
#[inline(always)]
fn alpha(a: &GatAttentionArgs, stat: (f32, f32), z: f32) -> (f32, f32) {
    let (lg, d) = leaky(z, a.slope);
    (ptx::exp(lg - stat.0) / stat.1, d)
}

#[inline(always)]
unsafe fn stat(a: &GatAttentionArgs, i: u32, h: u32) -> (f32, f32) {
    let s = unsafe { (a.stats as *const f32).add(i as usize * a.sld as usize + 2 * h as usize) };
    unsafe { (ptx::ld_nc_f32(s), ptx::ld_nc_f32(s.add(1))) }
}

/// The row pass: D_i, then ds_dst_i per head (two walks of the row).
#[inline(always)]
pub unsafe fn row_grad<const C: usize>(a: GatAttentionArgs) {
    let ln = HeadLanes::new(&a);
    let step = if a.threshold == 0 { 0 } else { unsafe { *a.step } };
    unsafe {
        rows(&a, a.row_ptr, |i, lo, hi, w, block| {
            let sd: [f32; C] = per_chunk(&a, &ln, |h, _| at(a.s_dst, i, a.hld, h));
            let st: [(f32, f32); C] = core::array::from_fn(|k| ln.head(&a, k).map_or((0.0, 1.0), |h| stat(&a, i, h)));
            let g: [f32; C] = per_chunk(&a, &ln, |_, c| c.map_or(0.0, |c| at(a.dout, i, a.ld, c)));
            let load = |j: u32| -> ([f32; C], [f32; C]) {
                (per_chunk(&a, &ln, |h, _| at(a.s_src, j, a.hld, h)), per_chunk(&a, &ln, |_, c| c.map_or(0.0, |c| at(a.wh, j, a.ld, c))))
            };
            // alpha, LeakyReLU' and da of an edge, per chunk.
            let edge = |e: u32, ss: [f32; C], x: [f32; C]| -> [(f32, f32, f32); C] {
                core::array::from_fn(|k| {
                    let da_p = head_sum(g[k] * x[k], ln.lanes);
                    match ln.head(&a, k) {
                        Some(h) => {
                            let (al, lk) = alpha(&a, st[k], sd[k] + ss[k]);
                            (al, lk, da_p * keep(&a, step, e, h))
                        }
                        None => (0.0, 0.0, 0.0),
                    }
                })
            };
            let mut d = [0f32; C];
            walk(a.col_idx, core::ptr::null(), lo, hi, load, |e, _, (ss, x)| {
                for (k, (al, _, da)) in edge(e, ss, x).into_iter().enumerate() {
                    d[k] += al * da;
                }
            });
            if block {
                d = block_sum::<C, 1>([d])[0];
            }
            let mut ds = [0f32; C];
            walk(a.col_idx, core::ptr::null(), lo, hi, load, |e, _, (ss, x)| {
                for (k, (al, lk, da)) in edge(e, ss, x).into_iter().enumerate() {
                    ds[k] += al * (da - d[k]) * lk;
                }
            });
            if block {
                ds = block_sum::<C, 1>([ds])[0];
                if w != 0 {
                    return;
                }
            }
            for k in 0..C {
                if let Some(h) = ln.head(&a, k).filter(|_| ln.sub == 0) {
                    let o = i as usize * a.hld as usize + h as usize;
                    ptx::st_f32(a.d_row.add(o), d[k]);
                    ptx::st_f32(a.ds_dst.add(o), ds[k]);
                }
            }
        })
    }
}

/// The column pass: per node j over its in-edges (rows of Sᵀ), ds_src_j and dWh_j.
#[inline(always)]
pub unsafe fn col_grad<const C: usize>(a: GatAttentionArgs) {
    let ln = HeadLanes::new(&a);
    let step = if a.threshold == 0 { 0 } else { unsafe { *a.step } };
    unsafe {
        rows(&a, a.t_ptr, |j, lo, hi, w, block| {
            let ss: [f32; C] = per_chunk(&a, &ln, |h, _| at(a.s_src, j, a.hld, h));
            let x: [f32; C] = per_chunk(&a, &ln, |_, c| c.map_or(0.0, |c| at(a.wh, j, a.ld, c)));
            let (mut dsrc, mut dw) = ([0f32; C], [0f32; C]);
            walk(
                a.t_cols,
                a.t_of,
                lo,
                hi,
                |i| -> ([f32; C], [(f32, f32); C], [f32; C], [f32; C]) {
                    let sd = per_chunk(&a, &ln, |h, _| at(a.s_dst, i, a.hld, h));
                    let st = core::array::from_fn(|k| ln.head(&a, k).map_or((0.0, 1.0), |h| stat(&a, i, h)));
                    let di = per_chunk(&a, &ln, |h, _| ptx::ld_nc_f32(a.d_row.add(i as usize * a.hld as usize + h as usize)));
                    let g = per_chunk(&a, &ln, |_, c| c.map_or(0.0, |c| at(a.dout, i, a.ld, c)));
                    (sd, st, di, g)
                },
                |e, _, (sd, st, di, g)| {
                    for k in 0..C {
                        let da_p = head_sum(g[k] * x[k], ln.lanes);
                        if let Some(h) = ln.head(&a, k) {
                            let (al, lk) = alpha(&a, st[k], sd[k] + ss[k]);
                            let mk = keep(&a, step, e, h);
                            dsrc[k] += al * (da_p * mk - di[k]) * lk;
                            dw[k] += al * mk * g[k];
                        }
                    }
                },
            );
            if block {
                [dsrc, dw] = block_sum::<C, 2>([dsrc, dw]);
                if w != 0 {
                    return;
                }
            }
            for k in 0..C {
                if let Some(c) = ln.col(&a, k) {
                    ptx::st_f32(a.dwh.add(j as usize * a.ld as usize + c as usize), dw[k]);
                }
                if let Some(h) = ln.head(&a, k).filter(|_| ln.sub == 0) {
                    ptx::st_f32(a.ds_src.add(j as usize * a.hld as usize + h as usize), dsrc[k]);
                }
            }
        })
    }
}
