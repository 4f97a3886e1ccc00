//! Row-sorted COO: one (row, col, value) triple per nonzero, in CSR order. The hybrid-parallel
//! CUDA-core kernels (HP-SpMM/SDDMM) give each warp a run of consecutive nonzeros and need the
//! row of each without searching `row_ptr`.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;

#[derive(Clone, Debug, PartialEq)]
pub struct Coo {
    pub n_rows: usize,
    pub n_cols: usize,
    /// Row of each nonzero, non-decreasing.
    pub row: Vec<u32>,
    pub col: Vec<u32>,
    pub values: Vec<f32>,
}

impl Coo {
    pub fn from_csr(csr: &Csr) -> Coo {
        let mut row = vec![0u32; csr.nnz()];
        let rp = csr.row_ptr();
        // Each row fills its own range of `row`; rows are independent, so split by row.
        let mut parts: Vec<(u32, &mut [u32])> = Vec::with_capacity(csr.n_rows());
        let mut rest = row.as_mut_slice();
        for r in 0..csr.n_rows() {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(csr.row_len(r));
            parts.push((r as u32, head));
            rest = tail;
        }
        parts.par_iter_mut().with_min_len(1024).for_each(|(r, s)| s.fill(*r));
        debug_assert_eq!(rp[csr.n_rows()] as usize, csr.nnz());
        Coo { n_rows: csr.n_rows(), n_cols: csr.n_cols(), row, col: csr.col_idx().to_vec(), values: csr.values().to_vec() }
    }

    pub fn nnz(&self) -> usize {
        self.row.len()
    }
    pub fn bytes(&self) -> usize {
        4 * (self.row.len() + self.col.len() + self.values.len())
    }

    /// Back to CSR, keeping the order of the entries (they must be row-sorted).
    pub fn to_csr(&self) -> Result<Csr> {
        if let Some(i) = self.row.windows(2).position(|w| w[0] > w[1]) {
            return Err(Error::InvalidGraph(format!("COO rows decrease at entry {}", i + 1)));
        }
        if self.col.len() != self.row.len() || self.values.len() != self.row.len() {
            return Err(Error::Shape("COO arrays differ in length".into()));
        }
        let mut row_ptr = vec![0u32; self.n_rows + 1];
        for &r in &self.row {
            if r as usize >= self.n_rows {
                return Err(Error::InvalidGraph(format!("COO row {r} >= n_rows {}", self.n_rows)));
            }
            row_ptr[r as usize + 1] += 1;
        }
        for r in 0..self.n_rows {
            row_ptr[r + 1] += row_ptr[r];
        }
        Csr::new(self.n_rows, self.n_cols, row_ptr, self.col.clone(), self.values.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let csr = Csr::from_triplets(4, 3, &[(0, 1, 1.0), (2, 0, 2.0), (2, 2, 3.0), (3, 1, 4.0)]).unwrap();
        let coo = Coo::from_csr(&csr);
        assert_eq!(coo.row, vec![0, 2, 2, 3]);
        assert_eq!(coo.to_csr().unwrap(), csr);
    }
}
