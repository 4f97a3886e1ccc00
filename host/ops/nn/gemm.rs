//! Dense products `C = op(A) op(B) + beta C`: the feature transforms `X W` and their gradients.
//! On the host with rayon (each transpose case in the loop order that streams rows), on the GPU
//! through cuBLAS (tf32 math when training in tf32 or f16).

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::ops::nn::dropout_gemm::{dropout_gemm_dw_scratch_len, skinny_gemm, skinny_gemm_fits};
use crate::util::Real;

pub trait GemmOp: Backend {
    /// `c = op(a) op(b) + beta c`, `op` transposing when asked.
    fn gemm(&self, a: &Self::Mat, trans_a: bool, b: &Self::Mat, trans_b: bool, beta: f32, c: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> GemmOp for CpuBackend<T> {
    fn gemm(&self, a: &HostMat<T>, ta: bool, b: &HostMat<T>, tb: bool, beta: f32, c: &mut HostMat<T>) -> Result<()> {
        let (m, ka) = if ta { (a.cols, a.rows) } else { (a.rows, a.cols) };
        let (kb, n) = if tb { (b.cols, b.rows) } else { (b.rows, b.cols) };
        if ka != kb || c.rows != m || c.cols != n {
            return Err(Error::Shape(format!("gemm: op(A) {m}x{ka}, op(B) {kb}x{n}, C {}x{}", c.rows, c.cols)));
        }
        gemm_host(a, ta, b, tb, T::from_f64(beta as f64), c);
        Ok(())
    }
}

impl GemmOp for CudaBackend {
    /// Tall products with at most 32 output columns (a layer's narrow transform, its weight
    /// gradient, its input gradient through a narrow weight) run on the streaming tensor-core
    /// kernels of `dropout_gemm` with p = 0; the rest on cuBLAS.
    fn gemm(&self, a: &DeviceMatrix<f32>, ta: bool, b: &DeviceMatrix<f32>, tb: bool, beta: f32, c: &mut DeviceMatrix<f32>) -> Result<()> {
        if beta == 0.0 && self.skinny_gemm && skinny_gemm_fits(a, ta, tb, c) {
            // Only the weight-gradient form (aᵀ b) uses the split scratch.
            let need = if ta { dropout_gemm_dw_scratch_len(&self.gpu, a.rows, a.cols, c.cols, false)? } else { 0 };
            return self.dropout_gemm_scratch().with_split(&self.gpu, need, |s| {
                self.timed("gemm (narrow)", || skinny_gemm((a, ta), (b, tb), c, &self.step_ptr(), s, self.math))
            });
        }
        self.timed("gemm", || self.blas.gemm(self.math, 1.0, (a, ta), (b, tb), beta, c))
    }
}

/// `c = op(a) op(b) + beta c` with rayon, each shape in the loop order that streams rows.
pub fn gemm_host<T: Real>(a: &HostMat<T>, ta: bool, b: &HostMat<T>, tb: bool, beta: T, c: &mut HostMat<T>) {
    let n = c.cols;
    if n == 0 {
        return;
    }
    let kk = if ta { a.rows } else { a.cols };
    let scale = |row: &mut [T]| row.iter_mut().for_each(|v| *v = if beta == T::zero() { T::zero() } else { *v * beta });
    match (ta, tb) {
        (false, false) => c.data.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
            scale(out);
            for (kx, &av) in a.row(r).iter().enumerate() {
                if av != T::zero() {
                    for (o, &bv) in out.iter_mut().zip(b.row(kx)) {
                        *o += av * bv;
                    }
                }
            }
        }),
        (false, true) => c.data.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
            scale(out);
            let ar = a.row(r);
            for (j, o) in out.iter_mut().enumerate() {
                *o += ar.iter().zip(b.row(j)).fold(T::zero(), |acc, (&x, &y)| acc + x * y);
            }
        }),
        (true, false) => {
            // C = Aᵀ B: rows of A and B stream together; a partial product per chunk of k, summed
            // in chunk order. The chunk depends on k only coarsely (a fixed size, doubled while
            // there would be more than MAX_PARTIALS), never on the thread count, and trailing zero
            // rows add exact zeros: so the result is the same on every machine and for a batch
            // padded with empty rows (the rebound sampled model pads each batch to a capacity
            // that depends on the batches seen; a resumed run must reproduce the losses exactly).
            const ROWS_PER_PARTIAL: usize = 256;
            const MAX_PARTIALS: usize = 64;
            let mut chunk = ROWS_PER_PARTIAL;
            while kk.div_ceil(chunk) > MAX_PARTIALS {
                chunk *= 2;
            }
            let partials: Vec<Vec<T>> = (0..kk.div_ceil(chunk))
                .into_par_iter()
                .map(|ci| {
                    let mut acc = vec![T::zero(); c.rows * n];
                    for kx in ci * chunk..((ci + 1) * chunk).min(kk) {
                        let br = b.row(kx);
                        for (r, &av) in a.row(kx).iter().enumerate() {
                            if av != T::zero() {
                                for (o, &bv) in acc[r * n..(r + 1) * n].iter_mut().zip(br) {
                                    *o += av * bv;
                                }
                            }
                        }
                    }
                    acc
                })
                .collect();
            let mut partial = vec![T::zero(); c.rows * n];
            for p in &partials {
                partial.iter_mut().zip(p).for_each(|(x, &q)| *x += q);
            }
            c.data.iter_mut().zip(partial).for_each(|(o, p)| *o = if beta == T::zero() { p } else { *o * beta + p });
        }
        (true, true) => c.data.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
            scale(out);
            for (j, o) in out.iter_mut().enumerate() {
                let mut acc = T::zero();
                for kx in 0..kk {
                    acc += a.data[kx * a.cols + r] * b.data[j * b.cols + kx];
                }
                *o += acc;
            }
        }),
    }
}
