//! GraphSAINT's aggregation on a batch: the model's own normalisation of the *full* graph times
//! the batch's aggregation weights C_v / C_{v,u}, so that the sum over a batch's sampled
//! neighbours estimates the full graph's (the GraphSAINT paper's Â_{v,u} / α_{u,v}; PyG's
//! `graph_saint.py` multiplies `edge_norm` into `1 / deg(col)` of the full graph the same way).
//!
//! Per model with a fixed aggregation (the Stack models):
//! - GCN: Â = D^-1/2 (A + I) D^-1/2 of the full graph; the self-loop of v (weight 1: it is in
//!   every batch that holds v) is added to every row, as `gcn_normalize` adds it (a loop among
//!   the raw entries is carried by it, its entry 0);
//! - SAGE (mean): 1 / (v's full row length);
//! - GIN (sum): 1.
//!
//! Attention models (GAT, AGNN) renormalise over the edges they see, so they take the batch's
//! raw subgraph and normalise it themselves ([`Aggregation::for_model`] returns `None`).
//!
//! Neighbour sampling ([`Aggregation::block_matrix`]) uses the same full-graph values: row v of
//! a block holds k of v's deg(v) entries, each weighted `deg(v) / k` (the sum over a uniform
//! k-subset times deg / k estimates the full row's sum without bias; every entry drawn: the
//! full row exactly), plus v's self-loop. For GCN that is Â's 1/sqrt(d_v d_u) with the full
//! graph's degrees (as GraphSAINT and a GCN on PyG's `NeighborLoader` with a precomputed
//! normalisation use), not the degrees inside the batch, which differ from the full graph's
//! the evaluation runs on; for SAGE's mean it is the mean over the drawn neighbours, as before.

use crate::error::Result;
use crate::graph::Csr;
use crate::graph::ops::gcn_normalize;
use crate::nn::models::{FixedAggregation, model_info};

/// The full graph's normalisation of one model, per entry of the graph and per node.
pub struct Aggregation {
    /// Value of raw entry e (position in the full graph's arrays).
    entry: Vec<f32>,
    /// The self-loop value of node v to add (0: none; GCN's always, a raw loop entry's value
    /// then 0).
    self_loop: Vec<f32>,
}

