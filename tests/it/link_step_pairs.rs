//! A link training step's pairs read by index (`ops::nn::pair_hadamard`, `ops::nn::bce_column`,
//! `task::link::step_pairs`): the by-index step against the `PairSet` decoder (sorted pattern,
//! SDDMM / SpMM selections) in f64 for both decoders, the new ops' gradients against central
//! finite differences in f64, the MLP decoder's batched epoch with one batch of every edge
//! against its full-batch epoch, and the GPU against the CPU in f64 on odd shapes with the
//! outputs poisoned (skips without a GPU).

use std::collections::HashMap;
use std::sync::Arc;

use tcgnn::nn::embedding::NodeInput;
use tcgnn::nn::models::{ModelConfig, default_config};
use tcgnn::nn::{Backend, CpuBackend, CudaBackend};
use tcgnn::ops::backend::Side;
use tcgnn::ops::backend::cpu::HostMat;
use tcgnn::ops::nn::bce_column::{BceColumn, BceColumnOp};
use tcgnn::ops::nn::bce_logits::BceLogitsOp;
use tcgnn::ops::nn::pair_hadamard::{PairHadamardOp, PairIndex};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::link::decoder::{Decoder, DecoderKind};
use tcgnn::task::link::pairs::PairSet;
use tcgnn::task::link::split::{LinkSplit, Pair};
use tcgnn::task::link::train::{LinkConfig, LinkTrainer};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

use crate::common::{gpu_or_skip, random_graph};

type F = CpuBackend<f64>;

/// ||a - b|| / ||b||.
fn rel64(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-300)).sqrt()
}

fn host(m: &Matrix) -> HostMat<f64> {
    HostMat { rows: m.rows, cols: m.cols, data: m.data.iter().map(|&v| v as f64).collect() }
}

/// Random z (n x d), distinct positives and negatives without self-pairs (what `PairSet`
/// accepts), node 0 a hub (at one end of about a quarter of them), node n - 1 in none.
fn problem(n: usize, d: usize, pairs: usize, seed: u64) -> (Matrix, Vec<Pair>, Vec<Pair>) {
    let mut rng = SplitMix64::new(seed);
    let z = Matrix::from_vec(n, d, rng.vec_f32(n * d)).unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut all = Vec::new();
    let live = (n - 1) as u64;
    while all.len() < pairs {
        let a = if rng.below(4) == 0 { 0 } else { rng.below(live) as u32 };
        let p = [a, rng.below(live) as u32];
        if p[0] != p[1] && seen.insert(p) {
            all.push(p);
        }
    }
    let neg = all.split_off(pairs / 3);
    (z, all, neg)
}

/// The old step's decoder part on a `PairSet`: (scores by pair, loss, dz, the decoder's
/// parameter gradients), the loss and gradients of the mean over the pairs in f64.
fn pair_set_step(kind: DecoderKind, z: &Matrix, pos: &[Pair], neg: &[Pair]) -> (HashMap<Pair, f64>, f64, Vec<f64>, Vec<Vec<f64>>) {
    let b = F::new();
    let (n, d) = (z.rows, z.cols);
    let zd = b.upload(z).unwrap();
    let mut set = PairSet::new(&b, n, pos, neg).unwrap();
    let mut dec = Decoder::new(&b, kind, n, d, 7).unwrap();
    dec.score(&b, &mut set, &zd).unwrap();
    let mut grad = b.edges(&set.graph, Side::Forward).unwrap();
    let mut grad_t = b.edges(&set.graph, Side::Transposed).unwrap();
    let mut stats = b.stats().unwrap();
    b.bce_logits(&set.scores, &set.targets, 1.0 / set.len() as f32, &mut grad, &mut stats).unwrap();
    let mut dz = b.matrix(n, d).unwrap();
    dec.backward(&b, &mut set, &zd, &grad, &mut grad_t, &mut dz).unwrap();
    // `bce_logits` takes 1 / len as an f32: undone, to compare with the exact mean.
    let r = (1.0 / set.len() as f64) / (1.0 / set.len() as f32) as f64;
    let scores = set.pairs.iter().copied().zip(set.scores.iter().copied()).collect();
    let loss = b.read_stats(&stats).unwrap().loss * r;
    let grads = dec.params().into_iter().map(|(_, p)| p.grad.data.iter().map(|v| v * r).collect()).collect();
    (scores, loss, dz.data.iter().map(|v| v * r).collect(), grads)
}

