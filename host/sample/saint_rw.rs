//! GraphSAINT's random-walk sampler: `roots` uniform start nodes, each walking `walk_length`
//! steps to a uniformly chosen neighbour; every node visited is sampled (as PyG's
//! `GraphSAINTRandomWalkSampler`: walk_length + 1 nodes per root, repeats merged later).
//! A node without neighbours keeps the walk where it is (torch_cluster's `random_walk` does too).

use super::stream::Stream;
use crate::graph::Csr;

/// The visited nodes of every walk, walk by walk (`roots * (walk_length + 1)` ids). Root r
/// draws its start with counter r * (walk_length + 1) and step s with the next counters, so
/// each walk can be replayed alone.
pub fn draw_walks(g: &Csr, roots: usize, walk_length: usize, s: Stream) -> Vec<u32> {
    let n = g.n_rows() as u64;
    if n == 0 {
        return Vec::new();
    }
    let (row_ptr, col) = (g.row_ptr(), g.col_idx());
    let per_walk = walk_length as u64 + 1;
    let mut out = Vec::with_capacity(roots * (walk_length + 1));
    for r in 0..roots as u64 {
        let base = r * per_walk;
        let mut v = s.below(base, n) as u32;
        out.push(v);
        for step in 0..walk_length as u64 {
            let (start, end) = (row_ptr[v as usize], row_ptr[v as usize + 1]);
            if end > start {
                v = col[(start as u64 + s.below(base + 1 + step, (end - start) as u64)) as usize];
            }
            out.push(v);
        }
    }
    out
}
