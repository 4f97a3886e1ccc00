//! Graph samplers (CPU): statistics against their definitions, the GraphSAINT normalisation on
//! a small graph by hand, structure of subgraphs and blocks, seeded reproducibility across
//! thread counts, and the HP-SpMM paper's DTP choice of NnzPerWarp for batch-sized graphs.

use crate::common;

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::sample::alias::AliasTable;
use tcgnn::sample::shuffle::permuted_index;
use tcgnn::sample::{
    Batch, Blocks, NeighborConfig, NeighborSampler, Prefetch, PrefetchConfig, SaintConfig, SaintKind, SaintNorm, SaintSampler, Stream,
};
use tcgnn::shared::partition::{
    DTP_CANDIDATES, dtp_active_blocks_per_sm, dtp_full_wave_size, dtp_nnz_per_warp, hp_nnz_per_warp, hvma_sparse_vector_width,
};

/// Undirected graph from an edge list (both directions stored), unit values.
fn undirected(n: usize, edges: &[(u32, u32)]) -> Csr {
    let t: Vec<(u32, u32, f32)> = edges.iter().flat_map(|&(a, b)| [(a, b, 1.0), (b, a, 1.0)]).collect();
    Csr::from_triplets(n, n, &t).unwrap()
}

/// Degrees 1 to 6 and a node without edges: a hub 0 joined to 1..=6, a path 1-2-3-4, 5-6, 7 alone.
fn skewed() -> Csr {
    undirected(8, &[(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (1, 2), (2, 3), (3, 4), (5, 6)])
}

/// Symmetric random graph of `n` nodes and about `deg` neighbours per node.
fn random_undirected(n: usize, deg: usize, seed: u64) -> Csr {
    let g = common::random_graph(n, deg / 2, 0, seed);
    tcgnn::graph::ops::symmetrize(&tcgnn::graph::ops::pattern(&g)).unwrap()
}

/// `|observed - expected| <= 5 sigma (+1)` for a count with binomial-ish variance `expected`.
fn assert_count(what: &str, observed: f64, expected: f64) {
    let tol = 5.0 * expected.sqrt() + 1.0;
    assert!((observed - expected).abs() <= tol, "{what}: observed {observed}, expected {expected} ± {tol:.1}");
}

fn saint(g: &Arc<Csr>, kind: SaintKind, coverage: u32, seed: u64) -> SaintSampler {
    SaintSampler::new(Arc::clone(g), SaintConfig { kind, steps_per_epoch: 8, coverage, seed }).unwrap()
}

/// Every entry of the batch is an edge of `g` between the right nodes, and every edge of `g`
/// between two sampled nodes is in the batch (the induced subgraph, no more, no less).
fn check_induced(g: &Csr, b: &Batch) {
    assert!(b.nodes.windows(2).all(|w| w[0] < w[1]), "nodes sorted and unique");
    assert_eq!(b.graph.n_rows(), b.nodes.len());
    assert_eq!(b.edge_ids.len(), b.graph.nnz());
    assert_eq!(b.loss_weight.len(), b.nodes.len());
    let mut found = 0;
    for r in 0..b.graph.n_rows() {
        for (k, e) in b.graph.row_range(r).enumerate() {
            let pe = b.edge_ids[e] as usize;
            let (gr, gc) = (b.nodes[r], b.nodes[b.graph.col_idx()[e] as usize]);
            assert!(g.row_range(gr as usize).contains(&pe), "entry {k} of row {r}: edge {pe} is not in row {gr}");
            assert_eq!(g.col_idx()[pe], gc, "edge {pe} goes to {} not {gc}", g.col_idx()[pe]);
        }
        let v = b.nodes[r] as usize;
        found += g.col_idx()[g.row_range(v)].iter().filter(|c| b.nodes.binary_search(c).is_ok()).count();
    }
    assert_eq!(found, b.graph.nnz(), "edges of g among the sampled nodes");
}

// ---------------------------------------------------------------- randomness

#[test]
fn streams_are_pure_functions_of_seed_epoch_batch_counter() {
    let a = Stream::new(7, 3, 11);
    assert_eq!(a, Stream::new(7, 3, 11));
    assert_eq!(a.bits(5), Stream::new(7, 3, 11).bits(5));
    let others = [Stream::new(8, 3, 11), Stream::new(7, 4, 11), Stream::new(7, 3, 12), Stream::new(7, 11, 3), a.substream(0)];
    for o in others {
        assert_ne!(a, o);
        assert_ne!(a.bits(0), o.bits(0));
    }
    // Uniform below n: every residue of n = 7 gets about 1/7 of 70 000 draws.
    let mut hist = [0u32; 7];
    for c in 0..70_000 {
        hist[a.below(c, 7) as usize] += 1;
    }
    for (v, &h) in hist.iter().enumerate() {
        assert_count(&format!("value {v}"), h as f64, 10_000.0);
    }
    let u: f64 = (0..10_000).map(|c| a.unit(c)).sum::<f64>() / 10_000.0;
    assert!((u - 0.5).abs() < 0.02, "mean of unit draws {u}");
}

#[test]
fn feistel_order_is_a_permutation_for_every_size() {
    for n in (1..=70).chain([255, 256, 257, 1000, 4097]) {
        let mut seen = vec![false; n];
        for i in 0..n {
            let p = permuted_index(99, n as u64, i as u64) as usize;
            assert!(p < n && !seen[p], "n = {n}: position {i} -> {p} twice or out of range");
            seen[p] = true;
        }
    }
    // Different keys give different orders.
    let a: Vec<u64> = (0..100).map(|i| permuted_index(1, 100, i)).collect();
    let b: Vec<u64> = (0..100).map(|i| permuted_index(2, 100, i)).collect();
    assert_ne!(a, b);
    assert_ne!(a, (0..100).collect::<Vec<_>>());
}

#[test]
fn alias_table_reproduces_its_weights() {
    let w = [1.0, 0.0, 3.0, 0.5, 10.0, 2.5];
    let t = AliasTable::new(&w, "test").unwrap();
    let total: f64 = w.iter().sum();
    for (i, &wi) in w.iter().enumerate() {
        assert!((t.probability(i) - wi / total).abs() < 1e-12, "slot {i}: {} vs {}", t.probability(i), wi / total);
    }
    let s = Stream::new(1, 0, 0);
    let mut hist = [0u32; 6];
    let draws = 170_000u64;
    for j in 0..draws {
        hist[t.pick(s.below(2 * j, 6) as usize, s.unit(2 * j + 1)) as usize] += 1;
    }
    for (i, &h) in hist.iter().enumerate() {
        assert_count(&format!("slot {i}"), h as f64, draws as f64 * w[i] / total);
    }
    assert!(AliasTable::new(&[], "x").is_err());
    assert!(AliasTable::new(&[0.0, 0.0], "x").is_err());
    let e = AliasTable::new(&[1.0, f64::NAN], "the weights").unwrap_err().to_string();
    assert!(e.contains("the weights") && e.contains("weight 1"), "{e}");
}

// ---------------------------------------------------------------- GraphSAINT samplers

#[test]
fn node_sampler_draws_nodes_in_proportion_to_degree() {
    // GraphSAINT §3.4: P(v) ∝ ||Ã_{:,v}||², = deg(v) for the 0/1 adjacency its code and PyG use.
    let g = Arc::new(skewed());
    let s = saint(&g, SaintKind::Node { budget: 50 }, 0, 3);
    let mut count = vec![0u32; g.n_rows()];
    let rounds = 2000;
    for i in 0..rounds {
        let d = s.draw(Stream::new(3, 0, i));
        assert_eq!(d.len(), 50);
        for v in d {
            count[v as usize] += 1;
        }
    }
    let draws = (rounds * 50) as f64;
    for (v, &c) in count.iter().enumerate() {
        assert_count(&format!("node {v}"), c as f64, draws * g.row_len(v) as f64 / g.nnz() as f64);
    }
    assert_eq!(count[7], 0, "a node without edges is never drawn");
}

#[test]
fn edge_sampler_draws_edges_in_proportion_to_inverse_degrees() {
    let g = Arc::new(skewed());
    let s = saint(&g, SaintKind::Edge { budget: 40 }, 0, 4);
    let deg = |v: u32| g.row_len(v as usize) as f64;
    let rows: Vec<u32> = (0..g.n_rows()).flat_map(|r| std::iter::repeat_n(r as u32, g.row_len(r))).collect();
    let w: Vec<f64> = (0..g.nnz()).map(|e| 1.0 / deg(rows[e]) + 1.0 / deg(g.col_idx()[e])).collect();
    let total: f64 = w.iter().sum();
    let draws = s.edge_draws().unwrap();
    for (e, &we) in w.iter().enumerate() {
        assert!((draws.probability(e) - we / total).abs() < 1e-12, "edge {e}");
    }
    let mut count = vec![0u32; g.nnz()];
    let rounds = 3000u32;
    for i in 0..rounds {
        for e in draws.draw_edges(40, Stream::new(4, 1, i)) {
            count[e as usize] += 1;
        }
    }
    for e in 0..g.nnz() {
        assert_count(&format!("edge {e}"), count[e] as f64, (rounds * 40) as f64 * w[e] / total);
    }
    // A batch's nodes are the ends of its drawn edges.
    let stream = Stream::new(4, 0, 0);
    let ends = s.draw(stream);
    let edges = draws.draw_edges(40, stream);
    for (j, &e) in edges.iter().enumerate() {
        assert_eq!(ends[2 * j], rows[e as usize]);
        assert_eq!(ends[2 * j + 1], g.col_idx()[e as usize]);
    }
}

#[test]
fn random_walks_have_their_length_follow_edges_and_start_uniformly() {
    let g = Arc::new(skewed());
    let (roots, len) = (20usize, 4usize);
    let s = saint(&g, SaintKind::RandomWalk { roots, walk_length: len }, 0, 5);
    let mut starts = vec![0u32; g.n_rows()];
    let rounds = 2000;
    for i in 0..rounds {
        let walks = s.draw(Stream::new(5, 0, i));
        assert_eq!(walks.len(), roots * (len + 1));
        for w in walks.chunks(len + 1) {
            starts[w[0] as usize] += 1;
            for step in w.windows(2) {
                let (a, b) = (step[0] as usize, step[1]);
                if g.row_len(a) == 0 {
                    assert_eq!(a as u32, b, "a walk stays on a node without neighbours");
                } else {
                    assert!(g.col_idx()[g.row_range(a)].contains(&b), "step {a} -> {b} is not an edge");
                }
            }
        }
    }
    for (v, &c) in starts.iter().enumerate() {
        assert_count(&format!("root {v}"), c as f64, (rounds as usize * roots) as f64 / g.n_rows() as f64);
    }
    // The step from the hub 0 (degree 6) is uniform over its neighbours.
    let mut next = [0u32; 8];
    let hub_walks = (0..4000u32).flat_map(|i| s.draw(Stream::new(6, 0, i))).collect::<Vec<_>>();
    for w in hub_walks.chunks(len + 1) {
        for step in w.windows(2).filter(|st| st[0] == 0) {
            next[step[1] as usize] += 1;
        }
    }
    let from_hub: u32 = next.iter().sum();
    for (v, &c) in next.iter().enumerate().skip(1).take(6) {
        assert_count(&format!("hub -> {v}"), c as f64, from_hub as f64 / 6.0);
    }
}

#[test]
fn saint_batches_are_induced_subgraphs() {
    let g = Arc::new(random_undirected(500, 8, 21));
    for kind in [SaintKind::Node { budget: 120 }, SaintKind::Edge { budget: 60 }, SaintKind::RandomWalk { roots: 40, walk_length: 3 }] {
        let s = saint(&g, kind, 0, 8);
        for i in 0..5 {
            let b = s.batch(2, i);
            assert!(!b.normalized);
            assert!(b.graph.values().iter().all(|&v| v == 1.0) && b.loss_weight.iter().all(|&w| w == 1.0));
            assert!(b.graph.is_canonical(), "{kind:?}: rows sorted");
            check_induced(&g, &b);
            let mut want = s.draw(Stream::new(8, 2, i));
            want.sort_unstable();
            want.dedup();
            assert_eq!(b.nodes, want, "{kind:?}: the batch holds exactly the drawn nodes");
        }
    }
}

// ---------------------------------------------------------------- GraphSAINT normalisation

#[test]
fn normalisation_on_a_path_by_hand() {
    // Path 0 - 1 - 2: entries row 0: (0,1); row 1: (1,0), (1,2); row 2: (2,1).
    let g = tcgnn::graph::generate::path(3);
    assert_eq!(g.col_idx(), &[1, 0, 2, 1]);
    // 4 subgraphs: C_0 = 2, C_1 = 3, C_2 = 0; C_(0,1) = 1, C_(1,0) = 3, C_(1,2) = 0, C_(2,1) = 0.
    let norm = SaintNorm::from_counts(&g, &[2, 3, 0], &[1, 3, 0, 0], 4).unwrap();
    // Aggregation weight C_v / C_(v,u) of row v's entry (v, u):
    //   (0,1): 2 / 1 = 2; (1,0): 3 / 3 = 1; (1,2): 3 / 0 = inf -> clamped to 1e4; (2,1): 0 / 0 -> 0.1.
    assert_eq!(norm.edge_norm, vec![2.0, 1.0, 1e4, 0.1]);
    // Loss weight num_samples / C_v / N: 4/2/3, 4/3/3, and C_2 = 0 counted as 0.1: 4/0.1/3.
    let want = [4.0 / 2.0 / 3.0, 4.0 / 3.0 / 3.0, 4.0 / 0.1 / 3.0];
    for (v, (&got, want)) in norm.node_norm.iter().zip(want).enumerate() {
        assert!((got as f64 - want).abs() < 1e-6 * want, "node {v}: {got} vs {want}");
    }
    assert_eq!(norm.num_samples, 4);
    assert!(SaintNorm::from_counts(&g, &[1, 1], &[0; 4], 1).is_err());
}

#[test]
fn presampling_counts_as_pyg_and_batches_carry_the_weights() {
    let g = Arc::new(random_undirected(300, 6, 5));
    let (steps, coverage) = (8u32, 20u32);
    let s = saint(&g, SaintKind::RandomWalk { roots: 10, walk_length: 2 }, coverage, 77);
    let norm = s.norm().expect("coverage > 0 pre-samples");
    // PyG's loop, replayed from the sampler's pre-sampling batches: whole rounds of `steps`
    // until the sampled node counts reach coverage * N.
    let (mut nc, mut ec) = (vec![0u32; g.n_rows()], vec![0u32; g.nnz()]);
    let (mut total, mut num_samples, mut round) = (0usize, 0u64, 0u32);
    while total < coverage as usize * g.n_rows() {
        for i in 0..steps {
            let b = s.presample_batch(round, i);
            b.nodes.iter().for_each(|&v| nc[v as usize] += 1);
            b.edge_ids.iter().for_each(|&e| ec[e as usize] += 1);
            total += b.nodes.len();
        }
        num_samples += steps as u64;
        round += 1;
    }
    assert_eq!(norm.num_samples, num_samples);
    assert_eq!(*norm, SaintNorm::from_counts(&g, &nc, &ec, num_samples).unwrap());
    // Every node was sampled (~coverage times each), so no weight falls back to 0.1; and
    // C_v >= C_(v,u) (a subgraph holding an entry holds its row's node): weights >= 1.
    assert!(nc.iter().all(|&c| c > 0));
    assert!(norm.edge_norm.iter().all(|&w| w >= 1.0));

    let b = s.batch(0, 3);
    assert!(b.normalized);
    check_induced(&g, &b);
    for (e, &pe) in b.edge_ids.iter().enumerate() {
        assert_eq!(b.graph.values()[e], norm.edge_norm[pe as usize]);
    }
    for (l, &v) in b.nodes.iter().enumerate() {
        assert_eq!(b.loss_weight[l], norm.node_norm[v as usize]);
    }
    // Training batches and pre-sampling draw from different streams.
    assert_ne!(b.nodes, s.presample_batch(0, 3).nodes);
}

#[test]
fn saint_rejects_bad_input_with_clear_errors() {
    let g = Arc::new(skewed());
    let cfg = |kind| SaintConfig { kind, steps_per_epoch: 4, coverage: 0, seed: 0 };
    let err = |g: Arc<Csr>, c| SaintSampler::new(g, c).err().expect("an error").to_string();
    assert!(err(Arc::clone(&g), cfg(SaintKind::Node { budget: 0 })).contains("batch size of 0"));
    assert!(err(Arc::clone(&g), cfg(SaintKind::RandomWalk { roots: 0, walk_length: 2 })).contains("0 roots"));
    let rect = Arc::new(Csr::from_triplets(2, 3, &[(0, 2, 1.0)]).unwrap());
    assert!(err(rect, cfg(SaintKind::Node { budget: 5 })).contains("square"));
    let empty = Arc::new(Csr::from_triplets(4, 4, &[]).unwrap());
    assert!(err(Arc::clone(&empty), cfg(SaintKind::Edge { budget: 5 })).contains("has none"));
    let mut c = cfg(SaintKind::RandomWalk { roots: 3, walk_length: 2 });
    c.steps_per_epoch = 0;
    c.coverage = 5;
    assert!(err(Arc::clone(&g), c).contains("steps per epoch"));
    // Random walks on a graph without edges still sample their roots, so pre-sampling ends.
    let mut c = cfg(SaintKind::RandomWalk { roots: 3, walk_length: 2 });
    c.coverage = 2;
    let s = SaintSampler::new(empty, c).unwrap();
    assert_eq!(s.batch(0, 0).graph.nnz(), 0);
}

// ---------------------------------------------------------------- neighbour sampling

fn check_blocks(g: &Csr, b: &Blocks, fanouts: &[i32], seeds: &[u32]) {
    assert_eq!(b.layers.len(), fanouts.len());
    assert_eq!(b.output_nodes, seeds);
    assert_eq!(&b.input_nodes[..seeds.len()], seeds, "the targets come first");
    let mut sorted = b.input_nodes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), b.input_nodes.len(), "input nodes are distinct");
    assert_eq!(b.layers[0].n_src(), b.input_nodes.len());
    assert_eq!(b.layers.last().unwrap().n_dst(), seeds.len());
    for l in 0..b.layers.len() {
        let block = &b.layers[l];
        if l + 1 < b.layers.len() {
            assert_eq!(block.n_dst(), b.layers[l + 1].n_src(), "layer {l}'s outputs are layer {}'s inputs", l + 1);
        }
        assert!(block.n_dst() <= block.n_src(), "outputs are the first inputs");
        // Layer l was sampled at hop (layers - 1 - l) from the targets.
        let fanout = fanouts[b.layers.len() - 1 - l];
        for r in 0..block.n_dst() {
            let v = b.input_nodes[r] as usize;
            let cols = &block.graph.col_idx()[block.graph.row_range(r)];
            let want = if fanout < 0 { g.row_len(v) } else { g.row_len(v).min(fanout as usize) };
            assert_eq!(cols.len(), want, "layer {l}, row {r} (node {v}, degree {})", g.row_len(v));
            assert!(cols.windows(2).all(|w| w[0] < w[1]), "no neighbour twice in a row (without replacement)");
            for e in block.graph.row_range(r) {
                let pe = block.edge_ids[e] as usize;
                assert!(g.row_range(v).contains(&pe), "edge {pe} is not in row {v}");
                assert_eq!(g.col_idx()[pe], b.input_nodes[block.graph.col_idx()[e] as usize]);
            }
        }
    }
}

