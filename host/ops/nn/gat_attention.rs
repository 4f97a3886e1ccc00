//! Fused multi-head GAT attention: one op for a layer's edge logits, per-head edge softmax,
//! attention dropout, aggregation of every head and bias (forward), and one for its backward
//! (the gradients of Wh and of both per-node scores), with no per-edge array: the forward keeps
//! per row and head the softmax's (max, sum), the backward recomputes alpha from them and
//! regenerates the dropout mask from the counter RNG (`rng.rs`, shared with the CPU: both draw
//! the same mask). The maths and the two passes of the backward are in
//! `kernels-gpu/src/nn/gat_attention.rs`; this file holds the CPU reference (generic over
//! f32 / f64, the same passes) and the launchers.
//!
//! The unfused path (per head: edge logits, edge softmax, dropout, SpMM, and their backward,
//! `GatConv::new_unfused`, `--variant`) stays as the check: equal at p = 0.

use half::f16;
use rayon::prelude::*;

use super::row_split::RowRange;
use super::{DeviceElem, check_gpu, check_matrix_64, row_split};
use crate::error::{Error, Result};
use crate::gpu::abi::gat_attention::{
    GatAttentionArgs, gat_attention_col_grad_d8, gat_attention_col_grad_d16, gat_attention_col_grad_d32, gat_attention_forward_d8,
    gat_attention_forward_d8_h16, gat_attention_forward_d8_one_head, gat_attention_forward_d16, gat_attention_forward_d32,
    gat_attention_row_grad_d8, gat_attention_row_grad_d16, gat_attention_row_grad_d32,
};
use crate::gpu::launch::{Kernel, Ptr, PtrMut};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::graph::Csr;
use crate::ops::ValueOrder;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::nn::dropout_gemm::DropoutGemmOp;
use crate::shared::rng::{dropout_keep_keyed, dropout_seed_key, dropout_threshold};
use crate::util::Real;

/// One layer's attention as the fused op takes it.
pub struct GatAttention<'a, I: ?Sized = [u32]> {
    pub heads: usize,
    /// Columns per head.
    pub dim: usize,
    /// LeakyReLU's negative slope.
    pub slope: f32,
    /// Attention dropout (0: none, as in evaluation) and the seed of its masks.
    pub p: f32,
    pub seed: u64,
    /// Added to every edge's mask index.
    pub first_edge: u64,
    /// The edges' original indices in the whole graph (a part of a partitioned graph: edge e is
    /// keyed `first_edge + edge_ids[e]`, so any partition draws the one-device masks); `None`:
    /// `first_edge + e`.
    pub edge_ids: Option<&'a I>,
    /// The rows a call covers (all: `None`; a part's overlapped step runs the op in row blocks
    /// around its halo exchange, [`crate::nn::halo_hook::RowSplit`]): forward, the rows of S
    /// whose output and statistics are written (the others' left as they are); backward, the
    /// row pass's rows of S (D, ds_dst). Each row is computed as in a whole call.
    pub rows: RowRange,
    /// Backward: the column pass's rows of Sᵀ, the nodes whose dWh and ds_src rows are written.
    pub cols: RowRange,
}

impl<I: ?Sized> Clone for GatAttention<'_, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I: ?Sized> Copy for GatAttention<'_, I> {}

impl<'a> GatAttention<'a, Vec<u32>> {
    /// The CPU backend's attention as the CPU references take it.
    pub fn host(&self) -> GatAttention<'a, [u32]> {
        let GatAttention { heads, dim, slope, p, seed, first_edge, edge_ids, rows, cols } = *self;
        GatAttention { heads, dim, slope, p, seed, first_edge, edge_ids: edge_ids.map(|v| v.as_slice()), rows, cols }
    }
}

impl GatAttention<'_> {
    /// Whether the fused kernels take `heads` heads of `dim` columns (at most 32 of each: a
    /// lane per head, the head's columns in its registers); else the layer runs unfused.
    pub fn fits(heads: usize, dim: usize) -> bool {
        (1..=32).contains(&heads) && (1..=32).contains(&dim)
    }
}

/// What the forward reads: Wh (n x H F), the per-node scores (n x H each) and the bias (H F
/// values).
pub struct Inputs<'a, M: ?Sized> {
    pub wh: &'a M,
    pub s_src: &'a M,
    pub s_dst: &'a M,
    pub bias: &'a M,
}

