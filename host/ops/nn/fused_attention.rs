//! Fused AGNN attention: out = softmax_row(beta n nᵀ on the edges of S) h in one op, and its
//! backward (dh and dbeta), without any per-edge array: the forward keeps per row the
//! softmax's (max, sum), the backward recomputes alpha from them. CPU reference (generic over
//! f32/f64, the same two passes as the GPU) and the launchers of
//! `kernels-gpu/src/nn/fused_attention.rs` (CUDA cores, f32 arithmetic; in f16 precision the
//! rows gathered per edge, h and dout, are read from f16 copies: half the bytes).
//!
//! The launchers take the layer's h with its row-normalised n and inv_norm (`row_normalize`);
//! the backend op ([`FusedAttentionOp`]) normalises h itself, so that on the tensor-core path
//! the normalisation writes the f16 copy of n both passes gather. S must be square (n_i . n_j
//! pairs a row with a column of the same matrix).
//!
//! The backward runs two passes, because of two dependencies: (1) dn_j collects terms from
//! the edges leaving j (rows of S) and from the edges entering j (rows of Sᵀ), and dh_j needs
//! all of dn_j for the normalisation's backward; (2) an edge (i, j) seen from j needs
//! D_i = sum_k alpha_ik dalpha_ik, a reduction over the whole of row i. The row pass writes D
//! and dn's row part; the column pass walks Sᵀ's CSR (the stored transpose pattern: no value
//! transposes, no atomics) and finishes dh.

use rayon::prelude::*;

use super::attention_tc::{TcPolicy, attention_backward_tc, attention_forward_tc};
use super::row_normalize::{row_normalize, row_normalize_cpu, row_normalize_with_half};
use super::{check_gpu, check_matrix_64, check_same, row_split};
use crate::error::{Error, Result};
use half::f16;

use crate::gpu::abi::attention::{
    self as k, ATTN_U, ATTN_U_C4, ATTN_U_COLUMN, ATTN_U_ROW_L8, AttentionColGradArgs, AttentionForwardArgs, AttentionRowGradArgs, AttnRows,
};
use crate::gpu::launch::{Kernel, Ptr};
use crate::gpu::{DeviceMatrix, Gpu};
use crate::graph::Csr;
use crate::ops::GraphHandle;
use crate::ops::Precision;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::util::Real;

/// The attention's operands once h is normalised: beta (1 x 1), the layer's input h, n =
/// rownorm(h) and its inverse row norms (rows x 1).
pub struct Normalized<'a, M: ?Sized> {
    pub beta: &'a M,
    pub h: &'a M,
    pub n: &'a M,
    pub inv_norm: &'a M,
}

/// What the backward reads: the operands, what the forward wrote (`out`, and `stats`: rows x
/// 2), and dout.
pub struct GradInputs<'a, M: ?Sized> {
    pub x: Normalized<'a, M>,
    pub stats: &'a M,
    pub out: &'a M,
    pub dout: &'a M,
}

// By hand: references copy whatever M is (a derive would ask M: Copy).
impl<M: ?Sized> Clone for Normalized<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: ?Sized> Copy for Normalized<'_, M> {}
impl<M: ?Sized> Clone for GradInputs<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: ?Sized> Copy for GradInputs<'_, M> {}

/// What the backward writes: `dh` (overwritten) and `dbeta` (1 x 1), through the scratch `dn`
/// (n's shape: the row pass's part of dn) and `d_row` (D per row, rows x 1).
pub struct Grads<'a, M: ?Sized> {
    pub dn: &'a mut M,
    pub d_row: &'a mut M,
    pub dh: &'a mut M,
    pub dbeta: &'a mut M,
}

/// What the backend op's forward writes: n = rownorm(h) and inv_norm (it normalises h itself),
/// out, and the per-row `stats`.
pub struct Outputs<'a, M: ?Sized> {
    pub n: &'a mut M,
    pub inv_norm: &'a mut M,
    pub out: &'a mut M,
    pub stats: &'a mut M,
}

fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    a.iter().zip(b).map(|(&x, &y)| x * y).sum()
}

fn check_square(s: &Csr, rows: usize, what: &str) -> Result<()> {
    if s.n_rows() != s.n_cols() || s.n_rows() != rows {
        return Err(Error::Shape(format!(
            "{what}: S is {} x {}, features have {rows} rows (want square, one row per node)",
            s.n_rows(),
            s.n_cols()
        )));
    }
    Ok(())
}