fn neighbor(g: &Arc<Csr>, targets: Vec<u32>, fanouts: Vec<i32>, batch_size: usize, seed: u64) -> NeighborSampler {
    NeighborSampler::new(Arc::clone(g), targets, NeighborConfig { fanouts, batch_size, shuffle: true, seed }).unwrap()
}

#[test]
fn neighbor_blocks_respect_fanouts_and_the_dst_first_convention() {
    let g = Arc::new(common::one_huge_row(600, 12, 9));
    let g = Arc::new(tcgnn::graph::ops::pattern(&g));
    let targets: Vec<u32> = (0..600).step_by(3).collect();
    for fanouts in [vec![15, 10], vec![5, -1], vec![3, 0, 2], vec![-1]] {
        let s = neighbor(&g, targets.clone(), fanouts.clone(), 32, 1);
        assert_eq!(s.batches_per_epoch(), 7);
        for i in 0..7 {
            let b = s.batch(0, i);
            let seeds = s.batch_targets(0, i);
            assert_eq!(seeds.len(), if i < 6 { 32 } else { 200 - 6 * 32 });
            check_blocks(&g, &b, &fanouts, &seeds);
        }
    }
}

#[test]
fn neighbor_sampling_is_uniform_without_replacement() {
    // Node 0 has 10 neighbours; with fan-out 3 each is kept with probability 3/10.
    let g = Arc::new(undirected(11, &(1..=10).map(|v| (0, v)).collect::<Vec<_>>()));
    let s = neighbor(&g, vec![0], vec![3], 1, 2);
    let mut hist = [0u32; 11];
    let rounds = 20_000;
    for i in 0..rounds {
        let b = s.sample(&[0], Stream::new(2, 0, i));
        assert_eq!(b.layers[0].graph.nnz(), 3);
        for &c in b.layers[0].graph.col_idx() {
            hist[b.input_nodes[c as usize] as usize] += 1;
        }
    }
    for (v, &h) in hist.iter().enumerate().skip(1) {
        assert_count(&format!("neighbour {v}"), h as f64, rounds as f64 * 0.3);
    }
}

