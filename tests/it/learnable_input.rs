//! Learnable node embeddings as a model's input (`tcgnn::nn::embedding`, `--features
//! learnable:D`): the table's gradient (the first layer's dL/dX, computed only for it) against
//! central finite differences in f64 through every model of the registry; link training with
//! it in mini-batches (`--batch-edges`): deterministic, one step per batch, equal to the
//! full-batch epoch when one batch holds every edge, learning a community graph from no
//! features at all; the best-validation rule; the GPU against the CPU on whole batched steps
//! (skips without a GPU); the command line (save and `predict --pairs` round trip, refusals).

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::embedding::{EMBEDDING_NAME, NodeInput, initial_table};
use tcgnn::nn::input::InputFeatures;
use tcgnn::nn::models::{self, Model, ModelConfig, default_config};
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, EdgeLayout};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::link::decoder::DecoderKind;
use tcgnn::task::link::split::LinkSplit;
use tcgnn::task::link::train::{BestBy, LinkConfig, LinkTrainer};
use tcgnn::tensor::rel_error;
use tcgnn::util::rng::SplitMix64;

use crate::common::gpu_or_skip;

type F = CpuBackend<f64>;

/// A directed graph with an isolated node (0) and a hub (1), as `nn_grad`'s.
fn awkward_graph(n: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 2..n as u32 {
        for _ in 0..rng.below(4) {
            t.push((r, 2 + rng.below(n as u64 - 2) as u32, 1.0));
        }
    }
    for c in (2..n as u32).step_by(3) {
        t.push((1, c, 1.0));
    }
    pattern(&Csr::from_triplets(n, n, &t).unwrap().canonical())
}

/// sum(logits ⊙ w) of a training forward (dropout masks fixed by the step counter).
fn objective(b: &F, net: &mut dyn Model<F>, input: &mut InputFeatures<F>, w: &[f64]) -> f64 {
    let logits = net.forward(b, input, true).unwrap();
    logits.data.iter().zip(w).map(|(a, b)| a * b).sum()
}

fn check_table_gradient(cfg: ModelConfig) {
    let (n, d, classes) = (19, 4, 3);
    let g = awkward_graph(n, 5);
    let b = F::new();
    let mut net = models::build(&b, &g, d, classes, &cfg).unwrap();
    let mut input = InputFeatures::<F>::learnable(&b, &initial_table(n, d, cfg.seed).unwrap()).unwrap();
    assert!(input.is_learnable() && input.cols() == d);
    // Off the ReLU kinks that zero biases put rows of an isolated node at.
    let mut rng = SplitMix64::new(77);
    for (_, q) in net.params() {
        q.value.data.iter_mut().for_each(|v| *v += rng.uniform(-0.1, 0.1) as f64);
    }
    let w: Vec<f64> = (0..n * classes).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
    b.begin_step().unwrap();
    objective(&b, &mut *net, &mut input, &w);
    let mut dlogits = tcgnn::ops::backend::cpu::HostMat { rows: n, cols: classes, data: w.clone() };
    // Poisoned: the backward must overwrite it.
    input.params()[0].1.grad.data.iter_mut().for_each(|v| *v = f64::NAN);
    net.backward(&b, &mut input, &mut dlogits).unwrap();
    let grad = input.params()[0].1.grad.data.clone();
    let h = 1e-6;
    let mut worst = 0.0f64;
    for (i, &gi) in grad.iter().enumerate() {
        let orig = input.params()[0].1.value.data[i];
        input.params()[0].1.value.data[i] = orig + h;
        let up = objective(&b, &mut *net, &mut input, &w);
        input.params()[0].1.value.data[i] = orig - h;
        let down = objective(&b, &mut *net, &mut input, &w);
        input.params()[0].1.value.data[i] = orig;
        let fd = (up - down) / (2.0 * h);
        let err = (fd - gi).abs() / (1e-6 + fd.abs().max(gi.abs()));
        assert!(err < 1e-4 || (fd - gi).abs() < 1e-8, "{} row {} col {}: analytic {gi} vs finite difference {fd}", cfg.model, i / d, i % d);
        worst = worst.max(err);
    }
    // Node 0 is isolated, but every model keeps a node's own row (self-loop, root weight, GIN's
    // (1 + eps) x_i, attention over self-loops): its rows get gradient too.
    assert!(grad.iter().filter(|v| v.abs() > 1e-6).count() > n * d / 2, "{}: most gradients vanish: {grad:?}", cfg.model);
    println!("{} dropout {}: {} table gradients, worst relative error {worst:.1e}", cfg.model, cfg.dropout, grad.len());
}

fn small(name: &str, dropout: f32) -> ModelConfig {
    let d = default_config(name).unwrap();
    ModelConfig { layers: 2, hidden: 5, heads: d.heads.min(2), dropout, seed: 3, ..d }
}

