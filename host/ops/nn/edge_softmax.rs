//! AGNN attention: alpha = softmax over each row's edges of beta * cos, and its backward
//! (with d beta): CPU (CSR order) and the launchers of `kernels-gpu/src/nn/edge_softmax.rs`
//! (values in either [`ValueOrder`]: CSR order, or the ME-BCRS (k = 8) slot `csr_to_slot[e]`
//! of each CSR edge e; slots that hold no edge are never touched). Also the plain row softmax
//! (beta = 1) of SDDMM scores on a graph handle, on the CPU and with its own kernel
//! (`kernels-gpu/src/sddmm/`), and its f64 reference.

use rayon::prelude::*;

use super::{check_gpu, check_matrix_64, csr_nnz, row_runs, row_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{
    EdgeSoftmaxBackwardArgs, EdgeSoftmaxBackwardLongArgs, EdgeSoftmaxScaledArgs, EdgeSoftmaxScaledLongArgs, SoftmaxBackwardEdges,
    SoftmaxScaledEdges, edge_softmax_backward_f32, edge_softmax_backward_long_f32, edge_softmax_scaled_f32, edge_softmax_scaled_long_f32,
};
use crate::gpu::abi::sddmm::{EdgeSoftmaxArgs, edge_softmax_f32};
use crate::gpu::launch::{Kernel, Ptr, Shape};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::graph::Csr;
use crate::ops::GraphHandle;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::sddmm::ValueOrder;
use crate::shared::config::{NN_EDGE_GROUP, NN_LONG_ROW, NN_LONG_ROW_BLOCK};
use crate::util::Real;

/// What the backward reads of its forward: `beta` (1 x 1), the cosines it scaled and the
/// softmax `alpha` (one value per edge each).
pub struct Softmaxed<'a, M: ?Sized, E: ?Sized> {
    pub beta: &'a M,
    pub cos: &'a E,
    pub alpha: &'a E,
}

// By hand: references copy whatever M and E are (a derive would ask them to be Copy).
impl<M: ?Sized, E: ?Sized> Clone for Softmaxed<'_, M, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: ?Sized, E: ?Sized> Copy for Softmaxed<'_, M, E> {}

/// alpha_e = exp(s_e - max_row s) / sum_row exp(s - max_row s) with s_e = beta * cos_e, values
/// in CSR order (one per edge). Rows without edges write nothing.
pub fn edge_softmax_scaled_cpu<T: Real>(row_ptr: &[u32], beta: T, cos: &[T], alpha: &mut [T]) {
    let nnz = csr_nnz(row_ptr);
    assert_eq!(cos.len(), nnz, "edge_softmax_scaled_cpu: {} cos values for {nnz} edges", cos.len());
    assert_eq!(alpha.len(), nnz, "edge_softmax_scaled_cpu: {} alpha values for {nnz} edges", alpha.len());
    row_runs(row_ptr, alpha).into_par_iter().for_each(|(r0, nr, out)| {
        let off = row_ptr[r0] as usize;
        for r in r0..r0 + nr {
            let (a, b) = (row_ptr[r] as usize, row_ptr[r + 1] as usize);
            if a == b {
                continue;
            }
            let s = &cos[a..b];
            let max = s.iter().fold(beta * s[0], |m, &c| m.max(beta * c));
            let mut sum = T::zero();
            for (o, &c) in out[a - off..b - off].iter_mut().zip(s) {
                *o = (beta * c - max).exp();
                sum += *o;
            }
            for o in &mut out[a - off..b - off] {
                *o /= sum;
            }
        }
    });
}

/// Backward of `edge_softmax_scaled_cpu`: per row dot = sum_e alpha_e dalpha_e,
/// ds_e = alpha_e (dalpha_e - dot), dcos_e = beta ds_e (written); returns
/// dbeta = sum over all edges of ds_e cos_e (summed in a fixed order: deterministic).
pub fn edge_softmax_backward_cpu<T: Real>(row_ptr: &[u32], beta: T, alpha: &[T], dalpha: &[T], cos: &[T], dcos: &mut [T]) -> T {
    let nnz = csr_nnz(row_ptr);
    for (name, len) in [("alpha", alpha.len()), ("dalpha", dalpha.len()), ("cos", cos.len()), ("dcos", dcos.len())] {
        assert_eq!(len, nnz, "edge_softmax_backward_cpu: {len} {name} values for {nnz} edges");
    }
    let partials: Vec<T> = row_runs(row_ptr, dcos)
        .into_par_iter()
        .map(|(r0, nr, out)| {
            let off = row_ptr[r0] as usize;
            let mut dbeta = T::zero();
            for r in r0..r0 + nr {
                let (a, b) = (row_ptr[r] as usize, row_ptr[r + 1] as usize);
                let dot: T = alpha[a..b].iter().zip(&dalpha[a..b]).map(|(&x, &y)| x * y).sum();
                for e in a..b {
                    let ds = alpha[e] * (dalpha[e] - dot);
                    out[e - off] = beta * ds;
                    dbeta += ds * cos[e];
                }
            }
            dbeta
        })
        .collect();
    partials.into_iter().fold(T::zero(), |a, b| a + b)
}