#[test]
fn an_epoch_visits_every_target_once_in_a_new_order() {
    let g = Arc::new(random_undirected(400, 4, 3));
    let targets: Vec<u32> = (0..400).rev().step_by(2).collect();
    let s = neighbor(&g, targets.clone(), vec![2], 16, 6);
    let epoch = |e: u32| (0..s.batches_per_epoch() as u32).flat_map(|i| s.batch_targets(e, i)).collect::<Vec<_>>();
    let (e0, e1) = (epoch(0), epoch(1));
    let (mut a, mut t) = (e0.clone(), targets.clone());
    a.sort_unstable();
    t.sort_unstable();
    assert_eq!(a, t, "each target exactly once");
    assert_ne!(e0, e1, "a new order each epoch");
    assert_ne!(e0, targets, "shuffled");
    assert!(s.batch_targets(0, 1000).is_empty());
    let ordered =
        NeighborSampler::new(Arc::clone(&g), targets.clone(), NeighborConfig { fanouts: vec![2], batch_size: 16, shuffle: false, seed: 6 })
            .unwrap();
    assert_eq!(ordered.batch_targets(3, 1), targets[16..32].to_vec());
}

#[test]
fn neighbor_rejects_bad_input_with_clear_errors() {
    let g = Arc::new(skewed());
    let err = |t: Vec<u32>, f: Vec<i32>, bs: usize| {
        NeighborSampler::new(Arc::clone(&g), t, NeighborConfig { fanouts: f, batch_size: bs, shuffle: true, seed: 0 })
            .err()
            .expect("an error")
            .to_string()
    };
    assert!(err(vec![0], vec![-2], 4).contains("fan-out -2"));
    assert!(err(vec![0, 8], vec![2], 4).contains("target node 8"));
    assert!(err(vec![1, 1], vec![2], 4).contains("listed twice"));
    assert!(err(vec![0], vec![2], 0).contains("batch size 0"));
}

