//! The rebound batch model (`sample::bound`): one model built at a capacity, padded batches
//! copied into it, must train exactly as a model built for each batch. CPU (f64: the padding
//! only adds exact zeros, so losses and updated weights agree to rounding of the order of
//! summation, which the CPU kernels keep) and GPU (f32 HP kernels; skipped without a GPU).

use crate::common;

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::nn::input::{HostFeatures, InputFeatures};
use tcgnn::nn::models::{self, Model, ModelConfig, default_config};
use tcgnn::nn::{CpuBackend, CudaBackend, Ops};
use tcgnn::ops::backend::{Side, TRAIN_BIT};
use tcgnn::ops::nn::AdamHyper;
use tcgnn::ops::{Impl, Precision};
use tcgnn::sample::aggregation::Aggregation;
use tcgnn::sample::batch::{BatchSource, NodeData, TrainBatch};
use tcgnn::sample::bound::{BoundModel, Capacity};
use tcgnn::sample::prepared::{PreparedBatch, PreparedFeatures};
use tcgnn::sample::train::{Step, build_batch_model, train_step};
use tcgnn::sample::{NeighborConfig, NeighborSampler, SaintConfig, SaintKind, SaintSampler};
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::util::rng::SplitMix64;

/// An SBM graph with dense features, or the same graph with sparse multi-hot features.
fn data(sparse: bool) -> Dataset {
    let mut d = Dataset::load("sbm:400:3:6", None, &SyntheticNodeData { features: 24, classes: 3, seed: 7 }).unwrap();
    if sparse {
        let mut rng = SplitMix64::new(3);
        let mut t = Vec::new();
        for v in 0..d.n() as u32 {
            for _ in 0..3 {
                t.push((v, rng.below(40) as u32, 1.0));
            }
        }
        d.features = HostFeatures::Sparse(Csr::from_triplets(d.n(), 40, &t).unwrap());
    }
    d
}

fn node_data(d: &Dataset) -> NodeData {
    let n_train = d.mask_bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    NodeData { features: d.features.clone(), labels: d.labels.clone(), mask_bits: d.mask_bits.clone(), n_train }
}

/// The samplers' batch sources: GraphSAINT random walks normalised (weighted loss and
/// aggregation) and plain, and neighbour sampling.
fn sources(d: &Dataset, model: &str) -> Vec<(&'static str, BatchSource)> {
    let g = Arc::new(d.graph.clone());
    let saint = |coverage| {
        let kind = SaintKind::RandomWalk { roots: 40, walk_length: 2 };
        let s = SaintSampler::new(g.clone(), SaintConfig { kind, steps_per_epoch: 3, coverage, seed: 5 }).unwrap();
        let aggregation = if coverage > 0 { Aggregation::for_model(model, &d.graph).unwrap() } else { None };
        BatchSource::Saint { sampler: Arc::new(s), aggregation }
    };
    let train: Vec<u32> = (0..d.n() as u32).filter(|&v| d.mask_bits[v as usize] & TRAIN_BIT != 0).collect();
    let nb = Arc::new(
        NeighborSampler::new(g.clone(), train, NeighborConfig { fanouts: vec![4, 3], batch_size: 24, shuffle: true, seed: 2 }).unwrap(),
    );
    // Per-layer blocks (a matrix per layer in the rebound model) and the union, both with the
    // full graph's normalisation.
    let normalized = |per_layer| BatchSource::NeighborNormalized {
        sampler: nb.clone(),
        aggregation: Aggregation::for_model(model, &d.graph).unwrap().unwrap(),
        per_layer,
    };
    vec![
        ("saint-rw normalised", saint(10)),
        ("saint-rw", saint(0)),
        ("neighbor blocks", normalized(true)),
        ("neighbor union normalised", normalized(false)),
        ("neighbor", BatchSource::Neighbor(nb.clone())),
    ]
}

