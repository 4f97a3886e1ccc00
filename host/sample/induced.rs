//! The subgraph a node set induces: every edge of the graph between two sampled nodes.

use super::local_ids::LocalIds;
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
    let mut row_ptr = Vec::with_capacity(nodes.len() + 1);
    row_ptr.push(0u32);
    let mut cols = Vec::new();
    let mut edge_ids = Vec::new();
    for &v in nodes {
        for e in row_ptr_g[v as usize]..row_ptr_g[v as usize + 1] {
            if let Some(l) = ids.get(col_g[e as usize]) {
                cols.push(l);
                edge_ids.push(e);
            }
        }
        row_ptr.push(cols.len() as u32);
    }
    let values = vec![1.0f32; cols.len()];
    let sub = Csr::new(nodes.len(), nodes.len(), row_ptr, cols, values)
        .expect("an induced subgraph is smaller than its valid parent");
    (sub, edge_ids)
}