// ---------------------------------------------------------------- reproducibility

#[test]
fn same_seed_same_batches_different_seed_different_batches() {
    let g = Arc::new(random_undirected(800, 10, 4));
    let a = saint(&g, SaintKind::Edge { budget: 100 }, 3, 42);
    let b = saint(&g, SaintKind::Edge { budget: 100 }, 3, 42);
    let c = saint(&g, SaintKind::Edge { budget: 100 }, 3, 43);
    assert_eq!(a.norm(), b.norm());
    assert_eq!(a.batch(5, 2), b.batch(5, 2));
    assert_ne!(a.batch(5, 2).nodes, c.batch(5, 2).nodes);
    assert_ne!(a.batch(5, 2).nodes, a.batch(5, 3).nodes);
    assert_ne!(a.batch(5, 2).nodes, a.batch(6, 2).nodes);
    let targets: Vec<u32> = (0..800).collect();
    let n1 = neighbor(&g, targets.clone(), vec![10, 5], 64, 42);
    let n2 = neighbor(&g, targets.clone(), vec![10, 5], 64, 42);
    let n3 = neighbor(&g, targets, vec![10, 5], 64, 43);
    assert_eq!(n1.batch(1, 4), n2.batch(1, 4));
    assert_ne!(n1.batch(1, 4), n3.batch(1, 4));
}

