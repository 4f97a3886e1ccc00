//! Compressed sparse rows: the hub format every loader produces and every translation reads.

use crate::error::{Error, Result};

/// A validated CSR matrix with f32 values.
///
/// Invariants (checked by [`Csr::new`]): `row_ptr.len() == n_rows + 1`, `row_ptr[0] == 0`,
/// `row_ptr` non-decreasing, `row_ptr[n_rows] == col_idx.len() == values.len()`,
/// every column `< n_cols`, and nnz < 2^31 (32-bit indices on the device and in cuSPARSE).
/// Columns inside a row are not required to be sorted or unique; [`Csr::is_canonical`] tells.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr {
    n_rows: usize,
    n_cols: usize,
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    values: Vec<f32>,
}

impl Csr {
    pub fn new(
        n_rows: usize,
        n_cols: usize,
        row_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        values: Vec<f32>,
    ) -> Result<Self> {
        let bad = |m: String| Err(Error::InvalidGraph(m));
        if row_ptr.len() != n_rows + 1 {
            return bad(format!("row_ptr has {} entries, expected n_rows + 1 = {}", row_ptr.len(), n_rows + 1));
        }
        if row_ptr[0] != 0 {
            return bad(format!("row_ptr[0] = {}, expected 0", row_ptr[0]));
        }
        if let Some(r) = row_ptr.windows(2).position(|w| w[0] > w[1]) {
            return bad(format!("row_ptr decreases at row {r}: {} > {}", row_ptr[r], row_ptr[r + 1]));
        }
        let nnz = row_ptr[n_rows] as usize;
        if col_idx.len() != nnz || values.len() != nnz {
            return bad(format!(
                "row_ptr ends at {nnz} but col_idx has {} and values {} entries",
                col_idx.len(),
                values.len()
            ));
        }
        if nnz >= (1usize << 31) {
            return bad(format!("{nnz} nonzeros exceed the 2^31 - 1 that 32-bit indices allow"));
        }
        if n_rows >= (1usize << 31) || n_cols >= (1usize << 31) {
            return bad(format!("{n_rows} x {n_cols} exceeds 32-bit row/column ids"));
        }
        if let Some(e) = col_idx.iter().position(|&c| c as usize >= n_cols) {
            return bad(format!("column index {} at entry {e} is out of range (n_cols = {n_cols})", col_idx[e]));
        }
        Ok(Csr { n_rows, n_cols, row_ptr, col_idx, values })
    }

