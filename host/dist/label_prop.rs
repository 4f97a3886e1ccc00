//! A parallel partitioner for graphs too large for METIS in the time a run allows (METIS took
//! 498 s on an SBM of 100M edges): size-constrained label propagation, in three phases, all of
//! them deterministic whatever the thread count (every rank of a run partitions the graph itself
//! and the ranks check that they agree):
//!
//! 1. **Clustering, multilevel.** Every node starts in its own cluster; in each round, half the
//!    nodes (by a hash of node and round, so that two neighbours rarely move at once and
//!    oscillate) pick, in parallel from the previous state, the cluster most of their
//!    neighbours' edge weight is in, among those that stay under a size bound; the moves are
//!    then applied in node order, each only while the bound still holds. The clusters are then
//!    contracted into a weighted graph (an edge's weight: the edges between the two clusters)
//!    and clustered again with a 4x larger bound, three levels up to half a part
//!    (`LEVEL_CLUSTERS_PER_PART`): one level alone packed unrelated clusters together and cut
//!    2-3x the edges.
//! 2. **Packing.** Nodes ordered by cluster, coarsest level first, cut into P contiguous
//!    ranges of the parts' shares of the weight (as the community method cuts its Louvain
//!    order).
//! 3. **Refinement.** A few rounds of the same propagation over the P parts: a node moves to the
//!    part most of its neighbours are in when that gains edges and the part stays within
//!    (1 + `IMBALANCE`) of its share of the weight.
//!
//! The parallel phases read only the previous state (rayon over nodes; the work is the edges),
//! the sequential ones are one pass over the proposed moves.

use rayon::prelude::*;

use crate::graph::Csr;
use crate::graph::ops::pattern;
use crate::shared::rng::mix64;

/// Rounds of clustering (per level).
const CLUSTER_ROUNDS: u32 = 6;
/// Refinement runs `MIN_REFINE_ROUNDS` rounds, then goes on while a round moves more than
/// 1 / `SETTLED` of the nodes, for at most `REFINE_ROUNDS` rounds. Four fixed rounds left two
/// SBMs of 10M nodes (8 classes, 100M entries) cutting 11.7 % and 21.5 % of their entries where
/// their classes allow 10 %; run until settled, 10.0 % and 16.7 %, while the citation graphs and
/// R-MATs had settled by the fourth (bench/NOTES.md, 2026-11-29 morning).
const MIN_REFINE_ROUNDS: u32 = 4;
const REFINE_ROUNDS: u32 = 16;
const SETTLED: usize = 1000;
/// Clusters per part the size bound of each level aims at: small clusters first, then the
/// clusters of the contracted graph grow 4x per level up to half a part (small enough to pack
/// parts evenly, large enough that the cuts split few of them).
const LEVEL_CLUSTERS_PER_PART: [u64; 3] = [32, 8, 2];
/// How far above the mean a part's weight may grow in refinement.
const IMBALANCE: f64 = 0.03;