#[test]
fn batches_do_not_depend_on_thread_count() {
    let g = Arc::new(random_undirected(1000, 8, 8));
    let build = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| saint(&g, SaintKind::Node { budget: 300 }, 10, 9))
    };
    let (one, three) = (Arc::new(build(1)), build(3));
    assert_eq!(one.norm(), three.norm(), "pre-sampling with 1 and 3 threads");
    let want: Vec<Batch> = (0..12).map(|i| one.batch(1, i)).collect();
    for workers in [1, 2, 3, 5] {
        for ahead in [1, 3] {
            let s = Arc::clone(&one);
            let got: Vec<Batch> = Prefetch::new(12, PrefetchConfig { workers, ahead }, move |i| s.batch(1, i as u32)).unwrap().collect();
            assert_eq!(got, want, "{workers} workers, {ahead} ahead");
        }
    }
    let ns = Arc::new(neighbor(&g, (0..1000).collect(), vec![5, 5], 100, 9));
    let want: Vec<Blocks> = (0..10).map(|i| ns.batch(0, i)).collect();
    let s = Arc::clone(&ns);
    let got: Vec<Blocks> = Prefetch::new(10, PrefetchConfig { workers: 3, ahead: 2 }, move |i| s.batch(0, i as u32)).unwrap().collect();
    assert_eq!(got, want);
}

