//! CPU SDDMM and edge softmax (rayon over rows): the fallback and the f64 reference.

use rayon::prelude::*;

use crate::graph::Csr;
use crate::tensor::Matrix;

/// O[e] = S[e] * dot(A[row(e)], B[col(e)]), CSR order, f32.
pub fn sddmm_cpu(s: &Csr, a: &Matrix, b: &Matrix) -> Vec<f32> {
    let mut out = vec![0f32; s.nnz()];
    let rp = s.row_ptr();
    // Rows own disjoint output ranges: split the output by row.
    let mut chunks: Vec<(usize, &mut [f32])> = Vec::with_capacity(s.n_rows());
    let mut rest = out.as_mut_slice();
    for r in 0..s.n_rows() {
        let (head, tail) = rest.split_at_mut((rp[r + 1] - rp[r]) as usize);
        chunks.push((r, head));
        rest = tail;
    }
    chunks.into_par_iter().for_each(|(r, o)| {
        for ((c, v), out) in s.row(r).zip(o.iter_mut()) {
            let dot: f32 = a.row(r).iter().zip(b.row(c as usize)).map(|(x, y)| x * y).sum();
            *out = v * dot;
        }
    });
    out
}

/// The same accumulated in f64: the reference kernels are checked against.
pub fn sddmm_reference_f64(s: &Csr, a: &Matrix, b: &Matrix) -> Vec<f64> {
    (0..s.n_rows())
        .into_par_iter()
        .flat_map_iter(|r| {
            s.row(r).map(move |(c, v)| {
                let dot: f64 = a.row(r).iter().zip(b.row(c as usize)).map(|(&x, &y)| x as f64 * y as f64).sum();
                v as f64 * dot
            })
        })
        .collect()
}

/// Row-wise softmax of CSR-ordered values, max-subtracted; empty rows produce nothing.
pub fn edge_softmax_cpu(s: &Csr, values: &[f32]) -> Vec<f32> {
    assert_eq!(values.len(), s.nnz(), "one value per nonzero");
    let mut out = values.to_vec();
    let rp = s.row_ptr();
    let mut rows: Vec<&mut [f32]> = Vec::with_capacity(s.n_rows());
    let mut rest = out.as_mut_slice();
    for r in 0..s.n_rows() {
        let (head, tail) = rest.split_at_mut((rp[r + 1] - rp[r]) as usize);
        rows.push(head);
        rest = tail;
    }
    rows.into_par_iter().for_each(|row| {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f64;
        for v in row.iter_mut() {
            *v = (*v - max).exp();
            sum += *v as f64;
        }
        for v in row.iter_mut() {
            *v = (*v as f64 / sum) as f32;
        }
    });
    out
}

/// f64 softmax reference.
pub fn edge_softmax_reference_f64(s: &Csr, values: &[f32]) -> Vec<f64> {
    let mut out = Vec::with_capacity(values.len());
    for r in 0..s.n_rows() {
        let row = &values[s.row_range(r)];
        let max = row.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        out.extend(row.iter().map(|&v| (v as f64 - max).exp() / sum));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sddmm_matches_dense_and_softmax_rows_sum_to_one() {
        let s = Csr::from_triplets(3, 3, &[(0, 1, 2.0), (0, 2, -1.0), (2, 0, 0.5)]).unwrap();
        let a = Matrix::from_vec(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = Matrix::from_vec(3, 2, vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap();
        // row 0: col 1 -> 2 * (1*0 + 2*1) = 4; col 2 -> -1 * (1 + 2) = -3; row 2: col 0 -> 0.5 * 5
        assert_eq!(sddmm_cpu(&s, &a, &b), vec![4.0, -3.0, 2.5]);
        assert_eq!(sddmm_reference_f64(&s, &a, &b), vec![4.0, -3.0, 2.5]);
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
