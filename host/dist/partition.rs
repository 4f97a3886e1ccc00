//! Nodes into P parts of balanced edges, for full-graph training across GPUs (1D row partition).
//!
//! Nodes are relabelled so part p owns the contiguous range `offsets[p]..offsets[p + 1]` of the
//! new ids; part p holds whole rows of the relabelled matrix, so a row's softmax and every other
//! per-row op stays local. Its rows are split by column owner into
//! - a **local** block (rows x own rows): columns it owns, renumbered `c - offsets[p]`;
//! - a **remote** block (rows x halo): columns other parts own, renumbered compactly 0..halo in
//!   increasing global id, which is increasing (owner part, owner-local row): the halo rows from
//!   one owner are one contiguous slice of the halo matrix, so a receive lands in place.
//!
//! Then `Y_p = A_local X_p + A_remote X_halo`. The backward `dX = Aᵀ dY` uses the transposes:
//! `local_t dY_p` for the owned rows and `remote_t dY_p` (halo x k) for rows that belong to other
//! parts, sent back to them and summed there ([`crate::dist::halo`]).
//!
//! Balance: a part's weight is Σ (row nnz + w) over its nodes: its edges (the sparse products'
//! work) plus `w` per row for the dense work (the weight products, the element-wise passes, the
//! loss), which costs a step as much as `w` edges do ([`DEFAULT_ROW_WEIGHT`]; `--row-weight`).
//! Balancing edges alone (w = 1) gave a part of many low-degree rows a quarter more work than
//! one of few hubs. The cut orders: the given order (contiguous), our
//! Louvain community order, METIS k-way with those vertex weights, or parallel label propagation
//! ([`crate::dist::label_prop`]).

use crate::dist::label_prop::share_of;
use crate::error::{Error, Result};
use crate::graph::ops::{pattern, remove_self_loops, symmetrize, transpose};
use crate::graph::reorder::community_order;
use crate::graph::{Csr, Permutation};

/// The edges a row weighs in the balance by default: a step's time per row over its time per
/// edge, fitted on the H200 to the two ranks' compute of an R-MAT 2^22 x 16 cut by edges alone
/// (GCN 7.1, GAT 6.6; bench/NOTES.md, 2026-11-29 (morning)).
pub const DEFAULT_ROW_WEIGHT: u64 = 7;

/// How nodes are assigned to parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionMethod {
    /// The graph's own node order cut into edge-balanced ranges (each part's interior nodes
    /// then moved before its boundary nodes, as for every method).
    Contiguous,
    /// Louvain community order ([`community_order`]) cut into edge-balanced ranges.
    Community,
    /// METIS k-way (edge cut minimised, vertex weights = the balance's node weights); needs the
    /// `metis` feature.
    Metis,
    /// Parallel size-constrained label propagation ([`crate::dist::label_prop`]): clusters
    /// packed into edge-balanced parts, then refined; for graphs too large for METIS.
    LabelProp,
}

impl std::str::FromStr for PartitionMethod {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "contiguous" => Ok(PartitionMethod::Contiguous),
            "community" | "louvain" => Ok(PartitionMethod::Community),
            "metis" => Ok(PartitionMethod::Metis),
            "lp" | "label-propagation" => Ok(PartitionMethod::LabelProp),
            o => Err(Error::Unsupported(format!("partition method '{o}' (contiguous, community, metis, lp)"))),
        }
    }
}

impl std::fmt::Display for PartitionMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PartitionMethod::Contiguous => "contiguous",
            PartitionMethod::Community => "community",
            PartitionMethod::Metis => "metis",
            PartitionMethod::LabelProp => "lp",
        })
    }
}