// By hand: references copy whatever M is (a derive would ask M: Copy).
impl<M: ?Sized> Clone for Inputs<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: ?Sized> Copy for Inputs<'_, M> {}

/// What the backward reads: the forward's Wh, scores and softmax statistics, and dout; and,
/// optionally, the attention vectors (a_src, a_dst), each 1 x H F: given, dWh also gets the
/// per-node scores' part ds_src ⊗ a_src + ds_dst ⊗ a_dst (the column pass adds it as it writes
/// dWh, so the scores' backward need not read and write dWh again).
pub struct GradInputs<'a, M: ?Sized> {
    pub wh: &'a M,
    pub s_src: &'a M,
    pub s_dst: &'a M,
    pub stats: &'a M,
    pub dout: &'a M,
    pub att: Option<(&'a M, &'a M)>,
}

/// What the backward writes (each overwritten): D per row and head (`d_row`, n x H, the row
/// pass's scratch), the gradients of both per-node scores (n x H each) and of Wh (n x H F).
pub struct GradOutputs<'a, M: ?Sized> {
    pub d_row: &'a mut M,
    pub ds_dst: &'a mut M,
    pub ds_src: &'a mut M,
    pub dwh: &'a mut M,
}

// References only: copied whatever M is (a derive would ask M: Copy).
impl<M: ?Sized> Clone for GradInputs<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: ?Sized> Copy for GradInputs<'_, M> {}

/// Whether `range` covers row `r`.
fn covers(range: RowRange, r: usize) -> bool {
    range.is_none_or(|(lo, hi)| (lo..hi).contains(&r))
}

fn leaky<T: Real>(z: T, slope: T) -> (T, T) {
    if z > T::zero() { (z, T::one()) } else { (z * slope, slope) }
}

/// The dropout factor of edge `e`, head `h` (1 without dropout).
fn keep<T: Real>(a: &GatAttention<'_>, step: u32, e: usize, h: usize) -> T {
    if a.p <= 0.0 {
        return T::one();
    }
    let e = a.edge_ids.map_or(e as u64, |ids| ids[e] as u64);
    let index = (a.first_edge + e) * a.heads as u64 + h as u64;
    if dropout_keep_keyed(dropout_seed_key(a.seed), step, index, dropout_threshold(a.p)) {
        T::one() / (T::one() - T::from_f64(a.p as f64))
    } else {
        T::zero()
    }
}

/// How many ids a backend's id buffer holds.
trait IdCount {
    fn count(&self) -> usize;
}
impl IdCount for [u32] {
    fn count(&self) -> usize {
        self.len()
    }
}
impl IdCount for Vec<u32> {
    fn count(&self) -> usize {
        self.len()
    }
}
impl IdCount for DeviceVec<u32> {
    fn count(&self) -> usize {
        self.len()
    }
}
fn id_count<I: ?Sized + IdCount>(ids: &I) -> usize {
    ids.count()
}

fn check<I: ?Sized + IdCount>(
    a: &GatAttention<'_, I>,
    s: &Csr,
    rows: usize,
    mats: &[(&str, (usize, usize), usize)],
    what: &str,
) -> Result<()> {
    if !GatAttention::fits(a.heads, a.dim) {
        return Err(Error::Unsupported(format!(
            "{what}: {} heads of {} columns (the fused kernels take at most 32 heads of at most 32 columns)",
            a.heads, a.dim
        )));
    }
    if !(0.0..1.0).contains(&a.p) {
        return Err(Error::Unsupported(format!("{what}: attention dropout {} (want 0 <= p < 1)", a.p)));
    }
    if s.n_rows() != s.n_cols() || s.n_rows() != rows {
        return Err(Error::Shape(format!(
            "{what}: S is {} x {}, Wh has {rows} rows (want square, one row per node)",
            s.n_rows(),
            s.n_cols()
        )));
    }
    for (name, range) in [("rows", a.rows), ("cols", a.cols)] {
        if let Some((lo, hi)) = range.filter(|&(lo, hi)| lo > hi || hi > rows) {
            return Err(Error::Shape(format!("{what}: {name} {lo}..{hi} of {rows}")));
        }
    }
    if let Some(n) = a.edge_ids.map(|ids| id_count(ids)).filter(|&n| a.p > 0.0 && n < s.nnz()) {
        return Err(Error::Shape(format!("{what}: {n} original edge ids for {} edges", s.nnz())));
    }
    for &(name, shape, cols) in mats {
        if shape != (rows, cols) {
            return Err(Error::Shape(format!("{what}: {name} is {} x {} (want {rows} x {cols})", shape.0, shape.1)));
        }
    }
    Ok(())
}

