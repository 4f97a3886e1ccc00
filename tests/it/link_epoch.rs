//! Link prediction's device-resident training step (`ops::nn::pair_dot`,
//! `ops::nn::negative_pattern`): the symmetric pair pattern (both ends of every pair, repeats
//! marked), its scores, loss and gradient against the `PairSet` + SDDMM decoder in f64, the
//! negatives' pattern against the sampler's pairs, and the device's pattern against the CPU's
//! bit for bit (GPU tests skip without one).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, EdgeLayout};
use tcgnn::ops::backend::Side;
use tcgnn::ops::backend::cpu::HostMat;
use tcgnn::ops::nn::bce_logits::BceLogitsOp;
use tcgnn::ops::nn::negative_pattern::{NegativePatternOp, negative_pattern_cpu};
use tcgnn::ops::nn::negative_sample::{EMPTY, negative_sample_cpu};
use tcgnn::ops::nn::pair_dot::{PairDotOp, PairPattern};
use tcgnn::ops::{Impl, Precision};
use tcgnn::shared::rng::negative_stream_key;
use tcgnn::task::link::decoder::{Decoder, DecoderKind};
use tcgnn::task::link::pairs::PairSet;
use tcgnn::task::link::split::{Pair, symmetric_graph, undirected_edges};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

use crate::common::{gpu_or_skip, random_graph};

/// ||a - b|| / ||b|| (the square roots of the sums of squares).
fn rel64(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-300)).sqrt()
}

/// The pairs a pattern holds once each (entries seen from their first end, not repeats).
fn pairs_of(p: &PairPattern) -> Vec<Pair> {
    let mut out = Vec::new();
    for u in 0..p.n {
        for e in p.row_ptr[u] as usize..p.row_ptr[u + 1] as usize {
            if p.keys[e] & 1 == 0 && p.targets[e] != 0.0 {
                out.push([u as u32, p.keys[e] >> 1]);
            }
        }
    }
    out
}

#[test]
fn pair_pattern_keeps_both_ends_and_marks_repeats() {
    // (1, 2) twice, (2, 1) once (another pair), (0, 3) once.
    let p = PairPattern::new(4, &[[1, 2], [0, 3], [2, 1], [1, 2]], -1.0).unwrap();
    assert_eq!(p.row_ptr, vec![0, 1, 4, 7, 8]);
    assert_eq!(p.keys, vec![3 << 1, 2 << 1, 2 << 1, (2 << 1) | 1, 1 << 1, (1 << 1) | 1, (1 << 1) | 1, 1]);
    assert_eq!(p.targets, vec![-1.0, -1.0, 0.0, -1.0, -1.0, -1.0, 0.0, -1.0]);
    assert_eq!(p.distinct, 3);
    assert_eq!(pairs_of(&p), vec![[0, 3], [1, 2], [2, 1]]);
    assert!(PairPattern::new(4, &[[0, 4]], 1.0).unwrap_err().to_string().contains("out of range"));
    assert!(PairPattern::new(4, &[[2, 2]], 1.0).unwrap_err().to_string().contains("itself"));
    let b = CpuBackend::<f32>::new();
    assert!(b.pair_list(4, &[[1, 2], [1, 2]], true).err().unwrap().to_string().contains("given twice"));
}

/// Random z, positives and negatives (distinct, no self-pair; both directions of some pairs).
fn problem(n: usize, d: usize, seed: u64) -> (Matrix, Vec<Pair>, Vec<Pair>) {
    let mut rng = SplitMix64::new(seed);
    let z = Matrix::from_vec(n, d, rng.vec_f32(n * d)).unwrap();
    let mut all: Vec<Pair> = Vec::new();
    let mut seen = HashSet::new();
    while all.len() < 3 * n {
        let p = [rng.below(n as u64) as u32, rng.below(n as u64) as u32];
        if p[0] != p[1] && seen.insert(p) {
            all.push(p);
        }
    }
    let neg = all.split_off(all.len() / 2);
    (z, all, neg)
}

