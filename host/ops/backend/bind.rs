//! Rewriting a model's graph and node data in place, for a model built once at a capacity and
//! rebound to every sampled batch (`sample::bound`): the buffers stay, only the batch's arrays
//! are copied into them. Shapes (rows, columns, nonzeros) never change: the caller pads every
//! batch to the capacity, so the kernels see the same sizes and no buffer is reallocated.
//!
//! On the GPU the graph's device arrays live in its handle's cache (shared `Arc`s): they are
//! overwritten through their raw addresses with copies queued on the backend's one stream, so
//! every kernel that read the previous batch runs before the new arrays land. Only the
//! CUDA-core kernels (HP and CSR SpMM on CSR-ordered values) read nothing but those arrays;
//! the tensor-core formats would need a translation per batch, so [`BindOps::can_bind`] says no
//! for them and the caller builds a model per batch instead.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use crate::error::{Error, Result};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::graph::Csr;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::{Impl, ValueOrder};
use crate::tensor::Matrix;
use crate::util::Real;

/// A pattern with its transpose, for every nonzero of the transpose the pattern's nonzero
/// holding the same edge, and the row of every nonzero of both (what the HP kernels read
/// beside the CSR): all made off the step's thread.
pub struct PaddedPattern {
    pub s: Csr,
    pub t: Csr,
    pub t_of: Vec<u32>,
    pub s_rows: Vec<u32>,
    pub t_rows: Vec<u32>,
}

impl PaddedPattern {
    /// `w` padded to `rows x cols` with `nnz` nonzeros ([`crate::graph::pad::pad_with_transpose`])
    /// with the COO rows of both sides.
    pub fn new(w: &crate::graph::pad::WithTranspose, rows: usize, cols: usize, nnz: usize) -> Result<Self> {
        let (s, t, t_of) = crate::graph::pad::pad_with_transpose(w, rows, cols, nnz)?;
        let (s_rows, t_rows) = (coo_rows(&s), coo_rows(&t));
        Ok(PaddedPattern { s, t, t_of, s_rows, t_rows })
    }
}

pub trait BindOps: Backend {
    /// Whether this backend's sparse kernels can run on a rebound graph (else: build per batch).
    fn can_bind(&self) -> bool;
    /// Rewrites `g` to the pattern `p.s` (the shape and nonzero count `g` was built with) and
    /// its transpose. The values of `p.s` are not the product's (those are [`Backend::Edges`],
    /// passed per call): only the pattern is rewritten.
    fn bind_graph(&self, g: &mut Self::Graph, p: &PaddedPattern) -> Result<()>;
    /// Rewrites `e` (of `values.len()` entries) with `values`.
    fn bind_edges(&self, e: &mut Self::Edges, values: &[f32]) -> Result<()>;
    /// Rewrites the first `rows.rows` rows of `m` (of `rows.cols` columns) with `rows`.
    fn bind_rows(&self, m: &mut Self::Mat, rows: &Matrix) -> Result<()>;
    /// Rewrites labels and membership bits (as many as `l` was made with).
    fn bind_labels(&self, l: &mut Self::Labels, labels: &[i32], mask_bits: &[u8]) -> Result<()>;
    /// Rewrites `ids` (of `values.len()` entries) with `values` (a live-row count, per batch).
    fn bind_ids(&self, ids: &mut Self::Ids, values: &[u32]) -> Result<()>;
    /// `dst := src` (a recorded step's statistics kept per batch), queued.
    fn copy_stats(&self, src: &Self::Stats, dst: &mut Self::Stats) -> Result<()>;
}

fn same_pattern(what: &str, built: (usize, usize, usize), s: &Csr, t: &Csr, t_of: &[u32]) -> Result<()> {
    let got = (s.n_rows(), s.n_cols(), s.nnz());
    if got != built || (t.n_rows(), t.n_cols(), t.nnz()) != (built.1, built.0, built.2) || t_of.len() != built.2 {
        return Err(Error::Shape(format!(
            "{what}: rebinding a {}x{} pattern of {} nonzeros to {}x{} with {} (transpose {}x{} with {}, map of {})",
            built.0,
            built.1,
            built.2,
            got.0,
            got.1,
            got.2,
            t.n_rows(),
            t.n_cols(),
            t.nnz(),
            t_of.len()
        )));
    }
    Ok(())
}