/// The device CSR row pointers and the slot map of `order` (null for CSR order), and the
/// number of value slots `order` needs.
fn edge_layout(g: &GraphHandle, order: ValueOrder) -> Result<(Ptr<u32>, Ptr<u32>, usize)> {
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let row_ptr = csr.row_ptr.arg(gpu);
    Ok(match order {
        ValueOrder::Csr => (row_ptr, Ptr::null(), g.csr().nnz()),
        ValueOrder::MeBcrs => (row_ptr, g.device_csr_to_slot()?.slots().arg(gpu), g.mebcrs(8)?.values.len()),
    })
}

/// The rows a warp is too narrow for (at least `NN_LONG_ROW` edges), on the device, built once
/// per graph: the `_long` kernels take them, a block per row.
struct LongRows {
    rows: DeviceVec<u32>,
    n: u32,
}

fn long_rows(g: &GraphHandle) -> Result<std::sync::Arc<LongRows>> {
    let gpu = g.gpu()?.clone();
    g.cached(NN_LONG_ROW as u64, || {
        let rp = g.csr().row_ptr();
        let rows: Vec<u32> = (0..g.csr().n_rows()).filter(|&r| rp[r + 1] - rp[r] >= NN_LONG_ROW).map(|r| r as u32).collect();
        Ok(LongRows { n: rows.len() as u32, rows: DeviceVec::upload(&gpu, &rows)? })
    })
}

/// Launches the `_long` twin of an edge kernel over the long rows (nothing when there are none);
/// `args` makes its arguments from the list of long rows.
///
/// # Safety
/// `args` must give the `_long` kernel the edges and values the warp kernel gets (valid as its
/// launch requires) with the list of long rows it is passed.
pub(super) unsafe fn launch_long<A: cudarc::driver::DeviceRepr>(
    gpu: &Gpu,
    g: &GraphHandle,
    kernel: Kernel<A>,
    args: impl FnOnce(Ptr<u32>) -> A,
) -> Result<()> {
    let long = long_rows(g)?;
    if long.n == 0 {
        return Ok(());
    }
    let args = args(long.rows.arg(gpu));
    // SAFETY: `long_rows` holds n rows of this graph, one per block; the edges and values are
    // valid as the caller guarantees; 32 floats of shared memory for the block reductions.
    unsafe { kernel.launch(gpu, Shape::linear(long.n, NN_LONG_ROW_BLOCK, 128), &args) }
}

fn check_beta(gpu: &std::sync::Arc<Gpu>, beta: &DeviceMatrix<f32>, what: &str) -> Result<()> {
    check_matrix_64(beta, what)?;
    if beta.rows != 1 || beta.cols != 1 {
        return Err(Error::Shape(format!("{what}: {} x {} (want 1 x 1)", beta.rows, beta.cols)));
    }
    check_gpu(gpu, beta.gpu(), what)
}

fn check_values(slots: usize, order: ValueOrder, vals: &[(&str, usize)], what: &str) -> Result<()> {
    for &(name, len) in vals {
        if len < slots {
            return Err(Error::Shape(format!("{what}: {name} has {len} values, {order:?} order needs {slots}")));
        }
    }
    Ok(())
}

fn rows_u32(g: &GraphHandle, what: &str) -> Result<u32> {
    u32::try_from(g.csr().n_rows())
        .ok()
        .filter(|&n| n <= u32::MAX / 2)
        .ok_or_else(|| Error::Unsupported(format!("{what}: {} rows", g.csr().n_rows())))
}