#[test]
fn table_gradient_matches_finite_differences_gcn_and_sage() {
    // With hidden dropout: the table itself is never dropped out (OGB's baselines).
    for dropout in [0.0, 0.4] {
        check_table_gradient(small("gcn", dropout));
        check_table_gradient(small("sage", dropout));
    }
    check_table_gradient(ModelConfig { layers: 3, variant: true, ..small("sage", 0.2) });
}

#[test]
fn table_gradient_matches_finite_differences_gin_gat_agnn() {
    check_table_gradient(small("gin", 0.0));
    check_table_gradient(small("gat", 0.3));
    check_table_gradient(small("agnn", 0.2));
}

/// Two communities of 100 nodes, edges only within them: with no node features at all, a
/// learnable input must learn which community each node is in.
fn communities(seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let t: Vec<(u32, u32, f32)> = (0..1500)
        .map(|_| {
            let c = rng.below(2) as u32;
            (c * 100 + rng.below(100) as u32, c * 100 + rng.below(100) as u32, 1.0)
        })
        .collect();
    Csr::from_triplets(200, 200, &t).unwrap()
}

fn trainer<B: tcgnn::nn::Ops + 'static>(b: Arc<B>, split: &LinkSplit, model: &str, lcfg: &LinkConfig) -> LinkTrainer<B> {
    let cfg = ModelConfig { hidden: 16, dropout: 0.0, seed: 3, ..default_config(model).unwrap() };
    LinkTrainer::new(b, NodeInput::Learnable { width: 12 }, split, &cfg, 8, lcfg).unwrap()
}

