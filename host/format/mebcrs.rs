//! ME-BCRS: FlashSparse's memory-efficient block CSR of 8x1 nonzero vectors (FlashSparse §3.5).
//!
//! FlashSparse swaps and transposes the MMA (Y^T = X^T S^T) so the sparse matrix is the *B*
//! operand of `mma m16n8kK`, whose N = 8: a window is 8 rows, and the unit of sparsity is an
//! 8 x 1 column vector (a (window, column) pair holding at least one nonzero). Vectors of a
//! window are sorted by column and grouped `k` per block (k = 8 or 16 for f16, 4 or 8 for tf32).
//! Compared with 16 x 1 vectors this roughly halves the zeros the tensor cores multiply.
//!
//! Memory-efficient: the last block of a window holds the remaining vectors only (no padding to
//! k); a kernel derives its width from `win_ptr`.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::util::split::{default_chunks, split_lengths, window_chunks};

/// Rows per ME-BCRS window (the N = 8 of `mma m16n8kK` after swap-and-transpose).
pub const MEBCRS_WINDOW: usize = 8;

/// FlashSparse ME-BCRS of a CSR matrix. Built by [`MeBcrs::from_csr`]; [`MeBcrs::to_csr`] undoes it.
#[derive(Clone, Debug, PartialEq)]
pub struct MeBcrs {
    pub n_rows: usize,
    pub n_cols: usize,
    /// Vectors per block: 4, 8 or 16.
    pub k: usize,
    /// Length n_windows + 1: window w's vectors are `win_ptr[w]..win_ptr[w+1]`.
    pub win_ptr: Vec<u32>,
    /// Column of each nonzero vector, sorted within its window.
    pub vec_col: Vec<u32>,
    /// 8 values per vector, block by block: block b of window w starts at vector
    /// v0 = win_ptr[w] + b*k and has kb = min(k, win_ptr[w+1] - v0) vectors; its values are
    /// `values[8*v0 .. 8*v0 + 8*kb]`, row-major 8 x kb: (row i, vector j) at 8*v0 + i*kb + j.
    /// Rows past n_rows and absent entries hold 0.
    pub values: Vec<f32>,
    /// Per CSR edge: its index into `values` (duplicate edges share a slot; their values add).
    pub csr_to_slot: Vec<u32>,
}

struct ChunkOut {
    vectors_per_window: Vec<u32>,
    vec_col: Vec<u32>,
}