/// Part id per node: one part per share, holding about `shares[p] / Σ shares` of the `weights`
/// (one per node), with few edges between them. The clusters depend on the weights only, not on
/// the shares: uneven shares move the cuts along the same cluster order.
pub fn label_propagation_parts(graph: &Csr, weights: &[u64], shares: &[u64]) -> Vec<u32> {
    let (n, parts) = (graph.n_rows(), shares.len());
    let total: u64 = weights.iter().sum();
    // Multilevel clustering: cluster, contract the clusters into a weighted graph, cluster that
    // with a 4x larger bound, ... `keys[l][v]`: v's cluster at level l.
    let mut keys: Vec<Vec<u32>> = Vec::new();
    // Every edge counts 1 (the input's values may be anything: a normalised matrix's).
    let unit = pattern(graph);
    let (mut g, mut w) = (unit.clone(), weights.to_vec());
    let mut member: Vec<u32> = (0..n as u32).collect(); // node -> node of the current level
    for (level, per_part) in LEVEL_CLUSTERS_PER_PART.iter().enumerate() {
        let bound = (total / (per_part * parts as u64)).max(w.iter().copied().max().unwrap_or(1));
        let mut label: Vec<u32> = (0..g.n_rows() as u32).collect();
        let mut size = w.clone();
        for round in 0..CLUSTER_ROUNDS {
            for half in 0..2 {
                let r = level as u32 * CLUSTER_ROUNDS + round;
                propagate(&g, &w, &mut label, &mut size, (r, half), |_, to_size, x| to_size + x <= bound);
            }
        }
        let (cluster, k) = compact(&label);
        member.par_iter_mut().for_each(|m| *m = cluster[*m as usize]);
        keys.push(member.clone());
        if level + 1 < LEVEL_CLUSTERS_PER_PART.len() {
            (g, w) = contract(&g, &w, &cluster, k);
        }
    }
    drop(g);
    // Nodes by cluster, coarsest level first (a coarse cluster's finer clusters stay together),
    // cut into parts.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.par_sort_unstable_by_key(|&v| {
        let v = v as usize;
        (keys[2][v], keys[1][v], keys[0][v], v)
    });
    drop(keys);
    let mut assign = vec![0u32; n];
    let mut acc = 0u64;
    let mut p = 0usize;
    for &v in &order {
        // Range p ends where the prefix weight reaches (p + 1) / P of the total.
        while p + 1 < parts && acc >= share_of(total, shares, p + 1) {
            p += 1;
        }
        assign[v as usize] = p as u32;
        acc += weights[v as usize];
    }
    let mut part_size = vec![0u64; parts];
    for v in 0..n {
        part_size[assign[v] as usize] += weights[v];
    }
    let cap: Vec<u64> = (0..parts)
        .map(|p| ((share_of(total, shares, p + 1) - share_of(total, shares, p)) as f64 * (1.0 + IMBALANCE)).ceil() as u64)
        .collect();
    for round in 0..REFINE_ROUNDS {
        let mut moved = 0;
        for half in 0..2 {
            moved += propagate(&unit, weights, &mut assign, &mut part_size, (CLUSTER_ROUNDS + round, half), |to, to_size, w| {
                to_size + w <= cap[to as usize]
            });
        }
        if round + 1 >= MIN_REFINE_ROUNDS && moved <= n / SETTLED {
            break;
        }
    }
    assign
}

/// The weight of `total` that parts 0..p hold by `shares` (exact integer arithmetic, so every
/// rank computes the same cut).
pub fn share_of(total: u64, shares: &[u64], p: usize) -> u64 {
    let all: u128 = shares.iter().map(|&s| s as u128).sum();
    let before: u128 = shares[..p].iter().map(|&s| s as u128).sum();
    (total as u128 * before / all.max(1)) as u64
}

/// Labels renumbered 0..k in order of first appearance: (cluster per node, k).
fn compact(label: &[u32]) -> (Vec<u32>, usize) {
    let mut id = vec![u32::MAX; label.len()];
    let mut k = 0u32;
    let cluster = label
        .iter()
        .map(|&l| {
            if id[l as usize] == u32::MAX {
                id[l as usize] = k;
                k += 1;
            }
            id[l as usize]
        })
        .collect();
    (cluster, k as usize)
}

