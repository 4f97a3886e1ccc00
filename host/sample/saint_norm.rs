//! GraphSAINT's normalisation, estimated by pre-sampling as its paper (§3.2, Alg. 1) and PyG's
//! `GraphSAINTSampler.__compute_norm__` define it.
//!
//! Pre-sampling draws rounds of `steps_per_epoch` subgraphs until the subgraphs' node counts add
//! up to `coverage * N` (the last round is finished, as PyG does); `num_samples` is the number
//! drawn. With C_v the number of subgraphs holding node v and C_{v,u} the number holding the
//! entry (v, u) of row v:
//!
//! - loss weight of v: `num_samples / C_v / N` (C_v = 0 counted as 0.1): v is in a batch with
//!   probability ≈ C_v / num_samples, so a batch's `Σ_v w_v ℓ_v` (over its train nodes, as PyG's
//!   example sums `loss * node_norm`) estimates the full graph's `Σ_v ℓ_v / N`;
//! - aggregation weight of the entry (v, u) of row v: `C_v / C_{v,u}`, clamped to [0, 1e4], and
//!   0.1 where both are 0. The paper's α_{u,v} = C_{u,v} / C_v for the aggregation at v divides
//!   each message, so the value multiplied in is this inverse. Rows are the aggregating nodes
//!   (Y = S X sums row v's columns); PyG's `node_count[row] / edge_count` uses the same formula
//!   with `row` its edge_index[0].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;

/// Node loss weights (per node of the graph) and edge aggregation weights (per entry of the
/// graph's CSR), and how many subgraphs they were estimated from.
#[derive(Clone, Debug, PartialEq)]
pub struct SaintNorm {
    pub node_norm: Vec<f32>,
    pub edge_norm: Vec<f32>,
    pub num_samples: u64,
}

impl SaintNorm {
    /// The weights from counts over `num_samples` subgraphs: `node_count[v]` = C_v,
    /// `edge_count[e]` = C of entry e of `g` (see the module docs for the formulas).
    pub fn from_counts(g: &Csr, node_count: &[u32], edge_count: &[u32], num_samples: u64) -> Result<Self> {
        if node_count.len() != g.n_rows() || edge_count.len() != g.nnz() {
            return Err(Error::Shape(format!(
                "GraphSAINT counts: {} node and {} edge counts for a graph of {} nodes and {} edges",
                node_count.len(),
                edge_count.len(),
                g.n_rows(),
                g.nnz()
            )));
        }
        let n = g.n_rows() as f64;
        let mut edge_norm = vec![0f32; g.nnz()];
        for (v, &cv) in node_count.iter().enumerate() {
            let cv = cv as f64;
            for e in g.row_range(v) {
                let t = cv / edge_count[e] as f64; // inf when only the node was seen, NaN when neither
                edge_norm[e] = if t.is_nan() { 0.1 } else { t.clamp(0.0, 1e4) as f32 };
            }
        }
        let node_norm = node_count
            .iter()
            .map(|&c| {
                let c = if c == 0 { 0.1 } else { c as f64 };
                (num_samples as f64 / c / n) as f32
            })
            .collect();
        Ok(SaintNorm { node_norm, edge_norm, num_samples })
    }

    /// Pre-sample with `sample(round, i)` → (sorted unique nodes, their induced subgraph's entry
    /// ids in `g`) until `coverage * N` nodes were sampled, in rounds of `steps` (each round's
    /// subgraphs drawn in parallel; counts are integers, so the result does not depend on the
    /// thread count).
    pub fn presample<F>(g: &Csr, steps: u32, coverage: u32, sample: F) -> Result<Self>
    where
        F: Fn(u32, u32) -> (Vec<u32>, Vec<u32>) + Sync,
    {
        if steps == 0 || coverage == 0 {
            return Err(Error::Unsupported(format!(
                "GraphSAINT pre-sampling needs steps per epoch >= 1 and coverage >= 1 (got {steps} and {coverage})"
            )));
        }
        let node_count: Vec<AtomicU32> = (0..g.n_rows()).map(|_| AtomicU32::new(0)).collect();
        let edge_count: Vec<AtomicU32> = (0..g.nnz()).map(|_| AtomicU32::new(0)).collect();
        let target = g.n_rows() as u64 * coverage as u64;
        let (mut total, mut num_samples, mut round) = (0u64, 0u64, 0u32);
        while total < target {
            let sampled = AtomicU64::new(0);
            (0..steps).into_par_iter().for_each(|i| {
                let (nodes, edges) = sample(round, i);
                for &v in &nodes {
                    node_count[v as usize].fetch_add(1, Ordering::Relaxed);
                }
                for &e in &edges {
                    edge_count[e as usize].fetch_add(1, Ordering::Relaxed);
                }
                sampled.fetch_add(nodes.len() as u64, Ordering::Relaxed);
            });
            let sampled = sampled.into_inner();
            if sampled == 0 {
                return Err(Error::Unsupported(
                    "GraphSAINT pre-sampling: a round of subgraphs held no nodes (a graph without edges?)".into(),
                ));
            }
            total += sampled;
            num_samples += steps as u64;
            round += 1;
        }
        let node_count: Vec<u32> = node_count.into_iter().map(AtomicU32::into_inner).collect();
        let edge_count: Vec<u32> = edge_count.into_iter().map(AtomicU32::into_inner).collect();
        Self::from_counts(g, &node_count, &edge_count, num_samples)
    }
}
