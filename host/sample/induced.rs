//! The subgraph a node set induces: every edge of the graph between two sampled nodes.

use super::local_ids::{ABSENT, LocalIds};
use crate::graph::Csr;

/// The induced subgraph of `nodes` (sorted, unique global ids) on local ids (position in
/// `nodes`), with each kept entry's position in `g`'s arrays (its global edge id). Local ids
/// increase with global ids, so rows keep `g`'s column order (sorted if `g`'s are). Values 1.
pub fn induced_subgraph(g: &Csr, nodes: &[u32], ids: &mut LocalIds) -> (Csr, Vec<u32>) {
    debug_assert!(nodes.windows(2).all(|w| w[0] < w[1]), "nodes must be sorted and unique");
    for (l, &v) in nodes.iter().enumerate() {
        ids.insert(v, l as u32);
    }
    let (row_ptr_g, col_g) = (g.row_ptr(), g.col_idx());
    // Every scanned entry is written and the cursor moves past the kept ones only: no branch
    // on whether a neighbour is in the batch (kept or not is a coin flip the predictor loses).
    let scanned: usize = nodes.iter().map(|&v| (row_ptr_g[v as usize + 1] - row_ptr_g[v as usize]) as usize).sum();
    let mut row_ptr = Vec::with_capacity(nodes.len() + 1);
    row_ptr.push(0u32);
    let mut cols = vec![0u32; scanned];
    let mut edge_ids = vec![0u32; scanned];
    let mut k = 0usize;
    for &v in nodes {
        let (first, end) = (row_ptr_g[v as usize] as usize, row_ptr_g[v as usize + 1] as usize);
        for (e, &c) in col_g[first..end].iter().enumerate() {
            let l = ids.get_raw(c);
            cols[k] = l;
            edge_ids[k] = (first + e) as u32;
            k += usize::from(l != ABSENT);
        }
        row_ptr.push(k as u32);
    }
    cols.truncate(k);
    edge_ids.truncate(k);
    let values = vec![1.0f32; cols.len()];
    let sub = Csr::new(nodes.len(), nodes.len(), row_ptr, cols, values).expect("an induced subgraph is smaller than its valid parent");
    (sub, edge_ids)
}
