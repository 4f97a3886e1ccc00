//! Padding a sparse pattern to a fixed shape and nonzero count, for a model built once at a
//! capacity and rebound to every batch (`sample::bound`, the graph task's bound net): the
//! batch's rows first, then empty rows, the missing nonzeros as zeros in the last row; and the
//! canonical template such models are built on.

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::ops::transpose_with_map;

/// A pattern with its transpose and, for every nonzero of the transpose, the nonzero of the
/// pattern holding the same edge.
pub struct WithTranspose {
    pub s: Csr,
    pub t: Csr,
    pub t_of: Vec<u32>,
}

impl WithTranspose {
    pub fn new(s: Csr) -> Self {
        let (t, t_of) = transpose_with_map(&s);
        WithTranspose { s, t, t_of }
    }
}

/// `a` padded to `rows x cols` with `nnz` nonzeros: its rows first, then empty rows, and the
/// missing nonzeros as zeros at (rows - 1, cols - 1) appended to the last row (which may be one
/// of `a`'s own when it has all the rows). Placing the padding last in both a pattern and its
/// transpose keeps every real nonzero at its own index, so per-edge keys (dropout masks) and
/// per-row sums are the unpadded batch's; zero values make the padding contribute nothing.
pub fn pad(a: &Csr, rows: usize, cols: usize, nnz: usize) -> Result<Csr> {
    if a.n_rows() > rows || a.n_cols() > cols || a.nnz() > nnz || rows == 0 || cols == 0 {
        return Err(Error::Shape(format!(
            "padding a {}x{} batch matrix of {} nonzeros to {rows}x{cols} with {nnz}",
            a.n_rows(),
            a.n_cols(),
            a.nnz()
        )));
    }
    let extra = nnz - a.nnz();
    let mut row_ptr = Vec::with_capacity(rows + 1);
    row_ptr.extend_from_slice(a.row_ptr());
    row_ptr.resize(rows + 1, a.nnz() as u32);
    row_ptr[rows] = nnz as u32;
    let mut col_idx = Vec::with_capacity(nnz);
    col_idx.extend_from_slice(a.col_idx());
    col_idx.resize(nnz, (cols - 1) as u32);
    let mut values = Vec::with_capacity(nnz);
    values.extend_from_slice(a.values());
    values.resize(nnz, 0.0);
    debug_assert_eq!(col_idx.len(), a.nnz() + extra);
    Csr::new(rows, cols, row_ptr, col_idx, values)
}

/// [`pad`] of a pattern and its transpose, with the transpose map extended over the padding
/// (the k-th padding nonzero of the transpose is the k-th of the pattern).
pub fn pad_with_transpose(w: &WithTranspose, rows: usize, cols: usize, nnz: usize) -> Result<(Csr, Csr, Vec<u32>)> {
    let s = pad(&w.s, rows, cols, nnz)?;
    let t = pad(&w.t, cols, rows, nnz)?;
    let mut t_of = Vec::with_capacity(nnz);
    t_of.extend_from_slice(&w.t_of);
    t_of.extend(w.s.nnz() as u32..nnz as u32);
    Ok((s, t, t_of))
}

/// A canonical `rows x cols` pattern of `nnz` nonzeros (row-major fill) to build buffers of
/// that size on; every batch's pattern overwrites it.
pub fn template(rows: usize, cols: usize, nnz: usize) -> Result<Csr> {
    if nnz > rows * cols {
        return Err(Error::Shape(format!("a {rows}x{cols} template cannot hold {nnz} nonzeros")));
    }
    let mut row_ptr: Vec<u32> = (0..=rows).map(|r| (r * cols).min(nnz) as u32).collect();
    row_ptr[rows] = nnz as u32;
    let col_idx = (0..nnz).map(|k| (k % cols) as u32).collect();
    Csr::new(rows, cols, row_ptr, col_idx, vec![0.0; nnz])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_keeps_real_nonzeros_in_place_and_the_transpose_consistent() {
        // 2 x 3 with an empty last row of the transpose's view.
        let a = Csr::from_triplets(2, 3, &[(0, 1, 2.0), (1, 0, 3.0), (1, 2, 4.0)]).unwrap();
        let w = WithTranspose::new(a.clone());
        let (s, t, t_of) = pad_with_transpose(&w, 4, 5, 6).unwrap();
        assert_eq!((s.n_rows(), s.n_cols(), s.nnz()), (4, 5, 6));
        assert_eq!(&s.col_idx()[..3], a.col_idx());
        assert_eq!(s.row_ptr(), &[0, 1, 3, 3, 6]);
        assert_eq!(&s.col_idx()[3..], &[4, 4, 4]);
        assert_eq!(&s.values()[3..], &[0.0, 0.0, 0.0]);
        // The transpose is 5 x 4; its padding sits in its last row, at the pattern's last row.
        assert_eq!((t.n_rows(), t.n_cols()), (5, 4));
        assert_eq!(t.row_ptr()[5], 6);
        assert_eq!(&t.col_idx()[3..], &[3, 3, 3]);
        // Every nonzero of the transpose maps to the pattern's nonzero with the same edge.
        for r in 0..t.n_rows() {
            for e in t.row_range(r) {
                let se = t_of[e] as usize;
                let srow = s.row_ptr().windows(2).position(|w| (w[0] as usize..w[1] as usize).contains(&se)).unwrap();
                assert_eq!((srow as u32, s.col_idx()[se]), (t.col_idx()[e], r as u32));
                assert_eq!(s.values()[se], t.values()[e]);
            }
        }
    }

    #[test]
    fn padding_a_full_last_row_appends_after_its_own_nonzeros() {
        let a = Csr::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 5.0)]).unwrap();
        let s = pad(&a, 2, 2, 4).unwrap();
        assert_eq!(s.row_ptr(), &[0, 1, 4]);
        assert_eq!(s.col_idx(), &[0, 1, 1, 1]);
        assert_eq!(s.values(), &[1.0, 5.0, 0.0, 0.0]);
        assert!(pad(&a, 1, 2, 4).is_err(), "fewer rows than the batch is refused");
        assert!(pad(&a, 2, 2, 1).is_err(), "fewer nonzeros than the batch is refused");
    }
}