impl MeBcrs {
    /// Translate a CSR matrix into blocks of `k` (4, 8 or 16) vectors.
    pub fn from_csr(csr: &Csr, k: usize) -> Result<MeBcrs> {
        if ![4, 8, 16].contains(&k) {
            return Err(Error::Unsupported(format!("ME-BCRS with k = {k} vectors per block: use 4, 8 or 16")));
        }
        let (n_rows, n_cols, nnz) = (csr.n_rows(), csr.n_cols(), csr.nnz());
        let row_ptr = csr.row_ptr();
        let n_windows = n_rows.div_ceil(MEBCRS_WINDOW);
        if 8 * (nnz as u64) >= u32::MAX as u64 {
            return Err(Error::Unsupported(format!("{nnz} nonzeros: up to 8 slots each overflow 32-bit slot ids")));
        }
        let chunks = window_chunks(row_ptr, MEBCRS_WINDOW, default_chunks());
        let edge_range = |ws: &std::ops::Range<usize>| {
            row_ptr[ws.start * MEBCRS_WINDOW] as usize..row_ptr[(ws.end * MEBCRS_WINDOW).min(n_rows)] as usize
        };
        let mut csr_to_slot = vec![0u32; nnz];
        let lens: Vec<usize> = chunks.iter().map(|c| edge_range(c).len()).collect();
        // Pass 1 (per chunk): each window's sorted unique columns; every edge's vector index
        // within its window goes to `csr_to_slot` for now.
        let outs: Vec<ChunkOut> = chunks
            .par_iter()
            .zip(split_lengths(&mut csr_to_slot, lens.iter().copied()))
            .map(|(ws, vec_of)| {
                let base = edge_range(ws).start;
                let mut out = ChunkOut { vectors_per_window: Vec::with_capacity(ws.len()), vec_col: Vec::new() };
                let mut keys: Vec<u64> = Vec::new();
                for w in ws.clone() {
                    let r0 = w * MEBCRS_WINDOW;
                    let r1 = (r0 + MEBCRS_WINDOW).min(n_rows);
                    let (e0, e1) = (row_ptr[r0] as usize, row_ptr[r1] as usize);
                    keys.clear();
                    keys.extend((e0..e1).map(|e| ((csr.col_idx()[e] as u64) << 32) | (e - e0) as u64));
                    keys.sort_unstable();
                    let v_first = out.vec_col.len();
                    for &key in &keys {
                        let col = (key >> 32) as u32;
                        if out.vec_col.len() == v_first || *out.vec_col.last().unwrap() != col {
                            out.vec_col.push(col);
                        }
                        vec_of[e0 - base + (key as u32) as usize] = (out.vec_col.len() - v_first - 1) as u32;
                    }
                    out.vectors_per_window.push((out.vec_col.len() - v_first) as u32);
                }
                out
            })
            .collect();

        let mut win_ptr = Vec::with_capacity(n_windows + 1);
        win_ptr.push(0u32);
        let mut v = 0u32;
        for o in &outs {
            for &n in &o.vectors_per_window {
                v += n; // vectors <= nnz < 2^31
                win_ptr.push(v);
            }
        }
        let n_vec = v as usize;
        let mut vec_col = Vec::with_capacity(n_vec);
        for o in &outs {
            vec_col.extend_from_slice(&o.vec_col);
        }
        drop(outs);
        // Pass 2 (per chunk): now that every window's first vector is known, turn vector
        // indices into slots and place the values straight into the final array.
        let mut values = vec![0f32; 8 * n_vec];
        let value_lens = chunks.iter().map(|ws| 8 * (win_ptr[ws.end] - win_ptr[ws.start]) as usize);
        let value_parts = split_lengths(&mut values, value_lens);
        let slot_parts = split_lengths(&mut csr_to_slot, lens.iter().copied());
        let win_ptr_ref = &win_ptr;
        chunks.par_iter().zip(value_parts).zip(slot_parts).for_each(|((ws, vals), slots)| {
            let base = edge_range(ws).start;
            let slot_base = 8 * win_ptr_ref[ws.start] as usize;
            for w in ws.clone() {
                let r0 = w * MEBCRS_WINDOW;
                let r1 = (r0 + MEBCRS_WINDOW).min(n_rows);
                let first = 8 * win_ptr_ref[w] as usize;
                let n_vec_w = (win_ptr_ref[w + 1] - win_ptr_ref[w]) as usize;
                for r in r0..r1 {
                    let i = r - r0;
                    for e in csr.row_range(r) {
                        let j_all = slots[e - base] as usize;
                        let (b, j) = (j_all / k, j_all % k);
                        let kb = k.min(n_vec_w - b * k);
                        let slot = first + 8 * b * k + i * kb + j;
                        vals[slot - slot_base] += csr.values()[e];
                        slots[e - base] = slot as u32;
                    }
                }
            }
        });
        Ok(MeBcrs { n_rows, n_cols, k, win_ptr, vec_col, values, csr_to_slot })
    }

    pub fn n_windows(&self) -> usize {
        self.win_ptr.len() - 1
    }
    pub fn n_vectors(&self) -> usize {
        self.vec_col.len()
    }
    /// Blocks of window `w`: ceil(vectors / k).
    pub fn blocks_of(&self, w: usize) -> usize {
        ((self.win_ptr[w + 1] - self.win_ptr[w]) as usize).div_ceil(self.k)
    }
    pub fn n_blocks(&self) -> usize {
        (0..self.n_windows()).map(|w| self.blocks_of(w)).sum()
    }
    /// Bytes of every array.
    pub fn bytes(&self) -> usize {
        4 * (self.win_ptr.len() + self.vec_col.len() + self.values.len() + self.csr_to_slot.len())
    }

