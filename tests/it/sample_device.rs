//! GraphSAINT batches made on the GPU (`sample::device_saint`, GPU only): the very batch the CPU
//! sampler makes for the same seed, epoch and index (nodes, the model's matrix with its values
//! bit for bit, the transpose's values and map, sparse features with their transpose, the sizes),
//! for every kind and fixed-aggregation model, on graphs with isolated nodes, a hub, self-loops,
//! more nodes than one scan tile and a one-node graph; and training with the device batches
//! gives the CPU-sampled losses, with dense and with sparse features.

use crate::common;

use std::sync::Arc;

use common::sample::{assert_batch_features, dataset, graph, node_data, sampled_losses, sparse_features};
use tcgnn::graph::Csr;
use tcgnn::nn::ModelConfig;
use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::models::default_config;
use tcgnn::sample::aggregation::Aggregation;
use tcgnn::sample::batch::BatchSource;
use tcgnn::sample::batch::TrainBatch;
use tcgnn::sample::device_saint::{DeviceBatches, DeviceSaint};
use tcgnn::sample::prepared::PreparedBatch;
use tcgnn::sample::{SaintConfig, SaintKind, SaintSampler};
use tcgnn::task::node::data::Dataset;

/// A symmetric graph of `n` nodes: random pairs, every `loops_every`-th node with a self-loop,
/// node 1 joined to every `hub_every`-th node, the last tenth of the nodes isolated.
fn symmetric(n: usize, pairs: usize, loops_every: usize, hub_every: usize, seed: u64) -> Csr {
    graph(n, pairs, loops_every, hub_every, true, seed)
}

fn graphs() -> Vec<(String, Csr)> {
    vec![
        ("small with a hub".into(), symmetric(97, 150, 3, 4, 1)),
        ("past one scan tile".into(), symmetric(9_001, 20_000, 7, 50, 2)),
        ("one node with its loop".into(), symmetric(1, 0, 1, 1, 3)),
    ]
}

fn kinds(n: usize) -> Vec<SaintKind> {
    vec![
        SaintKind::Node { budget: n / 2 + 1 },
        SaintKind::Edge { budget: n / 5 + 1 },
        SaintKind::RandomWalk { roots: n / 8 + 1, walk_length: 3 },
    ]
}

#[test]
fn gpu_saint_batches_equal_the_cpu_sampler() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_saint_batches_equal_the_cpu_sampler") else { return };
    for ((name, g), sparse) in graphs().into_iter().flat_map(|g| [(g.clone(), false), (g, true)]) {
        let d = if sparse { sparse_features(dataset(&name, g)) } else { dataset(&name, g) };
        let name = format!("{name}{}", if sparse { ", sparse features" } else { "" });
        let data = node_data(&d);
        for kind in kinds(d.n()) {
            let sampler =
                SaintSampler::new(Arc::new(d.graph.clone()), SaintConfig { kind, steps_per_epoch: 3, coverage: 4, seed: 9 }).unwrap();
            for model in ["gcn", "sage", "gin"] {
                let agg = Aggregation::for_model(model, &d.graph).unwrap();
                let mut dev = DeviceSaint::new(&gpu, &sampler, agg.as_ref(), &data, sparse).unwrap();
                for (epoch, i) in [(0, 0), (0, 2), (5, 1), (5, 1)] {
                    let what = format!("{name}, {kind:?}, {model}, epoch {epoch} batch {i}");
                    let got = dev.sample(epoch, i).unwrap();
                    let cpu = TrainBatch::from_saint(sampler.batch(epoch, i), &data, d.n(), agg.as_ref()).unwrap();
                    let (sampled, loss_nodes) = (cpu.sampled_edges, cpu.loss_nodes());
                    let want = PreparedBatch::new(cpu, model).unwrap();
                    assert_eq!(
                        (got.n, got.nnz, got.sampled_edges, got.loss_nodes),
                        (want.n, want.matrix.s.nnz(), sampled, loss_nodes),
                        "{what}: sizes"
                    );
                    let host = dev.download(&got).unwrap();
                    assert_eq!(host.nodes, want.nodes, "{what}: nodes");
                    assert_eq!(host.s.row_ptr(), want.matrix.s.row_ptr(), "{what}: row pointers");
                    assert_eq!(host.s.col_idx(), want.matrix.s.col_idx(), "{what}: columns");
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(host.s.values()), bits(want.matrix.s.values()), "{what}: values");
                    assert_eq!(want.matrix.t.col_idx(), want.matrix.s.col_idx(), "{what}: the CPU transpose has the batch's pattern");
                    assert_eq!(bits(&host.t_values), bits(want.matrix.t.values()), "{what}: transpose values");
                    assert_eq!(host.t_of, want.matrix.t_of, "{what}: transpose map");
                    assert_batch_features(&host.features, &want.features, got.feature_nnz, sparse, true, &what);
                }
            }
        }
    }
}

