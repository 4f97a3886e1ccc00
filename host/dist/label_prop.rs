//! A parallel partitioner for graphs too large for METIS in the time a run allows (METIS took
//! 498 s on an SBM of 100M edges): size-constrained label propagation, in three phases, all of
//! them deterministic whatever the thread count (every rank of a run partitions the graph itself
//! and the ranks check that they agree):
//!
//! 1. **Clustering.** Every node starts in its own cluster; in each round, half the nodes (by a
//!    hash of node and round, so that two neighbours rarely move at once and oscillate) pick,
//!    in parallel from the previous state, the cluster most of their neighbours are in, among
//!    those that stay under a size bound (1 / (`CLUSTERS_PER_PART` P) of the total weight);
//!    the moves are then applied in node order, each only while the bound still holds.
//! 2. **Packing.** Nodes ordered by cluster, cut into P contiguous edge-balanced ranges (as the
//!    community method cuts its Louvain order).
//! 3. **Refinement.** A few rounds of the same propagation over the P parts: a node moves to the
//!    part most of its neighbours are in when that gains edges and the part stays within
//!    (1 + `IMBALANCE`) of the mean weight.
//!
//! The parallel phases read only the previous state (rayon over nodes; the work is the edges),
//! the sequential ones are one pass over the proposed moves.

use rayon::prelude::*;

use crate::graph::Csr;
use crate::shared::rng::mix64;

/// Rounds of clustering and of refinement.
const CLUSTER_ROUNDS: u32 = 6;
const REFINE_ROUNDS: u32 = 4;
/// Clusters per part the size bound aims at (small enough to pack parts evenly).
const CLUSTERS_PER_PART: u64 = 2;
/// How far above the mean a part's weight may grow in refinement.
const IMBALANCE: f64 = 0.03;

/// Part id per node: `parts` parts of about equal `weights` (one per node) with few edges
/// between them.
pub fn label_propagation_parts(graph: &Csr, weights: &[u64], parts: usize) -> Vec<u32> {
    let n = graph.n_rows();
    let total: u64 = weights.iter().sum();
    let bound = (total / (CLUSTERS_PER_PART * parts as u64)).max(weights.iter().copied().max().unwrap_or(1));
    let mut label: Vec<u32> = (0..n as u32).collect();
    let mut size: Vec<u64> = weights.to_vec();
    for round in 0..CLUSTER_ROUNDS {
        for half in 0..2 {
            propagate(graph, weights, &mut label, &mut size, (round, half), |to_size, w| to_size + w <= bound);
        }
    }
    // Nodes by cluster (the cluster's first member's id is its label's order), cut into parts.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.par_sort_unstable_by_key(|&v| (label[v as usize], v));
    let mut assign = vec![0u32; n];
    let mut acc = 0u64;
    let mut p = 0usize;
    for &v in &order {
        // Range p ends where the prefix weight reaches (p + 1) / P of the total.
        while p + 1 < parts && acc >= (total as u128 * (p as u128 + 1) / parts as u128) as u64 {
            p += 1;
        }
        assign[v as usize] = p as u32;
        acc += weights[v as usize];
    }
    let mut part_size = vec![0u64; parts];
    for v in 0..n {
        part_size[assign[v] as usize] += weights[v];
    }
    let cap = ((total as f64 / parts as f64) * (1.0 + IMBALANCE)).ceil() as u64;
    for round in 0..REFINE_ROUNDS {
        for half in 0..2 {
            propagate(graph, weights, &mut assign, &mut part_size, (CLUSTER_ROUNDS + round, half), |to_size, w| to_size + w <= cap);
        }
    }
    assign
}

/// One half-round: the nodes whose hash picks `half` choose, in parallel from the current
/// labels, the neighbours' most frequent label that `allowed(its size, the node's weight)`
/// accepts and that beats their own (more neighbours there; ties keep the own label), then the
/// moves are applied in node order while `allowed` still holds for the sizes as they are then.
fn propagate(
    graph: &Csr,
    weights: &[u64],
    label: &mut [u32],
    size: &mut [u64],
    (round, half): (u32, u32),
    allowed: impl Fn(u64, u64) -> bool + Sync,
) {
    let (label_r, size_r) = (&*label, &*size);
    let moves: Vec<(u32, u32)> = (0..graph.n_rows())
        .into_par_iter()
        .with_min_len(1024)
        .filter(|&v| (mix64(((round as u64) << 32) ^ v as u64) & 1) as u32 == half)
        .map_init(Vec::new, |seen: &mut Vec<u32>, v| {
            let own = label_r[v];
            seen.clear();
            seen.extend(graph.col_idx()[graph.row_range(v)].iter().filter(|&&u| u as usize != v).map(|&u| label_r[u as usize]));
            if seen.is_empty() {
                return None;
            }
            seen.sort_unstable();
            let own_count = seen.iter().filter(|&&l| l == own).count() as u32;
            let (mut best, mut best_count) = (own, own_count);
            let mut i = 0;
            while i < seen.len() {
                let l = seen[i];
                let mut j = i;
                while j < seen.len() && seen[j] == l {
                    j += 1;
                }
                let c = (j - i) as u32;
                if l != own && c > best_count && allowed(size_r[l as usize], weights[v]) {
                    (best, best_count) = (l, c);
                }
                i = j;
            }
            (best != own).then_some((v as u32, best))
        })
        .flatten()
        .collect();
    for (v, to) in moves {
        let (v, w) = (v as usize, weights[v as usize]);
        if allowed(size[to as usize], w) {
            size[label[v] as usize] -= w;
            size[to as usize] += w;
            label[v] = to;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::{SbmParams, sbm};

    fn weights(g: &Csr) -> Vec<u64> {
        (0..g.n_rows()).map(|r| g.row_len(r) as u64 + 1).collect()
    }

    #[test]
    fn parts_are_balanced_deterministic_and_cut_few_edges_of_an_sbm() {
        let mut params = SbmParams::new(6000, 8, 3);
        params.p_in = 0.9;
        let (g, _) = sbm(params).unwrap();
        let w = weights(&g);
        let total: u64 = w.iter().sum();
        for parts in [2usize, 4] {
            let a = label_propagation_parts(&g, &w, parts);
            assert_eq!(a, label_propagation_parts(&g, &w, parts), "not deterministic");
            let mut size = vec![0u64; parts];
            let mut cut = 0usize;
            for v in 0..g.n_rows() {
                size[a[v] as usize] += w[v];
                cut += g.col_idx()[g.row_range(v)].iter().filter(|&&u| a[u as usize] != a[v]).count();
            }
            let max = *size.iter().max().unwrap() as f64 / (total as f64 / parts as f64);
            assert!(max <= 1.0 + IMBALANCE + 0.01, "{parts} parts: imbalance {max}");
            // A random assignment cuts (P - 1) / P of the edges; the planted blocks allow ~10%.
            let frac = cut as f64 / g.nnz() as f64;
            println!("{parts} parts: {frac:.3} of the edges cut, imbalance {max:.3}");
            assert!(frac < 0.35, "{parts} parts: {frac:.3} of the edges cut");
        }
    }
}
