//! The graph task's bound net (one net per fold at a capacity, rebound per batch): a padded
//! batch gives the unpadded batch's per-graph logits and parameter gradients (f64), BatchNorm
//! over a count of live rows on the GPU against the CPU, and training curves: the bound path
//! against nets built per batch on the CPU, the GPU eager and replayed against the CPU. GPU
//! tests skip without a GPU.

use crate::common;
use crate::graph_task::{graph_model, tmp_dir, write_random_set};

use tcgnn::gpu::{DeviceMatrix, DeviceVec};
use tcgnn::graph::tu::read_tu;
use tcgnn::nn::models::default_graph_pooling;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, Ops};
use tcgnn::ops::backend::bind::BindOps;
use tcgnn::ops::nn::batch_norm::{BatchNormHyper, BatchNormOp, batch_norm, batch_norm_backward};
use tcgnn::ops::nn::segment_pool::Pooling;
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::graph::bound::model_nnz;
use tcgnn::task::graph::{
    BoundGraphNet, FoldResult, Folds, GraphBatch, GraphCapacity, GraphNet, GraphSet, GraphTrainConfig, PaddedGraphBatch, train_fold,
};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-3);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol * scale, "{what}[{i}]: {a} vs {b} (scale {scale})");
    }
}

#[test]
fn padded_batch_gives_the_unpadded_batchs_logits_and_gradients() {
    let dir = tmp_dir("bound-pad");
    write_random_set(&dir, "P", 30, 3, false, 11);
    let set = GraphSet::new(read_tu(&dir, "P").unwrap()).unwrap();
    let b = CpuBackend::<f64>::new();
    let first: Vec<u32> = (0..12u32).rev().collect();
    let second: Vec<u32> = (12..30u32).step_by(2).collect();
    for (model, pooling) in [("gin", Pooling::Sum), ("gcn", Pooling::Mean), ("sage", Pooling::Max), ("gin", Pooling::Mean)] {
        for norm in [true, false] {
            let mut m = graph_model(&set, model, pooling);
            m.encoder.batch_norm = norm;
            let what = format!("{model} {pooling:?} norm={norm}");
            let nnz = model_nnz(&set, model).unwrap();
            // Room past both batches: padded node rows, nonzeros and graphs.
            let mut cap = GraphCapacity::plan(&set, &nnz, [&first[..], &second[..]]);
            cap.nodes += 5;
            cap.edges += 9;
            cap.graphs += 3;
            let mut bound = BoundGraphNet::new(&b, cap, &m).unwrap();
            for (k, ids) in [&first, &second].into_iter().enumerate() {
                let batch = GraphBatch::new(&set, ids).unwrap();
                let g = batch.len();
                let padded = PaddedGraphBatch::of(&set, ids, model, cap).unwrap();
                assert_eq!((padded.nodes, padded.graphs), (batch.nodes(), g));
                bound.bind(&b, &padded).unwrap();
                let mut fresh = GraphNet::new(&b, &batch, &m).unwrap();
                // Training mode (dropout in the head, batch statistics).
                let want = fresh.forward(&b, true).unwrap().data[..g * m.classes].to_vec();
                let got = bound.forward(&b, true).unwrap().data[..g * m.classes].to_vec();
                close(&format!("{what} batch {k} logits"), &got, &want, 1e-10);
                let (mut sf, mut sb) = (b.stats().unwrap(), b.stats().unwrap());
                fresh.gradients(&b, &mut sf).unwrap();
                bound.gradients(&b, &mut sb).unwrap();
                let (lf, lb) = (b.read_stats(&sf).unwrap(), b.read_stats(&sb).unwrap());
                // The per-batch net scales each graph's loss by 1 / g rounded to f32; the bound
                // net's sum is divided by g when read: they part at f32's rounding of 1 / g.
                let lbm = lb.loss / g as f64;
                assert!((lf.loss - lbm).abs() < 1e-7 * lf.loss.abs().max(1.0), "{what}: loss {lbm} vs {}", lf.loss);
                assert_eq!(lf.correct[0], lb.correct[0], "{what}: correct");
                let (pf, pb) = (fresh.params(), bound.params());
                assert_eq!(pf.len(), pb.len(), "{what}: parameters");
                for ((nf, xf), (nb, xb)) in pf.into_iter().zip(pb) {
                    assert_eq!(nf, nb);
                    close(&format!("{what} batch {k} grad {nf}"), &xb.grad.data, &xf.grad.data, 1e-10);
                }
                if k == 0 {
                    // Evaluation: the running statistics moved alike (two training forwards each).
                    let want = fresh.forward(&b, false).unwrap().data[..g * m.classes].to_vec();
                    let got = bound.forward(&b, false).unwrap().data[..g * m.classes].to_vec();
                    close(&format!("{what} eval logits"), &got, &want, 1e-10);
                }
            }
        }
    }
    // A batch larger than the capacity is refused before anything is copied.
    let nnz = model_nnz(&set, "gin").unwrap();
    let small = GraphCapacity::plan(&set, &nnz, [&[0u32, 1][..]]);
    let all: Vec<u32> = (0..30).collect();
    let err = PaddedGraphBatch::of(&set, &all, "gin", small).err().expect("refused");
    assert!(err.to_string().contains("does not fit"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Folds, config and set for the curve tests.
fn curve_setup(name: &str) -> (std::path::PathBuf, std::sync::Arc<GraphSet>, Folds) {
    let dir = tmp_dir(name);
    write_random_set(&dir, "C", 60, 2, true, 21);
    let set = GraphSet::new(read_tu(&dir, "C").unwrap()).unwrap();
    let folds = Folds::stratified("C", &set.tu.graph_labels, 4, 3).unwrap();
    (dir, std::sync::Arc::new(set), folds)
}

fn curve_config(set: &GraphSet, model: &str) -> GraphTrainConfig {
    GraphTrainConfig {
        model: graph_model(set, model, default_graph_pooling(model)),
        batch_size: 16,
        epochs: 3,
        lr: 0.01,
        lr_halve_every: 2,
        weight_decay: 0.0,
        workers: 2,
        rebind: true,
        record: true,
    }
}

fn curve<B: Ops + 'static>(b: &B, set: &std::sync::Arc<GraphSet>, folds: &Folds, cfg: &GraphTrainConfig) -> FoldResult {
    train_fold(b, set, folds, 1, cfg, &mut |_| {}).unwrap()
}

#[test]
fn bound_training_curve_matches_nets_built_per_batch_cpu() {
    let (dir, set, folds) = curve_setup("bound-curve");
    let b = CpuBackend::<f64>::new();
    for model in ["gin", "gcn", "sage"] {
        let cfg = curve_config(&set, model);
        let bound = curve(&b, &set, &folds, &cfg);
        let per_batch = curve(&b, &set, &folds, &GraphTrainConfig { rebind: false, ..cfg });
        assert!(bound.bound.is_some() && per_batch.bound.is_none(), "{model}: the paths taken");
        for (x, y) in bound.epochs.iter().zip(&per_batch.epochs) {
            // The reported loss parts at f32's rounding of 1 / g (see above); the gradients'
            // scale is the same f32 on both paths, so the training itself does not part.
            assert!((x.train_loss - y.train_loss).abs() < 1e-7, "{model} epoch {}: loss {} vs {}", x.epoch, x.train_loss, y.train_loss);
            assert_eq!((x.train_acc, x.test_acc), (y.train_acc, y.test_acc), "{model} epoch {}", x.epoch);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bound_training_curve_gpu_eager_and_replayed_match_cpu() {
    let Some((gpu, _lock)) = common::gpu_serial_or_skip("bound_training_curve_gpu_eager_and_replayed_match_cpu") else { return };
    let (dir, set, folds) = curve_setup("bound-curve-gpu");
    for model in ["gin", "gcn", "sage"] {
        let cfg = curve_config(&set, model);
        let cpu = curve(&CpuBackend::<f64>::new(), &set, &folds, &cfg);
        // A fresh backend per run: dropout's masks follow its step count, from the fold's 0.
        let gpu_b = || CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap();
        let eager = curve(&gpu_b(), &set, &folds, &GraphTrainConfig { record: false, ..cfg });
        let replayed = curve(&gpu_b(), &set, &folds, &cfg);
        let (be, br) = (eager.bound.as_ref().expect("bound on the GPU"), replayed.bound.as_ref().expect("bound on the GPU"));
        assert_eq!(be.recordings, 0, "{model}: eager steps recorded");
        assert!(br.record_error.is_none(), "{model}: recording failed: {:?}", br.record_error);
        // Recorded at the second step, again at the halved learning rate (epoch 3).
        assert_eq!(br.recordings, 2, "{model}: recordings");
        for ((c, e), r) in cpu.epochs.iter().zip(&eager.epochs).zip(&replayed.epochs) {
            println!(
                "{model} epoch {}: loss cpu {:.6} eager {:.6} replayed {:.6}; test {} {} {}",
                c.epoch, c.train_loss, e.train_loss, r.train_loss, c.test_acc, e.test_acc, r.test_acc
            );
            // f32 kernels with atomics against f64: the curve, not the bits.
            for (w, x) in [("eager", e), ("replayed", r)] {
                assert!(
                    (x.train_loss - c.train_loss).abs() < 2e-3 * c.train_loss.max(1.0),
                    "{model} {w} epoch {}: loss {} vs {}",
                    c.epoch,
                    x.train_loss,
                    c.train_loss
                );
                // Held-out accuracy reads the running statistics, which carry the f32 noise of
                // the biases before BatchNorm (vanishing gradients: Adam steps them by the noise's
                // sign, see graph_task.rs); of 15 held-out graphs, 3 may flip.
                assert!(
                    (x.test_acc - c.test_acc).abs() <= 0.21,
                    "{model} {w} epoch {}: test accuracy {} vs {}",
                    c.epoch,
                    x.test_acc,
                    c.test_acc
                );
            }
            assert!(
                (e.train_loss - r.train_loss).abs() < 1e-3 * c.train_loss.max(1.0),
                "{model} epoch {}: eager {} vs replayed {}",
                c.epoch,
                e.train_loss,
                r.train_loss
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn batch_norm_over_live_rows_gpu_matches_cpu() {
    let Some(gpu) = common::gpu_or_skip("batch_norm_over_live_rows_gpu_matches_cpu") else { return };
    let cpu = CpuBackend::<f64>::new();
    let mut rng = SplitMix64::new(5);
    for (rows, cols, live) in [(37usize, 5usize, 20usize), (300, 64, 299), (9, 130, 1), (64, 3, 0), (17, 8, 17), (2000, 33, 1234)] {
        let what = format!("{rows}x{cols} live {live}");
        let x = Matrix { rows, cols, data: (0..rows * cols).map(|_| rng.next_f64() as f32 * 4.0 - 1.5).collect() };
        let dy = Matrix { rows, cols, data: (0..rows * cols).map(|_| rng.next_f64() as f32 - 0.5).collect() };
        let gamma = Matrix { rows: 1, cols, data: (0..cols).map(|_| rng.next_f64() as f32 + 0.5).collect() };
        let beta = Matrix { rows: 1, cols, data: (0..cols).map(|_| rng.next_f64() as f32 - 0.5).collect() };
        let rv = Matrix { rows: 1, cols, data: vec![1.25; cols] };
        // The CPU reference on the live rows alone (an unpadded batch).
        let xl = Matrix { rows: live, cols, data: x.data[..live * cols].to_vec() };
        let dyl = Matrix { rows: live, cols, data: dy.data[..live * cols].to_vec() };
        let up = |m: &Matrix| cpu.upload(m).unwrap();
        let (xc, dyc, gc, bc) = (up(&xl), up(&dyl), up(&gamma), up(&beta));
        let (mut rmc, mut rvc) = (cpu.matrix(1, cols).unwrap(), up(&rv));
        let (mut yc, mut mc, mut sc) = (cpu.matrix(live, cols).unwrap(), cpu.matrix(1, cols).unwrap(), cpu.matrix(1, cols).unwrap());
        cpu.batch_norm((&xc, None), (&gc, &bc), (&mut rmc, &mut rvc), BatchNormHyper::torch(true), &mut yc, (&mut mc, &mut sc)).unwrap();
        let (mut dxc, mut dgc, mut dbc) = (cpu.matrix(live, cols).unwrap(), cpu.matrix(1, cols).unwrap(), cpu.matrix(1, cols).unwrap());
        cpu.batch_norm_backward((&xc, None), &dyc, &gc, (&mc, &sc), &mut dxc, (&mut dgc, &mut dbc)).unwrap();
        // The GPU on the whole matrix with the count in device memory (set, then rewritten).
        let dev = |m: &Matrix| DeviceMatrix::upload(&gpu, m).unwrap();
        let poison = |r: usize, c: usize| {
            let mut m = DeviceMatrix::<f32>::zeros(&gpu, r, c).unwrap();
            m.poison().unwrap();
            m
        };
        let (xd, dyd, gd, bd) = (dev(&x), dev(&dy), dev(&gamma), dev(&beta));
        let (mut rmd, mut rvd) = (dev(&Matrix::zeros(1, cols)), dev(&rv));
        let (mut yd, mut md, mut sd) = (poison(rows, cols), poison(1, cols), poison(1, cols));
        let mut count = DeviceVec::upload(&gpu, &[rows as u32 + 7]).unwrap();
        let b = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap();
        b.bind_ids(&mut count, &[live as u32]).unwrap();
        batch_norm(&xd, (&gd, &bd), (&mut rmd, &mut rvd), BatchNormHyper::torch(true), &mut yd, (&mut md, &mut sd), Some(&count)).unwrap();
        let (mut dxd, mut dgd, mut dbd) = (poison(rows, cols), poison(1, cols), poison(1, cols));
        batch_norm_backward(&xd, &dyd, &gd, (&md, &sd), &mut dxd, (&mut dgd, &mut dbd), Some(&count)).unwrap();
        let host = |m: &DeviceMatrix<f32>| m.download().unwrap().data.iter().map(|&v| v as f64).collect::<Vec<_>>();
        let pad = |v: &[f64]| {
            let mut v = v.to_vec();
            v.resize(rows * cols, 0.0);
            v
        };
        close(&format!("{what} y"), &host(&yd), &pad(&yc.data), 1e-4);
        close(&format!("{what} running mean"), &host(&rmd), &rmc.data, 1e-5);
        close(&format!("{what} running var"), &host(&rvd), &rvc.data, 1e-4);
        close(&format!("{what} dx"), &host(&dxd), &pad(&dxc.data), 1e-3);
        close(&format!("{what} dgamma"), &host(&dgd), &dgc.data, 1e-4);
        close(&format!("{what} dbeta"), &host(&dbd), &dbc.data, 1e-4);
    }
}
