//! Link-neighbour sampled training (`task::link::sampled`, `sample::seed_blocks`): batches are a
//! function of (seed, epoch), cover every training edge once an epoch and spread the full-graph
//! path's negatives; every seed pair's end points are the batch's seed rows; the blocks equal a
//! brute-force construction; with every neighbour and one batch the step is the full-graph step
//! (f64); the GPU's sampled steps equal the CPU's; the command line refuses what it does not do.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::input::HostFeatures::Dense;
use tcgnn::nn::models::Model;
use tcgnn::nn::models::{ModelConfig, default_config};
use tcgnn::nn::seed_blocks::SeedBlockSampler;
use tcgnn::nn::{CpuBackend, CudaBackend, EdgeLayout, Ops};
use tcgnn::ops::{Impl, Precision};
use tcgnn::sample::PrefetchConfig;
use tcgnn::sample::layerwise::LayerwiseInference;
use tcgnn::sample::seed_blocks::NeighborSeedBlocks;
use tcgnn::task::link::decoder::DecoderKind;
use tcgnn::task::link::sampled::{BatchPairs, LinkBatch, SampledLink};
use tcgnn::task::link::split::{LinkSplit, Pair};
use tcgnn::task::link::train::{LinkConfig, LinkTrainer, Representations};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

use crate::common::{gpu_or_skip, random_graph};