#[test]
fn pair_dot_step_matches_the_pair_set_decoder() {
    let (n, d) = (41, 7);
    let (z, pos, neg) = problem(n, d, 3);
    let b = CpuBackend::<f64>::new();
    let zd = b.upload(&z).unwrap();
    // The reference: one sorted pattern of all pairs, SDDMM, BCE over its entries, two SpMMs.
    let mut set = PairSet::new(&b, n, &pos, &neg).unwrap();
    let mut dec = Decoder::new(&b, DecoderKind::Dot, n, d, 1).unwrap();
    dec.score(&b, &mut set, &zd).unwrap();
    let mut grad = b.edges(&set.graph, Side::Forward).unwrap();
    let mut grad_t = b.edges(&set.graph, Side::Transposed).unwrap();
    let mut stats = b.stats().unwrap();
    b.bce_logits(&set.scores, &set.targets, 1.0 / set.len() as f32, &mut grad, &mut stats).unwrap();
    let want_loss = b.read_stats(&stats).unwrap().loss;
    let mut want_dz = b.matrix(n, d).unwrap();
    dec.backward(&b, &mut set, &zd, &grad, &mut grad_t, &mut want_dz).unwrap();
    // The pair patterns; the negatives with a repeat and a reversed copy added (the repeat is
    // scored once, the reversed pair is a pair of its own).
    let mut neg2 = neg.clone();
    neg2.push(neg[0]);
    let mut p_pos = b.pair_list(n, &pos, true).unwrap();
    let mut p_neg = tcgnn::ops::nn::pair_dot::HostPairs::new(PairPattern::new(n, &neg2, -1.0).unwrap());
    assert_eq!(p_neg.p.distinct, neg.len());
    b.pair_dot(&mut p_pos, &zd).unwrap();
    b.pair_dot(&mut p_neg, &zd).unwrap();
    b.pair_bce(&mut p_pos, &mut p_neg, &mut stats).unwrap();
    let loss = b.read_stats(&stats).unwrap().loss;
    let mut dz = HostMat { rows: n, cols: d, data: vec![f64::NAN; n * d] };
    b.pair_dot_backward(&p_pos, &zd, false, &mut dz).unwrap();
    b.pair_dot_backward(&p_neg, &zd, true, &mut dz).unwrap();
    // The reference scales by 1 / len rounded to f32 (`bce_logits` takes an f32): undone here.
    let r = (1.0 / set.len() as f64) / (1.0 / set.len() as f32) as f64;
    let want_loss = want_loss * r;
    let want_dz: Vec<f64> = want_dz.data.iter().map(|v| v * r).collect();
    assert!((loss - want_loss).abs() < 1e-12 * want_loss.abs(), "loss {loss} against the pair set's {want_loss}");
    let e = rel64(&dz.data, &want_dz);
    assert!(e < 1e-12, "dz rel. error {e:.2e}");
    assert!(want_dz.iter().any(|v| v.abs() > 1e-3), "a zero gradient tests nothing");
    // Both entries of a pair carry its score.
    let (pat, scores, _) = b.read_pairs(&p_pos).unwrap();
    for u in 0..n {
        let row = pat.row_ptr[u] as usize..pat.row_ptr[u + 1] as usize;
        for (&key, &got) in pat.keys[row.clone()].iter().zip(&scores[row]) {
            let c = (key >> 1) as usize;
            let want: f64 = (0..d).map(|k| z.data[u * d + k] as f64 * z.data[c * d + k] as f64).sum();
            assert!((got - want).abs() < 1e-12, "entry ({u}, {c}): {got} against {want}");
        }
    }
}

/// A random graph with every edge in both directions.
fn full_graph(n: usize, deg: usize, seed: u64) -> Csr {
    symmetric_graph(n, &undirected_edges(&random_graph(n, deg, 7, seed))).unwrap()
}