/// The forward on the host: `out` (n x H F) and `stats` (n x 2H, (max, sum) per head; (0, 0)
/// for an empty row, whose output is the bias).
pub fn gat_attention_cpu<T: Real>(s: &Csr, a: &GatAttention<'_>, step: u32, x: Inputs<'_, [T]>, out: &mut [T], stats: &mut [T]) {
    let Inputs { wh, s_src, s_dst, bias } = x;
    let (hs, f) = (a.heads, a.dim);
    let w = hs * f;
    let slope = T::from_f64(a.slope as f64);
    let (rp, ci) = (s.row_ptr(), s.col_idx());
    out.par_chunks_mut(w).zip(stats.par_chunks_mut(2 * hs)).enumerate().with_min_len(64).for_each(|(i, (o, st))| {
        if !covers(a.rows, i) {
            return;
        }
        let edges = rp[i] as usize..rp[i + 1] as usize;
        for h in 0..hs {
            let logit = |e: usize| leaky(s_dst[i * hs + h] + s_src[ci[e] as usize * hs + h], slope).0;
            let o = &mut o[h * f..(h + 1) * f];
            o.fill(T::zero());
            if edges.is_empty() {
                st[2 * h] = T::zero();
                st[2 * h + 1] = T::zero();
            } else {
                let m = edges.clone().map(logit).fold(logit(edges.start), |m, x| m.max(x));
                let mut l = T::zero();
                for e in edges.clone() {
                    let p = (logit(e) - m).exp();
                    l += p;
                    let kept = p * keep::<T>(a, step, e, h);
                    let j = ci[e] as usize;
                    for (x, &v) in o.iter_mut().zip(&wh[j * w + h * f..j * w + (h + 1) * f]) {
                        *x += kept * v;
                    }
                }
                for x in o.iter_mut() {
                    *x /= l;
                }
                st[2 * h] = m;
                st[2 * h + 1] = l;
            }
            for (x, &b) in o.iter_mut().zip(&bias[h * f..(h + 1) * f]) {
                *x += b;
            }
        }
    });
}

/// The backward on the host: the row pass writes `d_row` (D per row and head, n x H) and then
/// `ds_dst`; the column pass (over Sᵀ = `t`, `t_of` its entries' places in S) writes `ds_src`
/// and `dwh` (both overwritten; with `x.att`, dWh includes the scores' part). Fixed summation
/// order: deterministic.
pub fn gat_attention_backward_cpu<T: Real>(
    (s, t, t_of): (&Csr, &Csr, &[u32]),
    a: &GatAttention<'_>,
    step: u32,
    x: GradInputs<'_, [T]>,
    grads: GradOutputs<'_, [T]>,
) {
    let GradInputs { wh, s_src, s_dst, stats, dout, att } = x;
    let GradOutputs { d_row, ds_dst, ds_src, dwh } = grads;
    let (hs, f) = (a.heads, a.dim);
    let w = hs * f;
    let slope = T::from_f64(a.slope as f64);
    let dot = |x: &[T], y: &[T]| x.iter().zip(y).map(|(&p, &q)| p * q).fold(T::zero(), |acc, v| acc + v);
    // alpha and LeakyReLU' of edge (i, j), head h.
    let alpha = |i: usize, j: usize, h: usize| {
        let (lg, d) = leaky(s_dst[i * hs + h] + s_src[j * hs + h], slope);
        ((lg - stats[i * 2 * hs + 2 * h]).exp() / stats[i * 2 * hs + 2 * h + 1], d)
    };
    let head = |m: &[T], r: usize, h: usize| -> Vec<T> { m[r * w + h * f..r * w + (h + 1) * f].to_vec() };
    let (rp, ci) = (s.row_ptr(), s.col_idx());
    d_row.par_chunks_mut(hs).zip(ds_dst.par_chunks_mut(hs)).enumerate().with_min_len(64).for_each(|(i, (dr, dd))| {
        if !covers(a.rows, i) {
            return;
        }
        for h in 0..hs {
            let g = head(dout, i, h);
            let edges = rp[i] as usize..rp[i + 1] as usize;
            // alpha, LeakyReLU' and da of every edge; D first, then the sum with D subtracted per
            // edge (as the kernel: no cancelling difference of two row sums).
            let terms: Vec<(T, T, T)> = edges
                .clone()
                .zip(&ci[edges])
                .map(|(e, &j)| {
                    let j = j as usize;
                    let (al, lk) = alpha(i, j, h);
                    (al, lk, dot(&g, &wh[j * w + h * f..j * w + (h + 1) * f]) * keep::<T>(a, step, e, h))
                })
                .collect();
            let d = terms.iter().fold(T::zero(), |acc, &(al, _, da)| acc + al * da);
            dd[h] = terms.iter().fold(T::zero(), |acc, &(al, lk, da)| acc + al * (da - d) * lk);
            dr[h] = d;
        }
    });
    let (d_row, d_row_ds_dst) = (&*d_row, &*ds_dst);
    let (tp, tc) = (t.row_ptr(), t.col_idx());
    dwh.par_chunks_mut(w).zip(ds_src.par_chunks_mut(hs)).enumerate().with_min_len(64).for_each(|(j, (dw, dsrc))| {
        if !covers(a.cols, j) {
            return;
        }
        dw.fill(T::zero());
        for h in 0..hs {
            let x = head(wh, j, h);
            let mut acc = T::zero();
            for q in tp[j] as usize..tp[j + 1] as usize {
                let (i, e) = (tc[q] as usize, t_of[q] as usize);
                let (al, lk) = alpha(i, j, h);
                let g = &dout[i * w + h * f..i * w + (h + 1) * f];
                let mk = keep::<T>(a, step, e, h);
                acc += al * (dot(g, &x) * mk - d_row[i * hs + h]) * lk;
                for (o, &v) in dw[h * f..(h + 1) * f].iter_mut().zip(g) {
                    *o += al * mk * v;
                }
            }
            dsrc[h] = acc;
            if let Some((a_src, a_dst)) = att {
                let dd = d_row_ds_dst[j * hs + h];
                for (c, o) in (h * f..(h + 1) * f).zip(&mut dw[h * f..(h + 1) * f]) {
                    *o += acc * a_src[c] + dd * a_dst[c];
                }
            }
        }
    });
}