/// Steps `net` once on `batch` with a model built for it; returns the loss.
fn fresh_step<B: Ops + 'static>(
    b: &B,
    net: &mut dyn Model<B>,
    batch: &TrainBatch,
    classes: usize,
    cfg: &ModelConfig,
    hyper: &AdamHyper,
) -> f64 {
    let n = batch.nodes.len();
    let mut model = build_batch_model(b, batch, classes, cfg).unwrap();
    let mut input = InputFeatures::new(b, &batch.features).unwrap();
    let labels = b.labels(&batch.labels, &batch.mask_bits).unwrap();
    let mut dlogits = b.matrix(n, classes).unwrap();
    let mut stats = b.stats().unwrap();
    let mut scale = batch.loss_scale.as_ref().map(|w| {
        let g = b.graph(Csr::new(n, n, (0..=n as u32).collect(), (0..n as u32).collect(), w.clone()).unwrap()).unwrap();
        let v = b.graph_values(&g, Side::Forward).unwrap();
        (g, v, b.matrix(n, classes).unwrap())
    });
    let scale = scale.as_mut().map(|(g, v, m)| (&*g, &*v, m));
    let step = Step { input: &mut input, labels: &labels, dlogits: &mut dlogits, scale, loss_nodes: batch.loss_nodes(), stats: &mut stats };
    train_step(b, net, model.as_mut(), hyper, step, false).unwrap();
    b.read_stats(&stats).unwrap().loss
}

/// Steps `net` once on `p` bound into `m` (eager, recorded or replayed as `m` goes); returns
/// the loss.
fn bound_step<B: Ops + 'static>(b: &B, net: &mut dyn Model<B>, m: &mut BoundModel<B>, p: &PreparedBatch, hyper: &AdamHyper) -> f64 {
    m.bind(b, p).unwrap();
    let mut stats = b.stats().unwrap();
    m.step(b, net, hyper, &mut stats, false).unwrap();
    assert_eq!(m.record_error, None);
    b.read_stats(&stats).unwrap().loss / p.loss_nodes as f64
}

fn weights<B: Ops>(b: &B, net: &mut dyn Model<B>) -> Vec<f64> {
    net.params().into_iter().flat_map(|(_, p)| b.download(&p.value).unwrap().data).map(|x| x as f64).collect()
}

/// Three batches of every sampler through both paths, from the same parameters and step
/// counter: the losses and the weights after each step agree within `tol` (relative). With
/// `recorded`, the rebound model's second step is recorded and the later ones replayed (checked).
fn rebound_trains_as_fresh<B: Ops + 'static>(make: impl Fn() -> B, tol: f64, recorded: bool) {
    let hyper = AdamHyper { lr: 0.01, weight_decay: 5e-4, ..AdamHyper::default() };
    for sparse in [false, true] {
        let d = data(sparse);
        let f = d.features.cols();
        for model in ["gcn", "sage", "gin"] {
            let cfg = ModelConfig { seed: 4, ..default_config(model).unwrap() };
            for (name, source) in sources(&d, model) {
                let (bf, bb) = (make(), make());
                let mut net_f = models::build(&bf, &d.graph, f, d.classes, &cfg).unwrap();
                let mut net_b = models::build(&bb, &d.graph, f, d.classes, &cfg).unwrap();
                let nd = node_data(&d);
                let mut bound: Option<BoundModel<B>> = None;
                let mut steps_on_model = 0;
                for i in 0..3 {
                    let batch = source.make(&nd, d.n(), 1, i).unwrap();
                    let mut p = PreparedBatch::new(source.make(&nd, d.n(), 1, i).unwrap(), model).unwrap();
                    // Built for the first batch with room to spare: later batches are padded
                    // more, or outgrow it and rebuild.
                    if bound.as_ref().is_none_or(|m| !m.capacity().holds(&p)) {
                        let cap = bound.as_ref().map_or(Capacity::default(), |m| m.capacity()).grown_for(&p, 1.3);
                        bound =
                            Some(BoundModel::new(&bb, cap, f, matches!(p.features, PreparedFeatures::Sparse(_)), d.classes, &cfg).unwrap());
                        steps_on_model = 0;
                    }
                    let m = bound.as_mut().unwrap();
                    assert!(m.rows() > p.n, "the sink row is beyond the batch");
                    // Padded as a worker does, or by the model itself.
                    if i % 2 == 1 {
                        p.pad_for(m.capacity()).unwrap();
                        assert!(p.padded.is_some());
                    }
                    let lf = fresh_step(&bf, net_f.as_mut(), &batch, d.classes, &cfg, &hyper);
                    let lb = bound_step(&bb, net_b.as_mut(), m, &p, &hyper);
                    steps_on_model += 1;
                    if recorded && steps_on_model >= 2 {
                        assert!(m.is_recorded(), "{model} {name} batch {i}: the step was not recorded");
                    }
                    let what = format!("{model} {name} sparse={sparse} batch {i} ({} nodes, {} rows)", p.n, m.rows());
                    assert!(lf.is_finite() && lf > 0.0, "{what}: loss {lf}");
                    assert!((lf - lb).abs() <= tol * lf.abs(), "{what}: loss {lb} rebound vs {lf} built");
                    let (wf, wb) = (weights(&bf, net_f.as_mut()), weights(&bb, net_b.as_mut()));
                    let scale = wf.iter().fold(1e-3f64, |m, x| m.max(x.abs()));
                    let worst = wf.iter().zip(&wb).fold(0f64, |m, (x, y)| m.max((x - y).abs() / scale));
                    assert!(worst <= tol, "{what}: weights differ by {worst:e} of their scale");
                }
            }
        }
    }
}

