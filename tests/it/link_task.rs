//! Link prediction (`tcgnn::task::link`): the split (disjoint parts, nothing of validation or
//! test in the message-passing graph, the split file round trip and its refusals), the metrics
//! against hand-computed cases, the dot decoder's gradient against finite differences in f64,
//! the CPU negative sampler against the GPU's bit for bit, and a whole training step on the GPU
//! against the CPU (the GPU tests skip without one). Bad command-line input at the end.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::models::default_config;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, EdgeLayout};
use tcgnn::ops::backend::Side;
use tcgnn::ops::nn::bce_logits::BceLogitsOp;
use tcgnn::ops::nn::negative_sample::{EMPTY, NegativeSampleOp, negative_sample_cpu};
use tcgnn::ops::{Impl, Precision};
use tcgnn::shared::rng::negative_stream_key;
use tcgnn::task::link::decoder::{Decoder, DecoderKind};
use tcgnn::task::link::metric::{LinkMetrics, hits_at_k, roc_auc};
use tcgnn::task::link::pairs::PairSet;
use tcgnn::task::link::split::{LinkSplit, Pair, has_edge, symmetric_graph, undirected_edges};
use tcgnn::task::link::train::{LinkConfig, LinkTrainer};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

use crate::common::{datasets_dir, gpu_or_skip, random_graph};

fn norm(p: Pair) -> Pair {
    [p[0].min(p[1]), p[0].max(p[1])]
}

/// A random graph with a few self-loops and one-directional entries (the split must see each
/// undirected edge once).
fn test_graph(n: usize, deg: usize, seed: u64) -> Csr {
    let g = random_graph(n, deg, 7, seed);
    let mut t: Vec<(u32, u32, f32)> = Vec::new();
    for u in 0..n {
        for (v, _) in g.row(u) {
            t.push((u as u32, v, 1.0));
        }
    }
    t.push((3, 3, 1.0));
    Csr::from_triplets(n, n, &t).unwrap()
}

fn check_split(g: &Csr, s: &LinkSplit) {
    let edges = undirected_edges(g);
    let e = edges.len();
    assert_eq!(s.val_pos.len(), (0.05 * e as f64) as usize);
    assert_eq!(s.test_pos.len(), (0.10 * e as f64) as usize);
    assert_eq!(s.train.len() + s.val_pos.len() + s.test_pos.len(), e);
    let (tr, va, te): (HashSet<Pair>, HashSet<Pair>, HashSet<Pair>) = (
        s.train.iter().map(|&p| norm(p)).collect(),
        s.val_pos.iter().map(|&p| norm(p)).collect(),
        s.test_pos.iter().map(|&p| norm(p)).collect(),
    );
    assert_eq!(tr.len() + va.len() + te.len(), e, "a part repeats an edge");
    assert!(tr.is_disjoint(&va) && tr.is_disjoint(&te) && va.is_disjoint(&te), "parts overlap");
    let union: HashSet<Pair> = tr.iter().chain(&va).chain(&te).copied().collect();
    assert_eq!(union, edges.iter().copied().collect::<HashSet<_>>(), "the parts are not the graph's edges");
    // The message-passing graph: the training edges both ways, nothing else.
    let mp = s.message_passing_graph().unwrap();
    assert_eq!(mp.nnz(), 2 * s.train.len());
    for &[u, v] in &s.train {
        assert!(has_edge(&mp, u, v) && has_edge(&mp, v, u));
    }
    for &[u, v] in s.val_pos.iter().chain(&s.test_pos) {
        assert!(!has_edge(&mp, u, v) && !has_edge(&mp, v, u), "held-out edge ({u}, {v}) in the message-passing graph");
    }
    // Negatives: non-edges of distinct nodes, as many as positives, distinct across val / test.
    let full = symmetric_graph(g.n_rows(), &edges).unwrap();
    assert_eq!(s.val_neg.len(), s.val_pos.len());
    assert_eq!(s.test_neg.len(), s.test_pos.len());
    let mut negs = HashSet::new();
    for &[u, v] in s.val_neg.iter().chain(&s.test_neg) {
        assert!(u != v && !has_edge(&full, u, v), "negative ({u}, {v}) is an edge");
        assert!(negs.insert(norm([u, v])), "negative ({u}, {v}) twice");
    }
}