// -- the GPU launchers --

/// The kernel instance for heads of `dim` columns (8, 16 or 32 at most).
fn pick(kernels: [Kernel<GatAttentionArgs>; 3], dim: usize) -> Kernel<GatAttentionArgs> {
    match dim {
        0..=8 => kernels[0],
        9..=16 => kernels[1],
        _ => kernels[2],
    }
}

/// The arguments shared by the three kernels (outputs null; each launcher sets its own).
fn args(
    g: &GpuGraph,
    a: &GatAttention<'_, DeviceVec<u32>>,
    step: Ptr<u32>,
    (wh, s_src, s_dst): (&DeviceMatrix<f32>, &DeviceMatrix<f32>, &DeviceMatrix<f32>),
    what: &str,
) -> Result<GatAttentionArgs> {
    let h = &g.handle;
    let gpu = h.gpu()?.clone();
    let w = a.heads * a.dim;
    check(
        a,
        h.csr(),
        wh.rows,
        &[("Wh", (wh.rows, wh.cols), w), ("s_src", (s_src.rows, s_src.cols), a.heads), ("s_dst", (s_dst.rows, s_dst.cols), a.heads)],
        what,
    )?;
    for m in [wh, s_src, s_dst] {
        check_matrix_64(m, what)?;
        check_gpu(&gpu, m.gpu(), what)?;
    }
    if s_src.ld != s_dst.ld {
        return Err(Error::Shape(format!("{what}: the scores' strides differ ({} and {})", s_src.ld, s_dst.ld)));
    }
    if h.csr().nnz() as u64 * a.heads as u64 >= 1 << 62 || h.csr().n_rows() > u32::MAX as usize / 2 {
        return Err(Error::Unsupported(format!("{what}: {} edges x {} heads", h.csr().nnz(), a.heads)));
    }
    let (csr, t) = (h.device_csr()?, h.transpose()?);
    let (tcsr, t_of) = (t.device_csr()?, h.transpose_map(ValueOrder::Csr)?);
    Ok(GatAttentionArgs {
        row_ptr: csr.row_ptr.arg(&gpu),
        col_idx: csr.col_idx.arg(&gpu),
        t_ptr: tcsr.row_ptr.arg(&gpu),
        t_cols: tcsr.col_idx.arg(&gpu),
        t_of: t_of.arg(&gpu),
        split: row_split::unset(),
        heads: a.heads as u32,
        dim: a.dim as u32,
        shift: a.heads.next_power_of_two().trailing_zeros(),
        ld: wh.ld as u32,
        hld: s_src.ld as u32,
        sld: 0,
        slope: a.slope,
        threshold: if a.p > 0.0 { dropout_threshold(a.p).max(1) } else { 0 },
        keep_scale: 1.0 / (1.0 - a.p),
        seed_key: dropout_seed_key(a.seed),
        first_edge: a.first_edge,
        // With original edge ids the largest index is not known here: the 64-bit path.
        low_index: (a.edge_ids.is_none() && (a.first_edge + h.csr().nnz() as u64) * a.heads as u64 <= 1 << 32) as u32,
        step,
        wh: wh.arg(),
        s_src: s_src.arg(),
        s_dst: s_dst.arg(),
        bias: Ptr::null(),
        stats: PtrMut::null(),
        out: PtrMut::null(),
        dout: Ptr::null(),
        d_row: PtrMut::null(),
        row_state: PtrMut::null(),
        ds_dst: PtrMut::null(),
        ds_src: PtrMut::null(),
        dwh: PtrMut::null(),
        a_src: Ptr::null(),
        a_dst: Ptr::null(),
        edge_ids: a.edge_ids.map_or(Ptr::null(), |ids| ids.arg(&gpu)),
    })
}

