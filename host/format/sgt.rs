//! SGT: TC-GNN's Sparse Graph Translation (TC-GNN paper, Alg. 1).
//!
//! Rows are cut into windows of [`SGT_WINDOW`] = 16 rows. Inside a window the columns that hold
//! at least one edge are sorted and deduplicated (the window's unique neighbours, `win_cols`);
//! consecutive runs of `block_w` of them form one dense 16 x `block_w` tensor-core block, so a
//! window needs ceil(unique / block_w) blocks instead of one block per 16 x block_w tile of the
//! original matrix. A kernel gathers the feature rows `win_cols[...]` of a block and multiplies.
//!
//! Per block the edges are also listed block-major (`blk_edge_*`) so a kernel can scatter them
//! into a zeroed 16 x block_w shared-memory tile with one store per edge.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::util::split::{default_chunks, split_lengths, window_chunks};

/// Rows per SGT window (the M of the m16n8k8 / 16x16 tensor-core tiles).
pub const SGT_WINDOW: usize = 16;

/// TC-GNN tiles of a CSR matrix. Built by [`Sgt::from_csr`]; [`Sgt::to_csr`] undoes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sgt {
    pub n_rows: usize,
    pub n_cols: usize,
    /// Columns per block: 8 for SpMM (16 x 8 A operand), 16 for SDDMM (16 x 16 output tile).
    pub block_w: usize,
    /// Length n_windows + 1: window w's unique columns are `win_cols[win_ptr[w]..win_ptr[w+1]]`.
    pub win_ptr: Vec<u32>,
    /// Each window's sorted unique columns, windows concatenated.
    pub win_cols: Vec<u32>,
    /// Length n_windows + 1: prefix sum of blocks per window; window w has
    /// ceil(unique_w / block_w) blocks, numbered `blk_ptr[w]..blk_ptr[w+1]`.
    pub blk_ptr: Vec<u32>,
    /// Per CSR edge (CSR order): position of its column among its window's unique columns.
    pub edge_to_col: Vec<u32>,
    /// Length n_blocks + 1: block b's edges are `blk_edge_*[blk_edge_ptr[b]..blk_edge_ptr[b+1]]`.
    /// A window's edges are contiguous and start at the window's first CSR edge.
    pub blk_edge_ptr: Vec<u32>,
    /// Per block-edge: `row_in_window * block_w + col_in_block` (< 16 * 16, so a byte).
    pub blk_edge_pos: Vec<u8>,
    /// Per block-edge: its value.
    pub blk_edge_val: Vec<f32>,
    /// Per block-edge: its index in CSR order (SDDMM writes its outputs in CSR order).
    pub blk_edge_csr: Vec<u32>,
}

/// What one chunk of windows produces that is not at a CSR-determined position.
struct ChunkOut {
    unique_per_window: Vec<u32>,
    blocks_per_window: Vec<u32>,
    win_cols: Vec<u32>,
    /// Absolute start (in block-edge order) of every block of the chunk.
    blk_edge_start: Vec<u32>,
}