fn same_len(what: &str, have: usize, got: usize) -> Result<()> {
    if have != got {
        return Err(Error::Shape(format!("{what}: the buffer holds {have} entries, the batch gives {got}")));
    }
    Ok(())
}

impl<T: Real> BindOps for CpuBackend<T> {
    fn can_bind(&self) -> bool {
        true
    }
    fn bind_graph(&self, g: &mut HostGraph<T>, p: &PaddedPattern) -> Result<()> {
        same_pattern("bind_graph", (g.s.n_rows(), g.s.n_cols(), g.s.nnz()), &p.s, &p.t, &p.t_of)?;
        let values = p.s.values().iter().map(|&v| T::from_f64(v as f64)).collect();
        *g = HostGraph { s: p.s.clone(), t: p.t.clone(), t_of: p.t_of.clone(), values };
        Ok(())
    }
    fn bind_edges(&self, e: &mut Vec<T>, values: &[f32]) -> Result<()> {
        same_len("bind_edges", e.len(), values.len())?;
        e.iter_mut().zip(values).for_each(|(d, &v)| *d = T::from_f64(v as f64));
        Ok(())
    }
    fn bind_rows(&self, m: &mut HostMat<T>, rows: &Matrix) -> Result<()> {
        if rows.cols != m.cols || rows.rows > m.rows {
            return Err(Error::Shape(format!("bind_rows: {}x{} rows into a {}x{} matrix", rows.rows, rows.cols, m.rows, m.cols)));
        }
        m.data[..rows.data.len()].iter_mut().zip(&rows.data).for_each(|(d, &v)| *d = T::from_f64(v as f64));
        Ok(())
    }
    fn bind_labels(&self, l: &mut (Vec<i32>, Vec<u8>), labels: &[i32], mask_bits: &[u8]) -> Result<()> {
        same_len("bind_labels", l.0.len(), labels.len())?;
        same_len("bind_labels (membership)", l.1.len(), mask_bits.len())?;
        l.0.copy_from_slice(labels);
        l.1.copy_from_slice(mask_bits);
        Ok(())
    }
    fn bind_ids(&self, ids: &mut Vec<u32>, values: &[u32]) -> Result<()> {
        same_len("bind_ids", ids.len(), values.len())?;
        ids.copy_from_slice(values);
        Ok(())
    }
    fn copy_stats(&self, src: &[T; 4], dst: &mut [T; 4]) -> Result<()> {
        *dst = *src;
        Ok(())
    }
}

/// Queues a copy of `src` over the start of `dst`, a buffer other owners share (a graph
/// handle's cached arrays, reached through `Arc`s).
fn overwrite<T: DeviceRepr + ValidAsZeroBits + Clone + Default + Unpin>(
    gpu: &Gpu,
    dst: &DeviceVec<T>,
    src: &[T],
    what: &str,
) -> Result<()> {
    if src.len() > dst.len() {
        return Err(Error::Shape(format!("{what}: {} entries into a buffer of {}", src.len(), dst.len())));
    }
    if src.is_empty() {
        return Ok(());
    }
    // Through pinned memory: queued without waiting, so the host goes on to the next batch
    // while the copies and the step run (`src` may be freed at once: it was copied).
    gpu.copy_htod_pinned(dst.ptr(gpu), src.len(), |host: &mut [T]| host.clone_from_slice(src)).map_err(|e| match e {
        Error::Cuda { context, msg } => Error::Cuda { context: format!("{what}: {context}"), msg },
        e => e,
    })
}

/// The row of every nonzero of `s` (what the HP kernels read beside the CSR).
pub fn coo_rows(s: &Csr) -> Vec<u32> {
    let mut rows = Vec::with_capacity(s.nnz());
    for (r, w) in s.row_ptr().windows(2).enumerate() {
        rows.extend(std::iter::repeat_n(r as u32, (w[1] - w[0]) as usize));
    }
    rows
}

