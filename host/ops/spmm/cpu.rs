//! CPU SpMM (rayon over rows): the fallback without a GPU, and the f64 reference for tests.

use rayon::prelude::*;

use crate::graph::Csr;
use crate::tensor::Matrix;

/// Y = S X in f32.
pub fn spmm_cpu(s: &Csr, x: &Matrix) -> Matrix {
    assert_eq!(x.rows, s.n_cols(), "spmm_cpu: X rows must equal S columns");
    let k = x.cols;
    let mut y = Matrix::zeros(s.n_rows(), k);
    if k == 0 {
        return y;
    }
    y.data.par_chunks_mut(k).enumerate().for_each(|(r, out)| {
        for (c, v) in s.row(r) {
            for (o, xv) in out.iter_mut().zip(x.row(c as usize)) {
                *o += v * xv;
            }
        }
    });
    y
}

/// Y = S X accumulated in f64 from the given f32 inputs: the reference every kernel is checked
/// against. Pass inputs already rounded to the kernel's precision (e.g. f16) to measure only
/// the kernel's own error.
pub fn spmm_reference_f64(s: &Csr, x: &Matrix) -> Vec<f64> {
    let k = x.cols;
    let mut y = vec![0f64; s.n_rows() * k];
    if k == 0 {
        return y;
    }
    y.par_chunks_mut(k).enumerate().for_each(|(r, out)| {
        for (c, v) in s.row(r) {
            for (o, &xv) in out.iter_mut().zip(x.row(c as usize)) {
                *o += v as f64 * xv as f64;
            }
        }
    });
    y
}
