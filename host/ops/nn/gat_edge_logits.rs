//! GAT's edge logits of one head, e_ij = LeakyReLU(s_dst[i][h] + s_src[j][h]) on the edges of
//! S (row i = target, column j = source), from the per-node scores of `gat_scores`; the
//! backward dz_ij = de_ij LeakyReLU'(z_ij) with its row sums ds_dst[i][h]; and plain row sums of
//! edge values into one column of a matrix (ds_src: the row sums of dz laid out for Sᵀ, i.e.
//! S's column sums, without atomics). CPU (CSR order) and the launchers of
//! `kernels-gpu/src/nn/gat_edge_logits.rs` (values in either [`ValueOrder`]): a thread per edge
//! for the logits; a lane group per short row and a block per long row for dz with its sums
//! and for the plain sums.

use rayon::prelude::*;

use super::edge_softmax::launch_long;
use super::{check_gpu, check_matrix, elementwise_shape, row_runs, row_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{
    EdgeRowSumsArgs, EdgeRowSumsLongArgs, GatEdgeLogitsArgs, GatEdgeLogitsBackwardArgs, GatEdgeLogitsBackwardLongArgs, GatEdges,
    RowSumEdges, edge_row_sums_f32, edge_row_sums_long_f32, gat_edge_logits_backward_f32, gat_edge_logits_backward_long_f32,
    gat_edge_logits_f32,
};
use crate::gpu::launch::Ptr;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::graph::Csr;
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::backend::{Backend, Side};
use crate::ops::{GraphHandle, ValueOrder};
use crate::shared::config::{NN_EDGE_GROUP, NN_LONG_ROW};
use crate::util::Real;

/// PyG's GATConv `negative_slope`.
pub const GAT_SLOPE: f32 = 0.2;

/// One head's edge logits as the op takes them: the per-node scores of every head (n x H
/// each), the head, and LeakyReLU's negative slope.
pub struct HeadLogits<'a, M: ?Sized> {
    pub s_dst: &'a M,
    pub s_src: &'a M,
    pub head: usize,
    pub slope: f32,
}

// By hand: references copy whatever M is (a derive would ask M: Copy).
impl<M: ?Sized> Clone for HeadLogits<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: ?Sized> Copy for HeadLogits<'_, M> {}

fn check_scores(s: &Csr, s_dst: (usize, usize), s_src: (usize, usize), head: usize, what: &str) -> Result<()> {
    if s_dst.0 != s.n_rows() || s_src.0 != s.n_cols() || s_dst.1 != s_src.1 || head >= s_dst.1 {
        return Err(Error::Shape(format!(
            "{what}: S {}x{}, s_dst {}x{}, s_src {}x{}, head {head}",
            s.n_rows(),
            s.n_cols(),
            s_dst.0,
            s_dst.1,
            s_src.0,
            s_src.1
        )));
    }
    Ok(())
}

fn check_len(len: usize, want: usize, name: &str, what: &str) -> Result<()> {
    if len < want {
        return Err(Error::Shape(format!("{what}: {name} has {len} values for {want} edge slots")));
    }
    Ok(())
}

/// logits_e = LeakyReLU(s_dst[row(e)][head] + s_src[col(e)][head], slope), CSR order.
pub fn gat_edge_logits_cpu<T: Real>(s: &Csr, x: HeadLogits<'_, HostMat<T>>, logits: &mut [T]) -> Result<()> {
    let HeadLogits { s_dst, s_src, head, slope } = x;
    let slope = T::from_f64(slope as f64);
    check_scores(s, (s_dst.rows, s_dst.cols), (s_src.rows, s_src.cols), head, "gat_edge_logits")?;
    check_len(logits.len(), s.nnz(), "logits", "gat_edge_logits")?;
    let (rp, ci, h) = (s.row_ptr(), s.col_idx(), s_dst.cols);
    row_runs(rp, &mut logits[..s.nnz()]).into_par_iter().for_each(|(r0, nr, out)| {
        let off = rp[r0] as usize;
        for r in r0..r0 + nr {
            for e in rp[r] as usize..rp[r + 1] as usize {
                let z = s_dst.data[r * h + head] + s_src.data[ci[e] as usize * h + head];
                out[e - off] = if z > T::zero() { z } else { slope * z };
            }
        }
    });
    Ok(())
}