#[test]
fn negative_pattern_holds_the_samplers_pairs_once() {
    // 30 nodes and 400 draws: repeats are certain.
    let full = full_graph(30, 3, 5);
    let key = negative_stream_key(9, 4);
    let p = negative_pattern_cpu(&full, key, 400).unwrap();
    let drawn: Vec<Pair> = negative_sample_cpu(&full, key, 400).unwrap().into_iter().filter(|q| q[0] != EMPTY).collect();
    let want: BTreeSet<Pair> = drawn.iter().copied().collect();
    assert!(want.len() < drawn.len(), "no repeat drawn: the test tests nothing");
    assert_eq!(pairs_of(&p), want.into_iter().collect::<Vec<_>>());
    assert_eq!(p.distinct, pairs_of(&p).len());
    assert_eq!(p.nnz(), 2 * drawn.len());
}

#[test]
fn gpu_negative_pattern_and_pair_dot_match_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_negative_pattern_and_pair_dot_match_cpu") else { return };
    let cuda = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap().with_edge_layout(EdgeLayout::Csr);
    let cpu = CpuBackend::<f64>::new();
    // One node (every slot empty), repeats on a small graph, rows past 32 entries (the warp's
    // bitonic sort) and past the one-block scan (70k nodes), an odd width.
    for (n, deg, count, d, seed) in [(1, 0, 5, 3, 1u64), (30, 3, 400, 19, 2), (300, 6, 20_011, 70, 3), (70_003, 4, 150_001, 8, 4)] {
        let full = if n == 1 { Csr::new(1, 1, vec![0, 0], vec![], vec![]).unwrap() } else { full_graph(n, deg, seed) };
        let key = negative_stream_key(seed, 2);
        let want = negative_pattern_cpu(&full, key, count).unwrap();
        let mut neg = cuda.negative_list(n, count).unwrap();
        // Poison what the kernels write (a run before, with another key, leaves other rows).
        neg.keys = tcgnn::gpu::DeviceVec::upload(&gpu, &vec![u32::MAX - 7; 2 * count]).unwrap();
        neg.targets = tcgnn::gpu::DeviceVec::upload(&gpu, &vec![f32::NAN; 2 * count]).unwrap();
        let g = cuda.graph(full.clone()).unwrap();
        cuda.negative_pattern(&g, negative_stream_key(seed, 1), count, &mut neg).unwrap();
        cuda.negative_pattern(&g, key, count, &mut neg).unwrap();
        let (got, _, _) = cuda.read_pairs(&neg).unwrap();
        assert_eq!(got, want, "n {n}: the device's negative pattern differs from the CPU's");
        assert_eq!(cuda.pair_distinct(&neg).unwrap(), want.distinct);
        // Scores, loss and dz against the CPU in f64, the outputs poisoned.
        let mut rng = SplitMix64::new(seed);
        let z = Matrix::from_vec(n, d, rng.vec_f32(n * d)).unwrap();
        let pos: Vec<Pair> = undirected_edges(&full);
        let (zc, zg) = (cpu.upload(&z).unwrap(), cuda.upload(&z).unwrap());
        let (mut cp, mut cn) = (cpu.pair_list(n, &pos, true).unwrap(), cpu.negative_list(n, count).unwrap());
        cpu.negative_pattern(&cpu.graph(full.clone()).unwrap(), key, count, &mut cn).unwrap();
        let mut gp = cuda.pair_list(n, &pos, true).unwrap();
        for l in [&mut gp, &mut neg] {
            l.scores = tcgnn::gpu::DeviceVec::upload(&gpu, &vec![f32::NAN; l.cap.max(1)]).unwrap();
            l.grad = tcgnn::gpu::DeviceVec::upload(&gpu, &vec![f32::NAN; l.cap.max(1)]).unwrap();
        }
        let (mut cs, mut gs) = (cpu.stats().unwrap(), cuda.stats().unwrap());
        cpu.pair_dot(&mut cp, &zc).unwrap();
        cpu.pair_dot(&mut cn, &zc).unwrap();
        cpu.pair_bce(&mut cp, &mut cn, &mut cs).unwrap();
        cuda.pair_dot(&mut gp, &zg).unwrap();
        cuda.pair_dot(&mut neg, &zg).unwrap();
        cuda.pair_bce(&mut gp, &mut neg, &mut gs).unwrap();
        let mut cdz = cpu.matrix(n, d).unwrap();
        cpu.pair_dot_backward(&cp, &zc, false, &mut cdz).unwrap();
        cpu.pair_dot_backward(&cn, &zc, true, &mut cdz).unwrap();
        let mut gdz = cuda.matrix(n, d).unwrap();
        gdz.poison().unwrap();
        cuda.pair_dot_backward(&gp, &zg, false, &mut gdz).unwrap();
        cuda.pair_dot_backward(&neg, &zg, true, &mut gdz).unwrap();
        for (what, c, g) in [("positives", &cp, &gp), ("negatives", &cn, &neg)] {
            let (_, cs, cg) = cpu.read_pairs(c).unwrap();
            let (_, gs, gg) = cuda.read_pairs(g).unwrap();
            assert!(rel64(&gs, &cs) < 1e-5, "n {n} {what}: scores rel. error {:.2e}", rel64(&gs, &cs));
            assert!(rel64(&gg, &cg) < 1e-5, "n {n} {what}: gradients rel. error {:.2e}", rel64(&gg, &cg));
        }
        let (lc, lg) = (cpu.read_stats(&cs).unwrap().loss, cuda.read_stats(&gs).unwrap().loss);
        assert!((lc - lg).abs() <= 1e-5 * lc.abs().max(1e-3), "n {n}: loss {lg} on the GPU, {lc} on the CPU");
        let got = cuda.download(&gdz).unwrap();
        let gd: Vec<f64> = got.data.iter().map(|&v| v as f64).collect();
        let e = rel64(&gd, &cdz.data);
        assert!(e < 1e-5, "n {n}: dz rel. error {e:.2e}");
    }
}

