//! The partitioned step on the GPU ("skipped: no GPU" without one):
//! - in-process, P = 2 and 3 threads on one GPU (each its own stream; halo rows copied device
//!   to device, the default path) against the unpartitioned GPU run, for every model;
//! - NCCL with a world of one against the unpartitioned run (the plumbing of `--gpus` /
//!   `--rank`: NCCL refuses two ranks on one GPU, so more ranks need more GPUs);
//! - `tcgnn train --gpus 1` end to end (spawned rank, rendezvous, NCCL);
//! - the step recorded as a CUDA graph (a world of one, and each part alone) against the eager
//!   step.
//!
//! GPU sums use atomics (their order varies run to run), so curves are compared to 1e-4 over a
//! few epochs; the exactness to 1e-12 is the CPU test's (tests/dist_train.rs).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::common;

use tcgnn::dist::balance::time_alone;
use tcgnn::dist::nccl::{nccl_present, new_unique_id};
use tcgnn::dist::part_graph::relabel;
use tcgnn::dist::{DistOptions, DistTrainer, ExchangeMethod, InProcessRun, NcclCommunicator, Partition, PartitionMethod, train_in_process};
use tcgnn::gpu::Gpu;
use tcgnn::nn::CudaBackend;
use tcgnn::nn::models::{ModelConfig, default_config, model_info};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::task::node::train::{EpochRecord, Recorded};
use tcgnn::task::node::{TrainConfig, Trainer};

const EPOCHS: usize = 6;
const TOL: f64 = 1e-4;

fn data() -> Dataset {
    Dataset::load("sbm:3000:4:8", None, &SyntheticNodeData { features: 32, classes: 4, seed: 1 }).unwrap()
}

fn config(model: &str) -> (ModelConfig, TrainConfig) {
    let mut cfg = default_config(model).unwrap();
    cfg.seed = 3;
    let info = model_info(model).unwrap();
    (cfg, TrainConfig { epochs: EPOCHS, lr: info.lr, weight_decay: info.weight_decay })
}

fn backend(gpu: Arc<Gpu>, model: &str) -> CudaBackend {
    let layout = model_info(model).unwrap().edge_layout;
    CudaBackend::new(gpu, Precision::F32, Impl::Auto).unwrap().with_edge_layout(layout)
}

fn reference(gpu: &Arc<Gpu>, d: &Dataset, cfg: &ModelConfig, tcfg: &TrainConfig) -> Vec<EpochRecord> {
    let mut t = Trainer::new(Arc::new(backend(gpu.clone(), cfg.model)), d, cfg, tcfg).unwrap();
    t.fit(tcfg.epochs, |_| {}).unwrap().epochs
}

fn assert_close(what: &str, got: &[EpochRecord], want: &[EpochRecord]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let d = (g.loss - w.loss).abs() / w.loss.abs().max(1.0);
        assert!(d <= TOL, "{what}: epoch {} loss {} vs {} (relative {d:e})", w.epoch, g.loss, w.loss);
        // Accuracies: at most one node in a hundred may flip on a near-tie.
        assert!((g.val_acc - w.val_acc).abs() <= 0.01, "{what}: epoch {} val {} vs {}", w.epoch, g.val_acc, w.val_acc);
    }
}

#[test]
fn in_process_on_one_gpu_matches_unpartitioned() {
    let Some(gpu) = common::gpu_or_skip("in_process_on_one_gpu_matches_unpartitioned") else { return };
    let data = data();
    for parts in [2, 3] {
        let p = Partition::new(&data.graph, parts, PartitionMethod::Community).unwrap();
        let d = relabel(&data, &p.perm).unwrap();
        for model in ["gcn", "agnn", "gat", "sage", "gin"] {
            let (cfg, tcfg) = config(model);
            let want = reference(&gpu, &data, &cfg, &tcfg);
            let method = if parts == 3 { ExchangeMethod::AllGather } else { ExchangeMethod::PointToPoint };
            let (h, _) = train_in_process(
                &InProcessRun::new(&d, &p, method, &cfg, &tcfg, Duration::from_secs(300)),
                |_| Ok(backend(Gpu::probe()?, model)),
                |_| {},
            )
            .unwrap();
            assert_close(&format!("{model} P = {parts} on one GPU"), &h.epochs, &want);
            println!("{model} P = {parts}: last loss {:.6} (unpartitioned {:.6})", h.epochs[EPOCHS - 1].loss, want[EPOCHS - 1].loss);
        }
    }
}

/// The GPU and a one-rank NCCL world on it (None, saying why, without a GPU or NCCL).
fn nccl_world_of_one(test: &str) -> Option<(Arc<Gpu>, Rc<NcclCommunicator>)> {
    let gpu = common::gpu_or_skip(test)?;
    if let Err(e) = nccl_present() {
        println!("{test}: skipped: {e}");
        return None;
    }
    let comm = Rc::new(NcclCommunicator::new(gpu.clone(), 0, 1, &new_unique_id().unwrap()).unwrap());
    Some((gpu, comm))
}

#[test]
fn nccl_world_of_one_matches_unpartitioned() {
    let Some((gpu, comm)) = nccl_world_of_one("nccl_world_of_one_matches_unpartitioned") else { return };
    let data = data();
    let p = Partition::new(&data.graph, 1, PartitionMethod::Contiguous).unwrap();
    for model in ["gcn", "gat"] {
        let (cfg, tcfg) = config(model);
        let want = reference(&gpu, &data, &cfg, &tcfg);
        let mut t =
            DistTrainer::new(Arc::new(backend(gpu.clone(), model)), comm.clone(), &data, &p, ExchangeMethod::PointToPoint, &cfg, &tcfg)
                .unwrap();
        let h = t.fit(EPOCHS, |_| {}).unwrap();
        assert_close(&format!("{model} NCCL world of 1"), &h.epochs, &want);
        let timing = t.take_timing();
        assert_eq!(timing.steps, EPOCHS as u64);
        assert!(timing.all_reduce_bytes > 0);
    }
}