/// The graph of `k` clusters: an edge between two clusters weighs the edges between their
/// members (self-loops dropped), a cluster the sum of its members' weights.
fn contract(g: &Csr, w: &[u64], cluster: &[u32], k: usize) -> (Csr, Vec<u64>) {
    let mut cw = vec![0u64; k];
    for (v, &c) in cluster.iter().enumerate() {
        cw[c as usize] += w[v];
    }
    let mut pairs: Vec<(u32, u32, f32)> = (0..g.n_rows())
        .into_par_iter()
        .flat_map_iter(|v| {
            let cv = cluster[v];
            let range = g.row_range(v);
            g.col_idx()[range.clone()]
                .iter()
                .zip(&g.values()[range])
                .map(move |(&u, &x)| (cv, cluster[u as usize], x))
                .filter(|&(a, b, _)| a != b)
        })
        .collect();
    pairs.par_sort_unstable_by_key(|&(a, b, _)| (a, b));
    let mut row_ptr = vec![0u32; k + 1];
    let (mut cols, mut vals) = (Vec::new(), Vec::<f32>::new());
    let mut i = 0;
    while i < pairs.len() {
        let (a, b, _) = pairs[i];
        let mut sum = 0f64;
        while i < pairs.len() && (pairs[i].0, pairs[i].1) == (a, b) {
            sum += pairs[i].2 as f64;
            i += 1;
        }
        cols.push(b);
        vals.push(sum as f32);
        row_ptr[a as usize + 1] += 1;
    }
    for c in 0..k {
        row_ptr[c + 1] += row_ptr[c];
    }
    let csr = Csr::new(k, k, row_ptr, cols, vals).expect("a contracted graph is a valid CSR");
    (csr, cw)
}

/// One half-round: the nodes whose hash picks `half` choose, in parallel from the current
/// labels, the neighbours' most frequent label that `allowed(label, its size, the node's weight)`
/// accepts and that beats their own (more neighbours there; ties keep the own label), then the
/// moves are applied in node order while `allowed` still holds for the sizes as they are then.
/// Returns the number of nodes moved.
fn propagate(
    graph: &Csr,
    weights: &[u64],
    label: &mut [u32],
    size: &mut [u64],
    (round, half): (u32, u32),
    allowed: impl Fn(u32, u64, u64) -> bool + Sync,
) -> usize {
    let (label_r, size_r) = (&*label, &*size);
    let moves: Vec<(u32, u32)> = (0..graph.n_rows())
        .into_par_iter()
        .with_min_len(1024)
        .filter(|&v| (mix64(((round as u64) << 32) ^ v as u64) & 1) as u32 == half)
        .map_init(Vec::new, |seen: &mut Vec<(u32, f32)>, v| {
            let own = label_r[v];
            let range = graph.row_range(v);
            seen.clear();
            seen.extend(
                graph.col_idx()[range.clone()]
                    .iter()
                    .zip(&graph.values()[range])
                    .filter(|&(&u, _)| u as usize != v)
                    .map(|(&u, &x)| (label_r[u as usize], x)),
            );
            if seen.is_empty() {
                return None;
            }
            // By label, then by weight: each label's sum adds in one order on every run.
            seen.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            let mut runs = Vec::new();
            let mut i = 0;
            while i < seen.len() {
                let l = seen[i].0;
                let mut c = 0f64;
                while i < seen.len() && seen[i].0 == l {
                    c += seen[i].1.abs() as f64;
                    i += 1;
                }
                runs.push((l, c));
            }
            let own_sum = runs.iter().find(|r| r.0 == own).map_or(0.0, |r| r.1);
            let (mut best, mut best_sum) = (own, own_sum);
            for &(l, c) in &runs {
                if l != own && c > best_sum && allowed(l, size_r[l as usize], weights[v]) {
                    (best, best_sum) = (l, c);
                }
            }
            (best != own).then_some((v as u32, best))
        })
        .flatten()
        .collect();
    let mut moved = 0;
    for (v, to) in moves {
        let (v, w) = (v as usize, weights[v as usize]);
        if allowed(to, size[to as usize], w) {
            size[label[v] as usize] -= w;
            size[to as usize] += w;
            label[v] = to;
            moved += 1;
        }
    }
    moved
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
            let a = label_propagation_parts(&g, &w, &vec![1; parts]);
            assert_eq!(a, label_propagation_parts(&g, &w, &vec![1; parts]), "not deterministic");
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