/// alpha = softmax_row(beta * cos) on the device, a warp per row; `beta` (1 x 1) is read when
/// the kernel runs. `cos` and `alpha` hold values in `order`; empty rows and non-edge slots are
/// not written. The first call on a graph uploads its CSR (and slot map): warm up before
/// capturing a CUDA graph.
pub fn edge_softmax_scaled(
    g: &GraphHandle,
    order: ValueOrder,
    beta: &DeviceMatrix<f32>,
    cos: &DeviceVec<f32>,
    alpha: &mut DeviceVec<f32>,
) -> Result<()> {
    let gpu = g.gpu()?.clone();
    check_beta(&gpu, beta, "edge_softmax_scaled beta")?;
    let n = rows_u32(g, "edge_softmax_scaled")?;
    let (row_ptr, slot_of, slots) = edge_layout(g, order)?;
    check_values(slots, order, &[("cos", cos.len()), ("alpha", alpha.len())], "edge_softmax_scaled")?;
    let edges = SoftmaxScaledEdges { row_ptr, slot_of, beta: beta.arg(), cos: cos.arg(&gpu), alpha: alpha.arg_mut(&gpu) };
    // SAFETY: row_ptr has n + 1 entries, every (mapped) edge index is below `slots`, which cos
    // and alpha cover; beta has one value.
    unsafe {
        launch_long(&gpu, g, edge_softmax_scaled_long_f32, |long_rows| EdgeSoftmaxScaledLongArgs { long_rows, edges })?;
        let args = EdgeSoftmaxScaledArgs { n_rows: n, long_min: NN_LONG_ROW, edges };
        edge_softmax_scaled_f32.launch(&gpu, row_shape(&gpu, n as u64, 32 / NN_EDGE_GROUP, 0), &args)
    }
}

/// Backward of `edge_softmax_scaled` on the device: writes dcos (edge slots only) and
/// dbeta (1 x 1; zeroed with a memset, then one atomic add per block).
pub fn edge_softmax_backward(
    g: &GraphHandle,
    order: ValueOrder,
    fwd: Softmaxed<'_, DeviceMatrix<f32>, DeviceVec<f32>>,
    dalpha: &DeviceVec<f32>,
    dcos: &mut DeviceVec<f32>,
    dbeta: &mut DeviceMatrix<f32>,
) -> Result<()> {
    let Softmaxed { beta, cos, alpha } = fwd;
    let gpu = g.gpu()?.clone();
    check_beta(&gpu, beta, "edge_softmax_backward beta")?;
    check_beta(&gpu, dbeta, "edge_softmax_backward dbeta")?;
    let n = rows_u32(g, "edge_softmax_backward")?;
    let (row_ptr, slot_of, slots) = edge_layout(g, order)?;
    check_values(
        slots,
        order,
        &[("alpha", alpha.len()), ("dalpha", dalpha.len()), ("cos", cos.len()), ("dcos", dcos.len())],
        "edge_softmax_backward",
    )?;
    dbeta.zero()?;
    let edges = SoftmaxBackwardEdges {
        row_ptr,
        slot_of,
        beta: beta.arg(),
        alpha: alpha.arg(&gpu),
        dalpha: dalpha.arg(&gpu),
        cos: cos.arg(&gpu),
        dcos: dcos.arg_mut(&gpu),
        dbeta: dbeta.arg_mut(),
    };
    // SAFETY: as in `edge_softmax_scaled`, plus dbeta (one value, zeroed above) and 4 bytes of
    // shared memory for the warp kernel's block sum.
    unsafe {
        launch_long(&gpu, g, edge_softmax_backward_long_f32, |long_rows| EdgeSoftmaxBackwardLongArgs { long_rows, edges })?;
        let args = EdgeSoftmaxBackwardArgs { n_rows: n, long_min: NN_LONG_ROW, edges };
        edge_softmax_backward_f32.launch(&gpu, row_shape(&gpu, n as u64, 32 / NN_EDGE_GROUP, 4), &args)
    }
}

// -- the op on each backend --

pub trait EdgeSoftmaxOp: Backend {
    /// `alpha = softmax over each row of beta * cos` (`beta` a `1 x 1` matrix).
    fn edge_softmax(&self, g: &Self::Graph, beta: &Self::Mat, cos: &Self::Edges, alpha: &mut Self::Edges) -> Result<()>;
    /// The backward of [`EdgeSoftmaxOp::edge_softmax`]: `dcos`, and `dbeta` (overwritten).
    fn edge_softmax_backward(
        &self,
        g: &Self::Graph,
        fwd: Softmaxed<'_, Self::Mat, Self::Edges>,
        dalpha: &Self::Edges,
        dcos: &mut Self::Edges,
        dbeta: &mut Self::Mat,
    ) -> Result<()>;
}