impl Sgt {
    /// Translate a CSR matrix; `block_w` must be 8 or 16. Columns need not be sorted; duplicate
    /// (row, col) edges stay separate edges that land on the same block position.
    pub fn from_csr(csr: &Csr, block_w: usize) -> Result<Sgt> {
        if block_w != 8 && block_w != 16 {
            return Err(Error::Unsupported(format!("SGT block width {block_w}: use 8 (SpMM) or 16 (SDDMM)")));
        }
        let (n_rows, n_cols, nnz) = (csr.n_rows(), csr.n_cols(), csr.nnz());
        let row_ptr = csr.row_ptr();
        let n_windows = n_rows.div_ceil(SGT_WINDOW);
        let chunks = window_chunks(row_ptr, SGT_WINDOW, default_chunks());
        let edge_range =
            |ws: &std::ops::Range<usize>| row_ptr[ws.start * SGT_WINDOW] as usize..row_ptr[(ws.end * SGT_WINDOW).min(n_rows)] as usize;
        let mut edge_to_col = vec![0u32; nnz];
        let mut blk_edge_pos = vec![0u8; nnz];
        let mut blk_edge_val = vec![0f32; nnz];
        let mut blk_edge_csr = vec![0u32; nnz];
        let lens: Vec<usize> = chunks.iter().map(|c| edge_range(c).len()).collect();
        let outs: Vec<ChunkOut> = chunks
            .par_iter()
            .zip(split_lengths(&mut edge_to_col, lens.iter().copied()))
            .zip(split_lengths(&mut blk_edge_pos, lens.iter().copied()))
            .zip(split_lengths(&mut blk_edge_val, lens.iter().copied()))
            .zip(split_lengths(&mut blk_edge_csr, lens.iter().copied()))
            .map(|((((ws, e2c), pos), val), csr_of)| {
                let base = edge_range(ws).start;
                let mut out = ChunkOut {
                    unique_per_window: Vec::with_capacity(ws.len()),
                    blocks_per_window: Vec::with_capacity(ws.len()),
                    win_cols: Vec::new(),
                    blk_edge_start: Vec::new(),
                };
                let mut keys: Vec<u64> = Vec::new();
                let mut fill: Vec<u32> = Vec::new();
                for w in ws.clone() {
                    let r0 = w * SGT_WINDOW;
                    let r1 = (r0 + SGT_WINDOW).min(n_rows);
                    let (e0, e1) = (row_ptr[r0] as usize, row_ptr[r1] as usize);
                    // Sort (column, edge) pairs: gives the unique columns and every edge's
                    // position among them in one pass.
                    keys.clear();
                    keys.extend((e0..e1).map(|e| ((csr.col_idx()[e] as u64) << 32) | (e - e0) as u64));
                    keys.sort_unstable();
                    let first_col = out.win_cols.len();
                    for &k in &keys {
                        let col = (k >> 32) as u32;
                        if out.win_cols.len() == first_col || *out.win_cols.last().unwrap() != col {
                            out.win_cols.push(col);
                        }
                        e2c[e0 - base + (k as u32) as usize] = (out.win_cols.len() - first_col - 1) as u32;
                    }
                    let unique = out.win_cols.len() - first_col;
                    let blocks = unique.div_ceil(block_w);
                    out.unique_per_window.push(unique as u32);
                    out.blocks_per_window.push(blocks as u32);
                    // Counting sort of the window's edges by block, stable (CSR order inside).
                    fill.clear();
                    fill.resize(blocks + 1, 0);
                    for e in e0..e1 {
                        fill[e2c[e - base] as usize / block_w + 1] += 1;
                    }
                    for b in 0..blocks {
                        fill[b + 1] += fill[b];
                    }
                    out.blk_edge_start.extend(fill[..blocks].iter().map(|&f| e0 as u32 + f));
                    for r in r0..r1 {
                        let row_in_window = r - r0;
                        for e in csr.row_range(r) {
                            let p = e2c[e - base] as usize;
                            let slot = &mut fill[p / block_w];
                            let d = e0 - base + *slot as usize;
                            *slot += 1;
                            pos[d] = (row_in_window * block_w + p % block_w) as u8;
                            val[d] = csr.values()[e];
                            csr_of[d] = e as u32;
                        }
                    }
                }
                out
            })
            .collect();

        let mut win_ptr = Vec::with_capacity(n_windows + 1);
        let mut blk_ptr = Vec::with_capacity(n_windows + 1);
        win_ptr.push(0u32);
        blk_ptr.push(0u32);
        let (mut u, mut b) = (0u64, 0u64);
        for o in &outs {
            for (&uw, &bw) in o.unique_per_window.iter().zip(&o.blocks_per_window) {
                u += uw as u64;
                b += bw as u64;
                win_ptr.push(u as u32);
                blk_ptr.push(b as u32);
            }
        }
        // Unique columns <= nnz < 2^31 and blocks <= unique, so the u32 prefixes cannot wrap.
        let mut win_cols = Vec::with_capacity(u as usize);
        let mut blk_edge_ptr = Vec::with_capacity(b as usize + 1);
        for o in outs {
            win_cols.extend_from_slice(&o.win_cols);
            blk_edge_ptr.extend_from_slice(&o.blk_edge_start);
        }
        blk_edge_ptr.push(nnz as u32);
        Ok(Sgt { n_rows, n_cols, block_w, win_ptr, win_cols, blk_ptr, edge_to_col, blk_edge_ptr, blk_edge_pos, blk_edge_val, blk_edge_csr })
    }

