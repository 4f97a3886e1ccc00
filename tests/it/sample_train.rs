//! Mini-batch training (CPU, runs in CI): a GraphSAINT batch that holds the whole graph trains
//! every model exactly as the full-graph step does (parameters and Adam's moments carried across
//! batches by swapping), with and without the normalisation; the GraphSAINT aggregation of a
//! batch against values computed by hand; neighbour batches as the union of their blocks.

use crate::common;

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::graph::generate::grid;
use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::models::default_config;
use tcgnn::nn::{CpuBackend, CudaBackend, MODELS, ModelConfig, Ops};
use tcgnn::ops::backend::TRAIN_BIT;
use tcgnn::ops::{Impl, Precision};
use tcgnn::sample::aggregation::Aggregation;
use tcgnn::sample::batch::{BatchSource, NodeData, TrainBatch};
use tcgnn::sample::{NeighborConfig, NeighborSampler, PrefetchConfig, SaintConfig, SaintKind, SaintSampler, SampledTraining};
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::task::node::{TrainConfig, Trainer};

fn grid_data() -> Dataset {
    // Every node has an edge, so the node sampler can draw all of them.
    Dataset::synthetic("grid".into(), grid(10, 12), &SyntheticNodeData { features: 12, classes: 3, seed: 5 }).unwrap()
}

fn node_data(d: &Dataset) -> NodeData {
    let features = match &d.features {
        HostFeatures::Dense(m) => HostFeatures::Dense(m.clone()),
        HostFeatures::Sparse(c) => HostFeatures::Sparse(c.clone()),
    };
    let n_train = d.mask_bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    NodeData { features, labels: d.labels.clone(), mask_bits: d.mask_bits.clone(), n_train }
}

/// Node-sampler batches of 40 N draws: the whole graph in every batch (checked).
fn whole_graph_source(d: &Dataset, model: &str, coverage: u32) -> BatchSource {
    let g = Arc::new(d.graph.clone());
    let kind = SaintKind::Node { budget: 40 * d.n() };
    let sampler = SaintSampler::new(g, SaintConfig { kind, steps_per_epoch: 1, coverage, seed: 3 }).unwrap();
    assert_eq!(sampler.batch(0, 0).nodes.len(), d.n(), "the test needs batches holding every node");
    let aggregation = if coverage > 0 { Aggregation::for_model(model, &d.graph).unwrap() } else { None };
    BatchSource::Saint { sampler: Arc::new(sampler), aggregation }
}

fn weights_after(t: &mut Trainer<CpuBackend<f64>>, epochs: usize) -> Vec<(String, Vec<f32>)> {
    t.fit(epochs, |_| {}).unwrap();
    t.weights().unwrap().into_iter().map(|(n, m)| (n, m.data)).collect()
}