impl Aggregation {
    /// The normalisation `model` applies to `g`, when it has a fixed one (see the module docs).
    pub fn for_model(model: &str, g: &Csr) -> Result<Option<Self>> {
        let n = g.n_rows();
        Ok(match model_info(model)?.aggregation {
            Some(FixedAggregation::GcnNorm) => Some(Self::gcn(g)?),
            Some(FixedAggregation::Mean) => {
                let entry = (0..n).flat_map(|v| std::iter::repeat_n(1.0 / g.row_len(v).max(1) as f32, g.row_len(v))).collect();
                Some(Aggregation { entry, self_loop: vec![0.0; n] })
            }
            Some(FixedAggregation::Sum) => Some(Aggregation { entry: vec![1.0; g.nnz()], self_loop: vec![0.0; n] }),
            None => None,
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
            // The self-loop is v's own term, in every batch that holds v: always added with
            // weight 1, and a loop among the raw entries contributes nothing as an entry (a
            // neighbour sampler may leave that entry out, or scale it as a drawn neighbour).
            for e in g.row_range(v) {
                let u = g.col_idx()[e];
                entry[e] = if u as usize == v { 0.0 } else { find(u) };
            }
            *own = find(v as u32);
        }
        Ok(Aggregation { entry, self_loop })
    }

    /// The value of every raw entry of the full graph, and the self-loop value of every node
    /// (what a device sampler reads).
    pub fn parts(&self) -> (&[f32], &[f32]) {
        (&self.entry, &self.self_loop)
    }

    /// The aggregation matrix of a batch: `sub` on local ids (values = the aggregation weights),
    /// `nodes` its global ids, `edge_ids` its entries' positions in the full graph.
    pub fn batch_adjacency(&self, sub: &Csr, nodes: &[u32], edge_ids: &[u32]) -> Result<Csr> {
        match self.merged_rows(sub, nodes, edge_ids) {
            Some(m) => m,
            None => self.batch_adjacency_triplets(sub, nodes, edge_ids),
        }
    }

    /// [`Aggregation::batch_adjacency`] row by row, each row's self-loop merged into its sorted
    /// columns (summed with an existing one, as `from_triplets` sums duplicates): no sort, no
    /// triplets. `None` when a row of `sub` is not strictly increasing (then the general path).
    fn merged_rows(&self, sub: &Csr, nodes: &[u32], edge_ids: &[u32]) -> Option<Result<Csr>> {
        let n = nodes.len();
        let mut row_ptr = Vec::with_capacity(n + 1);
        row_ptr.push(0u32);
        let mut cols = Vec::with_capacity(sub.nnz() + n);
        let mut vals = Vec::with_capacity(sub.nnz() + n);
        for (r, &v) in nodes.iter().enumerate() {
            let entries = sub.row_range(r).map(|k| (sub.col_idx()[k], self.entry[edge_ids[k] as usize] * sub.values()[k]));
            if !push_row(&mut cols, &mut vals, r as u32, self.self_loop[v as usize], entries) {
                return None;
            }
            row_ptr.push(cols.len() as u32);
        }
        Some(Csr::new(n, n, row_ptr, cols, vals))
    }

    /// The aggregation matrix of one neighbour-sampling block over a batch of `n` nodes: `block`
    /// is n_dst x n_src on local ids (sorted rows; local id i = global `nodes[i]`, output i =
    /// input i), `edge_ids` its entries' positions in `full` (the whole graph, whose row lengths
    /// are the degrees). Square n x n, rows past n_dst empty (see the module docs).
    pub fn block_matrix(&self, full: &Csr, block: &Csr, edge_ids: &[u32], nodes: &[u32], n: usize) -> Result<Csr> {
        if block.n_rows() > n || block.n_cols() > n || nodes.len() < block.n_rows() || edge_ids.len() != block.nnz() {
            return Err(crate::error::Error::Shape(format!(
                "a {}x{} block of {} entries ({} edge ids) over a batch of {n} nodes ({} ids)",
                block.n_rows(),
                block.n_cols(),
                block.nnz(),
                edge_ids.len(),
                nodes.len()
            )));
        }
        let mut row_ptr = Vec::with_capacity(n + 1);
        row_ptr.push(0u32);
        let mut cols = Vec::with_capacity(block.nnz() + block.n_rows());
        let mut vals = Vec::with_capacity(block.nnz() + block.n_rows());
        for (d, &v) in nodes[..block.n_rows()].iter().enumerate() {
            let range = block.row_range(d);
            let scale = full.row_len(v as usize) as f64 / range.len().max(1) as f64;
            let entries = range.map(|k| (block.col_idx()[k], (self.entry[edge_ids[k] as usize] as f64 * scale) as f32));
            if !push_row(&mut cols, &mut vals, d as u32, self.self_loop[v as usize], entries) {
                return Err(crate::error::Error::Shape(format!("block row {d}: columns not strictly increasing")));
            }
            row_ptr.push(cols.len() as u32);
        }
        row_ptr.resize(n + 1, cols.len() as u32);
        Csr::new(n, n, row_ptr, cols, vals)
    }

    fn batch_adjacency_triplets(&self, sub: &Csr, nodes: &[u32], edge_ids: &[u32]) -> Result<Csr> {
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

/// Appends one row's `entries` (strictly increasing columns) with the self-loop weight `s`
/// merged in at column `r`: added to an entry there (as `from_triplets` sums duplicates), else
/// inserted in column order (nothing when `s` is 0). False when the columns are not strictly
/// increasing (the caller discards the row).
fn push_row(cols: &mut Vec<u32>, vals: &mut Vec<f32>, r: u32, s: f32, entries: impl Iterator<Item = (u32, f32)>) -> bool {
    let mut loop_left = s != 0.0;
    let mut prev: Option<u32> = None;
    for (c, x) in entries {
        if prev.is_some_and(|p| p >= c) {
            return false;
        }
        prev = Some(c);
        if loop_left && c >= r {
            loop_left = false;
            if c == r {
                cols.push(c);
                vals.push(x + s);
                continue;
            }
            cols.push(r);
            vals.push(s);
        }
        cols.push(c);
        vals.push(x);
    }
    if loop_left {
        cols.push(r);
        vals.push(s);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng::SplitMix64;

    /// The row-merge path builds exactly what the triplet path builds (values bit for bit),
    /// with and without existing diagonal entries, on rows before, at and after the diagonal.
    #[test]
    fn merged_rows_equal_the_triplet_path() {
        let mut rng = SplitMix64::new(9);
        for trial in 0..20 {
            let n = 1 + rng.below(40) as usize;
            let mut t = Vec::new();
            for r in 0..n as u32 {
                for _ in 0..rng.below(6) {
                    t.push((r, rng.below(n as u64) as u32, 1.0));
                }
            }
            let sub = Csr::from_triplets(n, n, &t).unwrap();
            let sub = crate::graph::ops::pattern(&sub);
            let nodes: Vec<u32> = (0..n as u32).collect();
            let edge_ids: Vec<u32> = (0..sub.nnz() as u32).collect();
            let agg = Aggregation {
                entry: (0..sub.nnz()).map(|_| rng.uniform(0.1, 1.0)).collect(),
                self_loop: (0..n).map(|v| if (v + trial) % 3 == 0 { 0.0 } else { rng.uniform(0.1, 1.0) }).collect(),
            };
            let merged = agg.merged_rows(&sub, &nodes, &edge_ids).expect("sorted rows").unwrap();
            let general = agg.batch_adjacency_triplets(&sub, &nodes, &edge_ids).unwrap();
            assert_eq!(merged, general, "trial {trial}");
        }
    }

    #[test]
    fn unsorted_rows_take_the_general_path() {
        let sub = Csr::new(2, 2, vec![0, 2, 2], vec![1, 0], vec![1.0, 1.0]).unwrap();
        let agg = Aggregation { entry: vec![0.5, 0.25], self_loop: vec![1.0, 1.0] };
        assert!(agg.merged_rows(&sub, &[0, 1], &[0, 1]).is_none());
        let a = agg.batch_adjacency(&sub, &[0, 1], &[0, 1]).unwrap();
        assert_eq!((a.col_idx(), a.values()), (&[0u32, 1, 1][..], &[1.25f32, 0.5, 1.0][..]));
    }
}