    /// Check every index a kernel will follow, so a hand-built or modified `MeBcrs` fails here
    /// instead of reading out of bounds on the device.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidGraph(format!("ME-BCRS: {m}")));
        if ![4, 8, 16].contains(&self.k) {
            return bad(format!("k = {}", self.k));
        }
        if self.win_ptr.len() != self.n_rows.div_ceil(MEBCRS_WINDOW) + 1 {
            return bad("win_ptr needs n_windows + 1 entries".into());
        }
        if self.win_ptr[0] != 0 || self.win_ptr.windows(2).any(|w| w[0] > w[1]) {
            return bad("win_ptr must start at 0 and not decrease".into());
        }
        if *self.win_ptr.last().unwrap() as usize != self.vec_col.len() || self.values.len() != 8 * self.vec_col.len() {
            return bad("win_ptr, vec_col and values disagree on the number of vectors".into());
        }
        if self.vec_col.iter().any(|&c| c as usize >= self.n_cols) {
            return bad("a vector column is out of range".into());
        }
        if self.csr_to_slot.iter().any(|&s| s as usize >= self.values.len()) {
            return bad("a slot is out of range".into());
        }
        Ok(())
    }

    /// (row, column) of a slot in `values`, or `None` if the slot is out of range or is a
    /// padding row past `n_rows`.
    pub fn slot_position(&self, slot: usize) -> Option<(usize, u32)> {
        let v = slot / 8;
        if v >= self.n_vectors() {
            return None;
        }
        // Window holding vector v: the last w with win_ptr[w] <= v.
        let w = self.win_ptr.partition_point(|&p| p as usize <= v) - 1;
        let wstart = self.win_ptr[w] as usize;
        let b = (v - wstart) / self.k;
        let v0 = wstart + b * self.k;
        let kb = self.k.min(self.win_ptr[w + 1] as usize - v0);
        let off = slot - 8 * v0;
        let (i, j) = (off / kb, off % kb);
        let row = w * MEBCRS_WINDOW + i;
        (row < self.n_rows).then(|| (row, self.vec_col[v0 + j]))
    }

    /// Rebuild the CSR through `csr_to_slot`: row and column of each edge from its slot, its
    /// value from `values`. Equal to the translated matrix when that one was canonical (sorted
    /// columns, no duplicates); explicit zero values survive.
    pub fn to_csr(&self) -> Result<Csr> {
        self.validate()?;
        let bad = |m: String| Error::InvalidGraph(format!("ME-BCRS: {m}"));
        let nnz = self.csr_to_slot.len();
        let mut row_ptr = vec![0u32; self.n_rows + 1];
        let mut cols = Vec::with_capacity(nnz);
        let mut vals = Vec::with_capacity(nnz);
        let mut last_row = 0usize;
        for (e, &slot) in self.csr_to_slot.iter().enumerate() {
            let (row, col) =
                self.slot_position(slot as usize).ok_or_else(|| bad(format!("edge {e} points at slot {slot} outside the blocks")))?;
            if row < last_row {
                return Err(bad(format!("edge {e} is out of row order")));
            }
            last_row = row;
            row_ptr[row + 1] += 1;
            cols.push(col);
            vals.push(self.values[slot as usize]);
        }
        for r in 0..self.n_rows {
            row_ptr[r + 1] += row_ptr[r];
        }
        Csr::new(self.n_rows, self.n_cols, row_ptr, cols, vals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_by_hand() {
        // Window 0: columns {1, 4, 6} -> with k = 2, blocks of 2 and 1 (unpadded) vectors.
        let csr = Csr::from_triplets(9, 8, &[(0, 4, 1.0), (0, 6, 2.0), (2, 1, 3.0), (7, 4, 4.0), (8, 0, 5.0)]).unwrap();
        let m = MeBcrs::from_csr(&csr, 4).unwrap();
        assert_eq!(m.win_ptr, vec![0, 3, 4]);
        assert_eq!(m.vec_col, vec![1, 4, 6, 0]);
        assert_eq!(m.n_blocks(), 2);
        assert_eq!(m.values.len(), 32);
        // Window 0, one block of kb = 3: (row i, vector j) at i*3 + j.
        assert_eq!(m.values[1], 1.0); // row 0, col 4 (vector 1)
        assert_eq!(m.values[2], 2.0); // row 0, col 6
        assert_eq!(m.values[2 * 3], 3.0); // row 2, col 1
        assert_eq!(m.values[7 * 3 + 1], 4.0); // row 7, col 4
        assert_eq!(m.values[24], 5.0); // window 1: row 8, col 0
        assert_eq!(m.values.iter().filter(|&&v| v != 0.0).count(), 5);
        assert_eq!(m.to_csr().unwrap(), csr);
        assert_eq!(m.blocks_of(0), 1);
        let mut broken = m.clone();
        broken.csr_to_slot[0] = 999;
        assert!(broken.to_csr().is_err());
        assert!(MeBcrs::from_csr(&csr, 5).is_err());
    }

    #[test]
    fn residue_block_is_unpadded() {
        let trip: Vec<_> = (0..11u32).map(|c| (c % 8, c, 1.0 + c as f32)).collect();
        let csr = Csr::from_triplets(8, 11, &trip).unwrap();
        let m = MeBcrs::from_csr(&csr, 8).unwrap();
        assert_eq!(m.n_blocks(), 2);
        assert_eq!(m.values.len(), 88);
        // Vector 9 (col 9, row 1) is in block 1 (v0 = 8, kb = 3): 8*8 + 1*3 + 1.
        assert_eq!(m.values[64 + 3 + 1], 10.0);
        assert_eq!(m.to_csr().unwrap(), csr);
    }
}
