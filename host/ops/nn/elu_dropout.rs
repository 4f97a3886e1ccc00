//! GAT's hidden tail fused: `h = ELU(h)` in place and `y = dropout(h)` in one pass (the mask
//! drawn from the counter RNG and never stored), and the backward of the dropout and the ELU in
//! one pass (`dz = keep ? dy / (1 - p) · ELU'(h) : 0`, the mask drawn again). CPU references and
//! the launchers of `kernels-gpu/src/nn/elu_dropout.rs`.
//!
//! Why: unfused, the tail is ELU (read and write h), dropout (read h, write y and a mask), and in
//! the backward dropout' (read the gradient and the mask, write) then ELU' (read h and the
//! gradient, write): fused, one read and two writes forward, two reads and a write backward, two
//! launches fewer. The values are the unfused path's, bit for bit, on both backends.

use rayon::prelude::*;

use super::col_sums::{ColSumsOp, col_sums};
use super::dropout::{DropKey, check_p, matrix_keep, scale_f32};
use super::elu::{elu_backward1, elu1};
use super::{check_gpu, check_matrix_64, check_same, elementwise_shape, n4};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{
    EluDropoutArgs, EluDropoutBackwardArgs, EluDropoutBackwardProductArgs, elu_dropout_backward_f32, elu_dropout_backward_product_f32,
    elu_dropout_f32,
};
use crate::gpu::launch::{PtrMut, Shape};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::ops::nn::dropout_gemm::DropoutGemmOp;
use crate::ops::nn::gemm::GemmOp;
use crate::shared::rng::{dropout_seed_key, dropout_threshold};
use crate::util::Real;
use half::f16;

/// h = ELU(h), y = dropout(h) on the host (`h`, `y` rows x cols unpadded): the values of
/// `elu_cpu` then `dropout_matrix_cpu_at` with the same key.
pub fn elu_dropout_cpu<T: Real>(h: &mut [T], (rows, cols): (usize, usize), y: &mut [T], key: DropKey<'_>, step: u32) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    if h.len() != rows * cols || y.len() != rows * cols {
        return Err(Error::Shape(format!("elu_dropout_cpu: h {}, y {} for {rows} x {cols}", h.len(), y.len())));
    }
    if cols == 0 {
        return Ok(());
    }
    key.check_ids(rows, "elu_dropout_cpu")?;
    let keep = matrix_keep(cols, key, step);
    let keep_frac = T::one() - T::from_f64(p as f64);
    h.par_chunks_mut(cols).zip(y.par_chunks_mut(cols)).enumerate().with_min_len(64).for_each(|(r, (hr, yr))| {
        for (c, (v, out)) in hr.iter_mut().zip(yr.iter_mut()).enumerate() {
            *v = elu1(*v);
            *out = if keep(r, c) { *v / keep_frac } else { T::zero() };
        }
    });
    Ok(())
}

/// dz = keep ? dy / (1 - p) · ELU'(h) : 0 on the host (`h` the forward's ELU output): the values
/// of `dropout_backward_cpu` then `elu_backward_cpu`.
pub fn elu_dropout_backward_cpu<T: Real>(
    dy: &[T],
    h: &[T],
    (rows, cols): (usize, usize),
    key: DropKey<'_>,
    step: u32,
    dz: &mut [T],
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    if dy.len() != rows * cols || h.len() != rows * cols || dz.len() != rows * cols {
        return Err(Error::Shape(format!("elu_dropout_backward_cpu: dy {}, h {}, dz {} for {rows} x {cols}", dy.len(), h.len(), dz.len())));
    }
    if cols == 0 {
        return Ok(());
    }
    key.check_ids(rows, "elu_dropout_backward_cpu")?;
    let keep = matrix_keep(cols, key, step);
    let keep_frac = T::one() - T::from_f64(p as f64);
    dz.par_chunks_mut(cols).enumerate().with_min_len(64).for_each(|(r, dr)| {
        for (c, d) in dr.iter_mut().enumerate() {
            let g = if keep(r, c) { dy[r * cols + c] / keep_frac } else { T::zero() };
            *d = elu_backward1(g, h[r * cols + c]);
        }
    });
    Ok(())
}

fn check_step(step: &DeviceVec<u32>, what: &str) -> Result<()> {
    if step.is_empty() {
        return Err(Error::Shape(format!("{what}: empty step counter")));
    }
    Ok(())
}