#[test]
fn gpu_link_epochs_match_cpu_with_the_device_pattern() {
    // 60 nodes, ~150 training edges and 3 negatives per edge an epoch: repeats every epoch, so
    // the device's repeat marks and its pair count (the loss's divisor) are in the comparison.
    // The CPU half runs everywhere (it checks that premise); the GPU half skips without one.
    let g = full_graph(60, 6, 12);
    let split = tcgnn::task::link::split::LinkSplit::new(&g, 1).unwrap();
    let mut rng = SplitMix64::new(8);
    let x = tcgnn::nn::input::HostFeatures::Dense(Matrix::from_vec(60, 13, rng.vec_f32(60 * 13)).unwrap());
    let lcfg = tcgnn::task::link::train::LinkConfig { seed: 6, neg_ratio: 3.0, ..Default::default() };
    let cfg = |model: &str| tcgnn::nn::models::ModelConfig {
        hidden: 16,
        dropout: 0.0,
        seed: 2,
        ..tcgnn::nn::models::default_config(model).unwrap()
    };
    let epochs = |b: &mut dyn FnMut(usize) -> (f64, usize)| (0..4).map(&mut *b).collect::<Vec<_>>();
    let mut wants = Vec::new();
    for model in ["gcn", "sage"] {
        let mut tc =
            tcgnn::task::link::train::LinkTrainer::new(Arc::new(CpuBackend::<f64>::new()), &x, &split, &cfg(model), 8, &lcfg).unwrap();
        let want = epochs(&mut |e| tc.train_epoch(e).unwrap());
        assert!(want.iter().all(|w| w.1 > 0), "{model}: no repeat drawn in some epoch: the test tests less than it says");
        wants.push((want, tc.evaluate().unwrap().0.auc));
    }
    let Some(gpu) = gpu_or_skip("gpu_link_epochs_match_cpu_with_the_device_pattern") else { return };
    for (model, (want, want_auc)) in ["gcn", "sage"].into_iter().zip(wants) {
        let cuda = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap().with_edge_layout(EdgeLayout::Csr);
        let mut tg = tcgnn::task::link::train::LinkTrainer::new(Arc::new(cuda), &x, &split, &cfg(model), 8, &lcfg).unwrap();
        let got = epochs(&mut |e| tg.train_epoch(e).unwrap());
        for (e, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(g.1, w.1, "{model} epoch {e}: {} negatives dropped on the GPU, {} on the CPU", g.1, w.1);
            assert!((g.0 - w.0).abs() <= 1e-5 * w.0.abs(), "{model} epoch {e}: loss {} on the GPU, {} on the CPU", g.0, w.0);
        }
        let auc = tg.evaluate().unwrap().0.auc;
        assert!((auc - want_auc).abs() < 1e-3, "{model}: validation AUC {auc} on the GPU, {want_auc} on the CPU");
    }
}