#[test]
fn step_pairs_match_the_pair_set_decoder() {
    let (n, d) = (37, 11);
    let (z, pos, neg) = problem(n, d, 150, 4);
    for kind in [DecoderKind::Dot, DecoderKind::Mlp] {
        let (want_scores, want_loss, want_dz, want_grads) = pair_set_step(kind, &z, &pos, &neg);
        let b = F::new();
        let zd = b.upload(&z).unwrap();
        let mut dec = Decoder::new(&b, kind, n, d, 7).unwrap();
        // Room for more pairs than the step has: the padding rows must add nothing.
        let mut sp = dec.step_pairs(&b, pos.len() + neg.len() + 5).unwrap();
        sp.bind(&b, &pos, &neg).unwrap();
        dec.score_step(&b, &mut sp, &zd).unwrap();
        let mut stats = b.stats().unwrap();
        let s = sp.scores(&b).unwrap();
        // The scores in pair order, positives first.
        for (p, &got) in pos.iter().chain(&neg).zip(&s) {
            let want = want_scores[p];
            assert!((got as f64 - want).abs() <= 1e-6 * want.abs().max(1.0), "{kind:?} pair {p:?}: {got} against {want}");
        }
        // The loss of the step's mean, added to a stale 5.0, then the gradients.
        stats[0] = 5.0;
        sp.loss(&b, 1.0 / (pos.len() + neg.len()) as f64, true, &mut stats).unwrap();
        let loss = b.read_stats(&stats).unwrap().loss - 5.0;
        assert!((loss - want_loss).abs() <= 1e-12 * want_loss.abs(), "{kind:?}: loss {loss} against {want_loss}");
        let mut dz = HostMat { rows: n, cols: d, data: vec![f64::NAN; n * d] };
        dec.backward_step(&b, &mut sp, &zd, &mut dz).unwrap();
        let e = rel64(&dz.data, &want_dz);
        assert!(e < 1e-12, "{kind:?}: dz rel. error {e:.2e}");
        assert!(want_dz.iter().any(|v| v.abs() > 1e-4), "a zero gradient tests nothing");
        assert!(dz.data[(n - 1) * d..].iter().all(|&v| v == 0.0), "the isolated node's gradient");
        for ((name, p), want) in dec.params().into_iter().zip(&want_grads) {
            let e = rel64(&p.grad.data, want);
            assert!(e < 1e-12, "{kind:?} {name}: gradient rel. error {e:.2e}");
        }
        // A second, smaller step rebinds in place (no pair of the first left).
        sp.bind(&b, &pos[..2], &neg[..1]).unwrap();
        dec.score_step(&b, &mut sp, &zd).unwrap();
        assert_eq!(sp.len(), 3);
        let s = sp.scores(&b).unwrap();
        for (p, &got) in pos[..2].iter().chain(&neg[..1]).zip(&s) {
            assert!((got as f64 - want_scores[p]).abs() <= 1e-6 * want_scores[p].abs().max(1.0));
        }
        assert!(sp.bind(&b, &pos, &[neg.clone(), neg.clone()].concat()).is_err(), "past the capacity");
    }
}

