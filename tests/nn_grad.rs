//! Every layer's backward against central finite differences in f64, through whole models (so
//! every layer, ReLU, dropout and the loss are on the path), on small graphs with the shapes
//! that break backward passes: a directed graph (Âᵀ ≠ Â), an isolated node, one huge row.

mod common;

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::backend::{Backend, TEST_BIT, TRAIN_BIT, VAL_BIT};
use tcgnn::nn::input::{HostFeatures, InputFeatures};
use tcgnn::nn::{CpuBackend, ModelConfig, ModelKind, Net};
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
fn loss(b: &B, net: &mut Net<B>, input: &mut InputFeatures<B>, p: &Problem, labels: &<B as Backend>::Labels) -> f64 {
    let n_train = p.bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    let logits = net.forward(b, input, true).unwrap();
    let (r, c) = B::shape(logits);
    let mut d = b.matrix(r, c).unwrap();
    let mut s = b.stats().unwrap();
    b.cross_entropy(logits, labels, 1.0 / n_train as f32, &mut d, &mut s).unwrap();
    b.read_stats(&s).unwrap().loss
}

fn check_model(kind: ModelKind, sparse: bool, dropout: f32) {
    let p = problem(23, 6, 3, sparse, 11);
    let b = Arc::new(B::new());
    let cfg = ModelConfig { kind, layers: 2, hidden: 5, dropout, seed: 3 };
    let mut net = Net::new(&*b, &p.graph, &p.features, p.classes, &cfg).unwrap();
    let mut input = InputFeatures::new(&*b, &p.features).unwrap();
    let labels = b.labels(&p.labels, &p.bits).unwrap();
    b.begin_step().unwrap(); // fixes the dropout masks for every evaluation below
    // Zero biases put a ReLU exactly at its kink wherever a row's input is all zero (an isolated
    // node whose features were all dropped): a finite difference there measures half a slope.
    let mut rng = SplitMix64::new(77);
    for q in net.params() {
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
        net.backward(&*b, &input, &d).unwrap();
    }
    let grads: Vec<Vec<f64>> = net.params().iter().map(|q| q.grad.data.clone()).collect();
    let h = 1e-6;
    let mut worst = 0.0f64;
    for (pi, g) in grads.iter().enumerate() {
        for (i, &gi) in g.iter().enumerate() {
            let set = |net: &mut Net<B>, v: f64| net.params()[pi].value.data[i] = v;
            let orig = net.params()[pi].value.data[i];
            set(&mut net, orig + h);
            let up = loss(&b, &mut net, &mut input, &p, &labels);
            set(&mut net, orig - h);
            let down = loss(&b, &mut net, &mut input, &p, &labels);
            set(&mut net, orig);
            let fd = (up - down) / (2.0 * h);
            let err = (fd - gi).abs() / (1e-6 + fd.abs().max(gi.abs()));
            assert!(err < 1e-4 || (fd - gi).abs() < 1e-8, "{kind:?} sparse={sparse} param {pi} [{i}]: analytic {gi} vs finite difference {fd}");
            worst = worst.max(err);
        }
    }
    assert!(grads.iter().flatten().any(|&v| v.abs() > 1e-6), "all gradients vanish: the check proves nothing");
    println!("{kind:?} sparse={sparse} dropout={dropout}: {} gradients, worst relative error {worst:.1e}", grads.iter().map(Vec::len).sum::<usize>());
}

#[test]
fn gcn_gradients_dense_features() {
    check_model(ModelKind::Gcn, false, 0.0);
}

#[test]
fn gcn_gradients_sparse_features_with_dropout() {
    check_model(ModelKind::Gcn, true, 0.4);
}

#[test]
fn agnn_gradients_dense_features() {
    check_model(ModelKind::Agnn, false, 0.0);
}

#[test]
fn agnn_gradients_sparse_features_with_dropout() {
    check_model(ModelKind::Agnn, true, 0.3);
}

#[test]
fn three_layer_gcn_gradients() {
    let p = problem(17, 4, 2, false, 5);
    let b = B::new();
    let cfg = ModelConfig { kind: ModelKind::Gcn, layers: 3, hidden: 3, dropout: 0.2, seed: 9 };
    let mut net = Net::new(&b, &p.graph, &p.features, p.classes, &cfg).unwrap();
    let mut input = InputFeatures::new(&b, &p.features).unwrap();
    let labels = b.labels(&p.labels, &p.bits).unwrap();
    b.begin_step().unwrap();
    let base = loss(&b, &mut net, &mut input, &p, &labels);
    assert!(base.is_finite());
}

