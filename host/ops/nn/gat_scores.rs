//! GAT's per-node attention scores: for every node i and head h, s[i][h] = <(W h_i)_h, a_h>
//! with `wh` = W h as one n x (H F) matrix and `a` = (a_1, ..., a_H) as 1 x (H F) (PyG's
//! `att_src` / `att_dst`, shape (1, H, F)). Computed per node, never per edge: the edge logits
//! gather two of these per edge. Both vectors' scores in one op (Wh read once). Backward:
//! dwh[i][c] += ds[i][h(c)] a[c] and da = column sums of ds[i][h(c)] wh[i][c], both vectors in
//! one pass over Wh (the GPU sums da per block and adds atomically). CPU and the launchers of
//! `kernels-gpu/src/nn/gat_scores.rs`.

use rayon::prelude::*;

use super::{NN_BLOCK, NN_BLOCKS_PER_SM, ROW_BLOCK, check_gpu, check_matrix_64, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{
    GatScoresArgs, GatScoresBackwardArgs, gat_scores_backward_f32, gat_scores_f32, gat_scores_one_head_rows as one_head_rows,
};
use crate::gpu::launch::{PtrMut, Shape};
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

/// s[i][h] = sum_f wh[i][h F + f] a[h F + f], for each of (a_src, s_src) and (a_dst, s_dst).
pub fn gat_scores_cpu<T: Real>(wh: &HostMat<T>, a: Pair<&HostMat<T>>, s: Pair<&mut HostMat<T>>) -> Result<()> {
    for (a, s) in [(a.0, s.0), (a.1, s.1)] {
        let (heads, f) = check_shapes((wh.rows, wh.cols), (a.rows, a.cols), (s.rows, s.cols), "gat_scores")?;
        s.data.par_chunks_mut(heads).with_min_len(ROW_BLOCK).enumerate().for_each(|(i, out)| {
            let row = wh.row(i);
            for (h, o) in out.iter_mut().enumerate() {
                *o = (h * f..(h + 1) * f).map(|c| row[c] * a.data[c]).sum();
            }
        });
    }
    Ok(())
}

/// For each of (a_src, ds_src, da_src) and (a_dst, ds_dst, da_dst): dwh[i][c] += ds[i][c / F]
/// a[c] (where `dwh` is given) and da[c] = sum_i ds[i][c / F] wh[i][c] (overwritten).
pub fn gat_scores_backward_cpu<T: Real>(
    wh: &HostMat<T>,
    a: Pair<&HostMat<T>>,
    ds: Pair<&HostMat<T>>,
    dwh: Option<&mut HostMat<T>>,
    da: Pair<&mut HostMat<T>>,
) -> Result<()> {
    for (a, ds, da) in [(a.0, ds.0, &*da.0), (a.1, ds.1, &*da.1)] {
        check_shapes((wh.rows, wh.cols), (a.rows, a.cols), (ds.rows, ds.cols), "gat_scores_backward")?;
        let dwh_shape = dwh.as_ref().map_or((wh.rows, wh.cols), |m| (m.rows, m.cols));
        if dwh_shape != (wh.rows, wh.cols) || (da.rows, da.cols) != (a.rows, a.cols) {
            return Err(Error::Shape(format!(
                "gat_scores_backward: dwh {}x{} and da {}x{} for a {}x{} wh",
                dwh_shape.0, dwh_shape.1, da.rows, da.cols, wh.rows, wh.cols
            )));
        }
    }
    let (w, heads) = (wh.cols, ds.0.cols);
    if w == 0 {
        return Ok(());
    }
    let f = w / heads;
    let Some(dwh) = dwh else {
        vector_grads(wh, ds, da, heads, f);
        return Ok(());
    };
    dwh.data.par_chunks_mut(w).with_min_len(ROW_BLOCK).enumerate().for_each(|(i, dw)| {
        let (d_s, d_d) = (&ds.0.data[i * heads..(i + 1) * heads], &ds.1.data[i * heads..(i + 1) * heads]);
        for c in 0..w {
            dw[c] += d_s[c / f] * a.0.data[c] + d_d[c / f] * a.1.data[c];
        }
    });
    vector_grads(wh, ds, da, heads, f);
    Ok(())
}

/// da[c] = sum_i ds[i][c / F] wh[i][c] for both vectors.
fn vector_grads<T: Real>(wh: &HostMat<T>, ds: Pair<&HostMat<T>>, da: Pair<&mut HostMat<T>>, heads: usize, f: usize) {
    for (ds, da) in [(ds.0, da.0), (ds.1, da.1)] {
        for (c, g) in da.data.iter_mut().enumerate() {
            *g = (0..wh.rows).map(|i| ds.data[i * heads + c / f] * wh.row(i)[c]).sum();
        }
    }
}

/// (for att_src, for att_dst).
pub type Pair<T> = (T, T);

fn check_device(mats: &[&DeviceMatrix<f32>], what: &str) -> Result<()> {
    for m in mats {
        check_matrix_64(m, what)?;
        check_gpu(mats[0].gpu(), m.gpu(), what)?;
    }
    Ok(())
}

/// [`gat_scores_cpu`] on the device, a thread per (node, head) for both vectors (padding
/// columns written 0).
pub fn gat_scores(wh: &DeviceMatrix<f32>, a: Pair<&DeviceMatrix<f32>>, s: Pair<&mut DeviceMatrix<f32>>) -> Result<()> {
    check_device(&[wh, a.0, a.1, s.0, s.1], "gat_scores")?;
    let (heads, f) = check_shapes((wh.rows, wh.cols), (a.0.rows, a.0.cols), (s.0.rows, s.0.cols), "gat_scores")?;
    check_shapes((wh.rows, wh.cols), (a.1.rows, a.1.cols), (s.1.rows, s.1.cols), "gat_scores")?;
    if s.0.ld != s.1.ld || s.0.cols != s.1.cols {
        return Err(Error::Shape(format!(
            "gat_scores: the two score matrices differ ({} and {} columns, strides {} and {})",
            s.0.cols, s.1.cols, s.0.ld, s.1.ld
        )));
    }
    let gpu = wh.gpu().clone();
    // A thread a padded score column, or a row for one narrow head.
    let items = if one_head_rows(heads as u32, wh.ld as u32, s.0.ld as u32) { s.0.rows } else { s.0.rows * s.0.ld } as u64;
    if items == 0 {
        return Ok(());
    }
    let args = GatScoresArgs {
        rows: wh.rows as u32,
        heads: heads as u32,
        head_dim: f as u32,
        wh_ld: wh.ld as u32,
        s_ld: s.0.ld as u32,
        wh: wh.arg(),
        a_src: a.0.arg(),
        a_dst: a.1.arg(),
        s_src: s.0.arg_mut(),
        s_dst: s.1.arg_mut(),
    };
    // SAFETY: valid matrices of the checked shapes: every row of the scores (one shape and
    // stride) is read from the same row of wh over columns below H F, and each a holds H F values.
    unsafe { gat_scores_f32.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

/// Shared memory the backward's block may use for its column sums (2 floats per column).
const BACKWARD_SMEM_MAX: usize = 32 << 10;

/// [`gat_scores_backward_cpu`] on the device: one pass over wh's rows, the vectors' gradients
/// summed per block and added atomically (the order of those adds is not fixed, so the last
/// bits may differ between runs, as `col_sums`).
pub fn gat_scores_backward(
    wh: &DeviceMatrix<f32>,
    a: Pair<&DeviceMatrix<f32>>,
    ds: Pair<&DeviceMatrix<f32>>,
    dwh: Option<&mut DeviceMatrix<f32>>,
    da: Pair<&mut DeviceMatrix<f32>>,
) -> Result<()> {
    let what = "gat_scores_backward";
    check_device(&[wh, a.0, a.1, ds.0, ds.1, da.0, da.1], what)?;
    let (heads, f) = check_shapes((wh.rows, wh.cols), (a.0.rows, a.0.cols), (ds.0.rows, ds.0.cols), what)?;
    check_shapes((wh.rows, wh.cols), (a.1.rows, a.1.cols), (ds.1.rows, ds.1.cols), what)?;
    if let Some(dwh) = &dwh {
        check_device(&[wh, dwh], what)?;
        if (dwh.rows, dwh.cols, dwh.ld) != (wh.rows, wh.cols, wh.ld) {
            return Err(Error::Shape(format!(
                "{what}: dwh {}x{} (stride {}) for a {}x{} wh (stride {})",
                dwh.rows, dwh.cols, dwh.ld, wh.rows, wh.cols, wh.ld
            )));
        }
    }
    if ds.0.ld != ds.1.ld || ds.0.cols != ds.1.cols {
        return Err(Error::Shape(format!(
            "{what}: the two score gradients differ ({} and {} columns, strides {} and {})",
            ds.0.cols, ds.1.cols, ds.0.ld, ds.1.ld
        )));
    }
    for m in [&*da.0, &*da.1] {
        if (m.rows, m.cols) != (1, wh.cols) {
            return Err(Error::Shape(format!("{what}: a gradient is {}x{}, want 1x{}", m.rows, m.cols, wh.cols)));
        }
    }
    let gpu = wh.gpu().clone();
    da.0.zero()?;
    da.1.zero()?;
    if wh.rows == 0 || wh.cols == 0 {
        return Ok(());
    }
    let smem_bytes = 2 * 4 * wh.ld;
    let smem = smem_bytes <= BACKWARD_SMEM_MAX;
    // Rows per block step at NN_BLOCK threads, and about 4 steps a block, at most
    // NN_BLOCKS_PER_SM blocks an SM: each thread's rows are a chain (its store to dwh keeps the
    // next row's loads behind it), so the grid must be wide (R-MAT 2^18 x 64 took 153 us with 2
    // blocks an SM: 248 rows a thread); the atomics per column stay about a thousand.
    let rpi = (NN_BLOCK as usize / wh.ld.min(NN_BLOCK as usize)).max(1);
    let blocks = wh.rows.div_ceil(4 * rpi).min((NN_BLOCKS_PER_SM * gpu.info().sm_count) as usize).max(1);
    let args = GatScoresBackwardArgs {
        rows: wh.rows as u32,
        heads: heads as u32,
        head_dim: f as u32,
        wh_ld: wh.ld as u32,
        s_ld: ds.0.ld as u32,
        smem: smem as u32,
        wh: wh.arg(),
        a_src: a.0.arg(),
        a_dst: a.1.arg(),
        ds_src: ds.0.arg(),
        ds_dst: ds.1.arg(),
        dwh: dwh.map_or(PtrMut::null(), |m| m.arg_mut()),
        da_src: da.0.arg_mut(),
        da_dst: da.1.arg_mut(),
    };
    // SAFETY: wh and dwh (unless null: not touched) share one shape and stride (valid, checked), the score gradients have a
    // row per row of wh and H columns (one stride), each a and da holds H F values; the shared
    // memory is the 2 wh_ld floats the kernel uses when `smem` is set.
    unsafe { gat_scores_backward_f32.launch(&gpu, Shape::linear(blocks as u32, NN_BLOCK, if smem { smem_bytes as u32 } else { 0 }), &args) }
}

// -- the op on each backend --

/// GAT's per-node scores and their backward, for both attention vectors at once.
pub trait GatScoresOp: Backend {
    /// `s[i][h] = <wh[i, h F .. (h + 1) F], a[h F .. (h + 1) F]>` for (att_src, s_src) and
    /// (att_dst, s_dst) (scores n x H).
    fn gat_scores(&self, wh: &Self::Mat, a: Pair<&Self::Mat>, s: Pair<&mut Self::Mat>) -> Result<()>;
    /// `dwh += ds ⊗ a` per head for both pairs (where `dwh` is given: the fused attention's
    /// backward adds that part itself), and each vector's gradient `da = 1ᵀ (ds ⊗ wh)`
    /// (overwritten).
    fn gat_scores_backward(
        &self,
        wh: &Self::Mat,
        a: Pair<&Self::Mat>,
        ds: Pair<&Self::Mat>,
        dwh: Option<&mut Self::Mat>,
        da: Pair<&mut Self::Mat>,
    ) -> Result<()>;
}

impl<T: Real> GatScoresOp for CpuBackend<T> {
    fn gat_scores(&self, wh: &HostMat<T>, a: Pair<&HostMat<T>>, s: Pair<&mut HostMat<T>>) -> Result<()> {
        gat_scores_cpu(wh, a, s)
    }
    fn gat_scores_backward(
        &self,
        wh: &HostMat<T>,
        a: Pair<&HostMat<T>>,
        ds: Pair<&HostMat<T>>,
        dwh: Option<&mut HostMat<T>>,
        da: Pair<&mut HostMat<T>>,
    ) -> Result<()> {
        gat_scores_backward_cpu(wh, a, ds, dwh, da)
    }
}

impl GatScoresOp for CudaBackend {
    fn gat_scores(&self, wh: &DeviceMatrix<f32>, a: Pair<&DeviceMatrix<f32>>, s: Pair<&mut DeviceMatrix<f32>>) -> Result<()> {
        self.timed("gat scores", || gat_scores(wh, a, s))
    }
    fn gat_scores_backward(
        &self,
        wh: &DeviceMatrix<f32>,
        a: Pair<&DeviceMatrix<f32>>,
        ds: Pair<&DeviceMatrix<f32>>,
        dwh: Option<&mut DeviceMatrix<f32>>,
        da: Pair<&mut DeviceMatrix<f32>>,
    ) -> Result<()> {
        self.timed("gat scores backward", || gat_scores_backward(wh, a, ds, dwh, da))
    }
}