/// One part's rows of the relabelled matrix, split by column owner, with their transposes.
#[derive(Clone, Debug, PartialEq)]
pub struct PartBlocks {
    pub part: usize,
    /// First global (relabelled) row it owns; it owns `first_row..first_row + rows`.
    pub first_row: usize,
    pub rows: usize,
    /// rows x rows: columns it owns, local ids.
    pub local: Csr,
    /// rows x halo: columns owned elsewhere, halo ids.
    pub remote: Csr,
    /// Per halo column: (owner part, row local to the owner), sorted.
    pub halo: Vec<(u32, u32)>,
    /// Halo columns from owner q are `recv_ptr[q]..recv_ptr[q + 1]` (P + 1 entries).
    pub recv_ptr: Vec<usize>,
    /// `send[q]`: its own local rows that part q needs, in q's halo order (empty for q = itself).
    pub send: Vec<Vec<u32>>,
    /// Transposes for the backward: `local_t` rows x rows, `remote_t` halo x rows.
    pub local_t: Csr,
    pub remote_t: Csr,
}

impl PartBlocks {
    /// Number of halo rows it receives.
    pub fn halo_rows(&self) -> usize {
        self.halo.len()
    }
}

/// A partition of a square graph into P parts that own contiguous ranges of new ids.
#[derive(Clone, Debug)]
pub struct Partition {
    pub method: PartitionMethod,
    /// The relabelling (graph's ids → partition order); apply it to features, labels, masks.
    pub perm: Permutation,
    /// P + 1 offsets into the new ids.
    pub offsets: Vec<usize>,
    pub blocks: Vec<PartBlocks>,
}

/// Sizes of one part: what it computes and what it receives.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PartitionStats {
    pub part: usize,
    pub nodes: usize,
    /// Nonzeros of its rows (local + remote).
    pub edges: usize,
    pub local_edges: usize,
    pub remote_edges: usize,
    /// Rows it receives in a halo exchange.
    pub halo_rows: usize,
    /// Rows an all-gather would bring it: every row it does not own.
    pub all_gather_rows: usize,
}

impl PartitionStats {
    /// halo / all-gather volume (0 when there is nothing to gather).
    pub fn halo_ratio(&self) -> f64 {
        if self.all_gather_rows == 0 { 0.0 } else { self.halo_rows as f64 / self.all_gather_rows as f64 }
    }
}

impl Partition {
    /// Partition `graph` (square) into `parts` parts with `method`, rows weighted
    /// [`DEFAULT_ROW_WEIGHT`].
    pub fn new(graph: &Csr, parts: usize, method: PartitionMethod) -> Result<Partition> {
        Self::with_row_weight(graph, parts, method, DEFAULT_ROW_WEIGHT)
    }

    /// [`Partition::new`] with a row weighing `row_weight` edges (>= 1: a node's own cost, so
    /// that isolated nodes still spread).
    pub fn with_row_weight(graph: &Csr, parts: usize, method: PartitionMethod, row_weight: u64) -> Result<Partition> {
        check_square(graph, parts)?;
        if row_weight == 0 {
            return Err(Error::Unsupported("a row weight of 0 edges: at least 1 (a node's own cost)".into()));
        }
        Self::with_node_weights(graph, parts, method, &node_weights(graph, row_weight))
    }

    /// [`Partition::new`] balancing `weights`, one per node (each >= 1).
    pub fn with_node_weights(graph: &Csr, parts: usize, method: PartitionMethod, weights: &[u64]) -> Result<Partition> {
        check_square(graph, parts)?;
        Self::with_shares(graph, method, weights, &vec![1; parts])
    }