/// The forward on the host: per row i with edges, s_ij = beta n_i . n_j, m_i = max_j s_ij,
/// l_i = sum_j exp(s_ij - m_i), out_i = sum_j exp(s_ij - m_i) / l_i h_j, stats[2i..2i+2] =
/// (m_i, l_i). Empty rows: out_i = 0 and stats (0, 0).
pub fn attention_forward_cpu<T: Real>(s: &Csr, beta: T, h: &[T], n: &[T], cols: usize, out: &mut [T], stats: &mut [T]) {
    let rows = s.n_rows();
    for (name, len) in [("h", h.len()), ("n", n.len()), ("out", out.len())] {
        assert_eq!(len, rows * cols, "attention_forward_cpu: {name} is not {rows} x {cols}");
    }
    assert_eq!(stats.len(), 2 * rows, "attention_forward_cpu: stats has {} values for {rows} rows", stats.len());
    if cols == 0 {
        stats.fill(T::zero());
        return;
    }
    let (rp, ci) = (s.row_ptr(), s.col_idx());
    out.par_chunks_mut(cols).zip(stats.par_chunks_mut(2)).enumerate().with_min_len(64).for_each(|(i, (o, st))| {
        o.fill(T::zero());
        let edges = &ci[rp[i] as usize..rp[i + 1] as usize];
        if edges.is_empty() {
            st.fill(T::zero());
            return;
        }
        let ni = &n[i * cols..(i + 1) * cols];
        let score = |j: u32| beta * dot(ni, &n[j as usize * cols..(j as usize + 1) * cols]);
        let m = edges[1..].iter().fold(score(edges[0]), |m, &j| m.max(score(j)));
        let mut l = T::zero();
        for &j in edges {
            let p = (score(j) - m).exp();
            l += p;
            for (x, &hv) in o.iter_mut().zip(&h[j as usize * cols..(j as usize + 1) * cols]) {
                *x += p * hv;
            }
        }
        for x in o.iter_mut() {
            *x /= l;
        }
        st[0] = m;
        st[1] = l;
    });
}

/// The backward on the host, from the forward's `stats` and `dout` (rows of `cols` values; `out`
/// is not read): writes `dh` (overwritten), `dbeta[0]`, the scratch `dn` (rows x cols: the row
/// pass's part of dn) and `d_row` (D per row). `t` is Sᵀ. Per row sums run in a fixed order:
/// deterministic.
pub fn attention_backward_cpu<T: Real>(s: &Csr, t: &Csr, x: GradInputs<'_, [T]>, cols: usize, grads: Grads<'_, [T]>) {
    let GradInputs { x: Normalized { beta, h, n, inv_norm }, stats, dout, .. } = x;
    let Grads { dn, d_row, dh, dbeta } = grads;
    assert_eq!((beta.len(), dbeta.len()), (1, 1), "attention_backward_cpu: beta and dbeta are not 1 x 1");
    let beta = beta[0];
    let rows = s.n_rows();
    for (name, len) in [("h", h.len()), ("n", n.len()), ("dout", dout.len()), ("dn", dn.len()), ("dh", dh.len())] {
        assert_eq!(len, rows * cols, "attention_backward_cpu: {name} is not {rows} x {cols}");
    }
    assert_eq!(stats.len(), 2 * rows, "attention_backward_cpu: stats has {} values for {rows} rows", stats.len());
    assert_eq!(inv_norm.len(), rows, "attention_backward_cpu: inv_norm has {} values for {rows} rows", inv_norm.len());
    assert_eq!(d_row.len(), rows, "attention_backward_cpu: d_row has {} values for {rows} rows", d_row.len());
    assert!(t.n_rows() == rows && t.nnz() == s.nnz(), "attention_backward_cpu: t is not the transpose of s");
    if cols == 0 {
        dh.fill(T::zero());
        d_row.fill(T::zero());
        dbeta[0] = T::zero();
        return;
    }
    let row = |m: &[T], i: usize| -> Vec<T> { m[i * cols..(i + 1) * cols].to_vec() };
    // alpha_ij, cos_ij and dalpha_ij = dout_i . h_j of edge (i, j).
    let edge = |i: usize, j: usize| {
        let cos = dot(&n[i * cols..(i + 1) * cols], &n[j * cols..(j + 1) * cols]);
        let alpha = (beta * cos - stats[2 * i]).exp() / stats[2 * i + 1];
        (alpha, cos, dot(&dout[i * cols..(i + 1) * cols], &h[j * cols..(j + 1) * cols]))
    };
    let (rp, ci) = (s.row_ptr(), s.col_idx());
    // Row pass: D_i, dn_i = beta sum_j ds_ij n_j, and each row's share of dbeta.
    let dbeta_rows: Vec<T> = dn
        .par_chunks_mut(cols)
        .zip(d_row.par_iter_mut())
        .enumerate()
        .with_min_len(64)
        .map(|(i, (dni, d))| {
            dni.fill(T::zero());
            let edges = &ci[rp[i] as usize..rp[i + 1] as usize];
            *d = edges
                .iter()
                .map(|&j| {
                    let (a, _, da) = edge(i, j as usize);
                    a * da
                })
                .sum();
            let mut dbeta = T::zero();
            for &j in edges {
                let (a, cos, da) = edge(i, j as usize);
                let ds = a * (da - *d);
                dbeta += ds * cos;
                for (x, &nv) in dni.iter_mut().zip(&n[j as usize * cols..(j as usize + 1) * cols]) {
                    *x += beta * ds * nv;
                }
            }
            dbeta
        })
        .collect();
    // Column pass over Sᵀ: the in-edges (i, j) of node j.
    let (tp, ti) = (t.row_ptr(), t.col_idx());
    let d_row: &[T] = d_row;
    let dn: &[T] = dn;
    dh.par_chunks_mut(cols).enumerate().with_min_len(64).for_each(|(j, dhj)| {
        let mut dnj = row(dn, j);
        dhj.fill(T::zero());
        for &i in &ti[tp[j] as usize..tp[j + 1] as usize] {
            let i = i as usize;
            let (a, _, da) = edge(i, j);
            let ds = a * (da - d_row[i]);
            for c in 0..cols {
                dnj[c] += beta * ds * n[i * cols + c];
                dhj[c] += a * dout[i * cols + c];
            }
        }
        let nj = &n[j * cols..(j + 1) * cols];
        let nd = dot(nj, &dnj);
        for c in 0..cols {
            dhj[c] += (dnj[c] - nj[c] * nd) * inv_norm[j];
        }
    });
    dbeta[0] = dbeta_rows.into_iter().fold(T::zero(), |a, b| a + b);
}