impl<T: Real> EdgeSoftmaxOp for CpuBackend<T> {
    fn edge_softmax(&self, g: &HostGraph<T>, beta: &HostMat<T>, cos: &Vec<T>, alpha: &mut Vec<T>) -> Result<()> {
        edge_softmax_scaled_cpu(g.s.row_ptr(), beta.data[0], cos, alpha);
        Ok(())
    }
    fn edge_softmax_backward(
        &self,
        g: &HostGraph<T>,
        fwd: Softmaxed<'_, HostMat<T>, Vec<T>>,
        dalpha: &Vec<T>,
        dcos: &mut Vec<T>,
        dbeta: &mut HostMat<T>,
    ) -> Result<()> {
        let Softmaxed { beta, cos, alpha } = fwd;
        dbeta.data[0] = edge_softmax_backward_cpu(g.s.row_ptr(), beta.data[0], alpha, dalpha, cos, dcos);
        Ok(())
    }
}

impl EdgeSoftmaxOp for CudaBackend {
    fn edge_softmax(&self, g: &GpuGraph, beta: &DeviceMatrix<f32>, cos: &DeviceVec<f32>, alpha: &mut DeviceVec<f32>) -> Result<()> {
        self.timed("edge softmax", || edge_softmax_scaled(&g.handle, self.plan.order, beta, cos, alpha))
    }
    fn edge_softmax_backward(
        &self,
        g: &GpuGraph,
        fwd: Softmaxed<'_, DeviceMatrix<f32>, DeviceVec<f32>>,
        dalpha: &DeviceVec<f32>,
        dcos: &mut DeviceVec<f32>,
        dbeta: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("edge softmax backward", || edge_softmax_backward(&g.handle, self.plan.order, fwd, dalpha, dcos, dbeta))
    }
}

/// Row-wise softmax of CSR-ordered values, max-subtracted; empty rows produce nothing (the
/// one CPU edge softmax, [`edge_softmax_scaled_cpu`], with β = 1).
pub fn edge_softmax_cpu(s: &Csr, values: &[f32]) -> Vec<f32> {
    assert_eq!(values.len(), s.nnz(), "one value per nonzero");
    let mut out = vec![0f32; values.len()];
    edge_softmax_scaled_cpu(s.row_ptr(), 1.0, values, &mut out);
    out
}

/// The same in f64.
pub fn edge_softmax_reference_f64(s: &Csr, values: &[f32]) -> Vec<f64> {
    assert_eq!(values.len(), s.nnz(), "one value per nonzero");
    let v64: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    let mut out = vec![0f64; values.len()];
    edge_softmax_scaled_cpu(s.row_ptr(), 1.0, &v64, &mut out);
    out
}

/// CPU softmax of CSR-ordered values.
pub fn edge_softmax(g: &GraphHandle, values: &[f32]) -> Result<Vec<f32>> {
    if values.len() != g.csr().nnz() {
        return Err(Error::Shape(format!("{} values for {} nonzeros", values.len(), g.csr().nnz())));
    }
    Ok(edge_softmax_cpu(g.csr(), values))
}

/// In-place softmax of device values in `order` (a warp per row).
pub fn edge_softmax_device(g: &GraphHandle, values: &mut DeviceVec<f32>, order: ValueOrder) -> Result<()> {
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let slot_of = match order {
        ValueOrder::Csr => Ptr::null(),
        ValueOrder::MeBcrs => {
            let m = g.device_csr_to_slot()?;
            m.slots().arg(gpu)
        }
    };
    let n = g.csr().n_rows() as u32;
    let args = EdgeSoftmaxArgs { n_rows: n, row_ptr: csr.row_ptr.arg(gpu), slot_of, vals: values.arg_mut(gpu) };
    // SAFETY: row_ptr has n + 1 entries and every (mapped) index is inside `values`, which
    // holds the graph's values in `order`.
    unsafe { edge_softmax_f32.launch(gpu, Shape::linear(n.div_ceil(8), 256, 0), &args) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_rows_sum_to_one() {
        let s = Csr::from_triplets(3, 3, &[(0, 1, 2.0), (0, 2, -1.0), (2, 0, 0.5)]).unwrap();
        let sm = edge_softmax_cpu(&s, &[4.0, -3.0, 2.5]);
        assert!((sm[0] + sm[1] - 1.0).abs() < 1e-6 && (sm[2] - 1.0).abs() < 1e-6);
        assert!(sm[0] > sm[1]);
        let r = edge_softmax_reference_f64(&s, &[4.0, -3.0, 2.5]);
        assert!((r[0] - sm[0] as f64).abs() < 1e-6);
        // Large values do not overflow (max-subtracted).
        let big = edge_softmax_cpu(&s, &[1000.0, 999.0, -1000.0]);
        assert!(big.iter().all(|v| v.is_finite()));
    }
}