    /// Part p gets `shares[p] / Σ shares` of the total weight (one part per share, each >= 1):
    /// uneven targets for parts whose weight costs unevenly ([`crate::dist::balance`]).
    pub fn with_shares(graph: &Csr, method: PartitionMethod, weights: &[u64], shares: &[u64]) -> Result<Partition> {
        let parts = shares.len();
        check_square(graph, parts)?;
        if let Some(p) = shares.iter().position(|&s| s == 0) {
            return Err(Error::Unsupported(format!("part {p}'s share of the weight is 0: every part has a share >= 1")));
        }
        if weights.len() != graph.n_rows() {
            return Err(Error::Shape(format!("{} node weights for {} nodes", weights.len(), graph.n_rows())));
        }
        if let Some(v) = weights.iter().position(|&w| w == 0) {
            return Err(Error::Unsupported(format!("node {v} weighs 0: every node weighs at least 1")));
        }
        // METIS loops bisecting empty graphs when asked for more parts than nodes; the cuts
        // leave the extra parts empty (which the halo exchange handles).
        if method == PartitionMethod::Metis {
            at_most_one_part_per_node(parts, graph.n_rows())?;
        }
        let (perm, offsets) = match method {
            PartitionMethod::Contiguous => {
                let perm = Permutation::identity(graph.n_rows());
                let offsets = balanced_cuts(weights, perm.new_to_old(), shares);
                (perm, offsets)
            }
            PartitionMethod::Community => {
                let perm = community_order(graph)?;
                let offsets = balanced_cuts(weights, perm.new_to_old(), shares);
                (perm, offsets)
            }
            PartitionMethod::Metis => {
                let assign = metis_parts(graph, weights, shares)?;
                relabel_by_part(&assign, parts)?
            }
            PartitionMethod::LabelProp => {
                relabel_by_part(&crate::dist::label_prop::label_propagation_parts(graph, weights, shares), parts)?
            }
        };
        Self::from_relabelling(graph, method, perm, offsets)
    }

    /// Partition from an explicit part id per node (tests, or an outside partitioner).
    pub fn from_assignment(graph: &Csr, assign: &[u32], parts: usize) -> Result<Partition> {
        check_square(graph, parts)?;
        if assign.len() != graph.n_rows() {
            return Err(Error::Shape(format!("{} part ids for {} nodes", assign.len(), graph.n_rows())));
        }
        let (perm, offsets) = relabel_by_part(assign, parts)?;
        Self::from_relabelling(graph, PartitionMethod::Contiguous, perm, offsets)
    }

    fn from_relabelling(graph: &Csr, method: PartitionMethod, perm: Permutation, offsets: Vec<usize>) -> Result<Partition> {
        use rayon::prelude::*;
        let perm = interior_first(graph, perm, &offsets)?;
        let identity = perm.new_to_old().iter().enumerate().all(|(i, &o)| i == o as usize);
        let a = if identity { graph.clone() } else { perm.apply_to_csr(graph)? };
        let parts = offsets.len() - 1;
        let mut blocks: Vec<PartBlocks> = (0..parts).into_par_iter().map(|p| split_rows(&a, &offsets, p)).collect::<Result<_>>()?;
        // Send lists are the other side of every halo list: part q sends to p the rows p's halo
        // names with owner q, in p's order.
        let mut send = vec![vec![Vec::new(); parts]; parts];
        for b in &blocks {
            for &(owner, row) in &b.halo {
                send[owner as usize][b.part].push(row);
            }
        }
        for (b, s) in blocks.iter_mut().zip(send) {
            b.send = s;
        }
        Ok(Partition { method, perm, offsets, blocks })
    }

    pub fn parts(&self) -> usize {
        self.blocks.len()
    }

    /// Global node count.
    pub fn nodes(&self) -> usize {
        *self.offsets.last().unwrap_or(&0)
    }

    /// The part that owns new id `v`.
    pub fn owner(&self, v: usize) -> usize {
        self.offsets.partition_point(|&o| o <= v) - 1
    }

    pub fn stats(&self) -> Vec<PartitionStats> {
        let n = self.nodes();
        self.blocks
            .iter()
            .map(|b| PartitionStats {
                part: b.part,
                nodes: b.rows,
                edges: b.local.nnz() + b.remote.nnz(),
                local_edges: b.local.nnz(),
                remote_edges: b.remote.nnz(),
                halo_rows: b.halo.len(),
                all_gather_rows: n - b.rows,
            })
            .collect()
    }

    /// Σ halo rows / Σ all-gather rows over the parts: what the exchange choice reads.
    pub fn halo_ratio(&self) -> f64 {
        let s = self.stats();
        let gather: usize = s.iter().map(|p| p.all_gather_rows).sum();
        if gather == 0 { 0.0 } else { s.iter().map(|p| p.halo_rows).sum::<usize>() as f64 / gather as f64 }
    }