/// A symmetric random graph with some isolated nodes.
fn graph(n: usize, deg: usize, seed: u64) -> Csr {
    let g = random_graph(n, deg, 9, seed);
    let mut t = Vec::new();
    for u in 0..n {
        for (v, _) in g.row(u) {
            t.push((u as u32, v, 1.0));
        }
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

fn features(n: usize, f: usize, seed: u64) -> HostFeatures {
    let mut rng = SplitMix64::new(seed);
    HostFeatures::Dense(Matrix::from_vec(n, f, rng.vec_f32(n * f)).unwrap())
}

fn encoder(model: &str) -> ModelConfig {
    ModelConfig { hidden: 16, dropout: 0.0, seed: 3, ..default_config(model).unwrap() }
}

struct Problem {
    split: LinkSplit,
    x: HostFeatures,
}

impl Problem {
    fn new(n: usize, deg: usize, seed: u64) -> Self {
        Problem { split: LinkSplit::new(&graph(n, deg, seed), seed).unwrap(), x: features(n, 11, seed + 1) }
    }

    fn sampler(&self, model: &str, fanouts: &[i32]) -> Arc<NeighborSeedBlocks> {
        let mp = Arc::new(self.split.message_passing_graph().unwrap());
        Arc::new(NeighborSeedBlocks::new(mp, Arc::new(self.x.clone()), model, fanouts.to_vec(), 7).unwrap())
    }

    fn trainer<B: Ops + 'static>(&self, b: B, model: &str, decoder: DecoderKind) -> LinkTrainer<B> {
        let lcfg = LinkConfig { seed: 5, decoder, neg_ratio: 1.5, ..LinkConfig::default() };
        LinkTrainer::new(Arc::new(b), &self.x, &self.split, &encoder(model), 8, &lcfg).unwrap()
    }

    fn sampled(&self, model: &str, fanouts: &[i32], batch: usize) -> SampledLink {
        let prefetch = PrefetchConfig { workers: 2, ahead: 1 };
        SampledLink::new(self.sampler(model, fanouts), &encoder(model), 8, batch, prefetch).unwrap()
    }
}

fn as_set(v: &[Pair]) -> HashSet<Pair> {
    v.iter().copied().collect()
}

#[test]
fn link_batches_are_deterministic_in_seed_and_epoch_and_cover_the_epoch() {
    let p = Problem::new(300, 6, 1);
    let mut t = p.trainer(CpuBackend::<f32>::new(), "gcn", DecoderKind::Dot);
    let s = p.sampled("gcn", &[3, 2], 64);
    let sampler = p.sampler("gcn", &[3, 2]);
    let e0 = s.epoch_pairs(&mut t, 0).unwrap();
    assert_eq!(e0.len(), p.split.train.len().div_ceil(64));
    assert_eq!(e0, s.epoch_pairs(&mut t, 0).unwrap(), "epoch 0's pairs differ between two calls");
    let e1 = s.epoch_pairs(&mut t, 1).unwrap();
    assert_ne!(e0, e1, "epochs 0 and 1 drew the same batches");
    for (epoch, batches) in [(0, &e0), (1, &e1)] {
        // Every training edge once, in a new order.
        let mut pos: Vec<Pair> = batches.iter().flat_map(|b| b.pos.iter().copied()).collect();
        assert_ne!(pos, p.split.train, "epoch {epoch}: the edges in split order");
        pos.sort_unstable();
        let mut want = p.split.train.clone();
        want.sort_unstable();
        assert_eq!(pos, want, "epoch {epoch}: not every training edge exactly once");
        // The negatives: the full-graph path's of this epoch, spread over the batches.
        let negs: HashSet<Pair> = batches.iter().flat_map(|b| b.neg.iter().copied()).collect();
        assert_eq!(negs, as_set(&t.negatives(epoch).unwrap().0), "epoch {epoch}: other negatives than the full-graph path's");
        for b in batches.iter() {
            assert_eq!(as_set(&b.neg).len(), b.neg.len(), "a negative repeated within a batch");
            assert!(b.neg.len() + b.dropped >= (b.pos.len() as f64 * 1.5).floor() as usize - 1, "a batch short of negatives");
        }
    }
    // The blocks: the same for the same (pairs, epoch, batch), wherever they are made.
    let made = |b: &BatchPairs, i: u32| LinkBatch::make(&*sampler, b, 0, i).unwrap();
    for (i, b) in e0.iter().enumerate() {
        let (x, y) = (made(b, i as u32), made(b, i as u32));
        assert_eq!((&x.blocks.nodes, &x.blocks.matrices, &x.pos, &x.neg), (&y.blocks.nodes, &y.blocks.matrices, &y.pos, &y.neg));
    }
    let (x, y) = (made(&e0[0], 0), made(&e0[0], 1));
    assert_ne!(x.blocks.matrices, y.blocks.matrices, "batch index does not change the draws");
    // A sampler of another seed draws other blocks.
    let mp = Arc::new(p.split.message_passing_graph().unwrap());
    let other = NeighborSeedBlocks::new(mp, Arc::new(p.x.clone()), "gcn", vec![3, 2], 8).unwrap();
    assert_ne!(LinkBatch::make(&other, &e0[0], 0, 0).unwrap().blocks.matrices, x.blocks.matrices);
}

/// GCN's full-graph normalisation of entry (v, u) of `g` (degrees of A + I).
fn gcn_value(g: &Csr, v: usize, u: usize) -> f64 {
    1.0 / (((g.row_len(v) + 1) * (g.row_len(u) + 1)) as f64).sqrt()
}

/// Checks batch `lb` of pairs `bp` against a brute-force construction on `g`: seeds first in
/// first-occurrence order, pairs on their rows; each block row a set of distinct neighbours
/// of the right size (all of them with fan-out -1, in the order a breadth-first walk reaches
/// them), and each matrix = GCN's values of the drawn entries times deg / drawn, plus the
/// self-loop, rows past the block's destinations empty.
fn check_against_brute_force(g: &Csr, fanouts: &[i32], bp: &BatchPairs, lb: &LinkBatch) {
    let nodes = &lb.blocks.nodes;
    let seeds = bp.seeds();
    assert_eq!(lb.blocks.seeds, seeds.len());
    assert_eq!(&nodes[..seeds.len()], &seeds[..], "the seeds are not the first nodes");
    for (local, global) in lb.pos.iter().zip(&bp.pos).chain(lb.neg.iter().zip(&bp.neg)) {
        for k in 0..2 {
            assert!((local[k] as usize) < lb.blocks.seeds, "pair end point {} is not a seed row", global[k]);
            assert_eq!(nodes[local[k] as usize], global[k], "pair relabelled to the wrong row");
        }
    }
    let n = nodes.len();
    assert_eq!(HashSet::<u32>::from_iter(nodes.iter().copied()).len(), n, "a node twice in the batch");
    let local: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    // The hops from the seeds outwards (matrices apply from the outermost hop inwards): hop h's
    // destinations are the nodes reached before it, its new nodes follow in the order a walk
    // over its rows (each row's drawn neighbours by id) first reaches them.
    let mut n_dst = seeds.len();
    for (h, &fanout) in fanouts.iter().enumerate() {
        let m = &lb.blocks.matrices[fanouts.len() - 1 - h];
        assert_eq!((m.n_rows(), m.n_cols()), (n, n));
        let mut seen: HashSet<u32> = nodes[..n_dst].iter().copied().collect();
        let mut new_nodes = Vec::new();
        for d in 0..n {
            let row: HashMap<u32, f32> = m.row(d).collect();
            if d >= n_dst {
                assert!(row.is_empty(), "hop {h}: row {d} past the destinations holds entries");
                continue;
            }
            let v = nodes[d] as usize;
            let deg = g.row_len(v);
            let mut drawn: Vec<u32> = row.keys().copied().filter(|&c| c as usize != d).map(|c| nodes[c as usize]).collect();
            drawn.sort_unstable();
            let want_drawn = if fanout < 0 { deg } else { deg.min(fanout as usize) };
            assert_eq!(drawn.len(), want_drawn, "hop {h}: row {d} (node {v}, degree {deg}) drew {} neighbours", drawn.len());
            let neighbours: HashSet<u32> = g.row(v).map(|(u, _)| u).collect();
            for &u in &drawn {
                assert!(neighbours.contains(&u), "hop {h}: node {u} drawn for {v}, not a neighbour");
                let c = local[&u] as u32;
                let want = gcn_value(g, v, u as usize) * deg as f64 / want_drawn as f64;
                assert!((row[&c] as f64 - want).abs() <= 1e-6 * want, "hop {h}: entry ({v}, {u}) {} want {want}", row[&c]);
                if seen.insert(u) {
                    new_nodes.push(u);
                }
            }
            let own = row.get(&(d as u32)).copied().unwrap_or(0.0) as f64;
            assert!((own - 1.0 / (deg + 1) as f64).abs() < 1e-7, "hop {h}: self-loop of {v} is {own}");
        }
        assert_eq!(&nodes[n_dst..n_dst + new_nodes.len()], &new_nodes[..], "hop {h}: new nodes not in the order first reached");
        n_dst += new_nodes.len();
    }
    assert_eq!(n_dst, n, "nodes past the last hop's");
}

#[test]
fn seed_pairs_are_seed_rows_and_blocks_equal_a_brute_force_construction() {
    let p = Problem::new(120, 5, 2);
    let mut t = p.trainer(CpuBackend::<f32>::new(), "gcn", DecoderKind::Dot);
    let g = p.split.message_passing_graph().unwrap();
    for fanouts in [vec![-1, -1], vec![2, 3], vec![-1], vec![1, -1, 2]] {
        let sampler = p.sampler("gcn", &fanouts);
        assert_eq!(sampler.layers(), fanouts.len());
        let s = p.sampled("gcn", &[2, 2], 40);
        for (i, bp) in s.epoch_pairs(&mut t, 3).unwrap().iter().enumerate() {
            let lb = LinkBatch::make(&*sampler, bp, 3, i as u32).unwrap();
            check_against_brute_force(&g, &fanouts, bp, &lb);
            // The features are the batch's nodes' rows.
            let (HostFeatures::Dense(all), HostFeatures::Dense(got)) = (&p.x, &lb.blocks.features) else { panic!("dense") };
            for (r, &v) in lb.blocks.nodes.iter().enumerate() {
                assert_eq!(got.row(r), all.row(v as usize));
            }
        }
    }
    // SAGE's mean: the drawn entries' values sum to 1 per destination row with neighbours.
    let sampler = p.sampler("sage", &[2, 2]);
    let s = p.sampled("sage", &[2, 2], 40);
    let bp = &s.epoch_pairs(&mut t, 0).unwrap()[0];
    let lb = LinkBatch::make(&*sampler, bp, 0, 0).unwrap();
    for m in &lb.blocks.matrices {
        for d in 0..m.n_rows() {
            let sum: f64 = m.row(d).map(|(_, x)| x as f64).sum();
            assert!(m.row_len(d) == 0 || (sum - 1.0).abs() < 1e-6, "SAGE row {d} sums to {sum}");
        }
    }
}

#[test]
fn one_batch_with_every_neighbour_is_the_full_graph_step() {
    let p = Problem::new(150, 5, 3);
    let every = p.split.train.len();
    for (model, decoder) in [("gcn", DecoderKind::Dot), ("sage", DecoderKind::Dot), ("gin", DecoderKind::Dot), ("gcn", DecoderKind::Mlp)] {
        let mut full = p.trainer(CpuBackend::<f64>::new(), model, decoder);
        let mut t = p.trainer(CpuBackend::<f64>::new(), model, decoder);
        let mut s = p.sampled(model, &[-1, -1], every + 3);
        for epoch in 0..3 {
            let (want, _) = full.train_epoch(epoch).unwrap();
            let (got, _) = s.train_epoch(&mut t, epoch).unwrap();
            // The full-graph steps (the dot decoder's pair patterns, the MLP decoder's pairs by
            // index) divide by the pair count in the backend's arithmetic; the sampled step
            // passes 1 / len rounded to f32 (`bce_logits`' scale): the two means differ by that
            // rounding alone.
            let tol = 2.0 * f32::EPSILON as f64;
            assert!((got - want).abs() <= tol * want.abs(), "{model} {decoder:?} epoch {epoch}: sampled loss {got}, full-graph {want}");
        }
        for ((name, a), (_, b)) in t.weights().unwrap().iter().zip(&full.weights().unwrap()) {
            let bd: Vec<f64> = b.data.iter().map(|&v| v as f64).collect();
            let e = rel_error(&a.data, &bd);
            assert!(e < 1e-6, "{model} {decoder:?}: {name} after three steps rel. error {e:.2e}");
        }
        let (v1, t1) = t.evaluate().unwrap();
        let (v2, t2) = full.evaluate().unwrap();
        assert!((v1.auc - v2.auc).abs() < 1e-9 && (t1.auc - t2.auc).abs() < 1e-9, "{model} {decoder:?}: AUCs differ");
    }
}

/// Losses and weights of `epochs` sampled epochs on `b`.
fn sampled_run<B: Ops + 'static>(p: &Problem, b: B, model: &str, decoder: DecoderKind, epochs: usize) -> (Vec<f64>, Vec<Matrix>) {
    let mut t = p.trainer(b, model, decoder);
    let mut s = p.sampled(model, &[3, 2], 50);
    let losses = (0..epochs).map(|e| s.train_epoch(&mut t, e).unwrap().0).collect();
    (losses, t.weights().unwrap().into_iter().map(|w| w.1).collect())
}