// -- the GPU launchers --

/// The lane split for rows of `ld4` float4s: (log2 of a slot's lanes, chunks per lane, the
/// instance's index in a kernel list: `_c1_l8`, `_c1_l16`, `_c1_l32`, `_c4`).
fn lane_split(ld4: usize, what: &str) -> Result<(u32, usize, usize)> {
    match ld4 {
        0..=8 => Ok((3, 1, 0)),
        9..=16 => Ok((4, 1, 1)),
        17..=32 => Ok((5, 1, 2)),
        33..=128 => Ok((5, 4, 3)),
        _ => Err(Error::Unsupported(format!("{what}: rows of {} floats (at most 512)", 4 * ld4))),
    }
}

/// Checks common to the three kernels; returns the n x n graph's row count as u32.
fn check_nodes(
    g: &GraphHandle,
    beta: &DeviceMatrix<f32>,
    n: &DeviceMatrix<f32>,
    per_row: &[(&str, usize, usize)],
    what: &str,
) -> Result<u32> {
    check_square(g.csr(), n.rows, what)?;
    check_matrix_64(n, what)?;
    check_matrix_64(beta, what)?;
    if beta.rows != 1 || beta.cols != 1 {
        return Err(Error::Shape(format!("{what}: beta is {} x {} (want 1 x 1)", beta.rows, beta.cols)));
    }
    check_gpu(g.gpu()?, n.gpu(), what)?;
    check_gpu(g.gpu()?, beta.gpu(), what)?;
    for &(name, len, per) in per_row {
        if len < per * n.rows {
            return Err(Error::Shape(format!("{what}: {name} has {len} values, {} rows need {}", n.rows, per * n.rows)));
        }
    }
    if g.csr().nnz() >= (1 << 31) {
        return Err(Error::Unsupported(format!("{what}: {} edges (at most 2^31 - 1)", g.csr().nnz())));
    }
    Ok(n.rows as u32)
}

/// The three kernels.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AttnPass {
    Forward,
    Row,
    Column,
}