/// Checks an output or input of the launchers against Wh's rows, `cols` columns and the
/// stride `ld` the kernels assume.
fn check_out<T: DeviceElem>(m: &DeviceMatrix<T>, rows: usize, cols: usize, ld: usize, name: &str, what: &str) -> Result<()> {
    check_matrix_64(m, what)?;
    if (m.rows, m.cols, m.ld) != (rows, cols, ld) {
        return Err(Error::Shape(format!(
            "{what}: {name} is {} x {} (stride {}), want {rows} x {cols} (stride {ld})",
            m.rows, m.cols, m.ld
        )));
    }
    Ok(())
}

/// The fused forward on the device (see [`gat_attention_cpu`]).
pub fn gat_attention(
    g: &GpuGraph,
    a: &GatAttention<'_, DeviceVec<u32>>,
    step: Ptr<u32>,
    x: Inputs<'_, DeviceMatrix<f32>>,
    out: &mut DeviceMatrix<f32>,
    stats: &mut DeviceMatrix<f32>,
) -> Result<()> {
    let wh = x.wh;
    check_out(out, wh.rows, a.heads * a.dim, wh.ld, "out", "gat_attention")?;
    let kernel = if a.heads == 1 && a.dim <= 8 {
        gat_attention_forward_d8_one_head
    } else {
        pick([gat_attention_forward_d8, gat_attention_forward_d16, gat_attention_forward_d32], a.dim)
    };
    // SAFETY: out checked above: rows x (H F) with Wh's stride.
    unsafe { forward(g, a, step, x, (out.arg_mut(), kernel), stats) }
}

/// [`gat_attention`] writing out in f16 (rounded once, as it is written): heads of exactly 8
/// columns (the hidden layers of GAT's default), out of Wh's shape and stride.
pub fn gat_attention_half(
    g: &GpuGraph,
    a: &GatAttention<'_, DeviceVec<u32>>,
    step: Ptr<u32>,
    x: Inputs<'_, DeviceMatrix<f32>>,
    out: &mut DeviceMatrix<f16>,
    stats: &mut DeviceMatrix<f32>,
) -> Result<()> {
    let wh = x.wh;
    let what = "gat_attention_half";
    if a.dim != 8 {
        return Err(Error::Unsupported(format!("{what}: heads of {} columns (an f16 output takes heads of 8)", a.dim)));
    }
    check_out(out, wh.rows, a.heads * a.dim, wh.ld, "out", what)?;
    check_gpu(wh.gpu(), out.gpu(), what)?;
    // SAFETY: out checked above: rows x (H 8) f16 with Wh's stride (a multiple of 8: every
    // head's 8 values one aligned 16-byte store).
    unsafe { forward(g, a, step, x, (out.arg_mut().cast(), gat_attention_forward_d8_h16), stats) }
}