#[test]
fn split_is_disjoint_and_holds_out_validation_and_test_edges() {
    for (n, deg, seed) in [(300, 6, 1), (57, 3, 2)] {
        let g = test_graph(n, deg, seed);
        let s = LinkSplit::new(&g, seed).unwrap();
        check_split(&g, &s);
        assert_eq!(LinkSplit::new(&g, seed).unwrap(), s, "the split is not a function of its seed");
        assert_ne!(LinkSplit::new(&g, seed + 1).unwrap().val_pos, s.val_pos, "another seed gave the same split");
    }
    let cora = datasets_dir().join("cora.mtx.gz");
    if cora.exists() {
        let g = tcgnn::graph::source::load(cora.to_str().unwrap()).unwrap();
        let s = LinkSplit::new(&g, 0).unwrap();
        check_split(&g, &s);
        assert_eq!(s.train.len() + s.val_pos.len() + s.test_pos.len(), 5278, "cora has 5278 undirected edges");
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcgnn-link-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn split_file_round_trips_and_refuses_another_graph() {
    let g = test_graph(200, 5, 3);
    let s = LinkSplit::new(&g, 9).unwrap();
    let dir = scratch("split");
    let p = dir.join("g.split");
    s.write(&p).unwrap();
    assert_eq!(LinkSplit::read(&p, &g).unwrap(), s);
    let err = |path: &std::path::Path, graph: &Csr| LinkSplit::read(path, graph).unwrap_err().to_string();
    // Another graph: other node count, or the same nodes with other edges.
    let e = err(&p, &test_graph(201, 5, 3));
    assert!(e.contains("201") && e.contains("g.split:"), "{e}");
    let e = err(&p, &test_graph(200, 5, 4));
    assert!(e.contains("another graph") || e.contains("edges"), "{e}");
    // Edited files: each refused naming the line.
    let text = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let train_at = lines.iter().position(|l| l.starts_with("train ")).unwrap();
    let edit = |name: &str, f: &dyn Fn(&mut Vec<String>)| {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        f(&mut l);
        let q = dir.join(name);
        std::fs::write(&q, l.join("\n") + "\n").unwrap();
        err(&q, &g)
    };
    let e = edit("trunc", &|l| l.truncate(l.len() - 3));
    assert!(e.contains("truncated"), "{e}");
    let e = edit("range", &|l| l[train_at + 1] = "0 200".into());
    assert!(e.contains("out of range") && e.contains(&format!(":{}:", train_at + 2)), "{e}");
    let e = edit("dup", &|l| l[train_at + 2] = l[train_at + 1].clone());
    assert!(e.contains("twice"), "{e}");
    let e = edit("self", &|l| l[train_at + 1] = "5 5".into());
    assert!(e.contains("itself"), "{e}");
    let e = edit("header", &|l| l[0] = "something else".into());
    assert!(e.contains("not a tcgnn link split"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn split_refuses_graphs_without_enough_edges() {
    let empty = Csr::new(5, 5, vec![0; 6], vec![], vec![]).unwrap();
    let e = LinkSplit::new(&empty, 0).unwrap_err().to_string();
    assert!(e.contains("no edges"), "{e}");
    // Only self-loops: no edge to predict either.
    let loops = Csr::from_triplets(3, 3, &[(0, 0, 1.0), (1, 1, 1.0)]).unwrap();
    assert!(LinkSplit::new(&loops, 0).unwrap_err().to_string().contains("no edges"));
    // 10 edges: 5% of them is no validation edge.
    let path: Vec<(u32, u32, f32)> = (0..10).map(|i| (i, i + 1, 1.0)).collect();
    let e = LinkSplit::new(&Csr::from_triplets(11, 11, &path).unwrap(), 0).unwrap_err().to_string();
    assert!(e.contains("empty"), "{e}");
}

#[test]
fn metrics_match_hand_computed_cases() {
    // AUC: 6 (pos, neg) pairs; 0.9 beats both, 0.5 ties 0.5 (a half) and beats 0.1, 0.3 beats
    // 0.1 only: (2 + 1.5 + 1) / 6.
    let auc = roc_auc(&[0.9, 0.5, 0.3], &[0.5, 0.1]).unwrap();
    assert!((auc - 0.75).abs() < 1e-12, "{auc}");
    assert_eq!(roc_auc(&[2.0, 3.0], &[1.0, 0.0, -1.0]).unwrap(), 1.0);
    assert_eq!(roc_auc(&[0.0], &[1.0]).unwrap(), 0.0);
    assert_eq!(roc_auc(&[1.0, 1.0], &[1.0]).unwrap(), 0.5);
    // Hits@K (OGB): the K-th highest negative is the threshold, positives strictly above count.
    let (pos, neg) = ([0.9, 0.7, 0.6, 0.1], [0.8, 0.6, 0.4, 0.2]);
    assert_eq!(hits_at_k(&pos, &neg, 1).unwrap(), 0.25); // above 0.8: 0.9
    assert_eq!(hits_at_k(&pos, &neg, 2).unwrap(), 0.5); // above 0.6 (0.6 itself does not count)
    assert_eq!(hits_at_k(&pos, &neg, 4).unwrap(), 0.75); // above 0.2
    assert_eq!(hits_at_k(&pos, &neg, 5).unwrap(), 1.0); // fewer than K negatives: OGB's 1
    let m = LinkMetrics::of(&pos, &neg).unwrap();
    assert_eq!(m.hits, [1.0, 1.0, 1.0]);
    assert!(roc_auc(&[], &[1.0]).is_err() && hits_at_k(&[f32::NAN], &[1.0], 1).is_err());
}

/// Random embeddings, positives and negatives on `n` nodes.
fn decoder_problem(n: usize, d: usize, seed: u64) -> (Matrix, Vec<Pair>, Vec<Pair>) {
    let mut rng = SplitMix64::new(seed);
    let z = Matrix::from_vec(n, d, rng.vec_f32(n * d)).unwrap();
    let mut all: Vec<Pair> = Vec::new();
    let mut seen = HashSet::new();
    while all.len() < 3 * n {
        let p = [rng.below(n as u64) as u32, rng.below(n as u64) as u32];
        // Both directions of a pair and self-pairs on purpose: the backward must add both ends.
        if seen.insert(p) {
            all.push(p);
        }
    }
    let neg = all.split_off(all.len() / 2);
    (z, all, neg)
}

/// Mean BCE of the decoder's scores with `z` and the decoder parameters `params` (when given;
/// else its own initial ones), its dL/dz and the parameters' gradients, on the CPU in f64.
fn decoder_loss(
    kind: DecoderKind,
    n: usize,
    d: usize,
    z: &[f64],
    params: Option<&[Vec<f64>]>,
    pos: &[Pair],
    neg: &[Pair],
) -> (f64, Vec<f64>, Vec<Vec<f64>>) {
    let b = CpuBackend::<f64>::new();
    let zd = tcgnn::ops::backend::cpu::HostMat { rows: n, cols: d, data: z.to_vec() };
    let mut set = PairSet::new(&b, n, pos, neg).unwrap();
    let mut dec = Decoder::new(&b, kind, n, d, 7).unwrap();
    if let Some(ps) = params {
        for ((_, p), v) in dec.params().into_iter().zip(ps) {
            p.value.data.clone_from(v);
        }
    }
    dec.score(&b, &mut set, &zd).unwrap();
    let mut grad = b.edges(&set.graph, Side::Forward).unwrap();
    let mut grad_t = b.edges(&set.graph, Side::Transposed).unwrap();
    let mut stats = b.stats().unwrap();
    b.bce_logits(&set.scores, &set.targets, 1.0 / set.len() as f32, &mut grad, &mut stats).unwrap();
    let mut dz = b.matrix(n, d).unwrap();
    dec.backward(&b, &mut set, &zd, &grad, &mut grad_t, &mut dz).unwrap();
    let pg = dec.params().into_iter().map(|(_, p)| p.grad.data.clone()).collect();
    (b.read_stats(&stats).unwrap().loss, dz.data, pg)
}

#[test]
fn decoder_gradients_match_finite_differences() {
    let (z, pos, neg) = decoder_problem(9, 5, 11);
    let (n, d) = (z.rows, z.cols);
    let zf: Vec<f64> = z.data.iter().map(|&v| v as f64).collect();
    for kind in [DecoderKind::Dot, DecoderKind::Mlp] {
        // The decoder's own initial parameters, read once.
        let params: Vec<Vec<f64>> = {
            let b = CpuBackend::<f64>::new();
            let mut dec = Decoder::new(&b, kind, n, d, 7).unwrap();
            dec.params().into_iter().map(|(_, p)| p.value.data.clone()).collect()
        };
        assert_eq!(params.len(), if kind == DecoderKind::Mlp { 4 } else { 0 });
        let (_, gz, gp) = decoder_loss(kind, n, d, &zf, Some(&params), &pos, &neg);
        let h = 1e-6;
        let mut worst = 0f64;
        let mut check = |what: String, analytic: f64, plus: f64, minus: f64| {
            let fd = (plus - minus) / (2.0 * h);
            let err = (analytic - fd).abs() / fd.abs().max(1e-3);
            worst = worst.max(err);
            assert!(err < 1e-6, "{kind:?} {what}: analytic {analytic} vs finite difference {fd}");
        };
        for i in 0..zf.len() {
            let (mut a, mut c) = (zf.clone(), zf.clone());
            a[i] += h;
            c[i] -= h;
            let (lp, lm) =
                (decoder_loss(kind, n, d, &a, Some(&params), &pos, &neg).0, decoder_loss(kind, n, d, &c, Some(&params), &pos, &neg).0);
            check(format!("dz[{i}]"), gz[i], lp, lm);
        }
        for (k, v) in params.iter().enumerate() {
            for i in 0..v.len() {
                let (mut a, mut c) = (params.clone(), params.clone());
                a[k][i] += h;
                c[k][i] -= h;
                let (lp, lm) =
                    (decoder_loss(kind, n, d, &zf, Some(&a), &pos, &neg).0, decoder_loss(kind, n, d, &zf, Some(&c), &pos, &neg).0);
                check(format!("parameter {k} [{i}]"), gp[k][i], lp, lm);
            }
        }
        assert!(gz.iter().any(|&v| v.abs() > 1e-3), "{kind:?}: the gradient is all zero: nothing was tested");
        println!("{kind:?} decoder + BCE: worst relative error against finite differences {worst:.1e}");
    }
}

#[test]
fn negative_sampler_draws_non_edges_deterministically() {
    let g = test_graph(120, 8, 5);
    let full = symmetric_graph(120, &undirected_edges(&g)).unwrap();
    let a = negative_sample_cpu(&full, negative_stream_key(3, 0), 1001).unwrap();
    assert_eq!(a, negative_sample_cpu(&full, negative_stream_key(3, 0), 1001).unwrap());
    assert_ne!(a, negative_sample_cpu(&full, negative_stream_key(3, 1), 1001).unwrap(), "epochs draw alike");
    assert_ne!(a, negative_sample_cpu(&full, negative_stream_key(4, 0), 1001).unwrap(), "seeds draw alike");
    for &[u, v] in &a {
        assert!(u != EMPTY && u != v && !has_edge(&full, u, v), "({u}, {v}) is not a non-edge");
    }
    // A slot's pair does not depend on how many are drawn (a pure function of the slot).
    assert_eq!(&negative_sample_cpu(&full, negative_stream_key(3, 0), 10).unwrap()[..], &a[..10]);
    // A complete graph has no non-edge: every slot stays empty (never an edge passed off).
    let k: Vec<Pair> = (0..6u32).flat_map(|u| (u + 1..6).map(move |v| [u, v])).collect();
    let complete = symmetric_graph(6, &k).unwrap();
    assert!(negative_sample_cpu(&complete, 1, 5).unwrap().iter().all(|p| p[0] == EMPTY));
}

#[test]
fn gpu_negative_sampler_and_bce_match_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_negative_sampler_and_bce_match_cpu") else { return };
    let cuda = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap().with_edge_layout(EdgeLayout::Csr);
    let cpu = CpuBackend::<f32>::new();
    for (n, deg, count, seed) in [(1, 0, 3, 1u64), (97, 5, 1001, 2), (5000, 12, 70_003, 3)] {
        let g = if n == 1 { Csr::new(1, 1, vec![0, 0], vec![], vec![]).unwrap() } else { test_graph(n, deg, seed) };
        let full = symmetric_graph(n, &undirected_edges(&g)).unwrap();
        let key = negative_stream_key(seed, 7);
        let want = cpu.negative_pairs(&cpu.graph(full.clone()).unwrap(), key, count).unwrap();
        let got = cuda.negative_pairs(&cuda.graph(full).unwrap(), key, count).unwrap();
        assert_eq!(got, want, "n {n}: the GPU drew other negatives than the CPU");
    }
    // BCE: odd length, targets +1 / -1 / 0, scores in both tails.
    let len = 1003;
    let mut rng = SplitMix64::new(5);
    let s: Vec<f32> = (0..len).map(|i| rng.uniform(-1.0, 1.0) * if i % 17 == 0 { 60.0 } else { 4.0 }).collect();
    let y: Vec<f32> = (0..len).map(|i| [1.0, -1.0, 0.0][i % 3]).collect();
    let g = &*gpu;
    let (sd, yd) = (tcgnn::gpu::DeviceVec::upload(g, &s).unwrap(), tcgnn::gpu::DeviceVec::upload(g, &y).unwrap());
    let mut gd = tcgnn::gpu::DeviceVec::upload(g, &vec![f32::NAN; len]).unwrap();
    let mut stats = tcgnn::gpu::DeviceVec::upload(g, &[f32::NAN; 4]).unwrap();
    tcgnn::ops::nn::bce_logits::bce_logits(g, &sd, &yd, 1.0 / len as f32, &mut gd, &mut stats).unwrap();
    let s64: Vec<f64> = s.iter().map(|&v| v as f64).collect();
    let y64: Vec<f64> = y.iter().map(|&v| v as f64).collect();
    let mut want = vec![0f64; len];
    let loss = tcgnn::ops::nn::bce_logits::bce_logits_cpu(&s64, &y64, 1.0 / len as f64, &mut want);
    let got = gd.download(g).unwrap();
    assert!(rel_error(&got, &want) < 1e-5, "bce gradient rel. error {:.2e}", rel_error(&got, &want));
    let l = stats.download(g).unwrap()[0] as f64;
    assert!((l - loss).abs() / loss < 1e-5, "bce loss {l} against {loss}");
}

/// One link trainer on `b` for the problem, after `epochs` training epochs: (losses, weights,
/// validation AUC).
fn run_steps<B: tcgnn::nn::Ops + 'static>(
    b: Arc<B>,
    x: &HostFeatures,
    split: &LinkSplit,
    model: &str,
    decoder: DecoderKind,
    epochs: usize,
) -> (Vec<f64>, Vec<Matrix>, f64) {
    let cfg = tcgnn::nn::models::ModelConfig { hidden: 16, dropout: 0.0, seed: 3, ..default_config(model).unwrap() };
    let lcfg = LinkConfig { seed: 5, decoder, ..LinkConfig::default() };
    let mut t = LinkTrainer::new(b, x, split, &cfg, 8, &lcfg).unwrap();
    let losses = (0..epochs).map(|e| t.train_epoch(e).unwrap().0).collect();
    let (val, _) = t.evaluate().unwrap();
    (losses, t.weights().unwrap().into_iter().map(|w| w.1).collect(), val.auc)
}

#[test]
fn gpu_link_step_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_link_step_matches_cpu") else { return };
    let g = test_graph(301, 6, 8);
    let split = LinkSplit::new(&g, 2).unwrap();
    let mut rng = SplitMix64::new(4);
    let x = HostFeatures::Dense(Matrix::from_vec(301, 19, rng.vec_f32(301 * 19)).unwrap());
    for (model, decoder) in [("gcn", DecoderKind::Dot), ("sage", DecoderKind::Dot), ("gcn", DecoderKind::Mlp)] {
        let (wl, ww, wauc) = run_steps(Arc::new(CpuBackend::<f64>::new()), &x, &split, model, decoder, 2);
        let cuda = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap().with_edge_layout(EdgeLayout::Csr);
        let (gl, gw, gauc) = run_steps(Arc::new(cuda), &x, &split, model, decoder, 2);
        for (e, (a, b)) in gl.iter().zip(&wl).enumerate() {
            assert!((a - b).abs() / b.abs() < 1e-5, "{model} {decoder:?} epoch {e}: loss {a} on the GPU, {b} on the CPU");
        }
        for (i, (a, b)) in gw.iter().zip(&ww).enumerate() {
            let bd: Vec<f64> = b.data.iter().map(|&v| v as f64).collect();
            let e = rel_error(&a.data, &bd);
            assert!(e < 4e-5, "{model} {decoder:?}: parameter {i} after two steps rel. error {e:.2e}");
        }
        assert!((gauc - wauc).abs() < 1e-3, "{model} {decoder:?}: validation AUC {gauc} on the GPU, {wauc} on the CPU");
    }
}

#[test]
fn link_training_learns_on_a_community_graph() {
    // Two dense communities, features = community one-hots plus noise: held-out edges (all
    // within a community) must score above random non-edges, half of which lie across. Knowing
    // the communities alone reaches AUC 0.75 (a within-community negative ties with a positive);
    // a model that learned nothing stays at 0.5.
    let n = 200;
    let mut rng = SplitMix64::new(1);
    let mut t = Vec::new();
    for _ in 0..1500 {
        let c = rng.below(2) as u32;
        let (u, v) = (c * 100 + rng.below(100) as u32, c * 100 + rng.below(100) as u32);
        t.push((u, v, 1.0));
    }
    let g = Csr::from_triplets(n, n, &t).unwrap();
    let split = LinkSplit::new(&g, 0).unwrap();
    let x: Vec<f32> = (0..n)
        .flat_map(|i| {
            let c = i / 100;
            (0..8).map(move |j| if j == c { 1.0 } else { 0.0 })
        })
        .zip(rng.vec_f32(n * 8))
        .map(|(a, b)| a + 0.1 * b)
        .collect();
    let x = HostFeatures::Dense(Matrix::from_vec(n, 8, x).unwrap());
    let (losses, _, auc) = run_steps(Arc::new(CpuBackend::<f32>::new()), &x, &split, "gcn", DecoderKind::Dot, 30);
    assert!(losses[29] < losses[0], "the loss did not fall: {losses:?}");
    assert!(auc > 0.65, "validation AUC {auc}");
}

// -- the command line on bad input: clear errors, never a panic --

fn bin() -> String {
    std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string())
}

/// `tcgnn ARGS` in `dir`: (exit code, stderr).
fn tcgnn<S: AsRef<std::ffi::OsStr>>(dir: &std::path::Path, args: &[S]) -> (Option<i32>, String) {
    let o = std::process::Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("TCGNN_DATASETS", dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn refuses<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(dir: &std::path::Path, args: &[S], expect: &str) {
    let (code, err) = tcgnn(dir, args);
    assert!(matches!(code, Some(1) | Some(2)), "tcgnn {args:?}: exit {code:?}, stderr:\n{err}");
    assert!(err.contains(expect), "tcgnn {args:?}: '{expect}' not in:\n{err}");
    assert!(!err.contains("panicked"), "tcgnn {args:?} panicked:\n{err}");
}

fn succeeds<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(dir: &std::path::Path, args: &[S]) {
    let (code, err) = tcgnn(dir, args);
    assert_eq!(code, Some(0), "tcgnn {args:?}: {err}");
}

#[test]
fn link_cli_refuses_bad_input() {
    let dir = scratch("cli");
    let empty = Csr::new(6, 6, vec![0; 7], vec![], vec![]).unwrap();
    tcgnn::graph::mtx::write_mtx(dir.join("empty.mtx"), &empty).unwrap();
    tcgnn::graph::mtx::write_mtx(dir.join("g.mtx"), &test_graph(80, 4, 6)).unwrap();
    let train = |extra: &[&str]| -> Vec<String> {
        let base = ["train", "g.mtx", "--task", "link", "--epochs", "2", "--device", "cpu", "--quiet", "--features", "8"];
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    refuses(&dir, &["train", "empty.mtx", "--task", "link", "--device", "cpu", "--quiet"], "no edges");
    refuses(&dir, &train(&["--neg-ratio", "0"]), "--neg-ratio");
    refuses(&dir, &train(&["--embedding", "0"]), "--embedding");
    // A split file of another graph.
    std::fs::write(dir.join("other.split"), "tcgnn-link-split 1\nnodes 5\nedges 1\nseed 0\n").unwrap();
    refuses(&dir, &train(&["--split-file", "other.split"]), "other.split:2");
    // A link model and a node model, then predict with the wrong one and with bad pairs.
    succeeds(&dir, &train(&["--save", "link.safetensors"]));
    succeeds(&dir, &["train", "g.mtx", "--epochs", "2", "--device", "cpu", "--quiet", "--features", "8", "--save", "node.safetensors"]);
    std::fs::write(dir.join("ok.txt"), "0 1\n# a comment\n2,3\n").unwrap();
    std::fs::write(dir.join("range.txt"), "0 1\n0 80\n").unwrap();
    std::fs::write(dir.join("dup.txt"), "0 1\n4 5\n0 1\n").unwrap();
    let predict = |model: &str, pairs: Option<&str>, out: &str| -> Vec<String> {
        let mut v: Vec<String> = ["predict", model, "g.mtx", "--device", "cpu", "--out", out].iter().map(|s| s.to_string()).collect();
        if let Some(p) = pairs {
            v.extend(["--pairs".to_string(), p.to_string()]);
        }
        v
    };
    succeeds(&dir, &predict("link.safetensors", Some("ok.txt"), "scores.csv"));
    let csv = std::fs::read_to_string(dir.join("scores.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.lines().nth(2).unwrap().starts_with("2,3,"), "{csv}");
    refuses(&dir, &predict("link.safetensors", Some("range.txt"), "s.csv"), "range.txt:2");
    refuses(&dir, &predict("link.safetensors", Some("dup.txt"), "s.csv"), "given twice");
    refuses(&dir, &predict("node.safetensors", Some("ok.txt"), "s.csv"), "another task");
    refuses(&dir, &predict("link.safetensors", None, "p.csv"), "--pairs");
    std::fs::remove_dir_all(&dir).ok();
}