/// h = ELU(h), y = dropout(h) on the device (whole padded buffers), the mask of `step[0]` when
/// the kernel runs, keyed by `key` as [`super::dropout::dropout_matrix_at`]'s.
pub fn elu_dropout(
    h: &mut DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    check_same(h, y, "elu_dropout")?;
    check_step(step, "elu_dropout")?;
    let gpu = h.gpu().clone();
    let n4 = n4(h);
    let ids = key.ids_arg(&gpu, h.rows, "elu_dropout")?;
    let (threshold, scale, seed_key, offset) = (dropout_threshold(p), scale_f32(p), dropout_seed_key(key.seed), key.offset);
    let (ld4, step) = ((h.ld / 4) as u32, step.arg(&gpu));
    let args = EluDropoutArgs { n4, h: h.arg_mut(), y: y.arg_mut(), threshold, scale, seed_key, step, offset, ld4, ids };
    // SAFETY: h and y hold n4 float4s each (distinct: two unique borrows), step one u32, ids
    // (if any) one per row.
    unsafe { elu_dropout_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// dz = keep ? dy · scale · ELU'(h) : 0 on the device (whole padded buffers; h the forward's
/// ELU output, the mask of [`elu_dropout`] with the same key and step).
pub fn elu_dropout_backward(
    dy: &DeviceMatrix<f32>,
    h: &DeviceMatrix<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
    dz: &mut DeviceMatrix<f32>,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    check_same(dy, h, "elu_dropout_backward")?;
    check_same(dy, dz, "elu_dropout_backward")?;
    check_step(step, "elu_dropout_backward")?;
    let gpu = dy.gpu().clone();
    let n4 = n4(dy);
    let ids = key.ids_arg(&gpu, h.rows, "elu_dropout_backward")?;
    let (threshold, scale, seed_key, offset) = (dropout_threshold(p), scale_f32(p), dropout_seed_key(key.seed), key.offset);
    let args = EluDropoutBackwardArgs {
        n4,
        dy: dy.arg(),
        h: h.arg(),
        threshold,
        scale,
        seed_key,
        step: step.arg(&gpu),
        offset,
        dz: dz.arg_mut(),
        pre: 0,
        h16: 0,
        ld4: (h.ld / 4) as u32,
        ids,
    };
    // SAFETY: dy, h and dz hold n4 float4s each (dz distinct from both: a unique borrow), step
    // one u32.
    unsafe { elu_dropout_backward_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// dz = keep ? dy · scale · ELU'(h) : 0 with dy = g wᵀ (g rows x k, w cols x k: the next
/// layer's dX, formed in the kernel and never written) on the device, for k ≤ 8; h and dz rows
/// x cols. Elsewhere (k past 8, rows past 1024 columns or 2^32 float4s) dy is formed by cuBLAS
/// into dz first and the backward runs in place. With `h16` (h's shape), h's values are read
/// from it instead (h itself unread: an activation the forward wrote in f16 only).
pub fn elu_dropout_backward_product(
    (blas, math): (&crate::gpu::cublas::Blas, crate::gpu::cublas::GemmMath),
    (g, w): (&DeviceMatrix<f32>, &DeviceMatrix<f32>),
    (h, h_is_input): (&DeviceMatrix<f32>, bool),
    h16: Option<&DeviceMatrix<f16>>,
    (key, step): (DropKey<'_, DeviceVec<u32>>, &DeviceVec<u32>),
    dz: &mut DeviceMatrix<f32>,
    dz_col_sums: Option<&mut DeviceMatrix<f32>>,
) -> Result<()> {
    let what = "elu_dropout_backward_product";
    let p = key.p;
    check_p(p)?;
    check_same(h, dz, what)?;
    check_step(step, what)?;
    if g.rows != h.rows || w.rows != h.cols || w.cols != g.cols {
        return Err(Error::Shape(format!("{what}: g {} x {}, w {} x {}, h {} x {}", g.rows, g.cols, w.rows, w.cols, h.rows, h.cols)));
    }
    if let Some(s) = &dz_col_sums {
        check_matrix_64(s, what)?;
        check_gpu(h.gpu(), s.gpu(), what)?;
        if (s.rows, s.cols) != (1, h.cols) {
            return Err(Error::Shape(format!("{what}: column sums {} x {} for {} columns (want 1 x {})", s.rows, s.cols, h.cols, h.cols)));
        }
    }
    if let Some(h16) = h16 {
        check_gpu(h.gpu(), h16.gpu(), what)?;
        if (h16.rows, h16.cols, h16.ld) != (h.rows, h.cols, h.ld) {
            return Err(Error::Shape(format!(
                "{what}: h's f16 values {} x {} (stride {}) for h {} x {} (stride {})",
                h16.rows, h16.cols, h16.ld, h.rows, h.cols, h.ld
            )));
        }
    }
    let (h_arg, h16_flag) = match h16 {
        Some(m) => (m.arg().cast(), 1),
        None => (h.arg(), 0),
    };
    let gpu = h.gpu().clone();
    let ids = key.ids_arg(&gpu, h.rows, what)?;
    let (threshold, scale, seed_key, offset) = (dropout_threshold(p), scale_f32(p), dropout_seed_key(key.seed), key.offset);
    let n4 = n4(h);
    let q = h.ld / 4;
    let shape = elementwise_shape(&gpu, n4);
    // The column sums ride along where a thread keeps one float4 column (the grid's threads a
    // multiple of q), in 4 ld bytes of shared memory after wᵀ (8 rows of h's stride).
    let fold_sums = dz_col_sums.is_some() && q > 0 && (shape.grid.0 as usize * shape.block.0 as usize).is_multiple_of(q);
    let smem = 32 * h.ld + if fold_sums { 4 * h.ld } else { 0 }; // at most 36 KB below
    if g.ld == 8 && w.ld == 8 && n4 <= u32::MAX as u64 && h.ld <= 1024 {
        // (`apart`: the sums still to take after the pass.)
        let (col_sums_arg, apart) = match dz_col_sums {
            Some(s) if fold_sums => {
                s.zero()?;
                (s.arg_mut(), None)
            }
            other => (PtrMut::null(), other),
        };
        let args = EluDropoutBackwardProductArgs {
            n4: n4 as u32,
            q: (h.ld / 4) as u32,
            cols: h.cols as u32,
            g: g.arg(),
            w: w.arg(),
            h: h_arg,
            threshold,
            scale,
            seed_key,
            step: step.arg(&gpu),
            offset,
            dz: dz.arg_mut(),
            col_sums: col_sums_arg,
            pre: h_is_input as u32,
            h16: h16_flag,
            ids,
        };
        // SAFETY: h and dz hold n4 float4s (rows x ld), g rows x 8 and w cols x 8 floats (the
        // kernel reads rows < h's rows and w rows < cols); dz distinct (a unique borrow); the
        // column sums (when not null) hold cols floats, the grid's threads a multiple of q.
        unsafe { elu_dropout_backward_product_f32.launch(&gpu, Shape { smem_bytes: smem as u32, ..shape }, &args)? };
        return apart.map_or(Ok(()), |s| col_sums(dz, s));
    }
    blas.gemm(math, 1.0, (g, false), (w, true), 0.0, dz)?;
    let args = EluDropoutBackwardArgs {
        n4,
        dy: dz.arg(),
        h: h_arg,
        threshold,
        scale,
        seed_key,
        step: step.arg(&gpu),
        offset,
        dz: dz.arg_mut(),
        pre: h_is_input as u32,
        h16: h16_flag,
        ld4: (h.ld / 4) as u32,
        ids,
    };
    // SAFETY: as `elu_dropout_backward`'s, with dy = dz: each thread reads the float4 it then
    // writes, nothing else.
    unsafe { elu_dropout_backward_f32.launch(&gpu, shape, &args)? };
    dz_col_sums.map_or(Ok(()), |s| col_sums(dz, s))
}

// -- the op on each backend --

pub trait EluDropoutOp: Backend + DropoutGemmOp {
    /// `h = ELU(h)` and `y = dropout(h)` with the mask [`DropoutOp::dropout_at`](super::dropout::DropoutOp::dropout_at)
    /// would draw for `key` and the step counter, not stored.
    fn elu_dropout(&self, h: &mut Self::Mat, y: &mut Self::Mat, key: DropKey<'_, Self::Ids>) -> Result<()>;
    /// `dz = keep ? dy / (1 - p) · ELU'(h) : 0` after [`EluDropoutOp::elu_dropout`] in the same
    /// step (same key).
    fn elu_dropout_backward(&self, dy: &Self::Mat, h: &Self::Mat, key: DropKey<'_, Self::Ids>, dz: &mut Self::Mat) -> Result<()>;
    /// [`EluDropoutOp::elu_dropout_backward`] of dy = g wᵀ (the next layer's dX: g its output
    /// gradient, w its weight), dy never stored where the backend can avoid it (the GPU for g
    /// of at most 8 columns); `h` the ELU's output, or its input with `h_is_input` (the ELU
    /// applied inside the next product: `DropoutGemmOp::elu_dropout_gemm`); with `dz_col_sums`
    /// (1 x cols, overwritten) also dz's column sums (the layer below's bias gradient), summed
    /// in the same pass where the backend can. `h16`: h's values in f16 where the forward wrote
    /// them so ([`DropoutGemmOp::half_activation`]), read instead of h.
    fn elu_dropout_backward_product(
        &self,
        gw: (&Self::Mat, &Self::Mat),
        h: (&Self::Mat, bool),
        h16: Option<&Self::Half>,
        key: DropKey<'_, Self::Ids>,
        dz: &mut Self::Mat,
        dz_col_sums: Option<&mut Self::Mat>,
    ) -> Result<()>;
}

impl<T: Real> EluDropoutOp for CpuBackend<T> {
    fn elu_dropout(&self, h: &mut HostMat<T>, y: &mut HostMat<T>, key: DropKey<'_, Vec<u32>>) -> Result<()> {
        same_shape("elu_dropout", y, h)?;
        elu_dropout_cpu(&mut h.data, (h.rows, h.cols), &mut y.data, key.host(), self.step())
    }
    fn elu_dropout_backward(&self, dy: &HostMat<T>, h: &HostMat<T>, key: DropKey<'_, Vec<u32>>, dz: &mut HostMat<T>) -> Result<()> {
        same_shape("elu_dropout_backward", dy, h)?;
        same_shape("elu_dropout_backward", dz, h)?;
        elu_dropout_backward_cpu(&dy.data, &h.data, (h.rows, h.cols), key.host(), self.step(), &mut dz.data)
    }
    fn elu_dropout_backward_product(
        &self,
        (g, w): (&HostMat<T>, &HostMat<T>),
        (h, h_is_input): (&HostMat<T>, bool),
        _h16: Option<&()>,
        key: DropKey<'_, Vec<u32>>,
        dz: &mut HostMat<T>,
        dz_col_sums: Option<&mut HostMat<T>>,
    ) -> Result<()> {
        // The reference: the product, then the unfused-order backward (from the ELU's output),
        // then the column sums.
        let mut dy = HostMat { rows: h.rows, cols: h.cols, data: vec![T::zero(); h.rows * h.cols] };
        self.gemm(g, false, w, true, 0.0, &mut dy)?;
        let out;
        let h = if h_is_input {
            out = HostMat { rows: h.rows, cols: h.cols, data: h.data.iter().map(|&v| elu1(v)).collect() };
            &out
        } else {
            h
        };
        self.elu_dropout_backward(&dy, h, key, dz)?;
        match dz_col_sums {
            Some(s) => self.col_sums(dz, s),
            None => Ok(()),
        }
    }
}

impl EluDropoutOp for CudaBackend {
    fn elu_dropout(&self, h: &mut DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>, key: DropKey<'_, DeviceVec<u32>>) -> Result<()> {
        self.timed("elu dropout", || elu_dropout(h, y, key, &self.step_ptr()))
    }
    fn elu_dropout_backward(
        &self,
        dy: &DeviceMatrix<f32>,
        h: &DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
        dz: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("elu dropout backward", || elu_dropout_backward(dy, h, key, &self.step_ptr(), dz))
    }
    fn elu_dropout_backward_product(
        &self,
        gw: (&DeviceMatrix<f32>, &DeviceMatrix<f32>),
        h: (&DeviceMatrix<f32>, bool),
        h16: Option<&DeviceMatrix<f16>>,
        key: DropKey<'_, DeviceVec<u32>>,
        dz: &mut DeviceMatrix<f32>,
        dz_col_sums: Option<&mut DeviceMatrix<f32>>,
    ) -> Result<()> {
        self.timed("elu dropout backward", || {
            elu_dropout_backward_product((&self.blas, self.math), gw, h, h16, (key, &self.step_ptr()), dz, dz_col_sums)
        })
    }
}