/// L(z) = sum of R ⊙ pair_hadamard(z) (R random, P x width), its gradient through the
/// backward with dout = R, against central differences; pairs with a repeat, a self-pair and
/// a node in every pair.
#[test]
fn pair_hadamard_gradient_matches_finite_differences() {
    let (n, d) = (6, 5);
    let mut rng = SplitMix64::new(9);
    let pairs: Vec<Pair> = vec![[0, 1], [0, 2], [3, 0], [0, 1], [4, 4], [0, 0], [2, 3]];
    let ix = PairIndex::new(n, &[&pairs[..3], &pairs[3..]]).unwrap();
    let b = F::new();
    let cap = pairs.len() + 2;
    let mut batch = b.pair_batch(n, cap).unwrap();
    b.bind_pair_batch(&mut batch, &ix).unwrap();
    let z0: Vec<f64> = (0..n * d).map(|_| rng.next_f64() - 0.5).collect();
    for width in [d, 1] {
        let r: Vec<f64> = (0..cap * width).map(|_| rng.next_f64() - 0.5).collect();
        let loss = |z: &[f64]| -> f64 {
            let zm = HostMat { rows: n, cols: d, data: z.to_vec() };
            let mut out = HostMat { rows: cap, cols: width, data: vec![f64::NAN; cap * width] };
            b.pair_hadamard(&batch, &zm, &mut out).unwrap();
            out.data.iter().zip(&r).map(|(a, b)| a * b).sum()
        };
        let dout = HostMat { rows: cap, cols: width, data: r.clone() };
        let zm = HostMat { rows: n, cols: d, data: z0.clone() };
        let mut dz = HostMat { rows: n, cols: d, data: vec![f64::NAN; n * d] };
        b.pair_hadamard_backward(&batch, &zm, &dout, false, &mut dz).unwrap();
        let h = 1e-6;
        let fd: Vec<f64> = (0..n * d)
            .map(|i| {
                let (mut zp, mut zm) = (z0.clone(), z0.clone());
                zp[i] += h;
                zm[i] -= h;
                (loss(&zp) - loss(&zm)) / (2.0 * h)
            })
            .collect();
        let e = rel64(&dz.data, &fd);
        assert!(e < 1e-7, "width {width}: dz against finite differences, rel. error {e:.2e}");
        assert!(dz.data[5 * d..].iter().all(|&v| v == 0.0), "node 5 joins no pair");
        // Accumulating adds the same sum to what dz held.
        let mut acc = HostMat { rows: n, cols: d, data: vec![1.0; n * d] };
        b.pair_hadamard_backward(&batch, &zm, &dout, true, &mut acc).unwrap();
        assert!(acc.data.iter().zip(&dz.data).all(|(a, g)| (a - 1.0 - g).abs() < 1e-15));
        // The padding rows of the output are 0 whatever R holds there.
        let mut out = HostMat { rows: cap, cols: width, data: vec![f64::NAN; cap * width] };
        b.pair_hadamard(&batch, &zm, &mut out).unwrap();
        assert!(out.data[pairs.len() * width..].iter().all(|&v| v == 0.0));
    }
    // A batch larger than its capacity, or z of another node count, is refused.
    let mut small = b.pair_batch(n, 2).unwrap();
    assert!(b.bind_pair_batch(&mut small, &ix).is_err());
    let z7 = HostMat { rows: n + 1, cols: d, data: vec![0.0; (n + 1) * d] };
    let mut out = HostMat { rows: cap, cols: d, data: vec![0.0; cap * d] };
    assert!(b.pair_hadamard(&batch, &z7, &mut out).is_err());
}

/// bce_column's gradient (grad_scale = loss_scale) against central differences of its loss.
#[test]
fn bce_column_gradient_matches_finite_differences() {
    let mut rng = SplitMix64::new(3);
    let rows = 9;
    let x0: Vec<f64> = (0..rows).map(|_| 8.0 * (rng.next_f64() - 0.5)).collect();
    let c = BceColumn { pairs: 7, positives: 3, grad_scale: 0.25, loss_scale: 0.25, accumulate: false };
    let b = F::new();
    let run = |x: &[f64]| -> (f64, Vec<f64>) {
        let xm = HostMat { rows, cols: 1, data: x.to_vec() };
        let mut g = HostMat { rows, cols: 1, data: vec![f64::NAN; rows] };
        let mut stats = b.stats().unwrap();
        b.bce_column(&xm, &c, &mut g, &mut stats).unwrap();
        (stats[0], g.data)
    };
    let (_, g) = run(&x0);
    let h = 1e-6;
    let fd: Vec<f64> = (0..rows)
        .map(|i| {
            let (mut xp, mut xm) = (x0.clone(), x0.clone());
            xp[i] += h;
            xm[i] -= h;
            (run(&xp).0 - run(&xm).0) / (2.0 * h)
        })
        .collect();
    assert!(rel64(&g, &fd) < 1e-8, "gradient {g:?} against {fd:?}");
    assert_eq!(&g[7..], &[0.0, 0.0], "rows past the pairs");
    // Hand-computed: s = 0 costs ln 2 whatever the target; accumulating adds.
    let xm = HostMat { rows: 2, cols: 1, data: vec![0.0, 0.0] };
    let mut gm = HostMat { rows: 2, cols: 1, data: vec![0.0; 2] };
    let mut stats = [1.0, 0.0, 0.0, 0.0];
    let one = BceColumn { pairs: 2, positives: 1, grad_scale: 0.5, loss_scale: 0.5, accumulate: true };
    b.bce_column(&xm, &one, &mut gm, &mut stats).unwrap();
    assert!((stats[0] - 1.0 - std::f64::consts::LN_2).abs() < 1e-15);
    assert_eq!(gm.data, vec![-0.25, 0.25]);
    let bad = BceColumn { positives: 3, ..one };
    assert!(b.bce_column(&xm, &bad, &mut gm, &mut stats).is_err());
}

