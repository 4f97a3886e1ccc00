//! Neighbour-sampled batches made on the GPU (`sample::device_neighbor`, GPU only): the very
//! batch the CPU sampler makes for the same seed, epoch and index (nodes in reach order, the
//! model's matrix over the union of the hops with its values bit for bit, its transpose with
//! values and map, the sizes), for GCN / SAGE / GIN, fan-outs with "all neighbours" and zero,
//! shuffled and in order, on a symmetric graph with a hub, a directed graph with one huge row,
//! more nodes than one scan tile and a one-node graph, dense and sparse features (the batch's
//! feature rows bit for bit, their transpose as the same entries per row); and training on the
//! device batches gives the CPU-sampled losses.

mod common;

use std::sync::Arc;

use tcgnn::nn::data::Dataset;
use tcgnn::nn::models::default_config;
use tcgnn::nn::{CudaBackend, ModelConfig, TrainConfig, Trainer};
use tcgnn::ops::backend::TRAIN_BIT;
use tcgnn::ops::{Impl, Precision};
use tcgnn::sample::batch::{BatchSource, TrainBatch};
use tcgnn::sample::device_neighbor::{DeviceBatches, DeviceNeighbor, unsupported};
use tcgnn::sample::prepared::PreparedBatch;
use tcgnn::sample::{NeighborConfig, NeighborSampler, PrefetchConfig, SampledTraining};
use common::sample::{dataset, graph, node_data, sparse_features};
use tcgnn::nn::input::HostFeatures;
use tcgnn::sample::prepared::PreparedFeatures;
use tcgnn::graph::Csr;

fn train_nodes(d: &Dataset) -> Vec<u32> {
    (0..d.n() as u32).filter(|&v| d.mask_bits[v as usize] & TRAIN_BIT != 0).collect()
}

fn graphs() -> Vec<(String, Csr)> {
    vec![
        ("symmetric with a hub".into(), graph(97, 150, 3, 4, true, 1)),
        ("directed with one huge row".into(), graph(3_001, 4_000, 5, 1, false, 2)),
        ("past one scan tile".into(), graph(9_001, 20_000, 7, 50, true, 3)),
        ("one node with its loop".into(), graph(1, 0, 1, 1, true, 4)),
    ]
}

#[test]
fn gpu_neighbor_batches_equal_the_cpu_sampler() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_neighbor_batches_equal_the_cpu_sampler") else { return };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for ((name, g), sparse) in graphs().into_iter().flat_map(|g| [(g.clone(), false), (g, true)]) {
        let d = if sparse { sparse_features(dataset(&name, g)) } else { dataset(&name, g) };
        let name = format!("{name}{}", if sparse { ", sparse features" } else { "" });
        let x = match &d.features {
            HostFeatures::Sparse(x) => Some(x),
            HostFeatures::Dense(_) => None,
        };
        let data = node_data(&d);
        let mut targets = train_nodes(&d);
        if targets.is_empty() {
            targets.push(0);
        }
        // Fan-outs past 32 and rows of more than 32 draws take the kernels' one-lane paths.
        for (fanouts, batch_size, shuffle) in [(vec![3, 2], 7, true), (vec![15, 10], 64, true), (vec![-1, 0, 4], 1000, false), (vec![40, 3], 50, true)] {
            let config = NeighborConfig { fanouts: fanouts.clone(), batch_size, shuffle, seed: 9 };
            let sampler = NeighborSampler::new(Arc::new(d.graph.clone()), targets.clone(), config).unwrap();
            let last = sampler.batches_per_epoch() as u32 - 1;
            for model in ["gcn", "sage", "gin"] {
                let mut dev = DeviceNeighbor::new(&gpu, &sampler, model, &d.labels, x).unwrap();
                for (epoch, i) in [(0, 0), (0, last), (5, last / 2), (5, last / 2)] {
                    let what = format!("{name}, fan-outs {fanouts:?}, batches of {batch_size}, {model}, epoch {epoch} batch {i}");
                    let got = dev.sample(epoch, i).unwrap();
                    let cpu = TrainBatch::from_blocks(sampler.batch(epoch, i), &data).unwrap();
                    let (sampled, loss_nodes) = (cpu.sampled_edges, cpu.loss_nodes());
                    let want = PreparedBatch::new(cpu, model).unwrap();
                    assert_eq!((got.n, got.nnz, got.sampled_edges, got.loss_nodes), (want.n, want.matrix.s.nnz(), sampled, loss_nodes), "{what}: sizes");
                    let host = dev.download(&got).unwrap();
                    assert_eq!(host.nodes, want.nodes, "{what}: nodes");
                    let (s, t) = (&want.matrix.s, &want.matrix.t);
                    assert_eq!((host.s.row_ptr(), host.s.col_idx()), (s.row_ptr(), s.col_idx()), "{what}: pattern");
                    assert_eq!(bits(host.s.values()), bits(s.values()), "{what}: values");
                    assert_eq!((host.t.row_ptr(), host.t.col_idx()), (t.row_ptr(), t.col_idx()), "{what}: transpose");
                    assert_eq!(bits(host.t.values()), bits(t.values()), "{what}: transpose values");
                    assert_eq!(host.t_of, want.matrix.t_of, "{what}: transpose map");
                    match (&host.features, &want.features) {
                        (None, PreparedFeatures::Dense(_)) => assert!(!sparse),
                        (Some((x, xt, xt_of)), PreparedFeatures::Sparse(w)) => {
                            assert_eq!(got.feature_nnz, w.s.nnz(), "{what}: feature entries");
                            assert_eq!((x.row_ptr(), x.col_idx()), (w.s.row_ptr(), w.s.col_idx()), "{what}: feature rows");
                            assert_eq!(bits(x.values()), bits(w.s.values()), "{what}: feature values");
                            assert_eq!(xt.row_ptr(), w.t.row_ptr(), "{what}: feature transpose rows");
                            // Each row of the transpose lists the batch's nodes in node-id order,
                            // the CPU's in local order: the same entries, each mapped to its own.
                            let entries = |t: &Csr, of: &[u32], f: usize| {
                                let mut e: Vec<_> = t.row_range(f).map(|i| (t.col_idx()[i], t.values()[i].to_bits(), of[i])).collect();
                                e.sort_unstable();
                                e
                            };
                            for f in 0..xt.n_rows() {
                                assert_eq!(entries(xt, xt_of, f), entries(&w.t, &w.t_of, f), "{what}: feature transpose row {f}");
                            }
                        }
                        _ => panic!("{what}: sparse features on one side only"),
                    }
                }
            }
        }
    }
}