    /// Build from (row, col, value) triplets: sorts by (row, col) and sums duplicates.
    pub fn from_triplets(n_rows: usize, n_cols: usize, triplets: &[(u32, u32, f32)]) -> Result<Self> {
        let mut counts = vec![0u32; n_rows + 1];
        for &(r, c, _) in triplets {
            if r as usize >= n_rows || c as usize >= n_cols {
                return Err(Error::InvalidGraph(format!(
                    "entry ({r}, {c}) is outside the {n_rows} x {n_cols} matrix"
                )));
            }
            counts[r as usize + 1] += 1;
        }
        for i in 0..n_rows {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut cols = vec![0u32; triplets.len()];
        let mut vals = vec![0f32; triplets.len()];
        for &(r, c, v) in triplets {
            let p = fill[r as usize] as usize;
            cols[p] = c;
            vals[p] = v;
            fill[r as usize] += 1;
        }
        let unsorted = Csr { n_rows, n_cols, row_ptr: counts, col_idx: cols, values: vals };
        Ok(unsorted.canonical())
    }

    /// Sorted columns, duplicates summed.
    pub fn canonical(&self) -> Csr {
        use rayon::prelude::*;
        let rows: Vec<Vec<(u32, f32)>> = (0..self.n_rows)
            .into_par_iter()
            .map(|r| {
                let mut row: Vec<(u32, f32)> = self.row(r).collect();
                row.sort_unstable_by_key(|e| e.0);
                let mut out: Vec<(u32, f32)> = Vec::with_capacity(row.len());
                for (c, v) in row {
                    match out.last_mut() {
                        Some(last) if last.0 == c => last.1 += v,
                        _ => out.push((c, v)),
                    }
                }
                out
            })
            .collect();
        let mut row_ptr = Vec::with_capacity(self.n_rows + 1);
        row_ptr.push(0u32);
        let nnz: usize = rows.iter().map(Vec::len).sum();
        let mut col_idx = Vec::with_capacity(nnz);
        let mut values = Vec::with_capacity(nnz);
        for row in rows {
            for (c, v) in row {
                col_idx.push(c);
                values.push(v);
            }
            row_ptr.push(col_idx.len() as u32);
        }
        Csr { n_rows: self.n_rows, n_cols: self.n_cols, row_ptr, col_idx, values }
    }

    pub fn n_rows(&self) -> usize { self.n_rows }
    pub fn n_cols(&self) -> usize { self.n_cols }
    pub fn nnz(&self) -> usize { self.col_idx.len() }
    pub fn row_ptr(&self) -> &[u32] { &self.row_ptr }
    pub fn col_idx(&self) -> &[u32] { &self.col_idx }
    pub fn values(&self) -> &[f32] { &self.values }

    /// Replace the values (same pattern), e.g. with GCN normalisation weights.
    pub fn with_values(mut self, values: Vec<f32>) -> Result<Self> {
        if values.len() != self.nnz() {
            return Err(Error::Shape(format!("{} values for {} nonzeros", values.len(), self.nnz())));
        }
        self.values = values;
        Ok(self)
    }

    pub fn row_range(&self, r: usize) -> std::ops::Range<usize> {
        self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize
    }
    pub fn row_len(&self, r: usize) -> usize { self.row_range(r).len() }

    /// (column, value) pairs of row `r`.
    pub fn row(&self, r: usize) -> impl Iterator<Item = (u32, f32)> + '_ {
        let rg = self.row_range(r);
        self.col_idx[rg.clone()].iter().copied().zip(self.values[rg].iter().copied())
    }

    /// Columns sorted and unique in every row.
    pub fn is_canonical(&self) -> bool {
        (0..self.n_rows).all(|r| self.col_idx[self.row_range(r)].windows(2).all(|w| w[0] < w[1]))
    }

    /// Bytes the three arrays occupy.
    pub fn bytes(&self) -> usize {
        4 * (self.row_ptr.len() + self.col_idx.len() + self.values.len())
    }

    pub fn into_parts(self) -> (usize, usize, Vec<u32>, Vec<u32>, Vec<f32>) {
        (self.n_rows, self.n_cols, self.row_ptr, self.col_idx, self.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_structure() {
        assert!(Csr::new(2, 2, vec![0, 1], vec![0], vec![1.0]).is_err()); // short row_ptr
        assert!(Csr::new(2, 2, vec![1, 1, 1], vec![0], vec![1.0]).is_err()); // row_ptr[0] != 0
        assert!(Csr::new(2, 2, vec![0, 2, 1], vec![0, 1], vec![1.0, 1.0]).is_err()); // decreasing
        assert!(Csr::new(2, 2, vec![0, 1, 2], vec![0, 2], vec![1.0, 1.0]).is_err()); // col out of range
        assert!(Csr::new(2, 2, vec![0, 1, 2], vec![0, 1], vec![1.0]).is_err()); // values short
        assert!(Csr::new(2, 2, vec![0, 1, 2], vec![0, 1], vec![1.0, 2.0]).is_ok());
    }

    #[test]
    fn triplets_sort_and_sum_duplicates() {
        let m = Csr::from_triplets(2, 3, &[(1, 2, 1.0), (0, 1, 2.0), (1, 0, 3.0), (1, 2, 4.0)]).unwrap();
        assert_eq!(m.row_ptr(), &[0, 1, 3]);
        assert_eq!(m.col_idx(), &[1, 0, 2]);
        assert_eq!(m.values(), &[2.0, 3.0, 5.0]);
        assert!(m.is_canonical());
        assert!(Csr::from_triplets(2, 2, &[(2, 0, 1.0)]).is_err());
    }
}