/// The forward's checks of its inputs and launch, into `out` by `kernel`.
///
/// # Safety
/// `out` must hold Wh's rows x (H F) in the element type `kernel` writes, with Wh's stride.
unsafe fn forward(
    g: &GpuGraph,
    a: &GatAttention<'_, DeviceVec<u32>>,
    step: Ptr<u32>,
    Inputs { wh, s_src, s_dst, bias }: Inputs<'_, DeviceMatrix<f32>>,
    (out, kernel): (PtrMut<f32>, Kernel<GatAttentionArgs>),
    stats: &mut DeviceMatrix<f32>,
) -> Result<()> {
    let what = "gat_attention";
    let mut x = args(g, a, step, (wh, s_src, s_dst), what)?;
    let w = a.heads * a.dim;
    check_matrix_64(stats, what)?;
    if (stats.rows, stats.cols) != (wh.rows, 2 * a.heads) || bias.rows * bias.cols != w {
        return Err(Error::Shape(format!(
            "{what}: stats {} x {} (want {} x {}), bias {} x {} (want {w} values)",
            stats.rows,
            stats.cols,
            wh.rows,
            2 * a.heads,
            bias.rows,
            bias.cols
        )));
    }
    let gpu = wh.gpu().clone();
    (x.sld, x.bias, x.out, x.stats) = (stats.ld as u32, bias.arg(), out, stats.arg_mut());
    // SAFETY: checked above and by the caller: S square over Wh's rows (device CSR and
    // transpose of the handle), Wh and out rows x (H F) with one stride, the scores rows x H
    // with one stride, stats rows x 2H, bias H F values; lanes touch columns below H F only.
    unsafe { launch_rows(&gpu, &g.handle, kernel, &x, a.dim, a.rows) }
}

/// Launches a pass over the rows of `h` (S, or Sᵀ for the column pass; `row_split`), with its
/// segments' shared memory and partial states: per segment and head (max, sum, dim sums)
/// forward, (D, P, Q) row pass, (ds_src, dim sums) column pass.
///
/// # Safety
/// `x` must be valid arguments of `kernel` for the rows of `h`.
unsafe fn launch_rows(
    gpu: &crate::gpu::Gpu,
    h: &crate::ops::GraphHandle,
    kernel: Kernel<GatAttentionArgs>,
    x: &GatAttentionArgs,
    dim: usize,
    range: RowRange,
) -> Result<()> {
    let pass = row_split::Pass { shift: x.shift, short_max: short_max(dim), pstride: x.heads * (2 + x.dim).max(3), slot_rows: true };
    // SAFETY: as the caller guarantees, for any split of h's rows.
    unsafe { row_split::launch_rows(gpu, h, kernel, pass, range, |split| GatAttentionArgs { split, ..*x }) }
}

/// Rows shorter than this are walked by one slot of lanes (no shuffles, no merge of slots): 16
/// entries with heads of 8 columns (8 steps of the forward's 2 entries, 16 of the backward's 1:
/// measured with these instances), 4 steps of 2 and 1 for 16 and 32 columns.
fn short_max(dim: usize) -> u32 {
    match dim {
        0..=8 => 16,
        9..=16 => 8,
        _ => 4,
    }
}

