//! Layer-wise inference in node batches (`sample::layerwise`) against the whole model's
//! full-graph forward: the same logits for GCN, SAGE (plain and normalised), GIN and a residual
//! GCN, on the odd shapes, with batches cut small so every graph spans many of them. CPU in
//! f64 (exact but for the f32 rounding of the logits read back), GPU f32 against the CPU f64 reference; and a trainer holding only
//! the parameters scores exactly as the full-graph trainer.

use crate::common;

use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::input::{HostFeatures, InputFeatures};
use tcgnn::nn::models::{self, ModelConfig, default_config};
use tcgnn::nn::{CpuBackend, CudaBackend, Ops};
use tcgnn::ops::{Impl, Precision};
use tcgnn::sample::layerwise::{LayerwiseInference, Targets, score};
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::task::node::train::{TrainConfig, Trainer};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

fn configs() -> Vec<ModelConfig> {
    let with = |name: &str, layers: usize, hidden: usize, residual: bool, variant: bool| ModelConfig {
        layers,
        hidden,
        residual,
        variant,
        seed: 11,
        ..default_config(name).unwrap()
    };
    vec![
        with("gcn", 2, 16, false, false),
        with("gcn", 3, 24, false, false),
        with("gcn", 4, 16, true, false),
        with("sage", 2, 16, false, false),
        with("sage", 3, 12, false, true),
        with("gin", 2, 16, false, false),
    ]
}

/// The full-graph model's evaluation logits with its own parameters.
fn full_logits<B: Ops + 'static>(b: &B, g: &Csr, x: &Matrix, classes: usize, cfg: &ModelConfig) -> (Box<dyn models::Model<B>>, Matrix) {
    let mut net = models::build(b, g, x.cols, classes, cfg).unwrap();
    let mut input = InputFeatures::for_model(b, &HostFeatures::Dense(x.clone()), cfg).unwrap();
    let y = net.forward(b, &mut input, false).unwrap();
    let y = b.download(y).unwrap();
    (net, y)
}

fn labels(n: usize, classes: usize, seed: u64) -> (Vec<i32>, Vec<u8>) {
    let mut rng = SplitMix64::new(seed);
    let labels = (0..n).map(|_| rng.below(classes as u64) as i32).collect();
    let masks = (0..n).map(|_| 1u8 << rng.below(3)).collect();
    (labels, masks)
}

/// Largest |a - b| over the largest |b| (at least 1).
fn rel_err(a: &Matrix, b: &Matrix) -> f64 {
    assert_eq!((a.rows, a.cols), (b.rows, b.cols));
    let scale = b.data.iter().fold(1.0f64, |m, &v| m.max((v as f64).abs()));
    a.data.iter().zip(&b.data).fold(0.0f64, |m, (&x, &y)| m.max((x as f64 - y as f64).abs())) / scale
}

#[test]
fn layerwise_logits_equal_the_full_graph_forward_on_the_cpu() {
    let b = CpuBackend::<f64>::new();
    let classes = 5;
    for (name, g) in common::odd_shapes(3) {
        let g = pattern(&g);
        let x = Matrix::random(g.n_rows(), 13, 21);
        let (lab, masks) = labels(g.n_rows(), classes, 4);
        for cfg in configs() {
            let (mut net, want) = full_logits(&b, &g, &x, classes, &cfg);
            // 1 nonzero per batch (a batch per row), a few dozen, and all in one.
            for batch_edges in [1, 37, 1 << 20] {
                let mut e = LayerwiseInference::new(
                    &b,
                    &g,
                    &x,
                    Targets { classes, labels: lab.clone(), mask_bits: masks.clone() },
                    &cfg,
                    batch_edges,
                )
                .unwrap();
                let got = e.logits(&b, net.as_mut()).unwrap();
                let err = rel_err(&got, &want);
                // Both logits come back as f32 (a Matrix): equal but for a last-bit rounding.
                assert!(
                    err < 1e-6,
                    "{name} {} {}x{} residual {} variant {}, batches of {batch_edges}: error {err:e}",
                    cfg.model,
                    cfg.layers,
                    cfg.hidden,
                    cfg.residual,
                    cfg.variant
                );
                // Twice in a row (the features are kept between evaluations).
                assert_eq!(e.logits(&b, net.as_mut()).unwrap().data, got.data, "{name}: a second evaluation differs");
            }
        }
    }
}

