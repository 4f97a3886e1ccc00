//! GraphSAINT's aggregation on a batch: the model's own normalisation of the *full* graph times
//! the batch's aggregation weights C_v / C_{v,u}, so that the sum over a batch's sampled
//! neighbours estimates the full graph's (the GraphSAINT paper's Â_{v,u} / α_{u,v}; PyG's
//! `graph_saint.py` multiplies `edge_norm` into `1 / deg(col)` of the full graph the same way).
//!
//! Per model with a fixed aggregation (the Stack models):
//! - GCN: Â = D^-1/2 (A + I) D^-1/2 of the full graph; the self-loop of v (weight 1: it is in
//!   every batch that holds v) is added to every row, as `gcn_normalize` adds it;
//! - SAGE (mean): 1 / (v's full row length);
//! - GIN (sum): 1.
//!
//! Attention models (GAT, AGNN) renormalise over the edges they see, so they take the batch's
//! raw subgraph and normalise it themselves ([`Aggregation::for_model`] returns `None`).

use crate::error::Result;
use crate::graph::Csr;
use crate::graph::ops::gcn_normalize;

/// The full graph's normalisation of one model, per entry of the graph and per node.
pub struct Aggregation {
    /// Value of raw entry e (position in the full graph's arrays).
    entry: Vec<f32>,
    /// The self-loop value of node v to add (0: none, or the graph has v's loop among its entries).
    self_loop: Vec<f32>,
}

impl Aggregation {
    /// The normalisation `model` applies to `g`, when it has a fixed one (see the module docs).
    pub fn for_model(model: &str, g: &Csr) -> Result<Option<Self>> {
        let n = g.n_rows();
        Ok(match model {
            "gcn" => Some(Self::gcn(g)?),
            "sage" => {
                let entry = (0..n).flat_map(|v| std::iter::repeat_n(1.0 / g.row_len(v).max(1) as f32, g.row_len(v))).collect();
                Some(Aggregation { entry, self_loop: vec![0.0; n] })
            }
            "gin" => Some(Aggregation { entry: vec![1.0; g.nnz()], self_loop: vec![0.0; n] }),
            _ => None,
        })
    }

    /// Â's value of every raw entry, found in Â's row by column (Â's rows are sorted and hold
    /// the raw row's columns plus the diagonal).
    fn gcn(g: &Csr) -> Result<Self> {
        let a_hat = gcn_normalize(g)?;
        let n = g.n_rows();
        let mut entry = vec![0f32; g.nnz()];
        let mut self_loop = vec![0f32; n];
        for (v, own) in self_loop.iter_mut().enumerate() {
            let (cols, vals) = (&a_hat.col_idx()[a_hat.row_range(v)], &a_hat.values()[a_hat.row_range(v)]);
            let find = |u: u32| cols.binary_search(&u).map(|k| vals[k]).unwrap_or(0.0);
            let mut has_loop = false;
            for e in g.row_range(v) {
                let u = g.col_idx()[e];
                has_loop |= u as usize == v;
                entry[e] = find(u);
            }
            if !has_loop {
                *own = find(v as u32);
            }
        }
        Ok(Aggregation { entry, self_loop })
    }

    /// The aggregation matrix of a batch: `sub` on local ids (values = the aggregation weights),
    /// `nodes` its global ids, `edge_ids` its entries' positions in the full graph.
    pub fn batch_adjacency(&self, sub: &Csr, nodes: &[u32], edge_ids: &[u32]) -> Result<Csr> {
        let mut t = Vec::with_capacity(sub.nnz() + nodes.len());
        for (r, &v) in nodes.iter().enumerate() {
            for k in sub.row_range(r) {
                t.push((r as u32, sub.col_idx()[k], self.entry[edge_ids[k] as usize] * sub.values()[k]));
            }
            let s = self.self_loop[v as usize];
            if s != 0.0 {
                t.push((r as u32, r as u32, s));
            }
        }
        Csr::from_triplets(nodes.len(), nodes.len(), &t)
    }
}
