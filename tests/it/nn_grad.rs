//! Every layer's backward against central finite differences in f64, through whole models (so
//! every layer, ReLU, dropout and the loss are on the path), on small graphs with the shapes
//! that break backward passes: a directed graph (Âᵀ ≠ Â), an isolated node, one huge row.

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::backend::{Backend, TEST_BIT, TRAIN_BIT, VAL_BIT};
use tcgnn::nn::input::{HostFeatures, InputFeatures};
use tcgnn::nn::models::{self, Model, default_config};
use tcgnn::nn::{CpuBackend, ModelConfig};
use tcgnn::ops::nn::cross_entropy::CrossEntropyOp;
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

type B = CpuBackend<f64>;

/// A directed graph with an isolated node (node 0: no in- or out-edges) and node 1 pointing at
/// a third of the others.
fn awkward_graph(n: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 2..n as u32 {
        for _ in 0..rng.below(4) {
            let c = 2 + rng.below(n as u64 - 2) as u32;
            t.push((r, c, 1.0));
        }
    }
    for c in (2..n as u32).step_by(3) {
        t.push((1, c, 1.0));
    }
    pattern(&Csr::from_triplets(n, n, &t).unwrap().canonical())
}

struct Problem {
    graph: Csr,
    features: HostFeatures,
    labels: Vec<i32>,
    bits: Vec<u8>,
    classes: usize,
}

fn problem(n: usize, f: usize, classes: usize, sparse: bool, seed: u64) -> Problem {
    let graph = awkward_graph(n, seed);
    let mut rng = SplitMix64::new(seed + 1);
    let features = if sparse {
        let mut t = Vec::new();
        for r in 0..n as u32 {
            for _ in 0..1 + rng.below(3) {
                t.push((r, rng.below(f as u64) as u32, rng.uniform(0.1, 1.0)));
            }
        }
        HostFeatures::Sparse(Csr::from_triplets(n, f, &t).unwrap().canonical())
    } else {
        HostFeatures::Dense(Matrix::random(n, f, seed + 2))
    };
    let labels = (0..n).map(|_| rng.below(classes as u64) as i32).collect();
    let bits = (0..n).map(|i| [TRAIN_BIT, TRAIN_BIT, VAL_BIT, TEST_BIT][i % 4]).collect();
    Problem { graph, features, labels, bits, classes }
}

/// The training loss with the current parameters (dropout masks fixed by the step counter).
fn loss(b: &B, net: &mut dyn Model<B>, input: &mut InputFeatures<B>, p: &Problem, labels: &<B as Backend>::Labels) -> f64 {
    let n_train = p.bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    let logits = net.forward(b, input, true).unwrap();
    let (r, c) = B::shape(logits);
    let mut d = b.matrix(r, c).unwrap();
    let mut s = b.stats().unwrap();
    b.cross_entropy(logits, labels, 1.0 / n_train as f32, &mut d, &mut s).unwrap();
    b.read_stats(&s).unwrap().loss
}

/// A small config of model `name`: 2 layers of width 5 (2 heads where it has heads).
pub fn small(name: &str, dropout: f32) -> ModelConfig {
    let d = default_config(name).unwrap();
    ModelConfig { layers: 2, hidden: 5, heads: d.heads.min(2), dropout, seed: 3, ..d }
}