fn largest_difference(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mut worst = 0f64;
    for ((na, va), (nb, vb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        let scale = va.iter().fold(1e-3f64, |m, &x| m.max(x.abs() as f64));
        for (x, y) in va.iter().zip(vb) {
            worst = worst.max((*x as f64 - *y as f64).abs() / scale);
        }
    }
    worst
}

#[test]
fn a_whole_graph_batch_trains_as_the_full_graph_step() {
    let d = grid_data();
    for info in MODELS {
        let cfg = ModelConfig { seed: 11, ..default_config(info.name).unwrap() };
        let tcfg = TrainConfig { epochs: 3, lr: info.lr, weight_decay: info.weight_decay };
        let mut full = Trainer::new(Arc::new(CpuBackend::<f64>::new()), &d, &cfg, &tcfg).unwrap();
        let want = weights_after(&mut full, 3);
        // Unnormalised: the same graph, the same mean loss: the same arithmetic, exactly.
        // Normalised: every C_v and C_{v,u} equal, so weights 1 and 1 / N_train, up to f32 rounding of the weights.
        for (coverage, tol) in [(0, 0.0), (5, 1e-5)] {
            let sampled = SampledTraining::new(
                whole_graph_source(&d, info.name, coverage),
                node_data(&d),
                d.n(),
                1,
                PrefetchConfig::default(),
                cfg,
                d.classes,
            )
            .unwrap();
            let mut t = Trainer::new(Arc::new(CpuBackend::<f64>::new()), &d, &cfg, &tcfg).unwrap();
            t.set_epoch_steps(Box::new(sampled));
            let got = weights_after(&mut t, 3);
            let diff = largest_difference(&want, &got);
            assert!(diff <= tol, "{} coverage {coverage}: weights differ by {diff:e} of their scale", info.name);
        }
    }
}

#[test]
fn sampled_training_learns_and_carries_state_across_batches() {
    // Small batches: the parameters must move from batch to batch (a swap that lost them would
    // leave the initial weights and chance accuracy).
    let data = Dataset::load("sbm:600:3:8", None, &SyntheticNodeData { features: 16, classes: 3, seed: 2 }).unwrap();
    let g = Arc::new(data.graph.clone());
    let train: Vec<u32> = (0..data.n() as u32).filter(|&v| data.mask_bits[v as usize] & TRAIN_BIT != 0).collect();
    let nb = NeighborSampler::new(g, train, NeighborConfig { fanouts: vec![5, 5], batch_size: 32, shuffle: true, seed: 1 }).unwrap();
    let steps = nb.batches_per_epoch();
    let cfg = default_config("sage").unwrap();
    let sampled = SampledTraining::new(
        BatchSource::Neighbor(Arc::new(nb)),
        node_data(&data),
        data.n(),
        steps,
        PrefetchConfig::default(),
        cfg,
        data.classes,
    )
    .unwrap();
    let mut t =
        Trainer::new(Arc::new(CpuBackend::<f32>::new()), &data, &cfg, &TrainConfig { epochs: 10, ..TrainConfig::default() }).unwrap();
    t.set_epoch_steps(Box::new(sampled));
    let h = t.fit(10, |_| {}).unwrap();
    assert!(h.test_acc > 0.9, "SAGE with neighbour sampling: test accuracy {}", h.test_acc);
    assert!(h.epochs.last().unwrap().loss < h.epochs[0].loss, "loss {:?}", h.epochs.iter().map(|e| e.loss).collect::<Vec<_>>());
}

#[test]
fn gcn_aggregation_of_a_batch_by_hand() {
    // Path 0 - 1 - 2: degrees with self-loops 2, 3, 2; Â(0,1) = Â(1,0) = 1/√6, Â(0,0) = 1/2, Â(1,1) = 1/3.
    let g = Csr::from_triplets(3, 3, &[(0, 1, 1.0), (1, 0, 1.0), (1, 2, 1.0), (2, 1, 1.0)]).unwrap();
    let agg = Aggregation::for_model("gcn", &g).unwrap().unwrap();
    // A batch of nodes {0, 1} holding entries 0 = (0,1) and 1 = (1,0) with weights C_v / C_{v,u} = 2 and 0.5.
    let sub = Csr::from_triplets(2, 2, &[(0, 1, 2.0), (1, 0, 0.5)]).unwrap();
    let a = agg.batch_adjacency(&sub, &[0, 1], &[0, 1]).unwrap();
    let s6 = 6f32.sqrt();
    let want = [(0, 0, 0.5), (0, 1, 2.0 / s6), (1, 0, 0.5 / s6), (1, 1, 1.0 / 3.0)];
    let got: Vec<(u32, u32, f32)> = (0..2).flat_map(|r| a.row(r).map(move |(c, v)| (r as u32, c, v))).collect();
    assert_eq!(got.len(), want.len(), "{got:?}");
    for ((r, c, v), (wr, wc, wv)) in got.iter().zip(want) {
        assert_eq!((*r, *c), (wr, wc));
        assert!((v - wv).abs() < 1e-6, "({r}, {c}): {v} vs {wv}");
    }
    // SAGE: 1 / full degree (node 1 has 2) times the weight; GIN: the weight.
    let mean = Aggregation::for_model("sage", &g).unwrap().unwrap().batch_adjacency(&sub, &[0, 1], &[0, 1]).unwrap();
    assert_eq!(mean.values(), &[2.0, 0.25]);
    let sum = Aggregation::for_model("gin", &g).unwrap().unwrap().batch_adjacency(&sub, &[0, 1], &[0, 1]).unwrap();
    assert_eq!(sum.values(), &[2.0, 0.5]);
    assert!(Aggregation::for_model("gat", &g).unwrap().is_none(), "attention renormalises over the batch");
}

#[test]
fn a_neighbour_batch_is_the_union_of_its_blocks() {
    let data = Dataset::load("sbm:300:3:6", None, &SyntheticNodeData { features: 4, classes: 3, seed: 4 }).unwrap();
    let g = Arc::new(data.graph.clone());
    let train: Vec<u32> = (0..data.n() as u32).filter(|&v| data.mask_bits[v as usize] & TRAIN_BIT != 0).collect();
    let nb =
        NeighborSampler::new(g.clone(), train, NeighborConfig { fanouts: vec![3, 2], batch_size: 16, shuffle: true, seed: 9 }).unwrap();
    let blocks = nb.batch(1, 2);
    let batch = TrainBatch::from_blocks(blocks.clone(), &node_data(&data)).unwrap();
    assert_eq!(batch.nodes, blocks.input_nodes);
    assert_eq!(batch.loss_nodes(), blocks.output_nodes.len());
    assert!(batch.mask_bits[..blocks.output_nodes.len()].iter().all(|&m| m == TRAIN_BIT));
    // Every block entry is in the union, every union entry in some block, each once; all are edges of the graph.
    let mut entries = std::collections::BTreeSet::new();
    for b in &blocks.layers {
        for r in 0..b.graph.n_rows() {
            entries.extend(b.graph.row(r).map(|(c, _)| (r as u32, c)));
        }
    }
    let union: Vec<(u32, u32)> = (0..batch.graph.n_rows()).flat_map(|r| batch.graph.row(r).map(move |(c, _)| (r as u32, c))).collect();
    assert_eq!(union, entries.into_iter().collect::<Vec<_>>());
    for &(r, c) in &union {
        let (u, v) = (batch.nodes[r as usize], batch.nodes[c as usize]);
        assert!(g.row(u as usize).any(|(x, _)| x == v), "({u}, {v}) is not an edge");
    }
    // Features and labels are the batch nodes' rows.
    let (HostFeatures::Dense(all), HostFeatures::Dense(mine)) = (&data.features, &batch.features) else {
        panic!("dense features expected")
    };
    for (l, &v) in batch.nodes.iter().enumerate() {
        assert_eq!(mine.row(l), all.row(v as usize));
        assert_eq!(batch.labels[l], data.labels[v as usize]);
    }
}

/// The loss curve of `epochs` epochs on `b`, sampled from `source` when given.
fn losses<B: Ops + 'static>(b: Arc<B>, d: &Dataset, cfg: &ModelConfig, source: Option<BatchSource>, epochs: usize) -> Vec<f64> {
    let tcfg = TrainConfig { epochs, ..TrainConfig::default() };
    let mut t = Trainer::new(b, d, cfg, &tcfg).unwrap();
    if let Some(source) = source {
        t.set_epoch_steps(Box::new(
            SampledTraining::new(source, node_data(d), d.n(), 1, PrefetchConfig::default(), *cfg, d.classes).unwrap(),
        ));
    }
    t.fit(epochs, |_| {}).unwrap().epochs.iter().map(|e| e.loss).collect()
}