#[test]
fn batches_cover_every_row_once_and_read_every_neighbour() {
    let b = CpuBackend::<f64>::new();
    let g = pattern(&common::random_graph(500, 6, 7, 9));
    let x = Matrix::random(500, 4, 1);
    let (lab, masks) = labels(500, 3, 2);
    let cfg = ModelConfig { seed: 1, ..default_config("gcn").unwrap() };
    let e = LayerwiseInference::new(&b, &g, &x, Targets { classes: 3, labels: lab, mask_bits: masks }, &cfg, 100).unwrap();
    let sizes = e.batch_sizes();
    assert_eq!(sizes.iter().map(|s| s.0).sum::<usize>(), 500, "every row in exactly one batch");
    assert!(sizes.len() > 5, "batches of about 100 nonzeros: got {}", sizes.len());
    assert!(sizes.iter().all(|&(k, n)| k >= 1 && n >= k), "{sizes:?}");
}

#[test]
fn score_counts_the_first_maximum_per_mask() {
    let logits = Matrix::from_vec(4, 3, vec![0.1, 0.9, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 2.0, 5.0, 0.0, 0.0]).unwrap();
    // Predictions 1, 0 (tie: the first), 2, 0.
    let labels = [1, 0, 1, 0];
    let masks = [1, 2, 4, 1 | 4];
    assert_eq!(score(&logits, &labels, &masks), [2.0, 1.0, 1.0]);
}

#[test]
fn a_parameter_only_trainer_with_layerwise_inference_scores_as_the_full_trainer() {
    let data = Dataset::load("sbm:300:4:6", None, &SyntheticNodeData { features: 16, classes: 4, seed: 3 }).unwrap();
    let HostFeatures::Dense(x) = &data.features else { panic!("dense features") };
    let b = std::sync::Arc::new(CpuBackend::<f64>::new());
    let cfg = ModelConfig { layers: 3, hidden: 16, seed: 5, ..default_config("sage").unwrap() };
    let tcfg = TrainConfig { epochs: 5, ..TrainConfig::default() };
    let mut full = Trainer::new(b.clone(), &data, &cfg, &tcfg).unwrap();
    let h = full.fit(5, |_| {}).unwrap();
    let want = h.epochs.last().unwrap();
    let weights = full.weights().unwrap();
    let mut small = Trainer::params_only(b.clone(), &data, &cfg, &tcfg).unwrap();
    small.load_weights(&weights).unwrap();
    let e = LayerwiseInference::new(
        &*b,
        &data.graph,
        x,
        Targets { classes: data.classes, labels: data.labels.clone(), mask_bits: data.mask_bits.clone() },
        &cfg,
        64,
    )
    .unwrap();
    small.set_evaluator(Box::new(e));
    small.evaluate().unwrap();
    let got = small.read(5).unwrap();
    assert_eq!((got.train_acc, got.val_acc, got.test_acc), (want.train_acc, want.val_acc, want.test_acc));
}

#[test]
fn gpu_layerwise_logits_match_the_cpu_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_layerwise_logits_match_the_cpu_reference") else { return };
    let cpu = CpuBackend::<f64>::new();
    let dev = CudaBackend::new(gpu, Precision::F32, Impl::Auto).unwrap();
    let classes = 5;
    for (name, g) in common::odd_shapes(5) {
        let g = pattern(&g);
        let x = Matrix::random(g.n_rows(), 13, 22);
        let (lab, masks) = labels(g.n_rows(), classes, 6);
        for cfg in configs() {
            let (_, want) = full_logits(&cpu, &g, &x, classes, &cfg);
            let mut net = models::build(&dev, &g, x.cols, classes, &cfg).unwrap();
            for batch_edges in [37, 1 << 20] {
                let mut e = LayerwiseInference::new(
                    &dev,
                    &g,
                    &x,
                    Targets { classes, labels: lab.clone(), mask_bits: masks.clone() },
                    &cfg,
                    batch_edges,
                )
                .unwrap();
                let got = e.logits(&dev, net.as_mut()).unwrap();
                let err = rel_err(&got, &want);
                // f32 through up to four layers of products (the 1e-5 of one op, compounded).
                assert!(err < 1e-4, "{name} {} {}x{}, batches of {batch_edges}: error {err:e}", cfg.model, cfg.layers, cfg.hidden);
            }
        }
    }
}
