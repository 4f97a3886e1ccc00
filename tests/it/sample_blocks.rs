//! Neighbour sampling on per-layer blocks with the full graph's normalisation (issue 45):
//! - with a fan-out that covers every neighbour, the batch model's outputs at the targets are
//!   the full-graph model's (per-layer blocks and the normalised union alike), which the union
//!   normalised by its own degrees is not for GCN;
//! - layer l's matrix has rows for block l's destinations only and reads block l's sources;
//! - a batch over the whole graph multiplies exactly the full graph's matrix.

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::graph::ops::gcn_normalize;
use tcgnn::nn::CpuBackend;
use tcgnn::nn::input::{HostFeatures, InputFeatures};
use tcgnn::nn::models::{self, ModelConfig, default_config};
use tcgnn::ops::backend::Backend;
use tcgnn::sample::aggregation::Aggregation;
use tcgnn::sample::batch::{NodeData, TrainBatch};
use tcgnn::sample::train::{build_batch_model, swap_state};
use tcgnn::sample::{NeighborConfig, NeighborSampler};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

/// A random symmetric graph of `n` nodes: a ring plus up to `extra - 1` random edges a node (a
/// few self-loops among them, to cover both kinds of row), uneven degrees so that subgraph and
/// full degrees differ.
fn graph(n: usize, extra: u64, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for v in 0..n as u32 {
        let u = (v + 1) % n as u32;
        t.extend([(v, u, 1.0), (u, v, 1.0)]);
        for _ in 0..rng.below(extra) {
            let u = rng.below(n as u64) as u32;
            t.extend([(v, u, 1.0), (u, v, 1.0)]);
        }
    }
    // from_triplets sums repeats: the pattern has value 1 everywhere.
    tcgnn::graph::ops::pattern(&Csr::from_triplets(n, n, &t).unwrap())
}

fn node_data(n: usize, f: usize, classes: usize) -> NodeData {
    let x = Matrix::random(n, f, 11);
    NodeData {
        features: HostFeatures::Dense(x),
        labels: (0..n as i32).map(|v| v % classes as i32).collect(),
        mask_bits: vec![0; n],
        n_train: 0,
    }
}

/// The logits of `batch`'s first `rows` nodes, in evaluation mode, with `net`'s parameters.
fn batch_logits(
    b: &CpuBackend<f64>,
    net: &mut dyn models::Model<CpuBackend<f64>>,
    batch: &TrainBatch,
    rows: usize,
    classes: usize,
    cfg: &ModelConfig,
) -> Vec<f64> {
    let mut model = build_batch_model(b, batch, classes, cfg).unwrap();
    swap_state(net, model.as_mut()).unwrap();
    let mut input = InputFeatures::new(b, &batch.features).unwrap();
    let out = b.download(model.forward(b, &mut input, false).unwrap()).unwrap();
    swap_state(net, model.as_mut()).unwrap();
    out.data[..rows * classes].iter().map(|&x| x as f64).collect()
}

fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(1e-12f64, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// Fan-out -1 (every neighbour) on every hop: each target's logits are the full graph's, for
/// per-layer blocks and for the union, both with the full graph's normalisation; for GCN the
/// union normalised by its own degrees differs (the outer hop's nodes lack neighbours there).
#[test]
fn full_fanout_blocks_give_the_full_graph_outputs() {
    let (n, f, classes) = (3000, 10, 4);
    let g = Arc::new(graph(n, 3, 3));
    let data = node_data(n, f, classes);
    let b = CpuBackend::<f64>::new();
    for (model, layers) in [("gcn", 2), ("gcn", 3), ("sage", 2), ("gin", 2)] {
        let cfg = ModelConfig { layers, seed: 5, dropout: 0.0, ..default_config(model).unwrap() };
        let mut net = models::build(&b, &g, f, classes, &cfg).unwrap();
        let mut input = InputFeatures::new(&b, &data.features).unwrap();
        let full = b.download(net.forward(&b, &mut input, false).unwrap()).unwrap();
        let agg = Aggregation::for_model(model, &g).unwrap().unwrap();
        let targets: Vec<u32> = (0..n as u32).filter(|v| v % 331 == 5).collect();
        let config = NeighborConfig { fanouts: vec![-1; layers], batch_size: targets.len(), shuffle: false, seed: 1 };
        let sampler = NeighborSampler::new(g.clone(), targets.clone(), config).unwrap();
        let blocks = sampler.batch(0, 0);
        assert!(blocks.input_nodes.len() < n, "{model}: the batch must not be the whole graph");
        let want: Vec<f64> = targets.iter().flat_map(|&v| full.row(v as usize).iter().map(|&x| x as f64)).collect();
        let t = targets.len();
        for per_layer in [true, false] {
            let batch = TrainBatch::from_blocks_normalized(blocks.clone(), &data, &agg, &g, per_layer).unwrap();
            assert_eq!(batch.later.len(), if per_layer { layers - 1 } else { 0 });
            assert_eq!(&batch.nodes[..t], &targets[..], "targets come first");
            let got = batch_logits(&b, net.as_mut(), &batch, t, classes, &cfg);
            let err = max_rel(&got, &want);
            assert!(err < 1e-9, "{model} {layers} layers, per_layer={per_layer}: targets' logits differ from the full graph's by {err:e}");
        }
        if model == "gcn" {
            let union = TrainBatch::from_blocks(blocks.clone(), &data).unwrap();
            let err = max_rel(&batch_logits(&b, net.as_mut(), &union, t, classes, &cfg), &want);
            assert!(err > 1e-3, "{model}: the union normalised by its own degrees should differ from the full graph ({err:e})");
        }
    }
}

/// Sampled fan-outs: layer l's matrix has rows for block l's destinations only, columns among
/// its sources, the entries of block l (plus each destination's self-loop for GCN), each scaled
/// by deg / drawn; the union has every hop's entries in every row.
#[test]
fn layer_matrices_hold_their_block_only() {
    let n = 400;
    let g = Arc::new(graph(n, 6, 8));
    let data = node_data(n, 6, 3);
    let gcn = Aggregation::for_model("gcn", &g).unwrap().unwrap();
    let a_hat = gcn_normalize(&g).unwrap();
    let targets: Vec<u32> = (0..n as u32).step_by(9).collect();
    let config = NeighborConfig { fanouts: vec![3, 2], batch_size: 20, shuffle: true, seed: 4 };
    let sampler = NeighborSampler::new(g.clone(), targets, config).unwrap();
    let mut drawn_fewer = 0;
    for i in 0..3 {
        let blocks = sampler.batch(1, i);
        let batch = TrainBatch::from_blocks_normalized(blocks.clone(), &data, &gcn, &g, true).unwrap();
        let nn = batch.nodes.len();
        let mats: Vec<&Csr> = std::iter::once(batch.adjacency.as_ref().unwrap()).chain(&batch.later).collect();
        assert_eq!(mats.len(), blocks.layers.len());
        for (l, (m, block)) in mats.iter().zip(&blocks.layers).enumerate() {
            assert_eq!((m.n_rows(), m.n_cols()), (nn, nn));
            let bg = &block.graph;
            for r in 0..nn {
                let cols = &m.col_idx()[m.row_range(r)];
                if r >= bg.n_rows() {
                    assert!(cols.is_empty(), "layer {l}: row {r} is past the block's {} destinations", bg.n_rows());
                    continue;
                }
                let v = batch.nodes[r] as usize;
                let drawn = bg.row_len(r);
                drawn_fewer += usize::from(drawn < g.row_len(v));
                // Drawn neighbours scaled by deg / drawn (a drawn raw loop adds nothing), and
                // the self-loop always, unscaled.
                let mut want: Vec<(u32, f64)> = bg.col_idx()[bg.row_range(r)]
                    .iter()
                    .filter(|&&c| c as usize != r)
                    .map(|&c| {
                        let u = batch.nodes[c as usize];
                        let k = a_hat.row_range(v).find(|&k| a_hat.col_idx()[k] == u).unwrap();
                        (c, a_hat.values()[k] as f64 * g.row_len(v) as f64 / drawn as f64)
                    })
                    .collect();
                let k = a_hat.row_range(v).find(|&k| a_hat.col_idx()[k] as usize == v).unwrap();
                want.push((r as u32, a_hat.values()[k] as f64));
                want.sort_by_key(|x| x.0);
                let got: Vec<(u32, f64)> = m.row_range(r).map(|k| (m.col_idx()[k], m.values()[k] as f64)).collect();
                assert_eq!(got.len(), want.len(), "layer {l} row {r}");
                for ((gc, gv), (wc, wv)) in got.iter().zip(&want) {
                    assert_eq!(gc, wc, "layer {l} row {r}");
                    assert!((gv - wv).abs() <= 1e-6 * wv.abs(), "layer {l} row {r} col {gc}: {gv} vs {wv}");
                    assert!((*gc as usize) < bg.n_cols(), "layer {l} reads past its sources");
                }
            }
        }
        // The union puts every hop's draws of a target into its row: more than the last block's.
        let union = TrainBatch::from_blocks_normalized(blocks.clone(), &data, &gcn, &g, false).unwrap();
        assert!(union.later.is_empty());
        let u = union.adjacency.as_ref().unwrap();
        let last = mats.last().unwrap();
        assert!(u.nnz() > last.nnz() && u.nnz() >= mats[0].nnz());
    }
    assert!(drawn_fewer > 0, "the fan-outs must leave neighbours out somewhere");
}

/// A batch of every node with fan-out -1 multiplies the full graph's Â (GCN) and mean (SAGE)
/// in every layer, in the batch's local order.
#[test]
fn whole_graph_batch_has_the_full_normalisation() {
    let n = 150;
    let g = Arc::new(graph(n, 6, 21));
    let data = node_data(n, 4, 2);
    for model in ["gcn", "sage"] {
        let agg = Aggregation::for_model(model, &g).unwrap().unwrap();
        let full = models::model_graph(model, &g).unwrap();
        // Targets in a shuffled order: local ids differ from global ones.
        let config = NeighborConfig { fanouts: vec![-1, -1], batch_size: n, shuffle: true, seed: 6 };
        let sampler = NeighborSampler::new(g.clone(), (0..n as u32).collect(), config).unwrap();
        let batch = TrainBatch::from_blocks_normalized(sampler.batch(0, 0), &data, &agg, &g, true).unwrap();
        assert_eq!(batch.nodes.len(), n);
        assert_ne!(batch.nodes, (0..n as u32).collect::<Vec<_>>(), "shuffled");
        for (l, m) in std::iter::once(batch.adjacency.as_ref().unwrap()).chain(&batch.later).enumerate() {
            assert_eq!(m.nnz(), full.nnz(), "{model} layer {l}");
            for r in 0..n {
                let v = batch.nodes[r] as usize;
                let mut got: Vec<(u32, f32)> = m.row_range(r).map(|k| (batch.nodes[m.col_idx()[k] as usize], m.values()[k])).collect();
                got.sort_by_key(|x| x.0);
                let want: Vec<(u32, f32)> = full.row_range(v).map(|k| (full.col_idx()[k], full.values()[k])).collect();
                assert_eq!(got.len(), want.len(), "{model} layer {l} node {v}");
                for ((gc, gv), (wc, wv)) in got.iter().zip(&want) {
                    assert_eq!(gc, wc, "{model} layer {l} node {v}");
                    assert!((gv - wv).abs() <= 1e-6 * wv.abs(), "{model} layer {l} node {v} -> {gc}: {gv} vs {wv}");
                }
            }
        }
    }
}