    pub fn n_windows(&self) -> usize {
        self.win_ptr.len() - 1
    }
    pub fn n_blocks(&self) -> usize {
        self.blk_ptr.last().copied().unwrap_or(0) as usize
    }
    pub fn nnz(&self) -> usize {
        self.edge_to_col.len()
    }
    /// Block ids of window `w`.
    pub fn blocks_of(&self, w: usize) -> std::ops::Range<usize> {
        self.blk_ptr[w] as usize..self.blk_ptr[w + 1] as usize
    }
    /// Unique columns of window `w`.
    pub fn cols_of(&self, w: usize) -> &[u32] {
        &self.win_cols[self.win_ptr[w] as usize..self.win_ptr[w + 1] as usize]
    }
    /// Bytes of every array (what a GPU copy of the format occupies).
    pub fn bytes(&self) -> usize {
        4 * (self.win_ptr.len()
            + self.win_cols.len()
            + self.blk_ptr.len()
            + self.edge_to_col.len()
            + self.blk_edge_ptr.len()
            + self.blk_edge_val.len()
            + self.blk_edge_csr.len())
            + self.blk_edge_pos.len()
    }

    /// Check every index a kernel will follow (array lengths, monotone pointers, columns,
    /// positions, CSR indices), so a hand-built or modified `Sgt` fails here instead of reading
    /// out of bounds on the device.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidGraph(format!("SGT: {m}")));
        let n_windows = self.n_rows.div_ceil(SGT_WINDOW);
        let nnz = self.edge_to_col.len();
        if self.block_w != 8 && self.block_w != 16 {
            return bad(format!("block_w {}", self.block_w));
        }
        if self.win_ptr.len() != n_windows + 1 || self.blk_ptr.len() != n_windows + 1 {
            return bad(format!("win_ptr/blk_ptr need {} entries", n_windows + 1));
        }
        for (name, p) in [("win_ptr", &self.win_ptr), ("blk_ptr", &self.blk_ptr), ("blk_edge_ptr", &self.blk_edge_ptr)] {
            if p.first() != Some(&0) || p.windows(2).any(|w| w[0] > w[1]) {
                return bad(format!("{name} must start at 0 and not decrease"));
            }
        }
        if *self.win_ptr.last().unwrap() as usize != self.win_cols.len() {
            return bad("win_ptr does not end at win_cols.len()".into());
        }
        for w in 0..n_windows {
            let unique = (self.win_ptr[w + 1] - self.win_ptr[w]) as usize;
            if (self.blk_ptr[w + 1] - self.blk_ptr[w]) as usize != unique.div_ceil(self.block_w) {
                return bad(format!("window {w}: blocks do not match its {unique} columns"));
            }
        }
        if self.win_cols.iter().any(|&c| c as usize >= self.n_cols) {
            return bad("a window column is out of range".into());
        }
        if self.blk_edge_ptr.len() != self.n_blocks() + 1 || *self.blk_edge_ptr.last().unwrap() as usize != nnz {
            return bad("blk_edge_ptr must have n_blocks + 1 entries ending at nnz".into());
        }
        if [self.blk_edge_pos.len(), self.blk_edge_val.len(), self.blk_edge_csr.len()].iter().any(|&l| l != nnz) {
            return bad("block-edge arrays differ in length from edge_to_col".into());
        }
        if self.blk_edge_pos.iter().any(|&p| p as usize >= SGT_WINDOW * self.block_w) {
            return bad("a block position is outside the block".into());
        }
        if self.blk_edge_csr.iter().any(|&e| e as usize >= nnz) {
            return bad("a CSR index is out of range".into());
        }
        Ok(())
    }

    /// Rebuild the CSR from the block-edge lists (rows from the positions, columns through
    /// `win_cols`, CSR order from `blk_edge_csr`), cross-checking `edge_to_col`. Gives back
    /// exactly the matrix the translation read, so any inconsistent array shows as an error.
    pub fn to_csr(&self) -> Result<Csr> {
        self.validate()?;
        let bad = |m: String| Error::InvalidGraph(format!("SGT: {m}"));
        let nnz = self.nnz();
        let mut rows = vec![u32::MAX; nnz];
        let mut cols = vec![0u32; nnz];
        let mut vals = vec![0f32; nnz];
        for w in 0..self.n_windows() {
            let wcols = self.cols_of(w);
            for (bi, b) in self.blocks_of(w).enumerate() {
                for i in self.blk_edge_ptr[b] as usize..self.blk_edge_ptr[b + 1] as usize {
                    let pos = self.blk_edge_pos[i] as usize;
                    let p = bi * self.block_w + pos % self.block_w;
                    let row = w * SGT_WINDOW + pos / self.block_w;
                    let e = self.blk_edge_csr[i] as usize;
                    if p >= wcols.len() || row >= self.n_rows || e >= nnz || rows[e] != u32::MAX {
                        return Err(bad(format!("block-edge {i} of block {b} is inconsistent")));
                    }
                    if self.edge_to_col[e] as usize != p {
                        return Err(bad(format!("edge_to_col[{e}] = {} but its block says {p}", self.edge_to_col[e])));
                    }
                    rows[e] = row as u32;
                    cols[e] = wcols[p];
                    vals[e] = self.blk_edge_val[i];
                }
            }
        }
        let mut row_ptr = vec![0u32; self.n_rows + 1];
        for (e, &r) in rows.iter().enumerate() {
            if r == u32::MAX || (e > 0 && rows[e - 1] > r) {
                return Err(bad(format!("CSR edge {e} is missing or out of row order")));
            }
            row_ptr[r as usize + 1] += 1;
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
    fn small_example_by_hand() {
        // Rows 0 and 1 share column 5; row 17 is in the second (partial) window.
        let csr = Csr::from_triplets(18, 20, &[(0, 5, 1.0), (0, 9, 2.0), (1, 5, 3.0), (17, 0, 4.0)]).unwrap();
        let s = Sgt::from_csr(&csr, 8).unwrap();
        assert_eq!(s.win_ptr, vec![0, 2, 3]);
        assert_eq!(s.win_cols, vec![5, 9, 0]);
        assert_eq!(s.blk_ptr, vec![0, 1, 2]);
        assert_eq!(s.edge_to_col, vec![0, 1, 0, 0]);
        assert_eq!(s.blk_edge_ptr, vec![0, 3, 4]);
        assert_eq!(s.blk_edge_pos, vec![0, 1, 8, 8]);
        assert_eq!(s.blk_edge_val, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.blk_edge_csr, vec![0, 1, 2, 3]);
        assert_eq!(s.to_csr().unwrap(), csr);
        assert!(Sgt::from_csr(&csr, 4).is_err());
        let mut broken = s.clone();
        broken.blk_edge_pos[0] = 200;
        assert!(broken.to_csr().is_err());
        let mut broken = s.clone();
        broken.win_ptr[1] = 9;
        assert!(broken.validate().is_err());
    }

    #[test]
    fn wide_window_spans_blocks() {
        let trip: Vec<_> = (0..40u32).map(|c| (3u32, c * 2, c as f32)).collect();
        let csr = Csr::from_triplets(16, 80, &trip).unwrap();
        for bw in [8, 16] {
            let s = Sgt::from_csr(&csr, bw).unwrap();
            assert_eq!(s.n_blocks(), 40usize.div_ceil(bw));
            assert_eq!(s.to_csr().unwrap(), csr);
            for b in 0..s.n_blocks() {
                let n = (s.blk_edge_ptr[b + 1] - s.blk_edge_ptr[b]) as usize;
                assert_eq!(n, bw.min(40 - b * bw));
            }
        }
    }
}