#[test]
fn gpu_sampled_link_steps_match_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_sampled_link_steps_match_cpu") else { return };
    let p = Problem::new(301, 6, 4);
    for (model, decoder) in [("gcn", DecoderKind::Dot), ("sage", DecoderKind::Dot), ("gcn", DecoderKind::Mlp)] {
        let (wl, ww) = sampled_run(&p, CpuBackend::<f64>::new(), model, decoder, 2);
        let cuda = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap().with_edge_layout(EdgeLayout::Csr);
        let (gl, gw) = sampled_run(&p, cuda, model, decoder, 2);
        for (e, (a, b)) in gl.iter().zip(&wl).enumerate() {
            assert!((a - b).abs() / b.abs() < 1e-5, "{model} {decoder:?} epoch {e}: loss {a} on the GPU, {b} on the CPU");
        }
        for (i, (a, b)) in gw.iter().zip(&ww).enumerate() {
            let bd: Vec<f64> = b.data.iter().map(|&v| v as f64).collect();
            let e = rel_error(&a.data, &bd);
            assert!(e < 1e-4, "{model} {decoder:?}: parameter {i} after two sampled epochs rel. error {e:.2e}");
        }
    }
}

/// Layer-wise inference as the link task's representations (what the CLI wires).
struct Layerwise<B: Ops>(LayerwiseInference<B>);

