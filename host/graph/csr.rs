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
    pub fn new(n_rows: usize, n_cols: usize, row_ptr: Vec<u32>, col_idx: Vec<u32>, values: Vec<f32>) -> Result<Self> {
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
            return bad(format!("row_ptr ends at {nnz} but col_idx has {} and values {} entries", col_idx.len(), values.len()));
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
        let rows: Vec<u32> = triplets.iter().map(|t| t.0).collect();
        let cols: Vec<u32> = triplets.iter().map(|t| t.1).collect();
        let vals: Vec<f32> = triplets.iter().map(|t| t.2).collect();
        Self::from_coo(n_rows, n_cols, &rows, &cols, Some(&vals))
    }

    /// Build from parallel coordinate arrays (`values = None`: every entry is 1, a pattern).
    /// Sorts by (row, col) and sums duplicates: a counting sort by row (O(nnz + n_rows), no
    /// per-row allocation), then an in-place sort of each row that is not already sorted.
    pub fn from_coo(n_rows: usize, n_cols: usize, rows: &[u32], cols: &[u32], values: Option<&[f32]>) -> Result<Self> {
        use rayon::prelude::*;
        if rows.len() != cols.len() || values.is_some_and(|v| v.len() != rows.len()) {
            return Err(Error::Shape(format!(
                "coordinate arrays differ in length: {} rows, {} cols, {:?} values",
                rows.len(),
                cols.len(),
                values.map(<[f32]>::len)
            )));
        }
        if rows.len() >= (1usize << 31) {
            return Err(Error::InvalidGraph(format!("{} entries exceed 32-bit indices", rows.len())));
        }
        if n_rows >= (1usize << 31) || n_cols >= (1usize << 31) {
            return Err(Error::InvalidGraph(format!("{n_rows} x {n_cols} exceeds 32-bit row/column ids")));
        }
        let bad = rows.par_iter().zip(cols.par_iter()).position_any(|(&r, &c)| r as usize >= n_rows || c as usize >= n_cols);
        if let Some(i) = bad {
            return Err(Error::InvalidGraph(format!("entry ({}, {}) is outside the {n_rows} x {n_cols} matrix", rows[i], cols[i])));
        }
        // Row pointers and fill cursors (8 bytes a row), columns and values (8 a nonzero): a
        // few header bytes can declare 2^31 rows, so ask before the allocator would abort.
        let need = 8 * (n_rows as u64 + 1) + 8 * rows.len() as u64;
        crate::util::memory::check_host_alloc(need, &format!("a {n_rows} x {n_cols} CSR of {} entries", rows.len()))?;
        let mut row_ptr = vec![0u32; n_rows + 1];
        for &r in rows {
            row_ptr[r as usize + 1] += 1;
        }
        for i in 0..n_rows {
            row_ptr[i + 1] += row_ptr[i];
        }
        let nnz = rows.len();
        let mut fill: Vec<u32> = row_ptr[..n_rows].to_vec();
        let mut col_idx = vec![0u32; nnz];
        let mut vals = vec![1f32; nnz];
        match values {
            Some(v) => {
                for ((&r, &c), &x) in rows.iter().zip(cols).zip(v) {
                    let p = &mut fill[r as usize];
                    col_idx[*p as usize] = c;
                    vals[*p as usize] = x;
                    *p += 1;
                }
            }
            None => {
                for (&r, &c) in rows.iter().zip(cols) {
                    let p = &mut fill[r as usize];
                    col_idx[*p as usize] = c;
                    *p += 1;
                }
            }
        }
        let m = Csr { n_rows, n_cols, row_ptr, col_idx, values: vals }.into_canonical();
        // Finite inputs can still sum past f32::MAX where duplicates merge.
        if let Some(e) = m.values.par_iter().position_first(|v| !v.is_finite()) {
            let r = m.row_ptr.partition_point(|&p| p as usize <= e) - 1;
            return Err(Error::InvalidGraph(format!(
                "entry ({r}, {}) is {} (duplicate entries summed past the f32 range?)",
                m.col_idx[e], m.values[e]
            )));
        }
        Ok(m)
    }

    /// Sorted columns, duplicates summed.
    pub fn canonical(&self) -> Csr {
        self.clone().into_canonical()
    }

    /// Sorted columns, duplicates summed, reusing this matrix's arrays: rows are sorted in place
    /// in parallel (chunks of similar nnz), then compacted only if duplicates were found.
    pub fn into_canonical(mut self) -> Csr {
        use crate::util::split::{default_chunks, split_lengths, window_chunks};
        use rayon::prelude::*;
        let chunks = window_chunks(&self.row_ptr, 1, default_chunks());
        let rp = &self.row_ptr;
        let lens = chunks.iter().map(|c| (rp[c.end] - rp[c.start]) as usize);
        let col_parts = split_lengths(&mut self.col_idx, lens.clone());
        let val_parts = split_lengths(&mut self.values, lens);
        // New length of every row (after merging duplicates), per chunk.
        let new_lens: Vec<Vec<u32>> = chunks
            .par_iter()
            .zip(col_parts)
            .zip(val_parts)
            .map(|((ch, cols), vals)| {
                let base = rp[ch.start] as usize;
                let mut scratch: Vec<(u32, f32)> = Vec::new();
                let mut lens = Vec::with_capacity(ch.len());
                for r in ch.clone() {
                    let rg = rp[r] as usize - base..rp[r + 1] as usize - base;
                    let (c, v) = (&mut cols[rg.clone()], &mut vals[rg]);
                    if c.windows(2).all(|w| w[0] < w[1]) {
                        lens.push(c.len() as u32);
                        continue;
                    }
                    scratch.clear();
                    scratch.extend(c.iter().copied().zip(v.iter().copied()));
                    scratch.sort_by_key(|e| e.0); // stable: duplicates are summed in input order
                    let mut n = 0usize;
                    for &(col, val) in &scratch {
                        if n > 0 && c[n - 1] == col {
                            v[n - 1] += val;
                        } else {
                            c[n] = col;
                            v[n] = val;
                            n += 1;
                        }
                    }
                    lens.push(n as u32);
                }
                lens
            })
            .collect();
        let total: usize = new_lens.iter().flatten().map(|&l| l as usize).sum();
        if total == self.col_idx.len() {
            return self;
        }
        // Duplicates were merged: slide every row down to its new start (never overlaps forward).
        let mut out = 0usize;
        let mut new_ptr = Vec::with_capacity(self.n_rows + 1);
        new_ptr.push(0u32);
        for (r, &len) in new_lens.iter().flatten().enumerate() {
            let start = self.row_ptr[r] as usize;
            let len = len as usize;
            self.col_idx.copy_within(start..start + len, out);
            self.values.copy_within(start..start + len, out);
            out += len;
            new_ptr.push(out as u32);
        }
        self.col_idx.truncate(out);
        self.values.truncate(out);
        self.row_ptr = new_ptr;
        self
    }

    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
    pub fn values(&self) -> &[f32] {
        &self.values
    }

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
    pub fn row_len(&self, r: usize) -> usize {
        self.row_range(r).len()
    }

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

    #[test]
    fn canonical_matches_a_sort_of_triplets() {
        let mut rng = crate::util::rng::SplitMix64::new(5);
        for n in [0usize, 1, 7, 100] {
            let m = if n == 0 { 0 } else { rng.below(20 * n as u64) as usize };
            let trip: Vec<(u32, u32, f32)> =
                (0..m).map(|_| (rng.below(n as u64) as u32, rng.below(n as u64) as u32, rng.below(4) as f32)).collect();
            let csr = Csr::from_triplets(n, n, &trip).unwrap();
            let mut sorted = trip.clone();
            sorted.sort_by_key(|t| (t.0, t.1));
            let mut expect: Vec<(u32, u32, f32)> = Vec::new();
            for t in sorted {
                match expect.last_mut() {
                    Some(l) if (l.0, l.1) == (t.0, t.1) => l.2 += t.2,
                    _ => expect.push(t),
                }
            }
            let got: Vec<(u32, u32, f32)> = (0..n).flat_map(|r| csr.row(r).map(move |(c, v)| (r as u32, c, v))).collect();
            assert_eq!(got, expect);
            assert!(csr.is_canonical());
        }
    }
}