// -- the command line: --checkpoint / --resume, and bad input --

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tcgnn-link-epoch-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bin() -> String {
    std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string())
}

/// `tcgnn ARGS` in `dir`: (exit code, stderr).
fn tcgnn(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let o = std::process::Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("TCGNN_DATASETS", dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn refuses(dir: &std::path::Path, args: &[&str], expect: &str) {
    let (code, err) = tcgnn(dir, args);
    assert!(matches!(code, Some(1) | Some(2)), "tcgnn {args:?}: exit {code:?}, stderr:\n{err}");
    assert!(err.contains(expect), "tcgnn {args:?}: '{expect}' not in:\n{err}");
    assert!(!err.contains("panicked"), "tcgnn {args:?} panicked:\n{err}");
}

fn succeeds(dir: &std::path::Path, args: &[&str]) {
    let (code, err) = tcgnn(dir, args);
    assert_eq!(code, Some(0), "tcgnn {args:?}: {err}");
}

/// The epochs of a `train --task link --out DIR` run's link.json.
fn curve(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("link.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v[0]["history"]["epochs"].as_array().unwrap().clone()
}

/// Equal JSON values, numbers to 1e-14 relative (serde_json's float parsing may miss the
/// correctly rounded value by an ulp).
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value::*;
    match (a, b) {
        (Number(x), Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-14 * x.abs().max(y.abs())
        }
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Object(x), Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w))),
        _ => a == b,
    }
}