/// dz_e = de_e (z_e > 0 ? 1 : slope) and ds_dst[r][head] = sum of row r's dz (every row
/// written, 0 for an empty one); CSR order.
pub fn gat_edge_logits_backward_cpu<T: Real>(
    s: &Csr,
    x: HeadLogits<'_, HostMat<T>>,
    de: &[T],
    dz: &mut [T],
    ds_dst: &mut HostMat<T>,
) -> Result<()> {
    let HeadLogits { s_dst, s_src, head, slope } = x;
    let slope = T::from_f64(slope as f64);
    check_scores(s, (s_dst.rows, s_dst.cols), (s_src.rows, s_src.cols), head, "gat_edge_logits_backward")?;
    check_len(de.len(), s.nnz(), "de", "gat_edge_logits_backward")?;
    check_len(dz.len(), s.nnz(), "dz", "gat_edge_logits_backward")?;
    if (ds_dst.rows, ds_dst.cols) != (s_dst.rows, s_dst.cols) {
        return Err(Error::Shape(format!(
            "gat_edge_logits_backward: ds_dst {}x{} for scores {}x{}",
            ds_dst.rows, ds_dst.cols, s_dst.rows, s_dst.cols
        )));
    }
    let (rp, ci, h) = (s.row_ptr(), s.col_idx(), s_dst.cols);
    let sums: Vec<(usize, Vec<T>)> = row_runs(rp, &mut dz[..s.nnz()])
        .into_par_iter()
        .map(|(r0, nr, out)| {
            let off = rp[r0] as usize;
            let mut sums = vec![T::zero(); nr];
            for r in r0..r0 + nr {
                for e in rp[r] as usize..rp[r + 1] as usize {
                    let z = s_dst.data[r * h + head] + s_src.data[ci[e] as usize * h + head];
                    let d = if z > T::zero() { de[e] } else { slope * de[e] };
                    out[e - off] = d;
                    sums[r - r0] += d;
                }
            }
            (r0, sums)
        })
        .collect();
    for (r0, run) in sums {
        for (k, v) in run.into_iter().enumerate() {
            ds_dst.data[(r0 + k) * h + head] = v;
        }
    }
    Ok(())
}

/// out[r][col] = sum of row r's values (CSR order of `s`; every row written).
pub fn edge_row_sums_cpu<T: Real>(s: &Csr, values: &[T], col: usize, out: &mut HostMat<T>) -> Result<()> {
    check_len(values.len(), s.nnz(), "values", "edge_row_sums")?;
    if out.rows != s.n_rows() || col >= out.cols {
        return Err(Error::Shape(format!("edge_row_sums: column {col} of a {}x{} matrix for {} rows", out.rows, out.cols, s.n_rows())));
    }
    let (rp, w) = (s.row_ptr(), out.cols);
    for r in 0..s.n_rows() {
        out.data[r * w + col] = values[rp[r] as usize..rp[r + 1] as usize].iter().fold(T::zero(), |a, &v| a + v);
    }
    Ok(())
}

/// Rows of `g` as the kernels index them.
fn rows_u32(g: &GraphHandle, what: &str) -> Result<u32> {
    u32::try_from(g.csr().n_rows())
        .ok()
        .filter(|&n| n <= u32::MAX / 2)
        .ok_or_else(|| Error::Unsupported(format!("{what}: {} rows", g.csr().n_rows())))
}

/// The slot map of `order` (null for CSR order) and the number of value slots it needs.
fn device_slots(g: &GraphHandle, order: ValueOrder) -> Result<(Ptr<u32>, usize)> {
    let gpu = g.gpu()?;
    let slot_of = match order {
        ValueOrder::Csr => Ptr::null(),
        ValueOrder::MeBcrs => g.device_csr_to_slot()?.slots().arg(gpu),
    };
    Ok((slot_of, g.value_len(order)?))
}

fn gat_edges(g: &GraphHandle, order: ValueOrder, x: HeadLogits<'_, DeviceMatrix<f32>>, what: &str) -> Result<(GatEdges, usize)> {
    let HeadLogits { s_dst, s_src, head, slope } = x;
    let gpu = g.gpu()?;
    check_matrix(s_dst, what)?;
    check_matrix(s_src, what)?;
    check_gpu(gpu, s_dst.gpu(), what)?;
    check_gpu(gpu, s_src.gpu(), what)?;
    check_scores(g.csr(), (s_dst.rows, s_dst.cols), (s_src.rows, s_src.cols), head, what)?;
    if s_dst.ld != s_src.ld {
        return Err(Error::Shape(format!("{what}: score strides {} and {}", s_dst.ld, s_src.ld)));
    }
    rows_u32(g, what)?;
    // row_ptr is u32, so nnz fits too.
    let nnz = g.csr().nnz() as u32;
    let (slot_of, slots) = device_slots(g, order)?;
    let edges = GatEdges {
        nnz,
        head: head as u32,
        s_ld: s_dst.ld as u32,
        slope,
        row_ptr: g.device_csr()?.row_ptr.arg(gpu),
        row_of: g.device_coo_rows()?.0.arg(gpu),
        col_idx: g.device_csr()?.col_idx.arg(gpu),
        slot_of,
        s_dst: s_dst.arg(),
        s_src: s_src.arg(),
    };
    Ok((edges, slots))
}

