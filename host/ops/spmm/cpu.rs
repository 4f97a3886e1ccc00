//! The one CPU SpMM (rayon over rows), generic over f32 / f64: the fallback without a GPU, the
//! CPU backend's product, and the f64 reference every kernel is checked against.

use rayon::prelude::*;

use crate::graph::Csr;
use crate::tensor::Matrix;
use crate::util::Real;

/// `y = S x` for a CSR pattern with `values` (one per edge, CSR order) and row-major `x`
/// (`k` columns, `S.n_cols` rows) into row-major `y` (`k` columns, `S.n_rows` rows).
pub fn spmm_rows<T: Real>(row_ptr: &[u32], col_idx: &[u32], values: &[T], x: &[T], k: usize, y: &mut [T]) {
    if k == 0 {
        return;
    }
    y.par_chunks_mut(k).enumerate().for_each(|(r, out)| {
        out.iter_mut().for_each(|o| *o = T::zero());
        for e in row_ptr[r] as usize..row_ptr[r + 1] as usize {
            let v = values[e];
            let c = col_idx[e] as usize;
            for (o, &xv) in out.iter_mut().zip(&x[c * k..(c + 1) * k]) {
                *o += v * xv;
            }
        }
    });
}

/// Y = S X in f32.
pub fn spmm_cpu(s: &Csr, x: &Matrix) -> Matrix {
    assert_eq!(x.rows, s.n_cols(), "spmm_cpu: X rows must equal S columns");
    let mut y = Matrix::zeros(s.n_rows(), x.cols);
    spmm_rows(s.row_ptr(), s.col_idx(), s.values(), &x.data, x.cols, &mut y.data);
    y
}

/// Y = S X accumulated in f64 from the given f32 inputs: the reference every kernel is checked
/// against. Pass inputs already rounded to the kernel's precision (e.g. f16) to measure only
/// the kernel's own error.
pub fn spmm_reference_f64(s: &Csr, x: &Matrix) -> Vec<f64> {
    assert_eq!(x.rows, s.n_cols(), "spmm_reference_f64: X rows must equal S columns");
    let values: Vec<f64> = s.values().iter().map(|&v| v as f64).collect();
    let x64: Vec<f64> = x.data.iter().map(|&v| v as f64).collect();
    let mut y = vec![0f64; s.n_rows() * x.cols];
    spmm_rows(s.row_ptr(), s.col_idx(), &values, &x64, x.cols, &mut y);
    y
}