    /// Largest part's edges over the mean (1.0 = perfectly balanced).
    pub fn edge_balance(&self) -> f64 {
        let s = self.stats();
        let total: usize = s.iter().map(|p| p.edges).sum();
        let max = s.iter().map(|p| p.edges).max().unwrap_or(0);
        if total == 0 { 1.0 } else { max as f64 * s.len() as f64 / total as f64 }
    }
}

/// Refuses more parts than nodes: what a user asks for that way leaves ranks with nothing to
/// train (the command line checks it; the library keeps empty parts working).
pub fn at_most_one_part_per_node(parts: usize, nodes: usize) -> Result<()> {
    if parts > nodes.max(1) {
        return Err(Error::Unsupported(format!("{parts} parts for a graph of {nodes} nodes: at most one part per node")));
    }
    Ok(())
}

fn check_square(graph: &Csr, parts: usize) -> Result<()> {
    if graph.n_rows() != graph.n_cols() {
        return Err(Error::Shape(format!("partitioning needs a square graph, got {} x {}", graph.n_rows(), graph.n_cols())));
    }
    if parts == 0 {
        return Err(Error::Unsupported("partition into 0 parts".into()));
    }
    if parts > u32::MAX as usize {
        return Err(Error::Unsupported(format!("{parts} parts")));
    }
    Ok(())
}

/// Row nnz + `row_weight` per node: the sparse work of its row plus its dense work.
pub fn node_weights(graph: &Csr, row_weight: u64) -> Vec<u64> {
    (0..graph.n_rows()).map(|r| graph.row_len(r) as u64 + row_weight).collect()
}

/// Cut `order` into one contiguous range per share, of about the shares' fractions of the
/// weight: range p ends near the node whose prefix weight reaches (shares 0..=p) / Σ shares of
/// the total. Empty parts arise only when there are fewer nodes (or heavy nodes) than parts.
fn balanced_cuts(weights: &[u64], order: &[u32], shares: &[u64]) -> Vec<usize> {
    let total: u64 = weights.iter().sum();
    let parts = shares.len();
    let mut offsets = Vec::with_capacity(parts + 1);
    offsets.push(0);
    let mut acc = 0u64;
    let mut i = 0;
    for p in 1..parts {
        let target = share_of(total, shares, p);
        // Take nodes while doing so brings the prefix closer to the target.
        while i < order.len() && acc < target {
            let w = weights[order[i] as usize];
            if acc + w <= target || (acc + w - target) < (target - acc) {
                acc += w;
                i += 1;
            } else {
                break;
            }
        }
        offsets.push(i);
    }
    offsets.push(order.len());
    offsets
}

/// Nodes sorted by (part, id): the relabelling and the part offsets.
fn relabel_by_part(assign: &[u32], parts: usize) -> Result<(Permutation, Vec<usize>)> {
    let mut counts = vec![0usize; parts + 1];
    for (v, &p) in assign.iter().enumerate() {
        if p as usize >= parts {
            return Err(Error::Shape(format!("node {v} assigned to part {p}, but there are {parts} parts")));
        }
        counts[p as usize + 1] += 1;
    }
    for p in 0..parts {
        counts[p + 1] += counts[p];
    }
    let offsets = counts.clone();
    let mut next = counts;
    let mut new_to_old = vec![0u32; assign.len()];
    for (v, &p) in assign.iter().enumerate() {
        new_to_old[next[p as usize]] = v as u32;
        next[p as usize] += 1;
    }
    Ok((Permutation::from_new_to_old(new_to_old)?, offsets))
}