#[test]
fn gpu_whole_graph_batches_match_the_full_graph_step() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_whole_graph_batches_match_the_full_graph_step") else { return };
    let d = grid_data();
    let cuda = || Arc::new(CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap());
    for info in MODELS {
        let cfg = ModelConfig { seed: 11, ..default_config(info.name).unwrap() };
        // Losses, not weights: Adam moves a weight by about lr whatever the size of its gradient,
        // so a gradient within atomic-order rounding of zero may step either way on the GPU.
        let want = losses(cuda(), &d, &cfg, None, 3);
        for coverage in [0, 5] {
            let got = losses(cuda(), &d, &cfg, Some(whole_graph_source(&d, info.name, coverage)), 3);
            for (e, (w, g)) in want.iter().zip(&got).enumerate() {
                assert!((w - g).abs() <= 1e-3 * w.abs(), "{} coverage {coverage} epoch {}: loss {g} vs full-graph {w}", info.name, e + 1);
            }
        }
    }
}

#[test]
fn gpu_sampled_training_learns() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_sampled_training_learns") else { return };
    let data = Dataset::load("sbm:2000:4:8", None, &SyntheticNodeData { features: 16, classes: 4, seed: 1 }).unwrap();
    let g = Arc::new(data.graph.clone());
    for model in ["gcn", "sage"] {
        let cfg = default_config(model).unwrap();
        let kind = SaintKind::RandomWalk { roots: 200, walk_length: 2 };
        let sampler = SaintSampler::new(g.clone(), SaintConfig { kind, steps_per_epoch: 4, coverage: 20, seed: 0 }).unwrap();
        let source = BatchSource::Saint { sampler: Arc::new(sampler), aggregation: Aggregation::for_model(model, &data.graph).unwrap() };
        let sampled = SampledTraining::new(source, node_data(&data), data.n(), 4, PrefetchConfig::default(), cfg, data.classes).unwrap();
        let b = Arc::new(CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap());
        let mut t = Trainer::new(b, &data, &cfg, &TrainConfig { epochs: 30, ..TrainConfig::default() }).unwrap();
        t.set_epoch_steps(Box::new(sampled));
        let h = t.fit(30, |_| {}).unwrap();
        assert!(h.test_acc > 0.9, "{model} with GraphSAINT random walks on the GPU: test accuracy {}", h.test_acc);
    }
}

/// Losses of random-walk batches (a new subset of the nodes each step) with the rebound model's
/// feature rows gathered from the resident matrix (`resident`) or copied from the host.
fn walk_losses<B: Ops + 'static>(b: Arc<B>, d: &Dataset, model: &str, resident: bool, epochs: usize) -> Vec<f64> {
    walk_losses_with(b, d, ModelConfig { seed: 4, ..default_config(model).unwrap() }, resident, epochs)
}