/// The fused backward on the device (see [`gat_attention_backward_cpu`]): the row pass then
/// the column pass.
pub fn gat_attention_backward(
    g: &GpuGraph,
    a: &GatAttention<'_, DeviceVec<u32>>,
    step: Ptr<u32>,
    inputs: GradInputs<'_, DeviceMatrix<f32>>,
    grads: GradOutputs<'_, DeviceMatrix<f32>>,
) -> Result<()> {
    let what = "gat_attention_backward";
    let GradInputs { wh, s_src, s_dst, stats, dout, att } = inputs;
    let GradOutputs { d_row, ds_dst, ds_src, dwh } = grads;
    let mut x = args(g, a, step, (wh, s_src, s_dst), what)?;
    let w = a.heads * a.dim;
    check_out(dout, wh.rows, w, wh.ld, "dout", what)?;
    if let Some((a_src, a_dst)) = att {
        for (m, name) in [(a_src, "a_src"), (a_dst, "a_dst")] {
            check_matrix_64(m, what)?;
            check_gpu(wh.gpu(), m.gpu(), what)?;
            if (m.rows, m.cols) != (1, w) {
                return Err(Error::Shape(format!("{what}: {name} is {} x {} (want 1 x {w})", m.rows, m.cols)));
            }
        }
        (x.a_src, x.a_dst) = (a_src.arg(), a_dst.arg());
    }
    check_out(dwh, wh.rows, w, wh.ld, "dWh", what)?;
    for (m, name) in [(&*d_row, "D"), (&*ds_dst, "ds_dst"), (&*ds_src, "ds_src")] {
        check_out(m, wh.rows, a.heads, s_src.ld, name, what)?;
    }
    check_matrix_64(stats, what)?;
    if (stats.rows, stats.cols) != (wh.rows, 2 * a.heads) {
        return Err(Error::Shape(format!("{what}: stats {} x {} (want {} x {})", stats.rows, stats.cols, wh.rows, 2 * a.heads)));
    }
    let gpu = wh.gpu().clone();
    (x.sld, x.stats, x.dout) = (stats.ld as u32, PtrMut::new(stats.arg().addr()), dout.arg());
    (x.d_row, x.ds_dst, x.ds_src, x.dwh) = (d_row.arg_mut(), ds_dst.arg_mut(), ds_src.arg_mut(), dwh.arg_mut());
    let d = a.dim;
    let t = g.handle.transpose()?;
    // The rows' state the row pass leaves for the column pass: scratch kept with the graph and
    // shared by its layers (their passes run one after another on one stream).
    let state = row_split::scratch(&g.handle, row_split::ROW_STATE_KEY, 4 * wh.rows * a.heads)?;
    x.row_state = PtrMut::new(state.arg(&gpu).addr());
    // SAFETY: as the forward's, plus dout and dWh of Wh's shape, D and the score gradients of
    // the scores' shape; the row pass writes D and ds_dst, which the column pass (queued after
    // it) reads; stats is only read. The column pass walks Sᵀ's rows (its long rows listed).
    unsafe {
        let row_grad = pick([gat_attention_row_grad_d8, gat_attention_row_grad_d16, gat_attention_row_grad_d32], d);
        launch_rows(&gpu, &g.handle, row_grad, &x, d, a.rows)?;
        launch_rows(&gpu, &t, pick([gat_attention_col_grad_d8, gat_attention_col_grad_d16, gat_attention_col_grad_d32], d), &x, d, a.cols)
    }
}

// -- the op on each backend --

/// GAT's fused attention and its backward.
pub trait GatAttentionOp: Backend + DropoutGemmOp {
    /// `out = [alpha'_h Wh_h]_h + bias` and the softmax statistics (`stats`, n x 2H).
    fn gat_attention(
        &self,
        g: &Self::Graph,
        a: &GatAttention<'_, Self::Ids>,
        x: Inputs<'_, Self::Mat>,
        out: &mut Self::Mat,
        stats: &mut Self::Mat,
    ) -> Result<()>;
    /// [`GatAttentionOp::gat_attention`] with out in f16 ([`DropoutGemmOp::half_activation`]'s
    /// buffer; heads of 8 columns), where the backend has f16 buffers (the GPU).
    fn gat_attention_half(
        &self,
        g: &Self::Graph,
        a: &GatAttention<'_, Self::Ids>,
        x: Inputs<'_, Self::Mat>,
        out: &mut Self::Half,
        stats: &mut Self::Mat,
    ) -> Result<()>;
    /// From `dout`: `dwh` (overwritten: the aggregation's part, plus the scores' part where
    /// `inputs.att` is given), `ds_dst`, `ds_src`, through the scratch `d_row` (n x H).
    fn gat_attention_backward(
        &self,
        g: &Self::Graph,
        a: &GatAttention<'_, Self::Ids>,
        inputs: GradInputs<'_, Self::Mat>,
        grads: GradOutputs<'_, Self::Mat>,
    ) -> Result<()>;
}