/// `perm` with each part's nodes reordered (stably) so that its *interior* nodes, whose every
/// neighbour it owns, come before its *boundary* nodes (some neighbour owned elsewhere). A
/// part's rows that read no halo row are then one leading range of its rows, which the GPU step
/// multiplies while the halo exchange is in flight ([`crate::nn::halo_hook`]). Within a part the
/// order is otherwise free: dropout is keyed by original ids, and a part's rows, halo and send
/// lists all follow from the relabelling.
fn interior_first(graph: &Csr, perm: Permutation, offsets: &[usize]) -> Result<Permutation> {
    use rayon::prelude::*;
    let (new_to_old, old_to_new) = (perm.new_to_old(), perm.old_to_new());
    let parts = offsets.len() - 1;
    let reordered: Vec<Vec<u32>> = (0..parts)
        .into_par_iter()
        .map(|p| {
            let (lo, hi) = (offsets[p], offsets[p + 1]);
            let interior = |old: u32| {
                graph.col_idx()[graph.row_range(old as usize)].iter().all(|&c| (lo..hi).contains(&(old_to_new[c as usize] as usize)))
            };
            let (mut inner, mut outer): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
            for &old in &new_to_old[lo..hi] {
                if interior(old) { inner.push(old) } else { outer.push(old) }
            }
            inner.extend(outer);
            inner
        })
        .collect();
    let v: Vec<u32> = reordered.concat();
    if v.as_slice() == new_to_old {
        return Ok(perm);
    }
    Permutation::from_new_to_old(v)
}

/// Part `p`'s rows of the relabelled matrix `a` split into local and remote blocks.
fn split_rows(a: &Csr, offsets: &[usize], p: usize) -> Result<PartBlocks> {
    let (lo, hi) = (offsets[p], offsets[p + 1]);
    let rows = hi - lo;
    // Halo: the distinct columns outside lo..hi, numbered in increasing global id (= by owner,
    // then owner-local row). A dense map from global column to halo id makes each lookup O(1):
    // binary searches over a 10M-node halo took minutes. It costs 4 bytes per node per part in
    // flight (one part per rayon thread).
    let n = a.n_cols();
    let outside = |c: u32| (c as usize) < lo || (c as usize) >= hi;
    let mut map = vec![u32::MAX; n];
    for r in lo..hi {
        for (c, _) in a.row(r) {
            if outside(c) {
                map[c as usize] = 0;
            }
        }
    }
    let mut halo_cols: Vec<u32> = Vec::new();
    for c in (0..lo).chain(hi..n) {
        if map[c] != u32::MAX {
            map[c] = halo_cols.len() as u32;
            halo_cols.push(c as u32);
        }
    }
    let halo_id = |c: u32| map[c as usize];

    let (mut l_ptr, mut l_col, mut l_val) = (vec![0u32], Vec::new(), Vec::new());
    let (mut r_ptr, mut r_col, mut r_val) = (vec![0u32], Vec::new(), Vec::new());
    for r in lo..hi {
        for (c, v) in a.row(r) {
            if (c as usize) >= lo && (c as usize) < hi {
                l_col.push(c - lo as u32);
                l_val.push(v);
            } else {
                r_col.push(halo_id(c));
                r_val.push(v);
            }
        }
        l_ptr.push(l_col.len() as u32);
        r_ptr.push(r_col.len() as u32);
    }
    let local = Csr::new(rows, rows, l_ptr, l_col, l_val)?;
    let remote = Csr::new(rows, halo_cols.len(), r_ptr, r_col, r_val)?;

    let parts = offsets.len() - 1;
    let mut recv_ptr = vec![0usize; parts + 1];
    let halo: Vec<(u32, u32)> = halo_cols
        .iter()
        .map(|&c| {
            let owner = offsets.partition_point(|&o| o <= c as usize) - 1;
            recv_ptr[owner + 1] += 1;
            (owner as u32, (c as usize - offsets[owner]) as u32)
        })
        .collect();
    for q in 0..parts {
        recv_ptr[q + 1] += recv_ptr[q];
    }
    Ok(PartBlocks {
        part: p,
        first_row: lo,
        rows,
        local_t: transpose(&local),
        remote_t: transpose(&remote),
        local,
        remote,
        halo,
        recv_ptr,
        send: Vec::new(),
    })
}

