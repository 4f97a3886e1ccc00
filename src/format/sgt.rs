//! SGT (TC-GNN's Sparse Graph Translation, Alg. 1): row windows of 16 rows; each window's edges
//! are renamed to the window's sorted unique columns and cut into TC blocks of `block_w` columns
//! (8 for SpMM: the 16 x 8 A operand of m16n8k8; 16 for SDDMM: 16 x 16 output tiles).
//!
//! Layout (shared with the `graph` branch's specification):
//! - `win_ptr[w]..win_ptr[w+1]`: window w's unique columns in `win_cols` (sorted);
//! - `blk_ptr[w]..blk_ptr[w+1]`: its blocks, `ceil(unique / block_w)` of them; block b of window w
//!   covers unique columns `win_ptr[w] + (b - blk_ptr[w]) * block_w ..` (the last one partial);
//! - `blk_edge_ptr[b]..blk_edge_ptr[b+1]`: block b's edges, with `blk_edge_pos` =
//!   `row_in_window * block_w + col_in_block`, `blk_edge_val` the value and `blk_edge_csr` the
//!   CSR index; `edge_to_col[e]` is edge e's position among its window's unique columns.
//!
//! Duplicate (row, column) entries of a non-canonical CSR become two edges with the same
//! position: kernels add them.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;

/// Rows per window.
pub const SGT_WINDOW: usize = 16;

#[derive(Clone, Debug, PartialEq)]
pub struct Sgt {
    pub n_rows: usize,
    pub n_cols: usize,
    /// Columns per TC block: 8 (SpMM) or 16 (SDDMM).
    pub block_w: usize,
    pub win_ptr: Vec<u32>,
    pub win_cols: Vec<u32>,
    pub blk_ptr: Vec<u32>,
    pub edge_to_col: Vec<u32>,
    pub blk_edge_ptr: Vec<u32>,
    pub blk_edge_pos: Vec<u8>,
    pub blk_edge_val: Vec<f32>,
    pub blk_edge_csr: Vec<u32>,
}

/// One window's part of the translation, built independently.
struct WindowPart {
    cols: Vec<u32>,
    /// Edges per block.
    blk_counts: Vec<u32>,
    /// (block, pos, value, csr index), sorted by block.
    edges: Vec<(u32, u8, f32, u32)>,
    /// (csr index, position among the unique columns).
    to_col: Vec<(u32, u32)>,
}

impl Sgt {
    pub fn from_csr(csr: &Csr, block_w: usize) -> Result<Sgt> {
        if !matches!(block_w, 8 | 16) {
            return Err(Error::Unsupported(format!("SGT block width {block_w}; use 8 (SpMM) or 16 (SDDMM)")));
        }
        let n_windows = csr.n_rows().div_ceil(SGT_WINDOW);
        let parts: Vec<WindowPart> = (0..n_windows)
            .into_par_iter()
            .map(|w| {
                let rows = w * SGT_WINDOW..((w + 1) * SGT_WINDOW).min(csr.n_rows());
                let (lo, hi) = (csr.row_ptr()[rows.start] as usize, csr.row_ptr()[rows.end] as usize);
                let mut cols = csr.col_idx()[lo..hi].to_vec();
                cols.sort_unstable();
                cols.dedup();
                let n_blocks = cols.len().div_ceil(block_w);
                let mut blk_counts = vec![0u32; n_blocks];
                let mut edges = Vec::with_capacity(hi - lo);
                let mut to_col = Vec::with_capacity(hi - lo);
                for (i, r) in rows.enumerate() {
                    for e in csr.row_range(r) {
                        let j = cols.binary_search(&csr.col_idx()[e]).expect("column is in its window");
                        let (b, c) = (j / block_w, j % block_w);
                        blk_counts[b] += 1;
                        edges.push((b as u32, (i * block_w + c) as u8, csr.values()[e], e as u32));
                        to_col.push((e as u32, j as u32));
                    }
                }
                edges.sort_by_key(|&(b, pos, _, e)| (b, pos, e));
                WindowPart { cols, blk_counts, edges, to_col }
            })
            .collect();

        let mut win_ptr = Vec::with_capacity(n_windows + 1);
        let mut blk_ptr = Vec::with_capacity(n_windows + 1);
        win_ptr.push(0u32);
        blk_ptr.push(0u32);
        for p in &parts {
            win_ptr.push(win_ptr.last().unwrap() + p.cols.len() as u32);
            blk_ptr.push(blk_ptr.last().unwrap() + p.blk_counts.len() as u32);
        }
        let n_blocks = *blk_ptr.last().unwrap() as usize;
        let mut blk_edge_ptr = Vec::with_capacity(n_blocks + 1);
        blk_edge_ptr.push(0u32);
        for p in &parts {
            for &c in &p.blk_counts {
                blk_edge_ptr.push(blk_edge_ptr.last().unwrap() + c);
            }
        }
        let nnz = csr.nnz();
        let mut win_cols = Vec::with_capacity(*win_ptr.last().unwrap() as usize);
        let mut edge_to_col = vec![0u32; nnz];
        let mut blk_edge_pos = Vec::with_capacity(nnz);
        let mut blk_edge_val = Vec::with_capacity(nnz);
        let mut blk_edge_csr = Vec::with_capacity(nnz);
        for p in parts {
            win_cols.extend_from_slice(&p.cols);
            for (e, j) in p.to_col {
                edge_to_col[e as usize] = j;
            }
            for (_, pos, v, e) in p.edges {
                blk_edge_pos.push(pos);
                blk_edge_val.push(v);
                blk_edge_csr.push(e);
            }
        }
        Ok(Sgt {
            n_rows: csr.n_rows(),
            n_cols: csr.n_cols(),
            block_w,
            win_ptr,
            win_cols,
            blk_ptr,
            edge_to_col,
            blk_edge_ptr,
            blk_edge_pos,
            blk_edge_val,
            blk_edge_csr,
        })
    }

