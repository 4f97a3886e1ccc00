//! GAT's per-node attention scores: for every node i and head h, s[i][h] = <(W h_i)_h, a_h>
//! with `wh` = W h as one n x (H F) matrix and `a` = (a_1, ..., a_H) as 1 x (H F) (PyG's
//! `att_src` / `att_dst`, shape (1, H, F)). Computed per node, never per edge: the edge logits
//! gather two of these per edge. Backward: dwh[i][c] += ds[i][h(c)] a[c] and da = column sums of
//! prod[i][c] = ds[i][h(c)] wh[i][c] (the caller runs `col_sums`, so the GPU needs no atomics
//! here). CPU and the launchers of `kernels-gpu/src/nn/gat_scores.rs`.

use rayon::prelude::*;

use super::{ROW_BLOCK, check_gpu, check_matrix_64, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{GatScoresArgs, GatScoresBackwardArgs, gat_scores_backward_f32, gat_scores_f32};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// (heads, head_dim) from the shapes: wh n x (H F), a 1 x (H F), s n x H.
fn check_shapes(wh: (usize, usize), a: (usize, usize), s: (usize, usize), what: &str) -> Result<(usize, usize)> {
    let heads = s.1;
    if heads == 0 || a != (1, wh.1) || s.0 != wh.0 || !wh.1.is_multiple_of(heads) {
        return Err(Error::Shape(format!(
            "{what}: wh {}x{}, a {}x{}, scores {}x{} (want wh n x H F, a 1 x H F, scores n x H)",
            wh.0, wh.1, a.0, a.1, s.0, s.1
        )));
    }
    Ok((heads, wh.1 / heads))
}

/// s[i][h] = sum_f wh[i][h F + f] a[h F + f].
pub fn gat_scores_cpu<T: Real>(wh: &HostMat<T>, a: &HostMat<T>, s: &mut HostMat<T>) -> Result<()> {
    let (heads, f) = check_shapes((wh.rows, wh.cols), (a.rows, a.cols), (s.rows, s.cols), "gat_scores")?;
    s.data.par_chunks_mut(heads).with_min_len(ROW_BLOCK).enumerate().for_each(|(i, out)| {
        let row = wh.row(i);
        for (h, o) in out.iter_mut().enumerate() {
            *o = (h * f..(h + 1) * f).map(|c| row[c] * a.data[c]).sum();
        }
    });
    Ok(())
}

/// dwh[i][c] += ds[i][c / F] a[c]; prod[i][c] = ds[i][c / F] wh[i][c] (da = col_sums(prod)).
pub fn gat_scores_backward_cpu<T: Real>(wh: &HostMat<T>, a: &HostMat<T>, ds: &HostMat<T>, dwh: &mut HostMat<T>, prod: &mut HostMat<T>) -> Result<()> {
    let (heads, f) = check_shapes((wh.rows, wh.cols), (a.rows, a.cols), (ds.rows, ds.cols), "gat_scores_backward")?;
    for m in [&*dwh, &*prod] {
        if (m.rows, m.cols) != (wh.rows, wh.cols) {
            return Err(Error::Shape(format!("gat_scores_backward: {}x{} gradient for a {}x{} wh", m.rows, m.cols, wh.rows, wh.cols)));
        }
    }
    let w = wh.cols;
    if w == 0 {
        return Ok(());
    }
    dwh.data.par_chunks_mut(w).zip(prod.data.par_chunks_mut(w)).with_min_len(ROW_BLOCK).enumerate().for_each(|(i, (dw, p))| {
        let (row, d) = (wh.row(i), &ds.data[i * heads..(i + 1) * heads]);
        for c in 0..w {
            let g = d[c / f];
            dw[c] += g * a.data[c];
            p[c] = g * row[c];
        }
    });
    Ok(())
}

fn check_device(mats: &[&DeviceMatrix<f32>], what: &str) -> Result<()> {
    for m in mats {
        check_matrix_64(m, what)?;
        check_gpu(mats[0].gpu(), m.gpu(), what)?;
    }
    Ok(())
}

/// [`gat_scores_cpu`] on the device, a thread per score (padding columns written 0).
pub fn gat_scores(wh: &DeviceMatrix<f32>, a: &DeviceMatrix<f32>, s: &mut DeviceMatrix<f32>) -> Result<()> {
    check_device(&[wh, a, s], "gat_scores")?;
    let (heads, f) = check_shapes((wh.rows, wh.cols), (a.rows, a.cols), (s.rows, s.cols), "gat_scores")?;
    let gpu = s.gpu().clone();
    let items = (s.rows * s.ld) as u64;
    if items == 0 {
        return Ok(());
    }
    let args = GatScoresArgs {
        rows: wh.rows as u32,
        heads: heads as u32,
        head_dim: f as u32,
        wh_ld: wh.ld as u32,
        s_ld: s.ld as u32,
        wh: wh.arg(),
        a: a.arg(),
        s: s.arg_mut(),
    };
    // SAFETY: valid matrices of the checked shapes: every row of s is read from the same row of
    // wh over columns below H F, and a holds H F values.
    unsafe { gat_scores_f32.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

/// [`gat_scores_backward_cpu`] on the device, a thread per element of wh's padded rows.
pub fn gat_scores_backward(
    wh: &DeviceMatrix<f32>,
    a: &DeviceMatrix<f32>,
    ds: &DeviceMatrix<f32>,
    dwh: &mut DeviceMatrix<f32>,
    prod: &mut DeviceMatrix<f32>,
) -> Result<()> {
    check_device(&[wh, a, ds, dwh, prod], "gat_scores_backward")?;
    let (heads, f) = check_shapes((wh.rows, wh.cols), (a.rows, a.cols), (ds.rows, ds.cols), "gat_scores_backward")?;
    for m in [&*dwh, &*prod] {
        if (m.rows, m.cols) != (wh.rows, wh.cols) {
            return Err(Error::Shape(format!("gat_scores_backward: {}x{} gradient for a {}x{} wh", m.rows, m.cols, wh.rows, wh.cols)));
        }
    }
    let gpu = wh.gpu().clone();
    let items = (wh.rows * wh.ld) as u64;
    if items == 0 {
        return Ok(());
    }
    let args = GatScoresBackwardArgs {
        rows: wh.rows as u32,
        heads: heads as u32,
        head_dim: f as u32,
        wh_ld: wh.ld as u32,
        s_ld: ds.ld as u32,
        wh: wh.arg(),
        a: a.arg(),
        ds: ds.arg(),
        dwh: dwh.arg_mut(),
        prod: prod.arg_mut(),
    };
    // SAFETY: wh, dwh and prod share one shape and stride (valid, checked), ds has a row per row
    // of wh and H columns, a holds H F values.
    unsafe { gat_scores_backward_f32.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

// -- the op on each backend --

/// GAT's per-node scores and their backward.
pub trait GatScoresOp: Backend {
    /// `s[i][h] = <wh[i, h F .. (h + 1) F], a[h F .. (h + 1) F]>` (`s` is n x H).
    fn gat_scores(&self, wh: &Self::Mat, a: &Self::Mat, s: &mut Self::Mat) -> Result<()>;
    /// `dwh += ds ⊗ a` per head; `prod = ds ⊗ wh` per head, whose column sums are `da`.
    fn gat_scores_backward(&self, wh: &Self::Mat, a: &Self::Mat, ds: &Self::Mat, dwh: &mut Self::Mat, prod: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> GatScoresOp for CpuBackend<T> {
    fn gat_scores(&self, wh: &HostMat<T>, a: &HostMat<T>, s: &mut HostMat<T>) -> Result<()> {
        gat_scores_cpu(wh, a, s)
    }
    fn gat_scores_backward(&self, wh: &HostMat<T>, a: &HostMat<T>, ds: &HostMat<T>, dwh: &mut HostMat<T>, prod: &mut HostMat<T>) -> Result<()> {
        gat_scores_backward_cpu(wh, a, ds, dwh, prod)
    }
}

impl GatScoresOp for CudaBackend {
    fn gat_scores(&self, wh: &DeviceMatrix<f32>, a: &DeviceMatrix<f32>, s: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("gat scores", || gat_scores(wh, a, s))
    }
    fn gat_scores_backward(
        &self,
        wh: &DeviceMatrix<f32>,
        a: &DeviceMatrix<f32>,
        ds: &DeviceMatrix<f32>,
        dwh: &mut DeviceMatrix<f32>,
        prod: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("gat scores backward", || gat_scores_backward(wh, a, ds, dwh, prod))
    }
}