/// Entries a slot of instance `instance` keeps in flight in `pass` (the `ATTN_U*` constants the
/// instances are listed with).
fn entries_in_flight(pass: AttnPass, instance: usize) -> u32 {
    (match (pass, instance) {
        (_, 3) => ATTN_U_C4,
        (AttnPass::Column, _) => ATTN_U_COLUMN,
        (AttnPass::Row, 0) => ATTN_U_ROW_L8,
        _ => ATTN_U,
    }) as u32
}

/// Launches a pass over `g`'s rows (`row_split`: a slot of lanes per short row, a warp per
/// middle one, segments of long rows and their combine launch), or with `rows_from` only over
/// the rows of at least that many entries (a warp or segments each; the tensor-core forward
/// takes the others).
///
/// # Safety
/// `args` must make arguments valid for `kernel` for the rows of `g`.
unsafe fn launch_rows<A: cudarc::driver::DeviceRepr>(
    gpu: &Gpu,
    g: &GraphHandle,
    ld4: usize,
    kernels: [Kernel<A>; 4],
    pass: AttnPass,
    rows_from: Option<u32>,
    args: impl Fn(AttnRows) -> A,
) -> Result<()> {
    let (shift, chunks, instance) = lane_split(ld4, "fused attention")?;
    let kernel = kernels[instance];
    let u = entries_in_flight(pass, instance);
    let csr = g.device_csr()?;
    let rows = AttnRows { row_ptr: csr.row_ptr.arg(gpu), col_idx: csr.col_idx.arg(gpu), ld4: ld4 as u32, split: row_split::unset() };
    // Rows shorter than 4 steps of a slot's edges in flight (4 with one chunk, 1 with four) a
    // slot each. Partial state per segment and lane: at most two sums of its chunks (column
    // pass) or a softmax state (forward).
    let short_max = rows_from.unwrap_or(4 * u);
    let pstride = (1 << shift) * (8 * chunks as u32 + 2);
    let split = row_split::Pass { shift, short_max, pstride, slot_rows: rows_from.is_none() };
    // SAFETY: row_ptr / col_idx are g's CSR (col ids < n_rows, checked square); the split is
    // of g's rows; shared memory as the kernels use it.
    unsafe { row_split::launch_rows(gpu, g, kernel, split, None, |split| args(AttnRows { split, ..rows })) }
}

/// The address the kernels gather `m`'s rows from: `m`, or its f16 copy `half` (checked to
/// have `m`'s shape and stride).
fn gather_ptr(m: &DeviceMatrix<f32>, half: Option<&DeviceMatrix<f16>>, what: &str) -> Result<Ptr<f32>> {
    match half {
        None => Ok(m.arg()),
        Some(h) if (h.rows, h.cols, h.ld) == (m.rows, m.cols, m.ld) && h.buf.len() >= m.rows * m.ld => {
            check_gpu(m.gpu(), h.gpu(), what)?;
            Ok(h.arg().cast())
        }
        Some(h) => Err(Error::Shape(format!(
            "{what}: f16 copy {} x {} (stride {}) of a {} x {} matrix (stride {})",
            h.rows, h.cols, h.ld, m.rows, m.cols, m.ld
        ))),
    }
}

/// The fused forward on the device: `out` (same shape as `n`, padding written 0) and `stats`
/// (2 values per row). `beta` (1 x 1) is read when the kernel runs. The neighbour rows are read
/// from `h` (n_j = h_j inv_norm_j), or from its f16 copy `h_half`. The first call on a graph
/// uploads its CSR and row lists: warm up before capturing a CUDA graph.
pub fn attention_forward(
    g: &GraphHandle,
    x: Normalized<'_, DeviceMatrix<f32>>,
    h_half: Option<&DeviceMatrix<f16>>,
    out: &mut DeviceMatrix<f32>,
    stats: &mut DeviceMatrix<f32>,
) -> Result<()> {
    attention_forward_rows(g, x, h_half, (out, stats), None)
}