#[test]
fn batched_link_epochs_with_a_learnable_input() {
    let g = communities(1);
    let split = LinkSplit::new(&g, 0).unwrap();
    let p = split.train.len();
    let k = 100;
    let lcfg = LinkConfig { seed: 5, lr: 0.01, batch_edges: Some(k), ..LinkConfig::default() };
    // One optimiser step per batch, the same losses on a second run.
    let b = Arc::new(CpuBackend::<f32>::new());
    let mut t = trainer(b.clone(), &split, "sage", &lcfg);
    let first = t.train_epoch(0).unwrap();
    assert_eq!(b.steps().unwrap() as usize, p.div_ceil(k), "{p} training edges in batches of {k}");
    let mut again = trainer(Arc::new(CpuBackend::<f32>::new()), &split, "sage", &lcfg);
    assert_eq!(again.train_epoch(0).unwrap(), first);
    // A batch of every edge is the full-batch epoch: the same pairs and step, in f64 (the
    // full-batch dot path sums in another order and scales the loss by 1 / pairs in f64, the
    // batched one by the f32 1 / len the MLP path uses too: 1e-8 apart).
    let whole = LinkConfig { batch_edges: Some(p), ..lcfg };
    let full = LinkConfig { batch_edges: None, ..lcfg };
    let mut a = trainer(Arc::new(CpuBackend::<f64>::new()), &split, "gcn", &whole);
    let mut c = trainer(Arc::new(CpuBackend::<f64>::new()), &split, "gcn", &full);
    for e in 0..2 {
        let (la, lc) = (a.train_epoch(e).unwrap(), c.train_epoch(e).unwrap());
        assert!(la.1 == lc.1 && (la.0 - lc.0).abs() <= 1e-7 * lc.0.abs(), "epoch {e}: {la:?} batched, {lc:?} full");
    }
    for ((name, wa), (_, wc)) in a.weights().unwrap().into_iter().zip(c.weights().unwrap()) {
        let e = rel_error(&wa.data, &wc.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert!(e < 1e-6, "{name} after two epochs: rel. error {e:.2e}");
    }
    // Learning from nothing but the edges: the table is trained (it moves), the held-out
    // within-community edges score above random pairs (half across: AUC 0.75 for knowing the
    // communities alone, 0.5 for nothing learned), and the run reports the epoch of best
    // validation Hits@20.
    let start = t.weights().unwrap().into_iter().find(|w| w.0 == EMBEDDING_NAME).unwrap().1;
    let lcfg = LinkConfig { best_by: BestBy::Hits20, ..lcfg };
    let mut t = trainer(Arc::new(CpuBackend::<f32>::new()), &split, "sage", &lcfg);
    let h = t.fit(Vec::new(), 25, |_, _| Ok(tcgnn::task::Flow::Continue)).unwrap();
    let end = t.weights().unwrap().into_iter().find(|w| w.0 == EMBEDDING_NAME).unwrap().1;
    assert_eq!((end.rows, end.cols), (200, 12));
    let moved = rel_error(&end.data, &start.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
    assert!(moved > 0.1, "the table barely moved ({moved:.2e})");
    let best = h.epochs.iter().map(|e| e.val.hits[0]).fold(f64::MIN, f64::max);
    assert_eq!(h.best_val.hits[0], best);
    assert_eq!(h.epochs.iter().find(|e| e.val.hits[0] == best).unwrap().epoch, h.best_epoch, "the first epoch of the best Hits@20");
    let auc = h.epochs.last().unwrap().val.auc;
    assert!(auc > 0.7, "validation AUC {auc} after 25 epochs");
    assert!(h.epochs.last().unwrap().loss < h.epochs[0].loss);
}

#[test]
fn gpu_batched_link_steps_with_a_learnable_input_match_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_batched_link_steps_with_a_learnable_input_match_cpu") else { return };
    let g = communities(2);
    let split = LinkSplit::new(&g, 1).unwrap();
    for (model, decoder) in [("sage", DecoderKind::Mlp), ("gcn", DecoderKind::Dot), ("gat", DecoderKind::Dot)] {
        let lcfg = LinkConfig { seed: 4, decoder, batch_edges: Some(333), ..LinkConfig::default() };
        let mut c = trainer(Arc::new(CpuBackend::<f64>::new()), &split, model, &lcfg);
        let cuda = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap().with_edge_layout(EdgeLayout::Csr);
        let mut d = trainer(Arc::new(cuda), &split, model, &lcfg);
        for e in 0..2 {
            let (lc, ld) = (c.train_epoch(e).unwrap().0, d.train_epoch(e).unwrap().0);
            assert!((lc - ld).abs() / lc.abs() < 1e-5, "{model} epoch {e}: loss {ld} on the GPU, {lc} on the CPU");
        }
        for ((name, wc), (_, wd)) in c.weights().unwrap().into_iter().zip(d.weights().unwrap()) {
            let e = rel_error(&wd.data, &wc.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
            assert!(e < 5e-5, "{model} {name} after two batched epochs: rel. error {e:.2e}");
        }
    }
}

// -- the command line --

fn bin() -> String {
    std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string())
}

fn tcgnn(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = std::process::Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("TCGNN_DATASETS", dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn refuses(dir: &std::path::Path, args: &[&str], expect: &str) {
    let (code, _, err) = tcgnn(dir, args);
    assert!(matches!(code, Some(1) | Some(2)), "tcgnn {args:?}: exit {code:?}, stderr:\n{err}");
    assert!(err.contains(expect), "tcgnn {args:?}: '{expect}' not in:\n{err}");
    assert!(!err.contains("panicked"), "tcgnn {args:?} panicked:\n{err}");
}

#[test]
fn learnable_input_cli_saves_predicts_and_refuses() {
    let dir = std::env::temp_dir().join(format!("tcgnn-learnable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    tcgnn::graph::mtx::write_mtx(dir.join("g.mtx"), &communities(3)).unwrap();
    tcgnn::graph::mtx::write_mtx(dir.join("small.mtx"), &awkward_graph(30, 1)).unwrap();
    let train = ["train", "g.mtx", "--task", "link", "--epochs", "3", "--device", "cpu", "--quiet"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { train.iter().chain(extra).copied().collect() };
    let (code, out, err) = tcgnn(
        &dir,
        &with(&["--features", "learnable:8", "--batch-edges", "200", "--best-by", "hits20", "--decoder", "mlp", "--save", "m.safetensors"]),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("learnable input 8") && out.contains("best val H@20"), "{out}");
    let saved = tcgnn::task::saved::TensorFile::read(&dir.join("m.safetensors")).unwrap();
    let table = saved.get(EMBEDDING_NAME).expect("the table is saved");
    assert_eq!((table.rows, table.cols), (200, 8));
    std::fs::write(dir.join("pairs.txt"), "0 1\n150 3\n").unwrap();
    let (code, _, err) = tcgnn(&dir, &["predict", "m.safetensors", "g.mtx", "--device", "cpu", "--pairs", "pairs.txt", "--out", "s.csv"]);
    assert_eq!(code, Some(0), "{err}");
    let csv = std::fs::read_to_string(dir.join("s.csv")).unwrap();
    // Nodes 0 and 1 share a community, 150 and 3 do not.
    let score = |l: &str| l.split(',').nth(2).unwrap().parse::<f32>().unwrap();
    let lines: Vec<&str> = csv.lines().skip(1).collect();
    assert!(lines.len() == 2 && lines.iter().all(|l| score(l).is_finite()), "{csv}");
    // A graph of another node count: the table has a row per node of the training graph.
    std::fs::write(dir.join("low.txt"), "0 1\n").unwrap();
    refuses(
        &dir,
        &["predict", "m.safetensors", "small.mtx", "--device", "cpu", "--pairs", "low.txt", "--out", "t.csv"],
        "this graph has 30 nodes",
    );
    refuses(&dir, &["train", "g.mtx", "--epochs", "1", "--device", "cpu", "--quiet", "--features", "learnable:8"], "--task link only");
    refuses(&dir, &with(&["--features", "learnable"]), "learnable:D");
    refuses(&dir, &with(&["--features", "learnable:0"]), "--features");
    refuses(&dir, &with(&["--batch-edges", "0"]), "--batch-edges");
    refuses(&dir, &with(&["--features", "learnable:8", "--sampler", "neighbor"]), "not available with --sampler neighbor");
    refuses(&dir, &with(&["--batch-edges", "100", "--sampler", "neighbor"]), "--batch-size");
    std::fs::remove_dir_all(&dir).ok();
}