fn trainer<B: tcgnn::nn::Ops + 'static>(b: Arc<B>, split: &LinkSplit, lcfg: &LinkConfig) -> LinkTrainer<B> {
    let cfg = ModelConfig { hidden: 16, dropout: 0.0, seed: 3, ..default_config("sage").unwrap() };
    LinkTrainer::new(b, NodeInput::Learnable { width: 12 }, split, &cfg, 8, lcfg).unwrap()
}

/// The MLP decoder: a batched epoch whose one batch holds every edge is the full-batch epoch
/// (the same pairs in another order: equal up to rounding, in f64).
#[test]
fn mlp_batched_epoch_of_one_batch_is_the_full_batch_epoch() {
    let g = random_graph(120, 6, 0, 5);
    let split = LinkSplit::new(&g, 2).unwrap();
    let p = split.train.len();
    let lcfg = LinkConfig { seed: 2, lr: 0.01, decoder: DecoderKind::Mlp, ..LinkConfig::default() };
    let mut a = trainer(Arc::new(F::new()), &split, &LinkConfig { batch_edges: Some(p), ..lcfg });
    let mut c = trainer(Arc::new(F::new()), &split, &LinkConfig { batch_edges: None, ..lcfg });
    for e in 0..3 {
        let (la, lc) = (a.train_epoch(e).unwrap(), c.train_epoch(e).unwrap());
        assert!(la.1 == lc.1 && (la.0 - lc.0).abs() <= 1e-12 * lc.0.abs(), "epoch {e}: {la:?} batched, {lc:?} full");
    }
    for ((name, wa), (_, wc)) in a.weights().unwrap().into_iter().zip(c.weights().unwrap()) {
        let e = rel_error(&wa.data, &wc.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert!(e < 1e-9, "{name} after three epochs: rel. error {e:.2e}");
    }
    // Smaller batches: several steps, a different curve, still finite and learning.
    let mut s = trainer(Arc::new(F::new()), &split, &LinkConfig { batch_edges: Some(p / 3 + 1), ..lcfg });
    let first = s.train_epoch(0).unwrap().0;
    let later = (1..6).map(|e| s.train_epoch(e).unwrap().0).last().unwrap();
    assert!(first.is_finite() && later < first, "loss {first} then {later}");
}

// -- the GPU against the CPU --

#[test]
fn gpu_pair_hadamard_and_bce_column_match_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_pair_hadamard_and_bce_column_match_cpu") else { return };
    let cuda = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap();
    let cpu = F::new();
    let mut rng = SplitMix64::new(11);
    // (nodes, width, pairs, capacity): one pair on one node (a self-pair), a width of 1,
    // widths not a multiple of 8 and past 128 (two column chunks, the second partial), a hub
    // in a quarter of the pairs and isolated nodes, padding rows past the pairs.
    for (n, d, pairs, cap) in [(1, 3, 1, 1), (5, 1, 4, 6), (40, 19, 300, 307), (300, 130, 5000, 5001), (4000, 256, 20_000, 20_000)] {
        let live = (n as u64).div_ceil(2).max(1);
        let all: Vec<Pair> = (0..pairs)
            .map(|i| {
                let a = if i % 4 == 0 { 0 } else { rng.below(live) as u32 };
                [a, rng.below(live) as u32]
            })
            .collect();
        let (pos, neg) = all.split_at(pairs / 2);
        let ix = PairIndex::new(n, &[pos, neg]).unwrap();
        let z = Matrix::from_vec(n, d, rng.vec_f32(n * d)).unwrap();
        let (zc, zg) = (host(&z), cuda.upload(&z).unwrap());
        let mut cb = cpu.pair_batch(n, cap).unwrap();
        let mut gb = cuda.pair_batch(n, cap).unwrap();
        cpu.bind_pair_batch(&mut cb, &ix).unwrap();
        cuda.bind_pair_batch(&mut gb, &ix).unwrap();
        for width in [d, 1] {
            let what = format!("n {n} d {d} pairs {pairs} cap {cap} width {width}");
            let mut oc = cpu.matrix(cap, width).unwrap();
            cpu.pair_hadamard(&cb, &zc, &mut oc).unwrap();
            let mut og = cuda.matrix(cap, width).unwrap();
            og.poison().unwrap();
            cuda.pair_hadamard(&gb, &zg, &mut og).unwrap();
            let got: Vec<f64> = og.download().unwrap().data.iter().map(|&v| v as f64).collect();
            let e = rel64(&got, &oc.data);
            assert!(e < 1e-5, "{what}: forward rel. error {e:.2e}");
            assert!(got[pairs * width..].iter().all(|&v| v == 0.0), "{what}: padding rows not 0");
            // The backward from a random dout (rows past the pairs 0, as the loss leaves them),
            // overwriting a poisoned dz, then accumulating onto a random one.
            let mut r: Vec<f32> = rng.vec_f32(cap * width);
            r[pairs * width..].fill(0.0);
            let dout = Matrix::from_vec(cap, width, r).unwrap();
            let (dc, dg) = (host(&dout), cuda.upload(&dout).unwrap());
            let start = Matrix::from_vec(n, d, rng.vec_f32(n * d)).unwrap();
            for accumulate in [false, true] {
                let mut zc_out = if accumulate { host(&start) } else { cpu.matrix(n, d).unwrap() };
                cpu.pair_hadamard_backward(&cb, &zc, &dc, accumulate, &mut zc_out).unwrap();
                let mut zg_out = cuda.upload(&start).unwrap();
                if !accumulate {
                    zg_out.poison().unwrap();
                }
                cuda.pair_hadamard_backward(&gb, &zg, &dg, accumulate, &mut zg_out).unwrap();
                let got: Vec<f64> = zg_out.download().unwrap().data.iter().map(|&v| v as f64).collect();
                let e = rel64(&got, &zc_out.data);
                assert!(e < 1e-5, "{what} accumulate {accumulate}: backward rel. error {e:.2e}");
            }
        }
        // The loss on a column of scores, twice accumulated.
        let x = Matrix::from_vec(cap, 1, rng.vec_f32(cap).iter().map(|v| 6.0 * v).collect()).unwrap();
        let c =
            BceColumn { pairs, positives: pos.len(), grad_scale: 1.0 / pairs as f64, loss_scale: 0.5 / pairs as f64, accumulate: false };
        let (mut gc, mut gg) = (cpu.matrix(cap, 1).unwrap(), cuda.matrix(cap, 1).unwrap());
        gg.poison().unwrap();
        let (mut sc, mut sg) = (cpu.stats().unwrap(), cuda.stats().unwrap());
        let (xc, xg) = (host(&x), cuda.upload(&x).unwrap());
        for accumulate in [false, true] {
            let c = BceColumn { accumulate, ..c };
            cpu.bce_column(&xc, &c, &mut gc, &mut sc).unwrap();
            cuda.bce_column(&xg, &c, &mut gg, &mut sg).unwrap();
        }
        let got: Vec<f64> = gg.download().unwrap().data.iter().map(|&v| v as f64).collect();
        assert!(rel64(&got, &gc.data) < 1e-5, "n {n}: bce gradient rel. error {:.2e}", rel64(&got, &gc.data));
        let (lc, lg) = (cpu.read_stats(&sc).unwrap().loss, cuda.read_stats(&sg).unwrap().loss);
        assert!((lc - lg).abs() <= 1e-5 * lc.abs(), "n {n}: loss {lg} on the GPU, {lc} on the CPU");
        assert!((lc - 2.0 * run_loss(&xc, &c)).abs() <= 1e-12 * lc.abs(), "accumulating twice doubles the loss");
    }
}

fn run_loss(x: &HostMat<f64>, c: &BceColumn) -> f64 {
    let mut g = vec![0.0; x.rows];
    tcgnn::ops::nn::bce_column::bce_column_cpu(&x.data, c, &mut g)
}