/// [`attention_forward`] over all rows, or with `rows_from` only over the rows of at least that
/// many entries (the tensor-core forward's hub rows).
pub(crate) fn attention_forward_rows(
    g: &GraphHandle,
    Normalized { beta, h, n, inv_norm }: Normalized<'_, DeviceMatrix<f32>>,
    h_half: Option<&DeviceMatrix<f16>>,
    (out, stats): (&mut DeviceMatrix<f32>, &mut DeviceMatrix<f32>),
    rows_from: Option<u32>,
) -> Result<()> {
    let (inv_norm, stats) = (&inv_norm.buf, &mut stats.buf);
    let what = "attention_forward";
    check_nodes(g, beta, n, &[("inv_norm", inv_norm.len(), 1), ("stats", stats.len(), 2)], what)?;
    check_same(n, h, what)?;
    check_same(n, out, what)?;
    let gpu = g.gpu()?.clone();
    let h_gather = gather_ptr(h, h_half, what)?;
    let (beta, np, inv, outp, st) = (beta.arg(), n.arg(), inv_norm.arg(&gpu), out.arg_mut(), stats.arg_mut(&gpu));
    let kernels = if h_half.is_some() {
        [k::attention_forward_c1_l8_f16, k::attention_forward_c1_l16_f16, k::attention_forward_c1_l32_f16, k::attention_forward_c4_f16]
    } else {
        [k::attention_forward_c1_l8_f32, k::attention_forward_c1_l16_f32, k::attention_forward_c1_l32_f32, k::attention_forward_c4_f32]
    };
    // SAFETY: shapes checked above: n, h (and its f16 copy) and out are rows x ld, inv_norm and
    // stats cover the rows.
    unsafe {
        launch_rows(&gpu, g, n.ld / 4, kernels, AttnPass::Forward, rows_from, |rows| AttentionForwardArgs {
            rows,
            beta,
            n: np,
            h_gather,
            inv_norm: inv,
            out: outp,
            stats: st,
        })
    }
}

/// The fused backward on the device: `dh` (overwritten, padding 0) and `dbeta` (1 x 1,
/// zeroed here then added to atomically), through the scratch `dn` (shape of `n`) and `d_row`
/// (a value per row). `out` and `stats` are the forward's. With `half` (f16 copies of `h` and
/// `dout`) the neighbour rows are read from them. Uploads Sᵀ's CSR on first use.
pub fn attention_backward(
    g: &GraphHandle,
    inputs: GradInputs<'_, DeviceMatrix<f32>>,
    half: Option<(&DeviceMatrix<f16>, &DeviceMatrix<f16>)>,
    grads: Grads<'_, DeviceMatrix<f32>>,
) -> Result<()> {
    let p = BackwardPasses::new(g, inputs, half, None);
    let Grads { dn, d_row, dh, dbeta } = grads;
    p.check(dn, d_row, dh, dbeta)?;
    dbeta.zero()?;
    p.row_pass(dn, d_row, dbeta)?;
    p.column_pass(dn, d_row, dh)
}

/// The backward's two passes on the CUDA cores, over all rows or with `rows_from` only over the
/// rows of at least that many entries (of S for the row pass, of Sᵀ for the column pass: the
/// tensor-core passes take the others).
pub(crate) struct BackwardPasses<'a> {
    pub g: &'a GraphHandle,
    pub beta: &'a DeviceMatrix<f32>,
    pub n: &'a DeviceMatrix<f32>,
    pub h: &'a DeviceMatrix<f32>,
    pub half: Option<(&'a DeviceMatrix<f16>, &'a DeviceMatrix<f16>)>,
    pub inv_norm: &'a DeviceMatrix<f32>,
    pub stats: &'a DeviceMatrix<f32>,
    pub out: &'a DeviceMatrix<f32>,
    pub dout: &'a DeviceMatrix<f32>,
    pub rows_from: Option<u32>,
}

impl<'a> BackwardPasses<'a> {
    const WHAT: &'static str = "attention_backward";

    pub fn new(
        g: &'a GraphHandle,
        inputs: GradInputs<'a, DeviceMatrix<f32>>,
        half: Option<(&'a DeviceMatrix<f16>, &'a DeviceMatrix<f16>)>,
        rows_from: Option<u32>,
    ) -> Self {
        let GradInputs { x: Normalized { beta, h, n, inv_norm }, stats, out, dout } = inputs;
        BackwardPasses { g, beta, n, h, half, inv_norm, stats, out, dout, rows_from }
    }

    /// Shapes and devices of every operand.
    pub fn check(
        &self,
        dn: &DeviceMatrix<f32>,
        d_row: &DeviceMatrix<f32>,
        dh: &DeviceMatrix<f32>,
        dbeta: &DeviceMatrix<f32>,
    ) -> Result<()> {
        let what = Self::WHAT;
        check_nodes(
            self.g,
            self.beta,
            self.n,
            &[("inv_norm", self.inv_norm.buf.len(), 1), ("stats", self.stats.buf.len(), 2), ("d_row", d_row.buf.len(), 1)],
            what,
        )?;
        for m in [self.h, self.out, self.dout, dn, dh] {
            check_same(self.n, m, what)?;
        }
        check_matrix_64(dbeta, what)?;
        if dbeta.rows != 1 || dbeta.cols != 1 {
            return Err(Error::Shape(format!("{what}: dbeta is {} x {} (want 1 x 1)", dbeta.rows, dbeta.cols)));
        }
        gather_ptr(self.h, self.half.map(|x| x.0), what)?;
        gather_ptr(self.dout, self.half.map(|x| x.1), what)?;
        Ok(())
    }