impl<B: Ops + 'static> Representations<B> for Layerwise<B> {
    fn all_nodes(&mut self, b: &B, net: &mut dyn Model<B>) -> tcgnn::Result<B::Mat> {
        self.0.outputs(b, net)
    }
}

#[test]
fn layerwise_evaluation_of_a_params_only_trainer_equals_the_full_graph_evaluation() {
    let p = Problem::new(97, 5, 8);
    let Dense(x) = &p.x else { unreachable!() };
    let mp = p.split.message_passing_graph().unwrap();
    for (model, decoder) in [("gcn", DecoderKind::Dot), ("sage", DecoderKind::Mlp), ("gin", DecoderKind::Dot)] {
        // Two sampled epochs move the parameters off their init; then both evaluate them.
        let mut full = p.trainer(CpuBackend::<f64>::new(), model, decoder);
        let mut s = p.sampled(model, &[3, 2], 30);
        for e in 0..2 {
            s.train_epoch(&mut full, e).unwrap();
        }
        let (val, test) = full.evaluate().unwrap();
        let lcfg = LinkConfig { seed: 5, decoder, neg_ratio: 1.5, ..LinkConfig::default() };
        let mut lean = LinkTrainer::params_only(Arc::new(CpuBackend::<f64>::new()), 11, &p.split, &encoder(model), 8, &lcfg).unwrap();
        let (state, steps) = full.optimizer_state().unwrap();
        lean.load_optimizer_state(&state, steps).unwrap();
        // Batches of about 40 nonzeros: several a layer.
        let b = CpuBackend::<f64>::new();
        let mut r = Layerwise(LayerwiseInference::representations(&b, &mp, x, 8, &encoder(model), 40).unwrap());
        let (lval, ltest) = lean.evaluate_from(&mut r).unwrap();
        for (what, a, b) in [("validation", lval, val), ("test", ltest, test)] {
            assert!((a.auc - b.auc).abs() < 1e-12, "{model}: {what} AUC {} layer-wise, {} full", a.auc, b.auc);
            assert_eq!(a.hits, b.hits, "{model}: {what} Hits@K");
        }
        // A params-only trainer has no full-graph step.
        assert!(lean.step(0).is_err());
    }
}