fn check_model(cfg: ModelConfig, sparse: bool) {
    let p = problem(23, 6, 3, sparse, 11);
    let b = Arc::new(B::new());
    let (kind, dropout) = (cfg.model, cfg.dropout);
    let mut net = models::build(&*b, &p.graph, p.features.cols(), p.classes, &cfg).unwrap();
    let mut input = InputFeatures::new(&*b, &p.features).unwrap();
    let labels = b.labels(&p.labels, &p.bits).unwrap();
    b.begin_step().unwrap(); // fixes the dropout masks for every evaluation below
    // Zero biases put a ReLU exactly at its kink wherever a row's input is all zero (an isolated
    // node whose features were all dropped): a finite difference there measures half a slope.
    let mut rng = SplitMix64::new(77);
    for (_, q) in net.params() {
        q.value.data.iter_mut().for_each(|v| *v += rng.uniform(-0.1, 0.1) as f64);
    }
    // Analytic gradients.
    let n_train = p.bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    {
        let logits = net.forward(&*b, &mut input, true).unwrap();
        let (r, c) = B::shape(logits);
        let mut d = b.matrix(r, c).unwrap();
        let mut s = b.stats().unwrap();
        b.cross_entropy(logits, &labels, 1.0 / n_train as f32, &mut d, &mut s).unwrap();
        net.backward(&*b, &mut input, &mut d).unwrap();
    }
    let grads: Vec<Vec<f64>> = net.params().iter().map(|(_, q)| q.grad.data.clone()).collect();
    let h = 1e-6;
    let mut worst = 0.0f64;
    for (pi, g) in grads.iter().enumerate() {
        for (i, &gi) in g.iter().enumerate() {
            let set = |net: &mut dyn Model<B>, v: f64| net.params()[pi].1.value.data[i] = v;
            let orig = net.params()[pi].1.value.data[i];
            set(&mut *net, orig + h);
            let up = loss(&b, &mut *net, &mut input, &p, &labels);
            set(&mut *net, orig - h);
            let down = loss(&b, &mut *net, &mut input, &p, &labels);
            set(&mut *net, orig);
            let fd = (up - down) / (2.0 * h);
            let err = (fd - gi).abs() / (1e-6 + fd.abs().max(gi.abs()));
            assert!(
                err < 1e-4 || (fd - gi).abs() < 1e-8,
                "{kind} sparse={sparse} param {} [{i}]: analytic {gi} vs finite difference {fd}",
                net.params()[pi].0
            );
            worst = worst.max(err);
        }
    }
    assert!(grads.iter().flatten().any(|&v| v.abs() > 1e-6), "all gradients vanish: the check proves nothing");
    println!(
        "{kind} sparse={sparse} dropout={dropout}: {} gradients, worst relative error {worst:.1e}",
        grads.iter().map(Vec::len).sum::<usize>()
    );
}

#[test]
fn gcn_gradients_dense_features() {
    check_model(small("gcn", 0.0), false);
}

#[test]
fn gcn_gradients_sparse_features_with_dropout() {
    check_model(small("gcn", 0.4), true);
}

#[test]
fn agnn_gradients_dense_features() {
    check_model(small("agnn", 0.0), false);
}

#[test]
fn agnn_gradients_sparse_features_with_dropout() {
    check_model(small("agnn", 0.3), true);
}

#[test]
fn agnn_fused_attention_gradients() {
    // --variant: the fused attention op in place of SDDMM, softmax and SpMMs.
    check_model(ModelConfig { variant: true, ..small("agnn", 0.3) }, true);
}

#[test]
fn gat_gradients_dense_features() {
    check_model(small("gat", 0.0), false);
}

#[test]
fn gat_gradients_sparse_features_with_dropout() {
    // Feature, hidden and attention dropout, masks fixed by the step counter.
    check_model(small("gat", 0.3), true);
}

#[test]
fn gat_unfused_attention_gradients() {
    // --variant: the unfused per-head ops (the default above is the fused op, its masks
    // regenerated from the step counter in the backward).
    check_model(ModelConfig { variant: true, ..small("gat", 0.0) }, false);
    check_model(ModelConfig { variant: true, ..small("gat", 0.3) }, true);
}

#[test]
fn three_layer_gat_gradients_mean_heads() {
    // Three layers (two hidden, ELU between) and an output layer averaging 3 heads: the mean
    // path of GatConv, which the 1-head default output layer leaves untested.
    use tcgnn::nn::gat_conv::{GatConv, GatGraph, GatShape};
    use tcgnn::nn::operand::Operand;
    let cfg = ModelConfig { layers: 3, ..small("gat", 0.2) };
    check_model(cfg, false);
    // The mean of 3 heads on its own, against finite differences of sum(out ⊙ w).
    let p = problem(19, 4, 3, false, 9);
    let b = B::new();
    let g = GatGraph::new(&b, &p.graph).unwrap();
    let mut rng = SplitMix64::new(5);
    let mut conv = GatConv::new(&b, &g, GatShape { rows: 19, fan_in: 4, heads: 3, dim: 5, concat: false }, 0.0, 1, &mut rng).unwrap();
    let x = b
        .upload(match &p.features {
            tcgnn::nn::input::HostFeatures::Dense(m) => m,
            _ => unreachable!(),
        })
        .unwrap();
    let w = b.upload(&Matrix::random(19, 5, 4)).unwrap();
    let objective = |conv: &mut GatConv<B>| -> f64 {
        let out = conv.forward(&b, &g, &Operand::Dense(&x), true).unwrap();
        out.data.iter().zip(&w.data).map(|(a, c)| a * c).sum()
    };
    objective(&mut conv);
    conv.backward(&b, &g, &Operand::Dense(&x), &w, None, false).unwrap();
    let grads: Vec<Vec<f64>> = conv.params().iter().map(|(_, q)| q.grad.data.clone()).collect();
    for (pi, gr) in grads.iter().enumerate() {
        for (i, &gi) in gr.iter().enumerate() {
            let orig = conv.params()[pi].1.value.data[i];
            conv.params()[pi].1.value.data[i] = orig + 1e-6;
            let up = objective(&mut conv);
            conv.params()[pi].1.value.data[i] = orig - 1e-6;
            let down = objective(&mut conv);
            conv.params()[pi].1.value.data[i] = orig;
            let fd = (up - down) / 2e-6;
            assert!(
                (fd - gi).abs() <= 1e-5 * (1.0 + fd.abs()),
                "mean-head GatConv param {pi} [{i}]: analytic {gi} vs finite difference {fd}"
            );
        }
    }
}