#[test]
fn link_resume_continues_the_uninterrupted_curve() {
    let dir = scratch("resume");
    tcgnn::graph::mtx::write_mtx(dir.join("g.mtx"), &full_graph(120, 5, 3)).unwrap();
    let base = ["train", "g.mtx", "--task", "link", "--device", "cpu", "--quiet", "--features", "8", "--hidden", "16", "--seeds", "4"];
    let with = |extra: &[&'static str]| -> Vec<&str> { base.iter().chain(extra).copied().collect() };
    for decoder in ["dot", "mlp"] {
        let d: &'static str = if decoder == "dot" { "dot" } else { "mlp" };
        std::fs::remove_dir_all(dir.join("ck")).ok();
        succeeds(&dir, &with(&["--decoder", d, "--epochs", "6", "--out", "full"]));
        succeeds(&dir, &with(&["--decoder", d, "--epochs", "4", "--checkpoint", "ck", "--checkpoint-every", "2"]));
        succeeds(&dir, &with(&["--decoder", d, "--epochs", "6", "--resume", "ck", "--out", "resumed"]));
        let (a, b) = (curve(&dir.join("full")), curve(&dir.join("resumed")));
        assert_eq!(a.len(), 6);
        // Every field of every epoch (loss, validation and test AUC and Hits@K, negatives
        // dropped) is the uninterrupted run's: exactly in the training (the CPU's reductions are
        // deterministic), to a JSON round trip's last bit for the epochs read back from the
        // checkpoint's metadata.
        assert!(
            same_json(&serde_json::Value::Array(a.clone()), &serde_json::Value::Array(b.clone())),
            "{decoder}: the resumed curve differs from the uninterrupted one:\n{a:?}\n{b:?}"
        );
        assert_ne!(a[5]["loss"], a[4]["loss"], "a constant curve tests nothing");
    }
    // Resuming under other settings, past its end, or a checkpoint of another task: refused.
    refuses(&dir, &with(&["--decoder", "mlp", "--epochs", "8", "--resume", "ck", "--lr", "0.02"]), "--resume continues a run");
    refuses(&dir, &with(&["--decoder", "mlp", "--epochs", "3", "--resume", "ck"]), "trained 4 epochs already");
    refuses(&dir, &with(&["--decoder", "mlp", "--epochs", "8", "--resume", "nowhere"]), "no checkpoint here");
    refuses(&dir, &with(&["--epochs", "8", "--checkpoint", "g.mtx"]), "is a file, not a folder");
    succeeds(&dir, &["train", "g.mtx", "--device", "cpu", "--quiet", "--features", "8", "--epochs", "2", "--checkpoint", "node-ck"]);
    refuses(&dir, &with(&["--epochs", "8", "--resume", "node-ck"]), "another task");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn link_cli_names_bad_pairs_files_and_empty_splits() {
    let dir = scratch("bad");
    tcgnn::graph::mtx::write_mtx(dir.join("g.mtx"), &full_graph(80, 4, 6)).unwrap();
    // 10 edges: 5% of them is no validation edge.
    let path: Vec<(u32, u32, f32)> = (0..10).map(|i| (i, i + 1, 1.0)).collect();
    tcgnn::graph::mtx::write_mtx(dir.join("path.mtx"), &Csr::from_triplets(11, 11, &path).unwrap()).unwrap();
    refuses(&dir, &["train", "path.mtx", "--task", "link", "--device", "cpu", "--quiet", "--features", "4"], "leave a split empty");
    let train = ["train", "g.mtx", "--task", "link", "--epochs", "1", "--device", "cpu", "--quiet", "--features", "8"];
    let mut save: Vec<&str> = train.to_vec();
    save.extend(["--save", "link.safetensors"]);
    succeeds(&dir, &save);
    for (file, text, expect) in [
        ("words.txt", "0 1\n1 two\n", "words.txt:2: '1 two' is not two node ids"),
        ("three.txt", "# pairs\n0 1 2\n", "three.txt:2: expected a pair"),
        ("range.txt", "0 1\n\n3 80\n", "range.txt:3: pair (3, 80) is out of range"),
        ("dup.txt", "0 1\n4,5\n0 1\n", "dup.txt:3: pair (0, 1) is given twice (also line 1)"),
        ("empty.txt", "# nothing\n", "empty.txt: no pairs"),
        ("negative.txt", "-1 2\n", "negative.txt:1"),
    ] {
        std::fs::write(dir.join(file), text).unwrap();
        refuses(&dir, &["predict", "link.safetensors", "g.mtx", "--device", "cpu", "--pairs", file, "--out", "s.csv"], expect);
    }
    assert!(!dir.join("s.csv").exists(), "a refused pairs file left scores behind");
    // A link model to node predict, and a node model to predict --pairs.
    refuses(&dir, &["predict", "link.safetensors", "g.mtx", "--device", "cpu", "--out", "p.csv"], "--pairs");
    succeeds(&dir, &["train", "g.mtx", "--epochs", "1", "--device", "cpu", "--quiet", "--features", "8", "--save", "node.safetensors"]);
    std::fs::write(dir.join("ok.txt"), "0 1\n").unwrap();
    refuses(&dir, &["predict", "node.safetensors", "g.mtx", "--device", "cpu", "--pairs", "ok.txt", "--out", "s.csv"], "another task");
    std::fs::remove_dir_all(&dir).ok();
}
