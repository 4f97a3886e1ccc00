//! Node reorderings that put related nodes in the same row windows, so SGT / ME-BCRS windows
//! share more columns and need fewer tensor-core blocks: Reverse Cuthill-McKee (small bandwidth)
//! and community order (Louvain communities, then degree within each community).
//!
//! Both look at the undirected pattern of the graph (A + A^T, values and self-loops ignored).

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::graph::ops::{pattern, remove_self_loops, symmetrize};
use crate::graph::{Csr, Permutation};

/// Which reordering to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reorder {
    Identity,
    /// Reverse Cuthill-McKee.
    Rcm,
    /// Louvain communities, then decreasing degree within each community.
    Community,
    /// Decreasing degree (a cheap baseline).
    Degree,
}

impl std::str::FromStr for Reorder {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" | "identity" => Ok(Reorder::Identity),
            "rcm" => Ok(Reorder::Rcm),
            "community" | "louvain" => Ok(Reorder::Community),
            "degree" => Ok(Reorder::Degree),
            o => Err(Error::Unsupported(format!("reordering '{o}' (none, rcm, community, degree)"))),
        }
    }
}

/// Compute the permutation for `graph` (square).
pub fn reorder(graph: &Csr, how: Reorder) -> Result<Permutation> {
    match how {
        Reorder::Identity => Ok(Permutation::identity(graph.n_rows())),
        Reorder::Rcm => rcm(graph),
        Reorder::Community => community_order(graph),
        Reorder::Degree => {
            let g = undirected(graph)?;
            let mut order: Vec<u32> = (0..g.n_rows() as u32).collect();
            order.sort_by_key(|&v| std::cmp::Reverse(g.row_len(v as usize)));
            Permutation::from_new_to_old(order)
        }
    }
}

fn undirected(graph: &Csr) -> Result<Csr> {
    Ok(pattern(&remove_self_loops(&symmetrize(graph)?)))
}