impl BindOps for CudaBackend {
    fn can_bind(&self) -> bool {
        self.plan.order == ValueOrder::Csr && matches!(self.plan.spmm, Impl::Hp | Impl::Csr)
    }
    fn bind_graph(&self, g: &mut GpuGraph, p: &PaddedPattern) -> Result<()> {
        if !self.can_bind() {
            return Err(Error::Unsupported(format!("rebinding a graph for SpMM {:?} on {:?} values", self.plan.spmm, self.plan.order)));
        }
        let h = &g.handle;
        let built = h.csr();
        same_pattern("bind_graph", (built.n_rows(), built.n_cols(), built.nnz()), &p.s, &p.t, &p.t_of)?;
        if p.s_rows.len() != p.s.nnz() || p.t_rows.len() != p.t.nnz() {
            return Err(Error::Shape("bind_graph: COO rows of another length than the pattern's nonzeros".into()));
        }
        let th = h.transpose()?;
        for (handle, csr, rows) in [(&**h, &p.s, &p.s_rows), (&*th, &p.t, &p.t_rows)] {
            let dev = handle.device_csr()?;
            overwrite(&self.gpu, &dev.row_ptr, csr.row_ptr(), "bind_graph: row_ptr")?;
            overwrite(&self.gpu, &dev.col_idx, csr.col_idx(), "bind_graph: col_idx")?;
            overwrite(&self.gpu, &handle.device_coo_rows()?.0, rows, "bind_graph: COO rows")?;
        }
        // Read by `transpose_edges` (sparse input dropout): Sᵀ's nonzero -> S's.
        overwrite(&self.gpu, &*h.transpose_map(ValueOrder::Csr)?, &p.t_of, "bind_graph: transpose map")
    }
    fn bind_edges(&self, e: &mut DeviceVec<f32>, values: &[f32]) -> Result<()> {
        same_len("bind_edges", e.len(), values.len().max(1))?;
        overwrite(&self.gpu, e, values, "bind_edges")
    }
    fn bind_rows(&self, m: &mut DeviceMatrix<f32>, rows: &Matrix) -> Result<()> {
        if rows.cols != m.cols || rows.rows > m.rows {
            return Err(Error::Shape(format!("bind_rows: {}x{} rows into a {}x{} matrix", rows.rows, rows.cols, m.rows, m.cols)));
        }
        let (ld, cols) = (m.ld, rows.cols);
        let dst = m.ptr_mut();
        // The batch's rows written padded straight into pinned memory (padding columns zero).
        self.gpu.copy_htod_pinned(dst, rows.rows * ld, |host: &mut [f32]| {
            for (r, row) in host.chunks_mut(ld.max(1)).enumerate() {
                row[..cols].copy_from_slice(&rows.data[r * cols..(r + 1) * cols]);
                row[cols..].fill(0.0);
            }
        })
    }
    fn bind_labels(&self, l: &mut (DeviceVec<i32>, DeviceVec<u8>), labels: &[i32], mask_bits: &[u8]) -> Result<()> {
        same_len("bind_labels", l.0.len(), labels.len().max(1))?;
        same_len("bind_labels (membership)", l.1.len(), mask_bits.len().max(1))?;
        overwrite(&self.gpu, &l.0, labels, "bind_labels")?;
        overwrite(&self.gpu, &l.1, mask_bits, "bind_labels (membership)")
    }
    fn bind_ids(&self, ids: &mut DeviceVec<u32>, values: &[u32]) -> Result<()> {
        same_len("bind_ids", ids.len(), values.len().max(1))?;
        overwrite(&self.gpu, ids, values, "bind_ids")
    }
    fn copy_stats(&self, src: &DeviceVec<f32>, dst: &mut DeviceVec<f32>) -> Result<()> {
        same_len("copy_stats", dst.len(), src.len())?;
        self.gpu.stream().memcpy_dtod(src.slice(), dst.slice_mut()).map_err(|e| Error::cuda("copy_stats", e))
    }
}