#[test]
fn three_layer_gcn_gradients() {
    let p = problem(17, 4, 2, false, 5);
    let b = B::new();
    let cfg = ModelConfig { layers: 3, hidden: 3, dropout: 0.2, seed: 9, ..default_config("gcn").unwrap() };
    let mut net = models::build(&b, &p.graph, p.features.cols(), p.classes, &cfg).unwrap();
    let mut input = InputFeatures::new(&b, &p.features).unwrap();
    let labels = b.labels(&p.labels, &p.bits).unwrap();
    b.begin_step().unwrap();
    let base = loss(&b, &mut *net, &mut input, &p, &labels);
    assert!(base.is_finite());
}

#[test]
fn sage_gradients_dense_features() {
    check_model(small("sage", 0.0), false);
}

#[test]
fn sage_gradients_sparse_features_with_dropout() {
    check_model(small("sage", 0.4), true);
}

#[test]
fn sage_normalized_gradients() {
    check_model(ModelConfig { variant: true, ..small("sage", 0.2) }, false);
}

#[test]
fn gin_gradients_fixed_eps() {
    check_model(small("gin", 0.0), false);
}

#[test]
fn gin_gradients_learnable_eps() {
    check_model(ModelConfig { variant: true, ..small("gin", 0.0) }, false);
}

#[test]
fn gin_gradients_sparse_features_with_dropout() {
    check_model(ModelConfig { variant: true, ..small("gin", 0.3) }, true);
}

/// Three layers, so the middle one is hidden -> hidden and takes the residual.
fn deep(name: &str, batch_norm: bool, residual: bool) -> ModelConfig {
    ModelConfig { layers: 3, batch_norm, residual, ..small(name, 0.2) }
}

#[test]
fn gcn_gradients_batch_norm_and_residual() {
    check_model(deep("gcn", true, true), false);
    check_model(deep("gcn", true, false), true);
    check_model(deep("gcn", false, true), false);
}

#[test]
fn sage_gradients_batch_norm_and_residual() {
    check_model(deep("sage", true, true), false);
    check_model(ModelConfig { variant: true, ..deep("sage", false, true) }, true);
}

#[test]
fn gin_gradients_batch_norm_and_residual() {
    check_model(ModelConfig { variant: true, ..deep("gin", true, true) }, false);
    check_model(deep("gin", true, false), true);
}

#[test]
fn eight_layer_residual_gcn_gradients() {
    check_model(ModelConfig { layers: 8, hidden: 4, ..deep("gcn", true, true) }, false);
}

#[test]
fn unsupported_options_are_refused() {
    let p = problem(17, 4, 2, false, 5);
    let b = B::new();
    let refused = |cfg: ModelConfig| match models::build(&b, &p.graph, p.features.cols(), p.classes, &cfg) {
        Ok(_) => panic!("{cfg:?} was accepted"),
        Err(e) => e.to_string(),
    };
    let e = refused(ModelConfig { residual: true, ..small("gcn", 0.0) });
    assert!(e.contains("--residual") && e.contains("3 layers"), "{e}");
    let e = refused(ModelConfig { layers: 1, batch_norm: true, ..small("sage", 0.0) });
    assert!(e.contains("--batch-norm"), "{e}");
    let e = refused(ModelConfig { variant: true, ..small("gcn", 0.0) });
    assert!(e.contains("--variant"), "{e}");
    let e = refused(ModelConfig { batch_norm: true, ..small("agnn", 0.0) });
    assert!(e.contains("agnn") && e.contains("--batch-norm"), "{e}");
}