/// METIS k-way on the undirected pattern (METIS wants a symmetric graph without self-loops).
#[cfg(feature = "metis")]
fn metis_parts(graph: &Csr, weights: &[u64], shares: &[u64]) -> Result<Vec<u32>> {
    let (n, parts) = (graph.n_rows(), shares.len());
    if parts == 1 || n == 0 {
        return Ok(vec![0; n]);
    }
    let g = pattern(&remove_self_loops(&symmetrize(graph)?));
    let too_big = |what: &str| Error::Unsupported(format!("METIS takes 32-bit ids; the graph's {what} does not fit"));
    let xadj: Vec<metis::Idx> =
        g.row_ptr().iter().map(|&x| metis::Idx::try_from(x).map_err(|_| too_big("edge count"))).collect::<Result<_>>()?;
    let adjncy: Vec<metis::Idx> = g.col_idx().iter().map(|&c| c as metis::Idx).collect();
    let vwgt: Vec<metis::Idx> =
        weights.iter().map(|&w| metis::Idx::try_from(w).map_err(|_| too_big("row weight"))).collect::<Result<_>>()?;
    let nparts = metis::Idx::try_from(parts).map_err(|_| too_big("part count"))?;
    let mut part = vec![0 as metis::Idx; n];
    let all: u64 = shares.iter().sum();
    let targets: Vec<metis::Real> = shares.iter().map(|&s| (s as f64 / all as f64) as metis::Real).collect();
    let graph = metis::Graph::new(1, nparts, &xadj, &adjncy)
        .map_err(|e| Error::InvalidGraph(format!("METIS rejected the graph: {e}")))?
        .set_vwgt(&vwgt)
        .set_option(metis::option::Seed(1));
    // Even shares: METIS's own default targets (bit for bit the cut it always made).
    let graph = if shares.iter().all(|&s| s == shares[0]) { graph } else { graph.set_tpwgts(&targets) };
    graph.part_kway(&mut part).map_err(|e| Error::Unsupported(format!("METIS k-way into {parts} parts failed: {e}")))?;
    Ok(part.into_iter().map(|p| p as u32).collect())
}