#[test]
fn cli_gpus_one_runs() {
    if common::gpu_or_skip("cli_gpus_one_runs").is_none() {
        return;
    }
    if let Err(e) = nccl_present() {
        println!("cli_gpus_one_runs: skipped: {e}");
        return;
    }
    let bin = std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string());
    let out = std::process::Command::new(bin)
        .args(["train", "sbm:2000", "--gpus", "1", "--epochs", "3", "--partition-method", "contiguous", "--quiet", "--verbose"])
        .output()
        .unwrap();
    let (so, se) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("on 1 parts") && so.contains("over NCCL") && so.contains("rank 0: step"), "{so}");
    assert!(se.contains("NCCL_NVLS_ENABLE"), "--verbose prints the NCCL environment: {se}");
}

/// One rank's recorded run: a CUDA graph of the step and one of the evaluation, replayed every
/// epoch, exchanges and all-reduces queued by NCCL inside the capture (a world of one: NCCL's
/// calls and the fork / join of its stream are recorded; the rows moved between two GPUs are
/// `two_gpus_over_nccl_recorded_equals_eager`'s). The same curve as the eager rank from epoch 1
/// (the warm-up step the recording runs is undone), with dropout on.
#[test]
fn nccl_world_of_one_recorded_step_is_the_eager_step() {
    let Some((gpu, comm)) = nccl_world_of_one("nccl_world_of_one_recorded_step_is_the_eager_step") else { return };
    let data = data();
    let p = Partition::new(&data.graph, 1, PartitionMethod::Contiguous).unwrap();
    let base = DistOptions::new(ExchangeMethod::PointToPoint);
    for model in ["gcn", "gat", "sage", "gin", "agnn"] {
        let (mut cfg, tcfg) = config(model);
        cfg.dropout = 0.5;
        let want = reference(&gpu, &data, &cfg, &tcfg);
        for options in [base, base.with_overlap(false).with_grad_buckets(Some(0))] {
            let run = |record: bool| {
                let b = Arc::new(backend(gpu.clone(), model));
                let mut t = DistTrainer::with_options(b, comm.clone(), &data, &p, options, &cfg, &tcfg).unwrap();
                if record {
                    let r = t.record().unwrap();
                    assert!(matches!(r, Recorded::Yes), "{model} {options:?}: {r:?}");
                }
                let h = t.fit(EPOCHS, |_| {}).unwrap();
                (h.epochs, t.take_timing())
            };
            let (eager, eager_timing) = run(false);
            let (recorded, timing) = run(true);
            let what = format!("{model} overlap {} buckets {:?}", options.overlap, options.grad_buckets);
            assert_close(&format!("{what}: recorded vs eager"), &recorded, &eager);
            assert_close(&format!("{what}: recorded vs one GPU"), &recorded, &want);
            assert_eq!((timing.steps, timing.replayed, eager_timing.replayed), (EPOCHS as u64, EPOCHS as u64, 0), "{what}");
            assert_eq!(timing.all_reduce_bytes, eager_timing.all_reduce_bytes, "{what}: a replay moves what the eager step moved");
            assert_eq!(timing.all_reduce_calls, eager_timing.all_reduce_calls, "{what}");
            assert!(timing.all_reduce_bytes > 0 && timing.all_reduce_seconds == 0.0, "{what}: {timing:?}");
            println!("{what}: recorded = eager over {EPOCHS} epochs (last loss {:.6})", recorded[EPOCHS - 1].loss);
        }
    }
}

/// Each part alone, recorded (`bench dist --alone --cuda-graph true`): every step a replay, and
/// what a replay counts as moved is what the eager part moves.
#[test]
fn parts_alone_record_their_step() {
    if common::gpu_or_skip("parts_alone_record_their_step").is_none() {
        return;
    }
    let data = data();
    let p = Partition::new(&data.graph, 2, PartitionMethod::LabelProp).unwrap();
    let d = relabel(&data, &p.perm).unwrap();
    for model in ["gcn", "gat"] {
        let (cfg, tcfg) = config(model);
        let options = DistOptions::new(ExchangeMethod::PointToPoint);
        for rank in 0..2 {
            let alone = |graph: bool| {
                let b = Arc::new(backend(Gpu::probe().unwrap(), model));
                time_alone(b, &d, &p, rank, options, &cfg, &tcfg, (2, 5, 0), graph).unwrap().0
            };
            let (eager, recorded) = (alone(false), alone(true));
            assert_eq!((recorded.steps, recorded.replayed, eager.replayed), (5, 5, 0), "{model} part {rank}: the timed steps");
            assert!(eager.halo.bytes > 0, "{model} part {rank}: a part of two has halo rows");
            assert_eq!((recorded.halo.bytes, recorded.halo.calls), (eager.halo.bytes, eager.halo.calls), "{model} part {rank}");
            assert_eq!(recorded.halo.seconds, 0.0, "{model} part {rank}: a replay's exchanges are not timed");
            println!(
                "{model} part {rank} alone: eager {:.3} ms, recorded {:.3} ms a step",
                1e3 * eager.step_seconds / eager.steps as f64,
                1e3 * recorded.step_seconds / recorded.steps as f64
            );
        }
    }
}
