//! ME-BCRS (FlashSparse §3.5): the sparse operand of the swap-and-transpose SpMM.
//!
//! Rows are grouped in windows of 8. A window's nonzero 8x1 vectors are its distinct columns
//! (sorted); they are grouped `k` per block (the MMA's K dimension: 8 for f16 m16n8k8 and tf32
//! m16n8k8). Block b of window w starts at vector `v0 = win_ptr[w] + b*k`, holds
//! `kb = min(k, win_ptr[w+1] - v0)` vectors (the last block is NOT padded: the kernel derives
//! `kb` from `win_ptr`), and stores its values row-major 8 x kb at `values[8*v0 ..]`:
//! (row i, vector j) at `8*v0 + i*kb + j`; entries with no nonzero hold 0.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;

/// Rows per window (the MMA's N = 8 once S is the B operand).
pub const MEBCRS_WINDOW: usize = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct MeBcrs {
    pub n_rows: usize,
    pub n_cols: usize,
    /// Vectors per block.
    pub k: usize,
    /// Offset of each window's first vector in `vec_col`; `n_windows + 1` entries.
    pub win_ptr: Vec<u32>,
    /// Column of each nonzero vector, sorted within its window.
    pub vec_col: Vec<u32>,
    /// `8 * n_vectors` values, block by block, row-major 8 x kb inside a block.
    pub values: Vec<f32>,
    /// Per CSR nonzero: its index in `values`.
    pub csr_to_slot: Vec<u32>,
}

impl MeBcrs {
    pub fn from_csr(csr: &Csr, k: usize) -> Result<MeBcrs> {
        if !matches!(k, 4 | 8 | 16) {
            return Err(Error::Unsupported(format!("ME-BCRS block width k = {k}; use 4, 8 or 16")));
        }
        let n_windows = csr.n_rows().div_ceil(MEBCRS_WINDOW);
        let rows_of = |w: usize| w * MEBCRS_WINDOW..((w + 1) * MEBCRS_WINDOW).min(csr.n_rows());
        // Pass 1: each window's sorted distinct columns.
        let win_cols: Vec<Vec<u32>> = (0..n_windows)
            .into_par_iter()
            .map(|w| {
                let rows = rows_of(w);
                let (lo, hi) = (csr.row_ptr()[rows.start] as usize, csr.row_ptr()[rows.end] as usize);
                let mut cols = csr.col_idx()[lo..hi].to_vec();
                cols.sort_unstable();
                cols.dedup();
                cols
            })
            .collect();
        let mut win_ptr = Vec::with_capacity(n_windows + 1);
        win_ptr.push(0u32);
        for c in &win_cols {
            win_ptr.push(win_ptr.last().unwrap() + c.len() as u32);
        }
        let n_vec = *win_ptr.last().unwrap() as usize;
        let vec_col: Vec<u32> = win_cols.concat();
        // Pass 2: scatter values, window by window (each window owns a disjoint slice).
        let mut values = vec![0f32; 8 * n_vec];
        let mut csr_to_slot = vec![0u32; csr.nnz()];
        let mut val_chunks: Vec<&mut [f32]> = Vec::with_capacity(n_windows);
        let mut rest = values.as_mut_slice();
        for cols in &win_cols {
            let (head, tail) = rest.split_at_mut(8 * cols.len());
            val_chunks.push(head);
            rest = tail;
        }
        let slot_chunks: Vec<Vec<(usize, u32)>> = val_chunks
            .into_par_iter()
            .enumerate()
            .map(|(w, vals)| {
                let cols = &win_cols[w];
                let base = 8 * win_ptr[w] as usize;
                let mut slots = Vec::new();
                for (i, r) in rows_of(w).enumerate() {
                    for e in csr.row_range(r) {
                        let j_all = cols.binary_search(&csr.col_idx()[e]).expect("column is in its window");
                        let (b, j) = (j_all / k, j_all % k);
                        let kb = k.min(cols.len() - b * k);
                        let local = 8 * b * k + i * kb + j;
                        vals[local] += csr.values()[e];
                        slots.push((e, (base + local) as u32));
                    }
                }
                slots
            })
            .collect();
        for chunk in slot_chunks {
            for (e, s) in chunk {
                csr_to_slot[e] = s;
            }
        }
        Ok(MeBcrs { n_rows: csr.n_rows(), n_cols: csr.n_cols(), k, win_ptr, vec_col, values, csr_to_slot })
    }

    pub fn n_windows(&self) -> usize {
        self.win_ptr.len() - 1
    }
    pub fn n_vectors(&self) -> usize {
        self.vec_col.len()
    }
    /// Blocks of window `w`.
    pub fn blocks_of(&self, w: usize) -> usize {
        ((self.win_ptr[w + 1] - self.win_ptr[w]) as usize).div_ceil(self.k)
    }
    pub fn n_blocks(&self) -> usize {
        (0..self.n_windows()).map(|w| self.blocks_of(w)).sum()
    }

    /// Back to CSR (sorted columns; explicit zeros inside blocks dropped).
    pub fn to_csr(&self) -> Result<Csr> {
        let mut t = Vec::new();
        for w in 0..self.n_windows() {
            let (v_begin, v_end) = (self.win_ptr[w] as usize, self.win_ptr[w + 1] as usize);
            let mut v0 = v_begin;
            while v0 < v_end {
                let kb = self.k.min(v_end - v0);
                for i in 0..8 {
                    let row = w * 8 + i;
                    for j in 0..kb {
                        let v = self.values[8 * v0 + i * kb + j];
                        if v != 0.0 && row < self.n_rows {
                            t.push((row as u32, self.vec_col[v0 + j], v));
                        }
                    }
                }
                v0 += kb;
            }
        }
        Csr::from_triplets(self.n_rows, self.n_cols, &t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_window_layout_is_exact() {
        // rows 0 and 2 of one window; columns {1, 5, 9}; k = 2 -> blocks of 2 and 1 vectors.
        let csr = Csr::from_triplets(3, 10, &[(0, 5, 1.0), (0, 1, 2.0), (2, 9, 3.0), (2, 1, 4.0)]).unwrap();
        let m = MeBcrs::from_csr(&csr, 4).unwrap();
        assert_eq!(m.win_ptr, vec![0, 3]);
        assert_eq!(m.vec_col, vec![1, 5, 9]);
        // one block of kb = 3: row-major 8 x 3
        assert_eq!(&m.values[0..3], &[2.0, 1.0, 0.0]);
        assert_eq!(&m.values[6..9], &[4.0, 0.0, 3.0]);
        assert_eq!(m.to_csr().unwrap(), csr);
        for (e, &slot) in m.csr_to_slot.iter().enumerate() {
            assert_eq!(m.values[slot as usize], csr.values()[e]);
        }
    }
}