#[cfg(not(feature = "metis"))]
fn metis_parts(_graph: &Csr, _weights: &[u64], _shares: &[u64]) -> Result<Vec<u32>> {
    let _ = (pattern, remove_self_loops, symmetrize);
    Err(Error::Unsupported("this build has no METIS (built without the `metis` feature); use --method community".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: usize) -> Csr {
        let t: Vec<(u32, u32, f32)> = (0..n as u32).flat_map(|i| [(i, (i + 1) % n as u32, 1.0), ((i + 1) % n as u32, i, 1.0)]).collect();
        Csr::from_triplets(n, n, &t).unwrap()
    }

    #[test]
    fn cuts_balance_weight() {
        let w = vec![1, 1, 1, 1, 10, 1, 1, 1, 1];
        let order: Vec<u32> = (0..9).collect();
        assert_eq!(balanced_cuts(&w, &order, &[1, 1]), vec![0, 4, 9]);
        assert_eq!(balanced_cuts(&w, &order, &[1]), vec![0, 9]);
        // Uneven shares: a quarter of the 18 is 4.5, three quarters 13.5.
        assert_eq!(balanced_cuts(&w, &order, &[1, 3]), vec![0, 4, 9]);
        assert_eq!(balanced_cuts(&w, &order, &[3, 1]), vec![0, 5, 9]);
        assert_eq!(balanced_cuts(&[1; 10], &(0..10).collect::<Vec<u32>>(), &[3, 7]), vec![0, 3, 10]);
        // More parts than nodes: trailing parts are empty, never out of range.
        let c = balanced_cuts(&[1, 1], &[0, 1], &[1, 1, 1, 1]);
        assert_eq!(c.len(), 5);
        assert_eq!(*c.last().unwrap(), 2);
        assert!(c.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn shares_set_the_parts_sizes_for_every_method() {
        let g = ring(400);
        let w = node_weights(&g, 1);
        for method in [PartitionMethod::Contiguous, PartitionMethod::Community, PartitionMethod::LabelProp, PartitionMethod::Metis] {
            let even = Partition::with_node_weights(&g, 2, method, &w).unwrap();
            let same = Partition::with_shares(&g, method, &w, &[5, 5]).unwrap();
            assert_eq!((&even.offsets, even.perm.new_to_old()), (&same.offsets, same.perm.new_to_old()), "{method}");
            let p = Partition::with_shares(&g, method, &w, &[3, 1]).unwrap();
            let nodes: Vec<usize> = p.stats().iter().map(|s| s.nodes).collect();
            // 3/4 of the ring within lp's refinement tolerance.
            assert!((285..=315).contains(&nodes[0]), "{method}: {nodes:?}");
        }
        assert!(Partition::with_shares(&g, PartitionMethod::Contiguous, &w, &[1, 0]).is_err());
        assert!(Partition::with_shares(&g, PartitionMethod::Contiguous, &w, &[]).is_err());
    }

    #[test]
    fn ring_blocks_and_send_lists() {
        let g = ring(8);
        let p = Partition::new(&g, 2, PartitionMethod::Contiguous).unwrap();
        assert_eq!(p.offsets, vec![0, 4, 8]);
        // Interior nodes first in each part: 1 2 | 0 3 and 5 6 | 4 7.
        assert_eq!(p.perm.new_to_old(), &[1, 2, 0, 3, 5, 6, 4, 7]);
        let b0 = &p.blocks[0];
        // Part 0's rows reach 4 (owner 1, local 2) and 7 (owner 1, local 3).
        assert_eq!(b0.halo, vec![(1, 2), (1, 3)]);
        assert_eq!(b0.recv_ptr, vec![0, 0, 2]);
        assert_eq!(b0.local.nnz() + b0.remote.nnz(), 8);
        assert_eq!(b0.remote.nnz(), 2);
        // Only the boundary rows (the last two of each part) read remote columns.
        assert!((0..4).all(|r| (b0.remote.row_len(r) > 0) == (r >= 2)));
        // Part 1 sends its local rows 2 and 3 to part 0, in part 0's halo order.
        assert_eq!(p.blocks[1].send[0], vec![2, 3]);
        assert!(p.blocks[0].send[0].is_empty());
        assert_eq!(b0.remote_t.n_rows(), 2);
        let s = p.stats();
        assert_eq!(s[0].halo_rows, 2);
        assert_eq!(s[0].all_gather_rows, 4);
        assert!((p.halo_ratio() - 0.5).abs() < 1e-12);
        assert_eq!(p.owner(5), 1);
    }

    #[test]
    fn assignment_errors_and_empty_parts() {
        let g = ring(5);
        assert!(Partition::from_assignment(&g, &[0, 1, 2, 0, 9], 3).is_err());
        assert!(Partition::from_assignment(&g, &[0, 1], 3).is_err());
        assert!(Partition::new(&g, 0, PartitionMethod::Contiguous).is_err());
        let p = Partition::from_assignment(&g, &[0, 0, 2, 2, 0], 3).unwrap();
        assert_eq!(p.blocks[1].rows, 0);
        assert_eq!(p.offsets, vec![0, 3, 3, 5]);
        let rect = Csr::new(2, 3, vec![0, 0, 0], vec![], vec![]).unwrap();
        assert!(Partition::new(&rect, 2, PartitionMethod::Contiguous).is_err());
    }

    #[cfg(feature = "metis")]
    #[test]
    fn metis_cuts_two_cliques_apart() {
        // Two 6-cliques joined by one edge: METIS must cut only that edge.
        let mut t = Vec::new();
        for base in [0u32, 6] {
            for i in 0..6 {
                for j in 0..6 {
                    if i != j {
                        t.push((base + i, base + j, 1.0));
                    }
                }
            }
        }
        t.push((5, 6, 1.0));
        t.push((6, 5, 1.0));
        let g = Csr::from_triplets(12, 12, &t).unwrap();
        let p = Partition::new(&g, 2, PartitionMethod::Metis).unwrap();
        assert_eq!(p.stats().iter().map(|s| s.halo_rows).collect::<Vec<_>>(), vec![1, 1]);
    }
}
