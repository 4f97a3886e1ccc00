//! Neighbour-sampled batches made on the GPU (`sample::device_neighbor`, GPU only): the very
//! batch the CPU sampler makes for the same seed, epoch and index (nodes in reach order, the
//! model's matrix over the union of the hops with its values bit for bit, its transpose with
//! values and map, the sizes), for GCN / SAGE / GIN, fan-outs with "all neighbours" and zero,
//! shuffled and in order, on a symmetric graph with a hub, a directed graph with one huge row,
//! more nodes than one scan tile and a one-node graph, dense and sparse features (the batch's
//! feature rows bit for bit, their transpose as the same entries per row); and training on the
//! device batches gives the CPU-sampled losses.

use crate::common;

use std::sync::Arc;

use common::sample::{assert_batch_features, dataset, graph, node_data, sampled_losses, sparse_features};
use tcgnn::graph::Csr;
use tcgnn::nn::ModelConfig;
use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::models::default_config;
use tcgnn::ops::backend::TRAIN_BIT;
use tcgnn::sample::batch::{BatchSource, TrainBatch};
use tcgnn::sample::device_neighbor::{DeviceBatches, DeviceNeighbor, unsupported};
use tcgnn::sample::prepared::PreparedBatch;
use tcgnn::sample::{NeighborConfig, NeighborSampler};
use tcgnn::task::node::data::Dataset;

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
        for (fanouts, batch_size, shuffle) in
            [(vec![3, 2], 7, true), (vec![15, 10], 64, true), (vec![-1, 0, 4], 1000, false), (vec![40, 3], 50, true)]
        {
            let config = NeighborConfig { fanouts: fanouts.clone(), batch_size, shuffle, seed: 9 };
            let sampler = NeighborSampler::new(Arc::new(d.graph.clone()), targets.clone(), config).unwrap();
            let last = sampler.batches_per_epoch() as u32 - 1;
            for model in ["gcn", "sage", "gin"] {
                let mut dev = DeviceNeighbor::new(&gpu, &sampler, model, &d.labels, x, None).unwrap();
                for (epoch, i) in [(0, 0), (0, last), (5, last / 2), (5, last / 2)] {
                    let what = format!("{name}, fan-outs {fanouts:?}, batches of {batch_size}, {model}, epoch {epoch} batch {i}");
                    let got = dev.sample(epoch, i).unwrap();
                    let cpu = TrainBatch::from_blocks(sampler.batch(epoch, i), &data).unwrap();
                    let (sampled, loss_nodes) = (cpu.sampled_edges, cpu.loss_nodes());
                    let want = PreparedBatch::new(cpu, model).unwrap();
                    assert_eq!(
                        (got.n, got.nnz, got.sampled_edges, got.loss_nodes),
                        (want.n, want.matrix.s.nnz(), sampled, loss_nodes),
                        "{what}: sizes"
                    );
                    let host = dev.download(&got).unwrap();
                    assert_eq!(host.nodes, want.nodes, "{what}: nodes");
                    let (s, t) = (&want.matrix.s, &want.matrix.t);
                    assert_eq!((host.s.row_ptr(), host.s.col_idx()), (s.row_ptr(), s.col_idx()), "{what}: pattern");
                    assert_eq!(bits(host.s.values()), bits(s.values()), "{what}: values");
                    assert_eq!((host.t.row_ptr(), host.t.col_idx()), (t.row_ptr(), t.col_idx()), "{what}: transpose");
                    assert_eq!(bits(host.t.values()), bits(t.values()), "{what}: transpose values");
                    assert_eq!(host.t_of, want.matrix.t_of, "{what}: transpose map");
                    assert_batch_features(&host.features, &want.features, got.feature_nnz, sparse, false, &what);
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
    sampled_losses(gpu, d, cfg, BatchSource::Neighbor(Arc::new(sampler)), steps, on_gpu, epochs)
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
    let none = NeighborSampler::new(
        Arc::new(d.graph.clone()),
        train_nodes(&d),
        NeighborConfig { fanouts: vec![], batch_size: 4, shuffle: true, seed: 0 },
    )
    .unwrap();
    assert!(unsupported(&none, "gcn").unwrap().contains("--fanout"));
}

/// Per-layer blocks with the full graph's normalisation (`BatchSource::NeighborNormalized`
/// with `per_layer`): the device batch is the CPU workers' `from_blocks_normalized` batch bit for
/// bit: nodes, every layer's matrix (layer l = hop H - 1 - l) with its values, transpose,
/// transpose values and map, the sizes (entries: the largest layer's), for GCN / SAGE / GIN, on
/// graphs with isolated nodes (the last tenth; every node a target in one setting), self-loops
/// (drawn ones merged with GCN's added loop), a hub, one huge directed row and one node; 1, 2
/// and 3 layers; fan-outs of all neighbours, 0, larger than every degree, and past 32 (the
/// sort's multi-pass path).
#[test]
fn gpu_neighbor_per_layer_blocks_equal_the_cpu_workers() {
    use tcgnn::sample::aggregation::Aggregation;
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_neighbor_per_layer_blocks_equal_the_cpu_workers") else { return };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let same = |got: (&Csr, &Csr, &[u32]), want: &tcgnn::sample::prepared::WithTranspose, what: &str| {
        let (s, t, t_of) = got;
        assert_eq!((s.row_ptr(), s.col_idx()), (want.s.row_ptr(), want.s.col_idx()), "{what}: pattern");
        assert_eq!(bits(s.values()), bits(want.s.values()), "{what}: values");
        assert_eq!((t.row_ptr(), t.col_idx()), (want.t.row_ptr(), want.t.col_idx()), "{what}: transpose");
        assert_eq!(bits(t.values()), bits(want.t.values()), "{what}: transpose values");
        assert_eq!(t_of, &want.t_of[..], "{what}: transpose map");
    };
    for ((name, g), sparse) in graphs().into_iter().flat_map(|g| [(g.clone(), false), (g, true)]) {
        let d = if sparse { sparse_features(dataset(&name, g)) } else { dataset(&name, g) };
        let name = format!("{name}{}", if sparse { ", sparse features" } else { "" });
        let x = match &d.features {
            HostFeatures::Sparse(x) => Some(x),
            HostFeatures::Dense(_) => None,
        };
        let data = node_data(&d);
        let mut train = train_nodes(&d);
        if train.is_empty() {
            train.push(0);
        }
        let every: Vec<u32> = (0..d.n() as u32).collect();
        let settings = [
            (vec![3, 2], 7, true, &train),
            (vec![-1], 64, true, &train),
            (vec![1000, 0], 50, false, &every),
            (vec![40, 3], 50, true, &train),
            (vec![2, 5, -1], 300, false, &every),
            (vec![15, 10, 5], 64, true, &train),
        ];
        for (fanouts, batch_size, shuffle, targets) in settings {
            let config = NeighborConfig { fanouts: fanouts.clone(), batch_size, shuffle, seed: 11 };
            let sampler = NeighborSampler::new(Arc::new(d.graph.clone()), targets.clone(), config).unwrap();
            let last = sampler.batches_per_epoch() as u32 - 1;
            for model in ["gcn", "sage", "gin"] {
                let agg = Aggregation::for_model(model, sampler.graph()).unwrap().expect("a fixed aggregation");
                let mut dev = DeviceNeighbor::new(&gpu, &sampler, model, &d.labels, x, Some(&agg)).unwrap();
                assert_eq!(dev.later_matrices(), fanouts.len() - 1);
                for (epoch, i) in [(0, 0), (0, last), (3, last / 2), (3, last / 2)] {
                    let what = format!("{name}, fan-outs {fanouts:?}, batches of {batch_size}, {model}, epoch {epoch} batch {i}");
                    let got = dev.sample(epoch, i).unwrap();
                    let cpu = TrainBatch::from_blocks_normalized(sampler.batch(epoch, i), &data, &agg, sampler.graph(), true).unwrap();
                    let (sampled, loss_nodes) = (cpu.sampled_edges, cpu.loss_nodes());
                    let want = PreparedBatch::new(cpu, model).unwrap();
                    assert_eq!(want.later.len(), fanouts.len() - 1, "{what}: a CPU matrix per layer");
                    assert_eq!(
                        (got.n, got.nnz, got.sampled_edges, got.loss_nodes),
                        (want.n, want.matrix_nnz(), sampled, loss_nodes),
                        "{what}: sizes"
                    );
                    let host = dev.download(&got).unwrap();
                    assert_eq!(host.nodes, want.nodes, "{what}: nodes");
                    same((&host.s, &host.t, &host.t_of), &want.matrix, &format!("{what}, layer 0"));
                    assert_eq!(host.later.len(), want.later.len(), "{what}: layers");
                    for (l, ((s, t, t_of), w)) in host.later.iter().zip(&want.later).enumerate() {
                        same((s, t, t_of), w, &format!("{what}, layer {}", l + 1));
                    }
                    assert_batch_features(&host.features, &want.features, got.feature_nnz, sparse, false, &what);
                }
            }
        }
    }
}

/// Losses of `epochs` epochs of per-layer neighbour batches with the full graph's
/// normalisation, made on the GPU or by the CPU workers.
fn per_layer_losses(gpu: &Arc<tcgnn::gpu::Gpu>, d: &Dataset, cfg: ModelConfig, on_gpu: bool, epochs: usize) -> Vec<f64> {
    use tcgnn::sample::aggregation::Aggregation;
    let config = NeighborConfig { fanouts: [5, 3, 4][..cfg.layers].to_vec(), batch_size: 300, shuffle: true, seed: 2 };
    let sampler = NeighborSampler::new(Arc::new(d.graph.clone()), train_nodes(d), config).unwrap();
    let steps = sampler.batches_per_epoch();
    let aggregation = Aggregation::for_model(cfg.model, sampler.graph()).unwrap().expect("a fixed aggregation");
    let source = BatchSource::NeighborNormalized { sampler: Arc::new(sampler), aggregation, per_layer: true };
    sampled_losses(gpu, d, cfg, source, steps, on_gpu, epochs)
}

#[test]
fn gpu_per_layer_neighbor_batches_train_as_cpu_sampled_ones() {
    let Some((gpu, _serial)) = common::gpu_serial_or_skip("gpu_per_layer_neighbor_batches_train_as_cpu_sampled_ones") else { return };
    let dense = dataset("past one scan tile", graph(5_003, 12_000, 7, 50, true, 4));
    let sparse = sparse_features(dense.clone());
    let runs = [(&dense, "gcn", 2), (&dense, "sage", 2), (&dense, "gin", 2), (&dense, "gcn", 3), (&sparse, "gcn", 2), (&sparse, "sage", 2)];
    for (d, model, layers) in runs {
        let cfg = ModelConfig { seed: 4, layers, ..default_config(model).unwrap() };
        let cpu = per_layer_losses(&gpu, d, cfg, false, 3);
        let dev = per_layer_losses(&gpu, d, cfg, true, 3);
        assert_eq!(cpu.len(), dev.len());
        for (e, (c, g)) in cpu.iter().zip(&dev).enumerate() {
            assert!(c.is_finite(), "{model}, {layers} layers, epoch {}: loss {c}", e + 1);
            assert!(
                (c - g).abs() <= 1e-5 * c.abs().max(1e-3),
                "{model}, {layers} layers, epoch {}: GPU-sampled {g} vs CPU-sampled {c}",
                e + 1
            );
        }
    }
}

/// Per-layer blocks find an entry's raw position by binary search: a graph whose rows are not
/// sorted and unique is left to the CPU workers, with the reason.
#[test]
fn gpu_per_layer_blocks_refuse_unsorted_rows() {
    use tcgnn::sample::device_neighbor::unsupported_per_layer;
    let config = NeighborConfig { fanouts: vec![2, 2], batch_size: 2, shuffle: false, seed: 0 };
    let sorted = Csr::new(3, 3, vec![0, 2, 3, 4], vec![1, 2, 0, 0], vec![1.0; 4]).unwrap();
    let s = NeighborSampler::new(Arc::new(sorted), vec![0, 1], config.clone()).unwrap();
    assert_eq!(unsupported_per_layer(&s, "gcn"), None);
    let unsorted = Csr::new(3, 3, vec![0, 2, 3, 4], vec![2, 1, 0, 0], vec![1.0; 4]).unwrap();
    let s = NeighborSampler::new(Arc::new(unsorted), vec![0, 1], config).unwrap();
    let why = unsupported_per_layer(&s, "gcn").expect("unsorted rows refused");
    assert!(why.contains("sorted"), "{why}");
    assert!(unsupported_per_layer(&s, "gat").unwrap().contains("gat"));
}