/// Losses of `epochs` epochs of GraphSAINT `kind` batches sampled on the GPU or the CPU.
fn losses(gpu: &Arc<tcgnn::gpu::Gpu>, d: &Dataset, cfg: ModelConfig, kind: SaintKind, on_gpu: bool, epochs: usize) -> Vec<f64> {
    let sampler = SaintSampler::new(Arc::new(d.graph.clone()), SaintConfig { kind, steps_per_epoch: 3, coverage: 5, seed: 2 }).unwrap();
    let source = BatchSource::Saint { sampler: Arc::new(sampler), aggregation: Aggregation::for_model(cfg.model, &d.graph).unwrap() };
    sampled_losses(gpu, d, cfg, source, 3, on_gpu, epochs)
}

#[test]
fn gpu_sampled_batches_train_as_cpu_sampled_ones() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_sampled_batches_train_as_cpu_sampled_ones") else { return };
    let dense = dataset("past one scan tile", symmetric(5_003, 12_000, 7, 50, 4));
    for (d, model) in [
        (&dense, "gcn"),
        (&dense, "sage"),
        (&dense, "gin"),
        (&sparse_features(dense.clone()), "gcn"),
        (&sparse_features(dense.clone()), "sage"),
    ] {
        let cfg = ModelConfig { seed: 4, ..default_config(model).unwrap() };
        for kind in [SaintKind::Node { budget: 900 }, SaintKind::RandomWalk { roots: 300, walk_length: 2 }] {
            let cpu = losses(&gpu, d, cfg, kind, false, 4);
            let dev = losses(&gpu, d, cfg, kind, true, 4);
            for (e, (c, g)) in cpu.iter().zip(&dev).enumerate() {
                let sparse = matches!(d.features, HostFeatures::Sparse(_));
                assert!(
                    (c - g).abs() <= 1e-5 * c.abs().max(1e-3),
                    "{model} {kind:?} (sparse features: {sparse}) epoch {}: GPU-sampled {g} vs CPU-sampled {c}",
                    e + 1
                );
            }
        }
    }
}

#[test]
fn gpu_sampling_explains_what_it_cannot_do() {
    let d = dataset("directed", Csr::from_triplets(3, 3, &[(0, 1, 1.0), (1, 2, 1.0)]).unwrap());
    let sampler = SaintSampler::new(
        Arc::new(d.graph.clone()),
        SaintConfig { kind: SaintKind::Node { budget: 4 }, steps_per_epoch: 1, coverage: 2, seed: 0 },
    )
    .unwrap();
    let agg = Aggregation::for_model("gcn", &d.graph).unwrap();
    let why = tcgnn::sample::device_saint::unsupported(&sampler, agg.as_ref()).expect("a directed graph is refused");
    assert!(why.contains("symmetric"), "{why}");
    let plain = SaintSampler::new(
        Arc::new(d.graph.clone()),
        SaintConfig { kind: SaintKind::Node { budget: 4 }, steps_per_epoch: 1, coverage: 0, seed: 0 },
    )
    .unwrap();
    assert!(tcgnn::sample::device_saint::unsupported(&plain, None).unwrap().contains("normalisation"));
}