#[test]
fn prefetch_delivers_in_order_stops_when_dropped_and_reraises_panics() {
    let p = Prefetch::new(100, PrefetchConfig { workers: 4, ahead: 2 }, |i| i * i).unwrap();
    assert_eq!(p.size_hint(), (100, Some(100)));
    assert_eq!(p.collect::<Vec<_>>(), (0..100).map(|i| i * i).collect::<Vec<_>>());
    // Dropped after two of a million items: returns at once instead of making the rest.
    let t0 = std::time::Instant::now();
    let mut p = Prefetch::new(1_000_000, PrefetchConfig::default(), |i| {
        std::thread::sleep(std::time::Duration::from_millis(1));
        i
    })
    .unwrap();
    assert_eq!((p.next(), p.next()), (Some(0), Some(1)));
    drop(p);
    assert!(t0.elapsed().as_secs() < 5);
    assert_eq!(Prefetch::new(0, PrefetchConfig::default(), |i| i).unwrap().count(), 0);
    let r = std::panic::catch_unwind(|| {
        Prefetch::new(10, PrefetchConfig { workers: 2, ahead: 1 }, |i| if i == 5 { panic!("batch 5 failed") } else { i })
            .unwrap()
            .collect::<Vec<_>>()
    });
    let msg = r.expect_err("the worker's panic reaches the consumer");
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"batch 5 failed"));
}