    /// D_i, dn's row part, dbeta's share (added to `dbeta`). Operands as [`Self::check`] found them.
    pub fn row_pass(&self, dn: &mut DeviceMatrix<f32>, d_row: &mut DeviceMatrix<f32>, dbeta: &mut DeviceMatrix<f32>) -> Result<()> {
        let gpu = self.g.gpu()?.clone();
        let h_gather = gather_ptr(self.h, self.half.map(|x| x.0), Self::WHAT)?;
        let kernels = if self.half.is_some() {
            [
                k::attention_row_grad_c1_l8_f16,
                k::attention_row_grad_c1_l16_f16,
                k::attention_row_grad_c1_l32_f16,
                k::attention_row_grad_c4_f16,
            ]
        } else {
            [
                k::attention_row_grad_c1_l8_f32,
                k::attention_row_grad_c1_l16_f32,
                k::attention_row_grad_c1_l32_f32,
                k::attention_row_grad_c4_f32,
            ]
        };
        let (dnp, dp, dbp) = (dn.arg_mut(), d_row.buf.arg_mut(&gpu), dbeta.arg_mut());
        let args = |rows| AttentionRowGradArgs {
            rows,
            beta: self.beta.arg(),
            n: self.n.arg(),
            h_gather,
            inv_norm: self.inv_norm.buf.arg(&gpu),
            stats: self.stats.buf.arg(&gpu),
            out: self.out.arg(),
            dout: self.dout.arg(),
            dn: dnp,
            d_row: dp,
            dbeta: dbp,
        };
        // SAFETY: shapes checked by `check`.
        unsafe { launch_rows(&gpu, self.g, self.n.ld / 4, kernels, AttnPass::Row, self.rows_from, args) }
    }

    /// dh from the row pass's dn and D, walking Sᵀ.
    pub fn column_pass(&self, dn: &DeviceMatrix<f32>, d_row: &DeviceMatrix<f32>, dh: &mut DeviceMatrix<f32>) -> Result<()> {
        let gpu = self.g.gpu()?.clone();
        let t = self.g.transpose()?;
        let h_gather = gather_ptr(self.h, self.half.map(|x| x.0), Self::WHAT)?;
        let dout_gather = gather_ptr(self.dout, self.half.map(|x| x.1), Self::WHAT)?;
        let kernels = if self.half.is_some() {
            [
                k::attention_col_grad_c1_l8_f16,
                k::attention_col_grad_c1_l16_f16,
                k::attention_col_grad_c1_l32_f16,
                k::attention_col_grad_c4_f16,
            ]
        } else {
            [
                k::attention_col_grad_c1_l8_f32,
                k::attention_col_grad_c1_l16_f32,
                k::attention_col_grad_c1_l32_f32,
                k::attention_col_grad_c4_f32,
            ]
        };
        let dhp = dh.arg_mut();
        let args = |rows| AttentionColGradArgs {
            rows,
            beta: self.beta.arg(),
            n: self.n.arg(),
            h: self.h.arg(),
            h_gather,
            inv_norm: self.inv_norm.buf.arg(&gpu),
            stats: self.stats.buf.arg(&gpu),
            dout_gather,
            d_row: d_row.buf.arg(&gpu),
            dn: dn.arg(),
            dh: dhp,
        };
        // SAFETY: shapes checked by `check`; Sᵀ is square like S.
        unsafe { launch_rows(&gpu, &t, self.n.ld / 4, kernels, AttnPass::Column, self.rows_from, args) }
    }
}

// -- the op on each backend --

