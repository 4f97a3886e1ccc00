//! CPU SDDMM (rayon over rows) and the edge-softmax entry points of the SDDMM API: the fallback
//! and the f64 reference.

use rayon::prelude::*;

use crate::graph::Csr;
use crate::tensor::Matrix;
use crate::util::Real;
use crate::util::split::split_lengths;

/// The one CPU SDDMM (rayon over rows), generic over f32 / f64: `out[e] = v[e] * a_row(e) ·
/// b_col(e)` in CSR order, `v` the edge values or 1 (`None`: the pattern only); `a`, `b`
/// row-major with `k` columns.
pub fn sddmm_rows<T: Real>(row_ptr: &[u32], col_idx: &[u32], values: Option<&[T]>, a: &[T], b: &[T], k: usize, out: &mut [T]) {
    let lens = (0..row_ptr.len().saturating_sub(1)).map(|r| (row_ptr[r + 1] - row_ptr[r]) as usize);
    split_lengths(out, lens).into_par_iter().enumerate().for_each(|(r, o)| {
        let ar = &a[r * k..(r + 1) * k];
        for (slot, e) in o.iter_mut().zip(row_ptr[r] as usize..) {
            let c = col_idx[e] as usize;
            let dot = ar.iter().zip(&b[c * k..(c + 1) * k]).fold(T::zero(), |acc, (&x, &y)| acc + x * y);
            *slot = values.map_or(dot, |v| v[e] * dot);
        }
    });
}

/// O[e] = S[e] * dot(A[row(e)], B[col(e)]), CSR order, f32.
pub fn sddmm_cpu(s: &Csr, a: &Matrix, b: &Matrix) -> Vec<f32> {
    assert!(a.rows == s.n_rows() && b.rows == s.n_cols() && a.cols == b.cols, "sddmm_cpu: shapes");
    let mut out = vec![0f32; s.nnz()];
    sddmm_rows(s.row_ptr(), s.col_idx(), Some(s.values()), &a.data, &b.data, a.cols, &mut out);
    out
}

/// The same accumulated in f64: the reference kernels are checked against.
pub fn sddmm_reference_f64(s: &Csr, a: &Matrix, b: &Matrix) -> Vec<f64> {
    assert!(a.rows == s.n_rows() && b.rows == s.n_cols() && a.cols == b.cols, "sddmm_reference_f64: shapes");
    let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let mut out = vec![0f64; s.nnz()];
    sddmm_rows(s.row_ptr(), s.col_idx(), Some(&f64s(s.values())), &f64s(&a.data), &f64s(&b.data), a.cols, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sddmm_matches_dense() {
        let s = Csr::from_triplets(3, 3, &[(0, 1, 2.0), (0, 2, -1.0), (2, 0, 0.5)]).unwrap();
        let a = Matrix::from_vec(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = Matrix::from_vec(3, 2, vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap();
        // row 0: col 1 -> 2 * (1*0 + 2*1) = 4; col 2 -> -1 * (1 + 2) = -3; row 2: col 0 -> 0.5 * 5
        assert_eq!(sddmm_cpu(&s, &a, &b), vec![4.0, -3.0, 2.5]);
        assert_eq!(sddmm_reference_f64(&s, &a, &b), vec![4.0, -3.0, 2.5]);
    }
}