// ---------------------------------------------------------------- DTP (HP-SpMM §III-B)

/// H100: 132 SMs, 64 warps / 64 K registers / 228 KB shared memory per SM; HP SpMM blocks of
/// 8 warps (`config::HP_SPMM_WARPS`), no shared memory.
const H100_SMS: u32 = 132;
const HP_WARPS_PER_BLOCK: u32 = tcgnn::shared::config::HP_SPMM_WARPS;
/// Eq. 4 with 8 resident HP blocks per SM (64 warps / 8, registers permitting).
const H100_WAVE: u32 = dtp_full_wave_size(H100_SMS, 8);

fn h100_hp_active_blocks(registers_per_thread: u32) -> u32 {
    dtp_active_blocks_per_sm(64, HP_WARPS_PER_BLOCK, 65536, registers_per_thread * 32 * HP_WARPS_PER_BLOCK, 233_472, 0)
}

#[test]
fn dtp_active_blocks_follow_eq_3() {
    // Warps limit: 64 / 8 = 8 blocks; registers: 65536 / (64 * 256) = 4; shared memory: 233472 / 100000 = 2.
    assert_eq!(dtp_active_blocks_per_sm(64, 8, 65536, 32 * 256, 233_472, 0), 8);
    assert_eq!(dtp_active_blocks_per_sm(64, 8, 65536, 64 * 256, 233_472, 0), 4);
    assert_eq!(dtp_active_blocks_per_sm(64, 8, 65536, 32 * 256, 233_472, 100_000), 2);
}