/// The fused attention of an AGNN layer. Matrices: `h`, `n`, `out`, `dout`, `dh`, `dn` are
/// rows x d; `inv_norm` and `d_row` rows x 1, `stats` rows x 2, `beta`, `dbeta` 1 x 1.
pub trait FusedAttentionOp: Backend {
    /// What the forward leaves for the backward beside n, inv_norm and stats: on the GPU the
    /// f16 copy of n the tensor-core kernels gather, written by the forward's normalisation (no
    /// cast a pass); nothing on the CPU. A layer keeps one ([`FusedAttentionOp::attention_copy`]).
    type AttentionCopy;
    /// An empty copy (the first forward that needs it allocates it).
    fn attention_copy(&self) -> Self::AttentionCopy;
    /// `n = rownorm(h)` with `inv_norm` (as [`super::row_normalize`]), then
    /// `out = softmax_row(beta cos) h` over the edges of `g` with per-row `stats`; `copy` is
    /// written for the backward.
    fn attention_forward(
        &self,
        g: &Self::Graph,
        beta: &Self::Mat,
        h: &Self::Mat,
        outputs: Outputs<'_, Self::Mat>,
        copy: &mut Self::AttentionCopy,
    ) -> Result<()>;
    /// The backward of [`FusedAttentionOp::attention_forward`], from what it wrote: `dh`
    /// (overwritten) and `dbeta`, through the scratch `dn` and `d_row`.
    fn attention_backward(
        &self,
        g: &Self::Graph,
        inputs: GradInputs<'_, Self::Mat>,
        copy: &Self::AttentionCopy,
        grads: Grads<'_, Self::Mat>,
    ) -> Result<()>;
}

fn check_host<T>(rows: usize, cols: usize, mats: &[(&str, &HostMat<T>, usize)], what: &str) -> Result<()> {
    for &(name, m, c) in mats {
        let want = if c == 0 { cols } else { c };
        if m.rows != rows || m.cols != want {
            return Err(Error::Shape(format!("{what}: {name} is {} x {} (want {rows} x {want})", m.rows, m.cols)));
        }
    }
    Ok(())
}

impl<T: Real> FusedAttentionOp for CpuBackend<T> {
    type AttentionCopy = ();
    fn attention_copy(&self) {}
    fn attention_forward(
        &self,
        g: &HostGraph<T>,
        beta: &HostMat<T>,
        h: &HostMat<T>,
        outputs: Outputs<'_, HostMat<T>>,
        _copy: &mut (),
    ) -> Result<()> {
        let Outputs { n, inv_norm, out, stats } = outputs;
        let what = "attention_forward";
        check_square(&g.s, h.rows, what)?;
        check_host(h.rows, h.cols, &[("n", n, 0), ("inv_norm", inv_norm, 1), ("out", out, 0), ("stats", stats, 2)], what)?;
        row_normalize_cpu(&h.data, h.rows, h.cols, &mut n.data, &mut inv_norm.data);
        attention_forward_cpu(&g.s, beta.data[0], &h.data, &n.data, h.cols, &mut out.data, &mut stats.data);
        Ok(())
    }
    fn attention_backward(
        &self,
        g: &HostGraph<T>,
        inputs: GradInputs<'_, HostMat<T>>,
        _copy: &(),
        grads: Grads<'_, HostMat<T>>,
    ) -> Result<()> {
        let GradInputs { x: Normalized { beta, h, n, inv_norm }, stats, out, dout } = inputs;
        let Grads { dn, d_row, dh, dbeta } = grads;
        let what = "attention_backward";
        check_square(&g.s, h.rows, what)?;
        let mats = [
            ("n", n, 0),
            ("inv_norm", inv_norm, 1),
            ("stats", stats, 2),
            ("out", out, 0),
            ("dout", dout, 0),
            ("dn", &*dn, 0),
            ("d_row", &*d_row, 1),
            ("dh", &*dh, 0),
        ];
        check_host(h.rows, h.cols, &mats, what)?;
        check_host(1, 1, &[("beta", beta, 1), ("dbeta", &*dbeta, 1)], what)?;
        let x = Normalized { beta: &beta.data[..], h: &h.data[..], n: &n.data[..], inv_norm: &inv_norm.data[..] };
        let inputs = GradInputs { x, stats: &stats.data[..], out: &out.data[..], dout: &dout.data[..] };
        let grads = Grads { dn: &mut dn.data[..], d_row: &mut d_row.data[..], dh: &mut dh.data[..], dbeta: &mut dbeta.data[..] };
        attention_backward_cpu(&g.s, &g.t, inputs, h.cols, grads);
        Ok(())
    }
}

/// The f16 copy of a layer's n on the GPU, and the address of the n it was made from (the
/// backward casts n afresh if it is handed another n).
#[derive(Default)]
pub struct DeviceAttentionCopy {
    n16: Option<DeviceMatrix<f16>>,
    of: Option<u64>,
}

