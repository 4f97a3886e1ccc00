//! GraphSAINT's node sampler: nodes drawn with probability proportional to their degree.
//!
//! The paper (§3.4) draws node v with P(v) ∝ ||Ã_{:,v}||²; with the unweighted 0/1 adjacency
//! its authors' code and PyG's `GraphSAINTNodeSampler` use, that is v's degree (not its square:
//! the squared entries are 1). PyG draws it as the row of a uniformly drawn edge, i.e. ∝ row
//! length (= degree on undirected graphs); so do we: `budget` draws with replacement (PyG's
//! `batch_size`), duplicates merged by the caller, nodes without edges never drawn.

use super::stream::Stream;
use crate::graph::Csr;

/// The row holding entry `e` (`e < nnz`): the last row whose start is `<= e`.
pub fn row_of_entry(row_ptr: &[u32], e: u32) -> u32 {
    (row_ptr.partition_point(|&p| p <= e) - 1) as u32
}

/// `budget` node draws (with repeats); draw j uses counter j. Empty if `g` has no edges.
pub fn draw_nodes(g: &Csr, budget: usize, s: Stream) -> Vec<u32> {
    let nnz = g.nnz() as u64;
    if nnz == 0 {
        return Vec::new();
    }
    (0..budget as u64).map(|j| row_of_entry(g.row_ptr(), s.below(j, nnz) as u32)).collect()
}