fn walk_losses_with<B: Ops + 'static>(b: Arc<B>, d: &Dataset, cfg: ModelConfig, resident: bool, epochs: usize) -> Vec<f64> {
    let model = cfg.model;
    let g = Arc::new(d.graph.clone());
    let kind = SaintKind::RandomWalk { roots: 20, walk_length: 2 };
    let sampler = SaintSampler::new(g, SaintConfig { kind, steps_per_epoch: 3, coverage: 5, seed: 2 }).unwrap();
    let source = BatchSource::Saint { sampler: Arc::new(sampler), aggregation: Aggregation::for_model(model, &d.graph).unwrap() };
    let mut s = SampledTraining::new(source, node_data(d), d.n(), 3, PrefetchConfig::default(), cfg, d.classes).unwrap();
    s.features_on_gpu = resident;
    let mut t = Trainer::new(b, d, &cfg, &TrainConfig { epochs, ..TrainConfig::default() }).unwrap();
    t.set_epoch_steps(Box::new(s));
    t.fit(epochs, |_| {}).unwrap().epochs.iter().map(|e| e.loss).collect()
}

#[test]
fn resident_features_train_as_copied_rows() {
    let d = grid_data();
    for model in ["gcn", "sage"] {
        let copied = walk_losses(Arc::new(CpuBackend::<f64>::new()), &d, model, false, 4);
        let gathered = walk_losses(Arc::new(CpuBackend::<f64>::new()), &d, model, true, 4);
        assert_eq!(copied, gathered, "{model}: gathering resident rows changed the losses");
    }
}

#[test]
fn gpu_resident_features_train_as_copied_rows() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_resident_features_train_as_copied_rows") else { return };
    let d = grid_data();
    let cuda = || Arc::new(CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap());
    for model in ["gcn", "sage"] {
        let copied = walk_losses(cuda(), &d, model, false, 4);
        let gathered = walk_losses(cuda(), &d, model, true, 4);
        for (e, (c, g)) in copied.iter().zip(&gathered).enumerate() {
            assert!((c - g).abs() <= 1e-5 * c.abs().max(1e-3), "{model} epoch {}: gathered {g} vs copied {c}", e + 1);
        }
    }
}

/// The grid's features stored sparse (about half their entries zeroed first, so the sparse and
/// dense forms differ in what they store).
fn sparse_grid_data() -> Dataset {
    let mut d = grid_data();
    let HostFeatures::Dense(m) = &d.features else { panic!("dense synthetic features") };
    let mut t = Vec::new();
    for r in 0..m.rows {
        for c in 0..m.cols {
            if (r + c) % 2 == 0 {
                t.push((r as u32, c as u32, m.data[r * m.cols + c]));
            }
        }
    }
    d.features = HostFeatures::Sparse(Csr::from_triplets(m.rows, m.cols, &t).unwrap());
    d
}

/// Sparse features kept on the device dense (`features_on_gpu`) train as the sparse batches do.
/// Without dropout: the dense and sparse input dropouts draw differently (by element, by stored
/// entry), so only the products' summation order may differ.
#[test]
fn densified_resident_features_train_as_sparse_batches() {
    let d = sparse_grid_data();
    for model in ["gcn", "sage"] {
        let cfg = ModelConfig { seed: 4, dropout: 0.0, ..default_config(model).unwrap() };
        let sparse = walk_losses_with(Arc::new(CpuBackend::<f64>::new()), &d, cfg, false, 4);
        let dense = walk_losses_with(Arc::new(CpuBackend::<f64>::new()), &d, cfg, true, 4);
        for (e, (s, g)) in sparse.iter().zip(&dense).enumerate() {
            assert!((s - g).abs() <= 1e-12 * s.abs().max(1e-3), "{model} epoch {}: dense resident {g} vs sparse batches {s}", e + 1);
        }
    }
}

#[test]
fn gpu_densified_resident_features_train_as_sparse_batches() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_densified_resident_features_train_as_sparse_batches") else { return };
    let d = sparse_grid_data();
    let cuda = || Arc::new(CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap());
    for model in ["gcn", "sage"] {
        let cfg = ModelConfig { seed: 4, dropout: 0.0, ..default_config(model).unwrap() };
        let sparse = walk_losses_with(cuda(), &d, cfg, false, 4);
        let dense = walk_losses_with(cuda(), &d, cfg, true, 4);
        for (e, (s, g)) in sparse.iter().zip(&dense).enumerate() {
            assert!((s - g).abs() <= 1e-5 * s.abs().max(1e-3), "{model} epoch {}: dense resident {g} vs sparse batches {s}", e + 1);
        }
    }
}