impl DeviceAttentionCopy {
    /// The copy, if it was made from `n` (same address and shape).
    fn of(&self, n: &DeviceMatrix<f32>) -> Option<&DeviceMatrix<f16>> {
        self.n16.as_ref().filter(|c| self.of == Some(n.ptr()) && (c.rows, c.cols, c.ld) == (n.rows, n.cols, n.ld))
    }
}

impl CudaBackend {
    /// Whether the fused attention gathers rows from f16 copies: in f16 precision, and only
    /// where the f32 rows would not fit in L2. The kernels are bound by their instructions
    /// while the rows sit in L2, and the copies cost a cast a call.
    fn half_gathers(&self, h: &DeviceMatrix<f32>) -> bool {
        self.precision == Precision::F16 && (h.rows * h.ld * 4) as u64 > self.gpu.info().l2_bytes as u64
    }

    /// Whether this layer's attention runs on the tensor cores (`ops::nn::attention_tc`).
    fn attention_on_tc(&self, g: &GpuGraph, n: &DeviceMatrix<f32>) -> Result<bool> {
        Ok(self.precision == Precision::F16 && self.op_state.get::<TcPolicy>().applies(&g.handle, n)?)
    }
}

impl FusedAttentionOp for CudaBackend {
    type AttentionCopy = DeviceAttentionCopy;
    fn attention_copy(&self) -> DeviceAttentionCopy {
        DeviceAttentionCopy::default()
    }
    fn attention_forward(
        &self,
        g: &GpuGraph,
        beta: &DeviceMatrix<f32>,
        h: &DeviceMatrix<f32>,
        outputs: Outputs<'_, DeviceMatrix<f32>>,
        copy: &mut DeviceAttentionCopy,
    ) -> Result<()> {
        let Outputs { n, inv_norm, out, stats } = outputs;
        copy.of = None;
        if self.attention_on_tc(g, n)? {
            let fits = copy.n16.as_ref().is_some_and(|c| (c.rows, c.cols, c.ld) == (n.rows, n.cols, n.ld));
            if !fits {
                copy.n16 = Some(DeviceMatrix::zeros(&self.gpu, n.rows, n.cols)?);
            }
            let n16 = copy.n16.as_mut().expect("allocated above");
            self.timed("row normalize", || row_normalize_with_half(h, n, Some(n16), &mut inv_norm.buf))?;
            copy.of = Some(n.ptr());
            let x = Normalized { beta, h, n: &*n, inv_norm: &*inv_norm };
            return self
                .timed("fused attention", || attention_forward_tc(&g.handle, x, n16, out, stats, self.op_state.get::<TcPolicy>().row_max));
        }
        self.timed("row normalize", || row_normalize(h, n, &mut inv_norm.buf))?;
        let x = Normalized { beta, h, n: &*n, inv_norm: &*inv_norm };
        self.timed("fused attention", || {
            if self.half_gathers(h) {
                // f16 copy of h in scratch slot 1 (2 holds dout's in the backward).
                self.with_half(h, 1, |hh| attention_forward(&g.handle, x, Some(hh), out, stats))
            } else {
                attention_forward(&g.handle, x, None, out, stats)
            }
        })
    }
    fn attention_backward(
        &self,
        g: &GpuGraph,
        inputs: GradInputs<'_, DeviceMatrix<f32>>,
        copy: &DeviceAttentionCopy,
        grads: Grads<'_, DeviceMatrix<f32>>,
    ) -> Result<()> {
        let (h, n, dout) = (inputs.x.h, inputs.x.n, inputs.dout);
        self.timed("fused attention backward", || {
            if self.attention_on_tc(g, n)? {
                let row_max = self.op_state.get::<TcPolicy>().row_max;
                // dout's f16 copy in scratch slot 2, written by the row pass.
                let run = |nh: &DeviceMatrix<f16>| {
                    self.with_half_scratch(dout.rows, dout.cols, 2, |gh| attention_backward_tc(&g.handle, inputs, nh, gh, grads, row_max))
                };
                return match copy.of(n) {
                    Some(nh) => run(nh),
                    // Not the forward's n: cast it (scratch slot 1).
                    None => self.with_half(n, 1, run),
                };
            }
            if self.half_gathers(h) {
                self.with_half(h, 1, |hh| self.with_half(dout, 2, |gh| attention_backward(&g.handle, inputs, Some((hh, gh)), grads)))
            } else {
                attention_backward(&g.handle, inputs, None, grads)
            }
        })
    }
}