/// Losses of `epochs` epochs of neighbour-sampled batches made on the GPU or the CPU.
fn losses(gpu: &Arc<tcgnn::gpu::Gpu>, d: &Dataset, cfg: ModelConfig, on_gpu: bool, epochs: usize) -> Vec<f64> {
    let config = NeighborConfig { fanouts: vec![5, 3], batch_size: 300, shuffle: true, seed: 2 };
    let sampler = NeighborSampler::new(Arc::new(d.graph.clone()), train_nodes(d), config).unwrap();
    let steps = sampler.batches_per_epoch();
    let mut s = SampledTraining::new(BatchSource::Neighbor(Arc::new(sampler)), node_data(d), d.n(), steps, PrefetchConfig::default(), cfg, d.classes).unwrap();
    // Dense features resident on the device either way; sparse ones in the batches.
    s.features_on_gpu = matches!(d.features, HostFeatures::Dense(_));
    s.sample_on_gpu = on_gpu;
    assert_eq!(s.gpu_sampling_unsupported(), None);
    let b = Arc::new(CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap());
    let mut t = Trainer::new(b, d, &cfg, &TrainConfig { epochs, ..TrainConfig::default() }).unwrap();
    t.set_epoch_steps(Box::new(s));
    t.fit(epochs, |_| {}).unwrap().epochs.iter().map(|e| e.loss).collect()
}

#[test]
fn gpu_neighbor_batches_train_as_cpu_sampled_ones() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_neighbor_batches_train_as_cpu_sampled_ones") else { return };
    let dense = dataset("past one scan tile", graph(5_003, 12_000, 7, 50, true, 4));
    let sparse = sparse_features(dense.clone());
    for (d, model) in [(&dense, "gcn"), (&dense, "sage"), (&dense, "gin"), (&sparse, "gcn"), (&sparse, "sage")] {
        let cfg = ModelConfig { seed: 4, ..default_config(model).unwrap() };
        let cpu = losses(&gpu, d, cfg, false, 3);
        let dev = losses(&gpu, d, cfg, true, 3);
        for (e, (c, g)) in cpu.iter().zip(&dev).enumerate() {
            assert!((c - g).abs() <= 1e-5 * c.abs().max(1e-3), "{model} epoch {}: GPU-sampled {g} vs CPU-sampled {c}", e + 1);
        }
    }
}

#[test]
fn gpu_neighbor_sampling_explains_what_it_cannot_do() {
    let d = dataset("ring", graph(20, 30, 3, 4, true, 5));
    let config = NeighborConfig { fanouts: vec![2], batch_size: 4, shuffle: true, seed: 0 };
    let sampler = NeighborSampler::new(Arc::new(d.graph.clone()), train_nodes(&d), config).unwrap();
    assert_eq!(unsupported(&sampler, "gcn"), None);
    let why = unsupported(&sampler, "gat").expect("attention normalises per batch");
    assert!(why.contains("gat"), "{why}");
    let none = NeighborSampler::new(Arc::new(d.graph.clone()), train_nodes(&d), NeighborConfig { fanouts: vec![], batch_size: 4, shuffle: true, seed: 0 }).unwrap();
    assert!(unsupported(&none, "gcn").unwrap().contains("--fanout"));
}
