//! Graphs, node data and shared checks for the sampler tests (`sample_device`,
//! `sample_device_neighbor`).

use tcgnn::graph::Csr;
use tcgnn::nn::input::HostFeatures;
use tcgnn::ops::backend::TRAIN_BIT;
use tcgnn::sample::batch::NodeData;
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::util::rng::SplitMix64;

/// `pairs` random edges among the first nine tenths of `n` nodes (both ways when `symmetric`),
/// every `loops_every`-th node with a self-loop, node 1 joined to every `hub_every`-th node
/// (only outwards when directed: one huge row).
pub fn graph(n: usize, pairs: usize, loops_every: usize, hub_every: usize, symmetric: bool, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let linked = (n - n / 10).max(1) as u64;
    let mut t = Vec::new();
    for _ in 0..pairs {
        let (a, b) = (rng.below(linked) as u32, rng.below(linked) as u32);
        t.push((a, b, 1.0));
        if symmetric {
            t.push((b, a, 1.0));
        }
    }
    for v in (0..linked as u32).step_by(loops_every) {
        t.push((v, v, 1.0));
    }
    if n > 1 {
        for v in (0..linked as u32).step_by(hub_every) {
            t.push((1, v, 1.0));
            if symmetric {
                t.push((v, 1, 1.0));
            }
        }
    }
    tcgnn::graph::ops::pattern(&Csr::from_triplets(n, n, &t).unwrap())
}

pub fn dataset(name: &str, g: Csr) -> Dataset {
    Dataset::synthetic(name.into(), g, &SyntheticNodeData { features: 12, classes: 3, seed: 5 }).unwrap()
}

pub fn node_data(d: &Dataset) -> NodeData {
    let n_train = d.mask_bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    NodeData { features: d.features.clone(), labels: d.labels.clone(), mask_bits: d.mask_bits.clone(), n_train }
}

/// `d` with its features stored sparse: a random third of the entries kept, some rows empty.
pub fn sparse_features(mut d: Dataset) -> Dataset {
    let HostFeatures::Dense(m) = &d.features else { panic!("dense synthetic features") };
    let mut rng = SplitMix64::new(17);
    let mut t = Vec::new();
    for r in 0..m.rows {
        for c in 0..m.cols {
            if r % 5 != 3 && rng.below(3) == 0 {
                t.push((r as u32, c as u32, m.data[r * m.cols + c]));
            }
        }
    }
    d.features = HostFeatures::Sparse(Csr::from_triplets(m.rows, m.cols, &t).unwrap());
    d
}

/// A device batch's sparse features against the CPU's (`want`): rows bit for bit; the transpose
/// bit for bit when `transpose_in_order`, else row by row as the same entries (each mapped to its
/// own), since the device lists a neighbour batch's nodes in node-id order and the CPU in local
/// order.
pub fn assert_batch_features(
    host: &Option<(Csr, Csr, Vec<u32>)>,
    want: &tcgnn::sample::prepared::PreparedFeatures,
    feature_nnz: usize,
    sparse: bool,
    transpose_in_order: bool,
    what: &str,
) {
    use tcgnn::sample::prepared::PreparedFeatures;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    match (host, want) {
        (None, PreparedFeatures::Dense(_)) => assert!(!sparse, "{what}: dense features from a sparse sampler"),
        (Some((x, xt, xt_of)), PreparedFeatures::Sparse(w)) => {
            assert_eq!(feature_nnz, w.s.nnz(), "{what}: feature entries");
            assert_eq!((x.row_ptr(), x.col_idx()), (w.s.row_ptr(), w.s.col_idx()), "{what}: feature rows");
            assert_eq!(bits(x.values()), bits(w.s.values()), "{what}: feature values");
            assert_eq!(xt.row_ptr(), w.t.row_ptr(), "{what}: feature transpose rows");
            if transpose_in_order {
                assert_eq!(xt.col_idx(), w.t.col_idx(), "{what}: feature transpose");
                assert_eq!(bits(xt.values()), bits(w.t.values()), "{what}: feature transpose values");
                assert_eq!(xt_of, &w.t_of, "{what}: feature transpose map");
            } else {
                let entries = |t: &Csr, of: &[u32], f: usize| {
                    let mut e: Vec<_> = t.row_range(f).map(|i| (t.col_idx()[i], t.values()[i].to_bits(), of[i])).collect();
                    e.sort_unstable();
                    e
                };
                for f in 0..xt.n_rows() {
                    assert_eq!(entries(xt, xt_of, f), entries(&w.t, &w.t_of, f), "{what}: feature transpose row {f}");
                }
            }
        }
        _ => panic!("{what}: sparse features on one side only"),
    }
}

/// Losses of `epochs` epochs of `source`'s batches (`steps` an epoch) made on the GPU or the CPU:
/// dense features resident on the device either way, sparse ones in the batches.
#[allow(clippy::too_many_arguments)]
pub fn sampled_losses(
    gpu: &std::sync::Arc<tcgnn::gpu::Gpu>,
    d: &Dataset,
    cfg: tcgnn::nn::ModelConfig,
    source: tcgnn::sample::batch::BatchSource,
    steps: usize,
    on_gpu: bool,
    epochs: usize,
) -> Vec<f64> {
    use std::sync::Arc;
    use tcgnn::nn::CudaBackend;
    use tcgnn::ops::{Impl, Precision};
    use tcgnn::task::node::{TrainConfig, Trainer};
    let mut s =
        tcgnn::sample::SampledTraining::new(source, node_data(d), d.n(), steps, tcgnn::sample::PrefetchConfig::default(), cfg, d.classes)
            .unwrap();
    s.features_on_gpu = matches!(d.features, HostFeatures::Dense(_));
    s.sample_on_gpu = on_gpu;
    assert_eq!(s.gpu_sampling_unsupported(), None);
    let b = Arc::new(CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap());
    let mut t = Trainer::new(b, d, &cfg, &TrainConfig { epochs, ..TrainConfig::default() }).unwrap();
    t.set_epoch_steps(Box::new(s));
    t.fit(epochs, |_| {}).unwrap().epochs.iter().map(|e| e.loss).collect()
}