#[test]
fn dtp_takes_the_largest_candidate_satisfying_ineq_5() {
    let full_wave = |blocks: u32| dtp_full_wave_size(H100_SMS, blocks);
    // InEq. 5 with alpha = a/b, multiplied out: a * FullWave * NPW * WPB * 32 * VW <= b * NNZ * K.
    let holds = |nnz: u64, k: u64, blocks: u32, npw: u64, a: u64, b: u64| {
        a * full_wave(blocks) as u64 * npw * HP_WARPS_PER_BLOCK as u64 * 32 * 4 <= b * nnz * k
    };
    let blocks = h100_hp_active_blocks(32);
    assert_eq!(blocks, 8);
    // Sampled batches (GraphSAINT on Flickr/Yelp: ~5-50 k nodes, 10-50 per row) up to full graphs.
    for nnz in [1_000u32, 60_000, 300_000, 1_000_000, 4_000_000, 20_000_000, 100_000_000] {
        for k in [32u32, 64, 128, 256] {
            for (a, b) in [(1u32, 1u32), (2, 1), (1, 2)] {
                let npw = dtp_nnz_per_warp(nnz, k, full_wave(blocks), HP_WARPS_PER_BLOCK, 4, a, b);
                assert!(DTP_CANDIDATES.contains(&npw));
                let i = DTP_CANDIDATES.iter().position(|&c| c == npw).unwrap();
                let ok = holds(nnz as u64, k as u64, blocks, npw as u64, a as u64, b as u64);
                // Either it satisfies InEq. 5 and the next candidate does not, or nothing does and it is 8.
                if ok {
                    if let Some(&next) = DTP_CANDIDATES.get(i + 1) {
                        assert!(!holds(nnz as u64, k as u64, blocks, next as u64, a as u64, b as u64), "nnz {nnz} K {k}: {next} fits too");
                    }
                } else {
                    assert_eq!(npw, 8, "nnz {nnz} K {k}: nothing fits, so the smallest");
                }
            }
        }
    }
    // Worked values (alpha = 1, K = 128, VW = 4 → one warp per nonzero range, 1056 blocks a wave):
    // 60 k nonzeros is below one wave even at 8 per warp; 20 M gives 20e6 / (8 * 1056) = 2367 ≥ 512.
    assert_eq!(dtp_nnz_per_warp(60_000, 128, H100_WAVE, 8, 4, 1, 1), 8);
    assert_eq!(dtp_nnz_per_warp(1_000_000, 128, H100_WAVE, 8, 4, 1, 1), 64); // 118 per warp allowed
    assert_eq!(dtp_nnz_per_warp(20_000_000, 128, H100_WAVE, 8, 4, 1, 1), 512);
    // Wider K exposes more warps per nonzero range, so larger tasks still fill the waves.
    assert_eq!(dtp_nnz_per_warp(1_000_000, 512, H100_WAVE, 8, 4, 1, 1), 256);
    // HVMA: 64 → int2/float2, 128 and above → int4/float4.
    assert_eq!(DTP_CANDIDATES.map(hvma_sparse_vector_width), [1, 1, 2, 4, 4, 4]);
}

#[test]
fn the_waves_rule_differs_from_the_papers_dtp_on_sampled_batches() {
    // `hp_nnz_per_warp` (the launchers' earlier rule, kept for `bench dtp`: 2 waves of 64 warps
    // per SM as a cap, a floor of 32, any multiple of 32 up to 4096) is not the paper's DTP,
    // which the launchers now use. On batch-sized graphs it keeps 32 nonzeros per warp where
    // the paper drops to 8 for more warps:
    let (nnz, k_chunks) = (60_000, 1);
    assert_eq!(hp_nnz_per_warp(nnz, H100_SMS, 64, 2, k_chunks), 32);
    assert_eq!(dtp_nnz_per_warp(nnz, 128, H100_WAVE, 8, 4, 1, 1), 8);
    // ... and on full graphs it takes values outside the candidate set.
    let launcher = hp_nnz_per_warp(20_000_000, H100_SMS, 64, 2, 1);
    assert!(!DTP_CANDIDATES.contains(&launcher), "{launcher}");
    assert_eq!(dtp_nnz_per_warp(20_000_000, 128, H100_WAVE, 8, 4, 1, 1), 512);
}