#[test]
fn sampled_link_refuses_what_it_does_not_do() {
    let p = Problem::new(60, 4, 5);
    let sampler = p.sampler("gcn", &[2, 2]);
    let refuse = |cfg: ModelConfig, batch: usize, expect: &str| {
        let e = SampledLink::new(sampler.clone(), &cfg, 8, batch, PrefetchConfig::default()).err().expect("refused");
        assert!(e.to_string().contains(expect), "'{expect}' not in: {e}");
    };
    refuse(encoder("gat"), 16, "renormalises");
    refuse(ModelConfig { layers: 3, ..encoder("gcn") }, 16, "2 hops for 3 layers");
    refuse(ModelConfig { batch_norm: true, ..encoder("gcn") }, 16, "--batch-norm");
    refuse(encoder("gcn"), 0, "--batch-size");
    let mp = Arc::new(p.split.message_passing_graph().unwrap());
    assert!(NeighborSeedBlocks::new(mp.clone(), Arc::new(p.x.clone()), "agnn", vec![2], 0).is_err());
    assert!(NeighborSeedBlocks::new(mp.clone(), Arc::new(features(59, 3, 0)), "gcn", vec![2], 0).is_err());
    let s = NeighborSeedBlocks::new(mp, Arc::new(p.x.clone()), "gcn", vec![2], 0).unwrap();
    assert!(s.around(&[0, 60], 0, 0).is_err(), "a seed out of range was sampled around");
}

#[test]
fn link_cli_trains_sampled_and_refuses_bad_options() {
    let dir = std::env::temp_dir().join(format!("tcgnn-link-sampled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    tcgnn::graph::mtx::write_mtx(dir.join("g.mtx"), &graph(80, 4, 6)).unwrap();
    let run = |extra: &[&str]| {
        let base = ["train", "g.mtx", "--task", "link", "--epochs", "2", "--device", "cpu", "--quiet", "--features", "8"];
        let bin = std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string());
        let o =
            std::process::Command::new(bin).args(base.iter().chain(extra)).current_dir(&dir).env("RUST_BACKTRACE", "0").output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
    };
    let (code, out) = run(&["--sampler", "neighbor", "--fanout", "3,2", "--batch-size", "20"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("AUC"), "{out}");
    let (code, lw) = run(&[
        "--sampler",
        "neighbor",
        "--fanout",
        "3,2",
        "--batch-size",
        "20",
        "--inference",
        "layerwise",
        "--inference-batch-edges",
        "50",
    ]);
    assert_eq!(code, Some(0), "{lw}");
    // The same run evaluated layer by layer: the same metrics (f32 sums in another order may
    // move the last printed digit, 0.01 points).
    let table = |o: &str| -> Vec<f64> {
        o.lines()
            .filter(|l| l.starts_with("validation") || l.starts_with("test"))
            .flat_map(|l| l.split_whitespace().skip(1).filter_map(|w| w.parse::<f64>().ok()).collect::<Vec<_>>())
            .collect()
    };
    let (a, b) = (table(&out), table(&lw));
    assert!(a.len() >= 8 && a.len() == b.len(), "full:\n{out}\nlayer-wise:\n{lw}");
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 0.011), "full:\n{out}\nlayer-wise:\n{lw}");
    for (extra, expect) in [
        (&["--sampler", "saint-rw"][..], "--sampler neighbor"),
        (&["--sampler", "neighbor", "--fanout", "5"], "1 hops for 2 layers"),
        (&["--sampler", "neighbor", "--fanout", "5,0"], "--fanout"),
        (&["--sampler", "neighbor", "--model", "gat"], "renormalises"),
        (&["--sampler", "neighbor", "--batch-size", "0"], "--batch-size"),
        (&["--sampler", "neighbor", "--neighbor-union"], "--neighbor-union"),
        (&["--fanout", "5,5"], "add --sampler"),
        (&["--sampler", "neighbor", "--inference-batch-edges", "100"], "add --inference layerwise"),
        (&["--sampler", "neighbor", "--inference", "layerwise", "--batch-norm"], "--batch-norm"),
    ] {
        let (code, out) = run(extra);
        assert!(matches!(code, Some(1) | Some(2)), "{extra:?}: exit {code:?}\n{out}");
        assert!(out.contains(expect) && !out.contains("panicked"), "{extra:?}: '{expect}' not in\n{out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