/// [`gat_edge_logits_cpu`] on the device, a thread per edge, values in `order` (non-edge slots
/// untouched). The first call on a graph uploads its COO rows, CSR (and slot map): warm up
/// before capturing.
pub fn gat_edge_logits(
    g: &GraphHandle,
    order: ValueOrder,
    x: HeadLogits<'_, DeviceMatrix<f32>>,
    logits: &mut DeviceVec<f32>,
) -> Result<()> {
    let (edges, slots) = gat_edges(g, order, x, "gat_edge_logits")?;
    check_len(logits.len(), slots, "logits", "gat_edge_logits")?;
    let gpu = g.gpu()?.clone();
    if edges.nnz == 0 {
        return Ok(());
    }
    let args = GatEdgeLogitsArgs { edges, logits: logits.arg_mut(&gpu) };
    // SAFETY: row_of and col_idx have nnz entries, every row is a row of s_dst and every column
    // one of s_src (shapes checked), head < the score columns, and every (mapped) edge index is
    // below `slots`, which logits covers.
    unsafe { gat_edge_logits_f32.launch(&gpu, elementwise_shape(&gpu, edges.nnz as u64), &args) }
}

/// [`gat_edge_logits_backward_cpu`] on the device: dz and its row sums in one pass, a lane
/// group per short row and a thread block per long row (no atomics: the same bits every run).
pub fn gat_edge_logits_backward(
    g: &GraphHandle,
    order: ValueOrder,
    x: HeadLogits<'_, DeviceMatrix<f32>>,
    de: &DeviceVec<f32>,
    dz: &mut DeviceVec<f32>,
    ds_dst: &mut DeviceMatrix<f32>,
) -> Result<()> {
    let what = "gat_edge_logits_backward";
    let (edges, slots) = gat_edges(g, order, x, what)?;
    let s_dst = x.s_dst;
    check_len(de.len(), slots, "de", what)?;
    check_len(dz.len(), slots, "dz", what)?;
    check_matrix(ds_dst, what)?;
    if (ds_dst.rows, ds_dst.cols, ds_dst.ld) != (s_dst.rows, s_dst.cols, s_dst.ld) {
        return Err(Error::Shape(format!("{what}: ds_dst {}x{} for scores {}x{}", ds_dst.rows, ds_dst.cols, s_dst.rows, s_dst.cols)));
    }
    let gpu = g.gpu()?.clone();
    check_gpu(&gpu, ds_dst.gpu(), what)?;
    let n_rows = rows_u32(g, what)?;
    if n_rows == 0 {
        return Ok(());
    }
    let (de, dz, ds_dst) = (de.arg(&gpu), dz.arg_mut(&gpu), ds_dst.arg_mut());
    // SAFETY: as in `gat_edge_logits`, with row_ptr's n_rows + 1 entries; de and dz cover
    // `slots`, ds_dst has the shape and stride of s_dst; the long kernel gets this graph's long
    // rows and the short kernel skips exactly those.
    unsafe {
        launch_long(&gpu, g, gat_edge_logits_backward_long_f32, |long_rows| GatEdgeLogitsBackwardLongArgs {
            long_rows,
            edges,
            de,
            dz,
            ds_dst,
        })?;
        let args = GatEdgeLogitsBackwardArgs { n_rows, long_min: NN_LONG_ROW, edges, de, dz, ds_dst };
        gat_edge_logits_backward_f32.launch(&gpu, row_shape(&gpu, n_rows as u64, 32 / NN_EDGE_GROUP, 0), &args)
    }
}