/// Reverse Cuthill-McKee: breadth-first search from a pseudo-peripheral node of each connected
/// component, visiting neighbours by increasing degree; the visit order reversed.
pub fn rcm(graph: &Csr) -> Result<Permutation> {
    let g = undirected(graph)?;
    let n = g.n_rows();
    let deg = |v: usize| g.row_len(v);
    let mut visited = vec![false; n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    // Components are started from their lowest-degree node (ties: lowest id).
    let mut by_degree: Vec<u32> = (0..n as u32).collect();
    by_degree.sort_by_key(|&v| (deg(v as usize), v));
    let mut level = vec![u32::MAX; n];
    for &start in &by_degree {
        if visited[start as usize] {
            continue;
        }
        let root = pseudo_peripheral(&g, start as usize, &mut level);
        let first = order.len();
        visited[root] = true;
        order.push(root as u32);
        let mut head = first;
        let mut nbrs: Vec<u32> = Vec::new();
        while head < order.len() {
            let v = order[head] as usize;
            head += 1;
            nbrs.clear();
            nbrs.extend(g.row(v).map(|(c, _)| c).filter(|&c| !visited[c as usize]));
            nbrs.sort_by_key(|&c| (deg(c as usize), c));
            for &c in &nbrs {
                visited[c as usize] = true;
                order.push(c);
            }
        }
    }
    order.reverse();
    Permutation::from_new_to_old(order)
}

/// George-Liu: repeat BFS from the farthest, lowest-degree node while the eccentricity grows.
fn pseudo_peripheral(g: &Csr, start: usize, level: &mut [u32]) -> usize {
    let mut root = start;
    let mut ecc = 0;
    for _ in 0..8 {
        let (far, e, touched) = bfs_levels(g, root, level);
        for &t in &touched {
            level[t as usize] = u32::MAX;
        }
        if e <= ecc {
            break;
        }
        ecc = e;
        root = far;
    }
    root
}

/// BFS levels from `root`: (a lowest-degree node of the last level, its level, nodes touched).
fn bfs_levels(g: &Csr, root: usize, level: &mut [u32]) -> (usize, u32, Vec<u32>) {
    let mut queue = VecDeque::from([root as u32]);
    let mut touched = vec![root as u32];
    level[root] = 0;
    let (mut far, mut far_level) = (root, 0);
    while let Some(v) = queue.pop_front() {
        let lv = level[v as usize];
        if lv > far_level || (lv == far_level && g.row_len(v as usize) < g.row_len(far)) {
            far = v as usize;
            far_level = lv;
        }
        for (c, _) in g.row(v as usize) {
            if level[c as usize] == u32::MAX {
                level[c as usize] = lv + 1;
                touched.push(c);
                queue.push_back(c);
            }
        }
    }
    (far, far_level, touched)
}

/// Louvain community of every node (multi-level: local moving, then aggregation, repeated
/// while it merges communities), numbered 0..communities.
pub fn louvain(graph: &Csr) -> Result<Vec<u32>> {
    let g = undirected(graph)?;
    let n = g.n_rows();
    let mut assign: Vec<u32> = (0..n as u32).collect();
    let mut level_graph = g;
    for _ in 0..16 {
        let comm = local_moving(&level_graph);
        let k = comm.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        if k == level_graph.n_rows() {
            break; // no node moved: converged
        }
        for a in assign.iter_mut() {
            *a = comm[*a as usize];
        }
        // Aggregate: one node per community, edge weights summed (internal ones on the diagonal).
        let (mut src, mut dst, mut w) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..level_graph.n_rows() {
            for (c, v) in level_graph.row(r) {
                src.push(comm[r]);
                dst.push(comm[c as usize]);
                w.push(v);
            }
        }
        level_graph = Csr::from_coo(k, k, &src, &dst, Some(&w))?;
    }
    Ok(assign)
}

/// One Louvain level: move nodes to the neighbouring community with the best modularity gain
/// until a pass moves almost nothing. Returns communities renumbered 0..k by first appearance.
fn local_moving(g: &Csr) -> Vec<u32> {
    let n = g.n_rows();
    let k: Vec<f64> = (0..n).map(|v| g.row(v).map(|(_, w)| w as f64).sum()).collect();
    let m2: f64 = k.iter().sum();
    let mut comm: Vec<u32> = (0..n as u32).collect();
    let mut tot = k.clone();
    if m2 == 0.0 {
        return comm;
    }
    let mut w_to = vec![0f64; n];
    let mut touched: Vec<u32> = Vec::new();
    for _pass in 0..32 {
        let mut moved = 0usize;
        for v in 0..n {
            let own = comm[v] as usize;
            touched.clear();
            for (c, w) in g.row(v) {
                if c as usize == v {
                    continue;
                }
                let cc = comm[c as usize] as usize;
                if w_to[cc] == 0.0 {
                    touched.push(cc as u32);
                }
                w_to[cc] += w as f64;
            }
            tot[own] -= k[v];
            // Gain of joining community c (up to terms that do not depend on c).
            let gain = |c: usize, w: f64| w - tot[c] * k[v] / m2;
            let mut best = own;
            let mut best_gain = gain(own, w_to[own]);
            for &c in &touched {
                let c = c as usize;
                let gc = gain(c, w_to[c]);
                if gc > best_gain + 1e-12 {
                    best = c;
                    best_gain = gc;
                }
            }
            tot[best] += k[v];
            if best != own {
                comm[v] = best as u32;
                moved += 1;
            }
            for &c in &touched {
                w_to[c as usize] = 0.0;
            }
        }
        if moved * 1000 <= n {
            break;
        }
    }
    let mut id = vec![u32::MAX; n];
    let mut next = 0u32;
    for c in comm.iter_mut() {
        if id[*c as usize] == u32::MAX {
            id[*c as usize] = next;
            next += 1;
        }
        *c = id[*c as usize];
    }
    comm
}

/// Nodes grouped by Louvain community (communities in order of their first node), and by
/// decreasing degree inside each community.
pub fn community_order(graph: &Csr) -> Result<Permutation> {
    let comm = louvain(graph)?;
    let deg: Vec<usize> = (0..graph.n_rows()).map(|v| graph.row_len(v)).collect();
    let mut order: Vec<u32> = (0..graph.n_rows() as u32).collect();
    order.sort_by_key(|&v| (comm[v as usize], std::cmp::Reverse(deg[v as usize]), v));
    Permutation::from_new_to_old(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Sgt;
    use crate::graph::generate::{SbmParams, grid, sbm};
    use crate::util::rng::SplitMix64;

    fn shuffle(g: &Csr, seed: u64) -> Csr {
        let mut order: Vec<u32> = (0..g.n_rows() as u32).collect();
        let mut rng = SplitMix64::new(seed);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        Permutation::from_new_to_old(order).unwrap().apply_to_csr(g).unwrap()
    }

    fn bandwidth(g: &Csr) -> usize {
        (0..g.n_rows()).flat_map(|r| g.row(r).map(move |(c, _)| r.abs_diff(c as usize))).max().unwrap_or(0)
    }

    #[test]
    fn rcm_restores_small_bandwidth() {
        let g = shuffle(&grid(30, 20), 1);
        let p = rcm(&g).unwrap();
        let r = p.apply_to_csr(&g).unwrap();
        assert!(bandwidth(&g) > 300);
        assert!(bandwidth(&r) <= 40, "bandwidth {}", bandwidth(&r));
    }

    #[test]
    fn community_order_groups_sbm_classes() {
        let mut params = SbmParams::new(4000, 50, 9);
        params.p_in = 0.95;
        let (g, _) = sbm(params).unwrap();
        let g = shuffle(&g, 2);
        let comm = louvain(&g).unwrap();
        let k = comm.iter().max().unwrap() + 1;
        assert!((20..=200).contains(&k), "{k} communities");
        let before = Sgt::from_csr(&g, 8).unwrap().n_blocks();
        for how in [Reorder::Community, Reorder::Rcm] {
            let after = Sgt::from_csr(&reorder(&g, how).unwrap().apply_to_csr(&g).unwrap(), 8).unwrap().n_blocks();
            assert!(after * 10 < before * 9, "{how:?}: {before} -> {after} blocks");
        }
    }

    #[test]
    fn trivial_graphs() {
        for n in [0, 1, 5] {
            let g = Csr::from_triplets(n, n, &[]).unwrap();
            for how in [Reorder::Identity, Reorder::Rcm, Reorder::Community, Reorder::Degree] {
                assert_eq!(reorder(&g, how).unwrap().len(), n);
            }
        }
    }
}