    pub fn n_windows(&self) -> usize {
        self.win_ptr.len() - 1
    }

    pub fn n_blocks(&self) -> usize {
        *self.blk_ptr.last().unwrap() as usize
    }

    /// Blocks of window `w`.
    pub fn blocks_of(&self, w: usize) -> usize {
        (self.blk_ptr[w + 1] - self.blk_ptr[w]) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rebuild the dense matrix from the blocks and compare with the CSR.
    fn densify(s: &Sgt) -> Vec<f32> {
        let mut d = vec![0f32; s.n_rows * s.n_cols];
        for w in 0..s.n_windows() {
            for b in s.blk_ptr[w]..s.blk_ptr[w + 1] {
                let first = s.win_ptr[w] as usize + (b - s.blk_ptr[w]) as usize * s.block_w;
                for e in s.blk_edge_ptr[b as usize]..s.blk_edge_ptr[b as usize + 1] {
                    let pos = s.blk_edge_pos[e as usize] as usize;
                    let (r, c) = (pos / s.block_w, pos % s.block_w);
                    assert!(first + c < s.win_ptr[w + 1] as usize, "edge past the window's columns");
                    let col = s.win_cols[first + c] as usize;
                    d[(w * SGT_WINDOW + r) * s.n_cols + col] += s.blk_edge_val[e as usize];
                }
            }
        }
        d
    }

    #[test]
    fn blocks_reproduce_the_matrix() {
        let t = [(0, 3, 1.0), (0, 9, 2.0), (5, 3, 3.0), (15, 0, 4.0), (16, 20, 5.0), (17, 1, 6.0), (20, 1, 7.0)];
        let csr = Csr::from_triplets(21, 22, &t).unwrap();
        for bw in [8, 16] {
            let s = Sgt::from_csr(&csr, bw).unwrap();
            assert_eq!(s.win_ptr, vec![0, 3, 5]);
            assert_eq!(s.win_cols, vec![0, 3, 9, 1, 20]);
            assert_eq!(s.blk_ptr, vec![0, 1, 2]);
            let mut dense = vec![0f32; 21 * 22];
            for &(r, c, v) in &t {
                dense[r as usize * 22 + c as usize] += v;
            }
            assert_eq!(densify(&s), dense);
            for e in 0..csr.nnz() {
                let pos = s.blk_edge_csr.iter().position(|&x| x == e as u32).unwrap();
                assert_eq!(s.blk_edge_val[pos], csr.values()[e]);
            }
            assert_eq!(s.edge_to_col, vec![1, 2, 1, 0, 1, 0, 0]);
        }
        assert!(Sgt::from_csr(&csr, 4).is_err());
    }

    #[test]
    fn many_columns_make_several_blocks() {
        let t: Vec<(u32, u32, f32)> = (0..40u32).map(|i| (i % 16, (i * 7) % 100, i as f32 + 1.0)).collect();
        let csr = Csr::from_triplets(16, 100, &t).unwrap();
        let s = Sgt::from_csr(&csr, 8).unwrap();
        assert_eq!(s.n_blocks(), s.win_cols.len().div_ceil(8));
        assert_eq!(*s.blk_edge_ptr.last().unwrap() as usize, csr.nnz());
        let mut dense = vec![0f32; 16 * 100];
        for &(r, c, v) in &t {
            dense[r as usize * 100 + c as usize] += v;
        }
        assert_eq!(densify(&s), dense);
    }
}