/// [`edge_row_sums_cpu`] on the device, values in `order` for the pattern of `g`: rows shorter
/// than `NN_LONG_ROW` edges a lane group each, longer ones a thread block each (the same bits
/// on every run: no atomics).
pub fn edge_row_sums(g: &GraphHandle, order: ValueOrder, values: &DeviceVec<f32>, col: usize, out: &mut DeviceMatrix<f32>) -> Result<()> {
    let what = "edge_row_sums";
    let gpu = g.gpu()?.clone();
    check_matrix(out, what)?;
    check_gpu(&gpu, out.gpu(), what)?;
    if out.rows != g.csr().n_rows() || col >= out.cols {
        return Err(Error::Shape(format!("{what}: column {col} of a {}x{} matrix for {} rows", out.rows, out.cols, g.csr().n_rows())));
    }
    let n_rows = rows_u32(g, what)?;
    let (slot_of, slots) = device_slots(g, order)?;
    check_len(values.len(), slots, "values", what)?;
    if n_rows == 0 {
        return Ok(());
    }
    let sums = RowSumEdges {
        col: col as u32,
        ld: out.ld as u32,
        row_ptr: g.device_csr()?.row_ptr.arg(&gpu),
        slot_of,
        values: values.arg(&gpu),
        out: out.arg_mut(),
    };
    // SAFETY: row_ptr has n_rows + 1 entries, every (mapped) edge index is below `slots` (which
    // values covers), out has n_rows rows with col < its columns; the long kernel gets this
    // graph's long rows and the short kernel skips exactly those.
    unsafe {
        launch_long(&gpu, g, edge_row_sums_long_f32, |long_rows| EdgeRowSumsLongArgs { long_rows, sums })?;
        let args = EdgeRowSumsArgs { n_rows, long_min: NN_LONG_ROW, sums };
        edge_row_sums_f32.launch(&gpu, row_shape(&gpu, n_rows as u64, 32 / NN_EDGE_GROUP, 0), &args)
    }
}

// -- the op on each backend --

/// GAT's edge logits of one head from the per-node scores, their backward, and edge row sums.
pub trait GatEdgeLogitsOp: Backend {
    /// `logits_ij = LeakyReLU(s_dst[i][head] + s_src[j][head], slope)` on the edges of S.
    fn gat_edge_logits(&self, g: &Self::Graph, x: HeadLogits<'_, Self::Mat>, logits: &mut Self::Edges) -> Result<()>;
    /// `dz = de ⊙ LeakyReLU'(z)`, and `ds_dst[:, head]` = its row sums.
    fn gat_edge_logits_backward(
        &self,
        g: &Self::Graph,
        x: HeadLogits<'_, Self::Mat>,
        de: &Self::Edges,
        dz: &mut Self::Edges,
        ds_dst: &mut Self::Mat,
    ) -> Result<()>;
    /// `out[:, col]` = the row sums of `values` on `side` of the pattern.
    fn edge_row_sums(&self, g: &Self::Graph, side: Side, values: &Self::Edges, col: usize, out: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> GatEdgeLogitsOp for CpuBackend<T> {
    fn gat_edge_logits(&self, g: &HostGraph<T>, x: HeadLogits<'_, HostMat<T>>, logits: &mut Vec<T>) -> Result<()> {
        gat_edge_logits_cpu(&g.s, x, logits)
    }
    fn gat_edge_logits_backward(
        &self,
        g: &HostGraph<T>,
        x: HeadLogits<'_, HostMat<T>>,
        de: &Vec<T>,
        dz: &mut Vec<T>,
        ds_dst: &mut HostMat<T>,
    ) -> Result<()> {
        gat_edge_logits_backward_cpu(&g.s, x, de, dz, ds_dst)
    }
    fn edge_row_sums(&self, g: &HostGraph<T>, side: Side, values: &Vec<T>, col: usize, out: &mut HostMat<T>) -> Result<()> {
        edge_row_sums_cpu(self.side(g, side), values, col, out)
    }
}

impl GatEdgeLogitsOp for CudaBackend {
    fn gat_edge_logits(&self, g: &GpuGraph, x: HeadLogits<'_, DeviceMatrix<f32>>, logits: &mut DeviceVec<f32>) -> Result<()> {
        self.timed("gat edge logits", || gat_edge_logits(&g.handle, self.plan.order, x, logits))
    }
    fn gat_edge_logits_backward(
        &self,
        g: &GpuGraph,
        x: HeadLogits<'_, DeviceMatrix<f32>>,
        de: &DeviceVec<f32>,
        dz: &mut DeviceVec<f32>,
        ds_dst: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("gat edge logits backward", || gat_edge_logits_backward(&g.handle, self.plan.order, x, de, dz, ds_dst))
    }
    fn edge_row_sums(&self, g: &GpuGraph, side: Side, values: &DeviceVec<f32>, col: usize, out: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("edge row sums", || {
            let h = g.side(side)?;
            edge_row_sums(&h, self.plan.order, values, col, out)
        })
    }
}