#[test]
fn rebound_model_trains_as_a_model_built_per_batch_cpu() {
    // The weighted loss's 1/n is folded into f32 weights: rounding at 1e-7 of the weights' f32.
    rebound_trains_as_fresh(CpuBackend::<f64>::new, 1e-6, false);
}

#[test]
fn rebound_model_trains_as_a_model_built_per_batch_gpu() {
    let Some(gpu) = common::gpu_or_skip("rebound_model_trains_as_a_model_built_per_batch_gpu") else {
        return;
    };
    // f32, atomics in the HP kernels (padding changes the warps' split): rounding only.
    rebound_trains_as_fresh(|| CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap(), 2e-4, true);
}

#[test]
fn a_batch_that_does_not_fit_is_refused_not_truncated() {
    let d = data(false);
    let cfg = default_config("gcn").unwrap();
    let b = CpuBackend::<f32>::new();
    let source = &sources(&d, "gcn")[0].1;
    let p = PreparedBatch::new(source.make(&node_data(&d), d.n(), 0, 0).unwrap(), "gcn").unwrap();
    let small = Capacity { nodes: p.n - 1, edges: p.matrix.s.nnz(), feature_nnz: 0, later: 0 };
    let mut m = BoundModel::new(&b, small, d.features.cols(), false, d.classes, &cfg).unwrap();
    assert!(!m.capacity().holds(&p));
    let err = m.bind(&b, &p).unwrap_err().to_string();
    assert!(err.contains("does not fit"), "{err}");
    // BatchNorm would see the padded rows: refused, the caller builds per batch.
    let bn = ModelConfig { batch_norm: true, ..cfg };
    assert!(BoundModel::new(&b, small, d.features.cols(), false, d.classes, &bn).is_err());
}

#[test]
fn seeded_sampled_runs_on_the_rebound_model_repeat_exactly() {
    use tcgnn::sample::{PrefetchConfig, SampledTraining};
    use tcgnn::task::node::{TrainConfig, Trainer};
    let d = data(true);
    let cfg = ModelConfig { seed: 9, ..default_config("sage").unwrap() };
    let run = || {
        let (_, source) = sources(&d, "sage").swap_remove(0);
        let sampled =
            SampledTraining::new(source, node_data(&d), d.n(), 3, PrefetchConfig { workers: 2, ahead: 1 }, cfg, d.classes).unwrap();
        let mut t =
            Trainer::new(Arc::new(CpuBackend::<f32>::new()), &d, &cfg, &TrainConfig { epochs: 4, ..TrainConfig::default() }).unwrap();
        t.set_epoch_steps(Box::new(sampled));
        t.fit(4, |_| {}).unwrap();
        let times = t.epoch_steps().unwrap().summary();
        assert!(times.contains("12 of 12 batches on one rebound model"), "{times}");
        // The first batches were made before the model existed; the later ones were padded by the workers.
        assert!(!times.contains(", 0 padded by the workers"), "{times}");
        t.weights().unwrap().into_iter().flat_map(|(_, m)| m.data).collect::<Vec<f32>>()
    };
    assert_eq!(run(), run());
}
