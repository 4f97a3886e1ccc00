//! GraphSAINT's edge sampler: edges (u, v) drawn with p ∝ 1/deg(u) + 1/deg(v), both ends kept.
//!
//! The paper's (§3.4) probability, from Ã = D⁻¹A: p_{u,v} ∝ Ã_{u,v} + Ã_{v,u}. We take deg(u)
//! as u's row length and deg(v) as v's column count (the same on undirected graphs). Draws are
//! with replacement from an alias table, O(1) each, so a batch costs O(budget), not O(E).
//! (PyG's `GraphSAINTEdgeSampler` draws `batch_size` edges without replacement by a top-k over
//! all E edges per batch, and its code computes 1/(1/deg) = deg where the paper has 1/deg; the
//! normalisation is estimated from the same draws the batches use, so it matches either way.)

use super::alias::AliasTable;
use super::saint_node::row_of_entry;
use super::stream::Stream;
use crate::error::Result;
use crate::graph::Csr;

/// The edge distribution of one graph.
pub struct EdgeDraws {
    table: AliasTable,
}

impl EdgeDraws {
    /// Fails on a graph without edges.
    pub fn new(g: &Csr) -> Result<Self> {
        let mut in_deg = vec![0u32; g.n_cols()];
        for &c in g.col_idx() {
            in_deg[c as usize] += 1;
        }
        let mut w = Vec::with_capacity(g.nnz());
        for r in 0..g.n_rows() {
            let out = g.row_len(r) as f64;
            for &c in &g.col_idx()[g.row_range(r)] {
                w.push(1.0 / out + 1.0 / in_deg[c as usize] as f64);
            }
        }
        Ok(EdgeDraws { table: AliasTable::new(&w, "GraphSAINT edge sampler: the graph's edges")? })
    }

    /// The alias table the draws pick from.
    pub fn table(&self) -> &AliasTable {
        &self.table
    }

    /// The probability of drawing entry `e` of `g` in one draw.
    pub fn probability(&self, e: usize) -> f64 {
        self.table.probability(e)
    }

    /// `budget` edge draws (entry positions in `g`, with repeats); draw j uses counters 2j (the
    /// slot) and 2j + 1 (the alias coin).
    pub fn draw_edges(&self, budget: usize, s: Stream) -> Vec<u32> {
        let n = self.table.len() as u64;
        (0..budget as u64).map(|j| self.table.pick(s.below(2 * j, n) as usize, s.unit(2 * j + 1))).collect()
    }

    /// Both ends of each drawn edge (with repeats).
    pub fn draw_nodes(&self, g: &Csr, budget: usize, s: Stream) -> Vec<u32> {
        let mut nodes = Vec::with_capacity(2 * budget);
        for e in self.draw_edges(budget, s) {
            nodes.push(row_of_entry(g.row_ptr(), e));
            nodes.push(g.col_idx()[e as usize]);
        }
        nodes
    }
}