impl<T: Real> GatAttentionOp for CpuBackend<T> {
    fn gat_attention(
        &self,
        g: &HostGraph<T>,
        a: &GatAttention<'_, Vec<u32>>,
        x: Inputs<'_, HostMat<T>>,
        out: &mut HostMat<T>,
        stats: &mut HostMat<T>,
    ) -> Result<()> {
        let Inputs { wh, s_src, s_dst, bias } = x;
        let (n, w, hs) = (wh.rows, a.heads * a.dim, a.heads);
        let what = "gat_attention";
        check(
            a,
            &g.s,
            n,
            &[
                ("Wh", (wh.rows, wh.cols), w),
                ("s_src", (s_src.rows, s_src.cols), hs),
                ("s_dst", (s_dst.rows, s_dst.cols), hs),
                ("out", (out.rows, out.cols), w),
                ("stats", (stats.rows, stats.cols), 2 * hs),
            ],
            what,
        )?;
        if bias.data.len() != w {
            return Err(Error::Shape(format!("{what}: bias of {} values for {w} columns", bias.data.len())));
        }
        let x = Inputs { wh: &wh.data[..], s_src: &s_src.data[..], s_dst: &s_dst.data[..], bias: &bias.data[..] };
        gat_attention_cpu(&g.s, &a.host(), self.step(), x, &mut out.data, &mut stats.data);
        Ok(())
    }
    fn gat_attention_half(
        &self,
        _: &HostGraph<T>,
        _: &GatAttention<'_, Vec<u32>>,
        _: Inputs<'_, HostMat<T>>,
        _: &mut (),
        _: &mut HostMat<T>,
    ) -> Result<()> {
        Err(Error::Unsupported("gat_attention_half: the CPU keeps activations in its own precision (no f16 buffers)".into()))
    }
    fn gat_attention_backward(
        &self,
        g: &HostGraph<T>,
        a: &GatAttention<'_, Vec<u32>>,
        inputs: GradInputs<'_, HostMat<T>>,
        grads: GradOutputs<'_, HostMat<T>>,
    ) -> Result<()> {
        let GradInputs { wh, s_src, s_dst, stats, dout, att } = inputs;
        let GradOutputs { d_row, ds_dst, ds_src, dwh } = grads;
        let (n, w, hs) = (wh.rows, a.heads * a.dim, a.heads);
        let shapes = [
            ("Wh", (wh.rows, wh.cols), w),
            ("s_src", (s_src.rows, s_src.cols), hs),
            ("s_dst", (s_dst.rows, s_dst.cols), hs),
            ("stats", (stats.rows, stats.cols), 2 * hs),
            ("dout", (dout.rows, dout.cols), w),
            ("D", (d_row.rows, d_row.cols), hs),
            ("ds_dst", (ds_dst.rows, ds_dst.cols), hs),
            ("ds_src", (ds_src.rows, ds_src.cols), hs),
            ("dWh", (dwh.rows, dwh.cols), w),
        ];
        check(a, &g.s, n, &shapes, "gat_attention_backward")?;
        if let Some((a_src, a_dst)) = att {
            for (m, name) in [(a_src, "a_src"), (a_dst, "a_dst")] {
                if (m.rows, m.cols) != (1, w) {
                    return Err(Error::Shape(format!("gat_attention_backward: {name} is {} x {} (want 1 x {w})", m.rows, m.cols)));
                }
            }
        }
        let att = att.map(|(s, d)| (&s.data[..], &d.data[..]));
        let inputs = GradInputs {
            wh: &wh.data[..],
            s_src: &s_src.data[..],
            s_dst: &s_dst.data[..],
            stats: &stats.data[..],
            dout: &dout.data[..],
            att,
        };
        let grads =
            GradOutputs { d_row: &mut d_row.data[..], ds_dst: &mut ds_dst.data[..], ds_src: &mut ds_src.data[..], dwh: &mut dwh.data[..] };
        gat_attention_backward_cpu((&g.s, &g.t, &g.t_of), &a.host(), self.step(), inputs, grads);
        Ok(())
    }
}

impl GatAttentionOp for CudaBackend {
    fn gat_attention(
        &self,
        g: &GpuGraph,
        a: &GatAttention<'_, DeviceVec<u32>>,
        x: Inputs<'_, DeviceMatrix<f32>>,
        out: &mut DeviceMatrix<f32>,
        stats: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("gat attention", || gat_attention(g, a, self.step_ptr().arg(&self.gpu), x, out, stats))
    }
    fn gat_attention_half(
        &self,
        g: &GpuGraph,
        a: &GatAttention<'_, DeviceVec<u32>>,
        x: Inputs<'_, DeviceMatrix<f32>>,
        out: &mut DeviceMatrix<f16>,
        stats: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("gat attention", || gat_attention_half(g, a, self.step_ptr().arg(&self.gpu), x, out, stats))
    }
    fn gat_attention_backward(
        &self,
        g: &GpuGraph,
        a: &GatAttention<'_, DeviceVec<u32>>,
        inputs: GradInputs<'_, DeviceMatrix<f32>>,
        grads: GradOutputs<'_, DeviceMatrix<f32>>,
    ) -> Result<()> {
        self.timed("gat attention backward", || gat_attention_backward(g, a, self.step_ptr().arg(&self.gpu), inputs, grads))
    }
}
