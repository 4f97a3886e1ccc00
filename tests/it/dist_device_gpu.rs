//! The device-resident halo exchange ("skipped: no GPU" without one):
//! - one exchange: the device path's halo rows after `fill`, and the gradient rows after
//!   `give_back`, are bit-identical to the host-staged path's (both are copies, and both add the
//!   returned rows peer after peer in f32), and the filled halo rows are their owners' rows;
//! - training: in-process P = 2 and 3 on one GPU with the device path give the loss curve of the
//!   host path and of P = 1 (GCN, AGNN, GAT, SAGE).
//!
//! The NCCL side of the device path (a world of one: its all-reduce on device buffers, an empty
//! exchange) is exercised by `dist_train_gpu`, whose trainers now default to the device path.

use std::rc::Rc;
use std::time::Duration;

use crate::common;

use tcgnn::dist::device_exchange::DeviceHaloExchange;
use tcgnn::dist::exchange::HaloExchange;
use tcgnn::dist::part_graph::{ExtendedLayout, halo_ids, relabel};
use tcgnn::dist::{Communicator, ExchangeMethod, Halo, HaloPath, InProcess, InProcessRun, Partition, PartitionMethod, train_in_process};
use tcgnn::gpu::Gpu;
use tcgnn::nn::halo_hook::HaloHook;
use tcgnn::nn::models::{default_config, model_info};
use tcgnn::nn::{Backend, CudaBackend};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::node::TrainConfig;
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::task::node::train::EpochRecord;
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

const EPOCHS: usize = 6;
/// Relative loss difference allowed: GPU sums use atomics, whose order varies run to run.
const TOL: f64 = 1e-5;

/// Row `g` of the whole graph's matrix: values that name their row and column.
fn global_row(g: usize, k: usize) -> Vec<f32> {
    (0..k).map(|j| (g * 1000 + j) as f32 * 1e-3).collect()
}

#[test]
fn device_exchange_equals_host_exchange() {
    let Some(_gpu) = common::gpu_or_skip("device_exchange_equals_host_exchange") else { return };
    // A random graph with a hub row (read by every part, sent to several peers at once).
    let n = 600;
    let mut rng = SplitMix64::new(7);
    let mut t = Vec::new();
    for i in 0..n as u32 {
        for _ in 0..3 {
            t.push((i, rng.below(n as u64) as u32, 1.0));
        }
        t.push((i, 0, 1.0));
        t.push((0, i, 1.0));
    }
    let graph = tcgnn::graph::Csr::from_triplets(n, n, &t).unwrap();
    // Two label-propagation parts of a symmetric graph: each part sends its boundary rows, the
    // last of its owned rows in order, so they go from x in place (no gather); the other cuts
    // gather (some of their ranks send runs too: every row of a part the hub reads).
    let sbm = data().graph;
    let cases = [
        (&graph, 2, PartitionMethod::Contiguous),
        (&graph, 3, PartitionMethod::Contiguous),
        (&sbm, 2, PartitionMethod::LabelProp),
        (&sbm, 3, PartitionMethod::LabelProp),
    ];
    let paths = std::sync::Mutex::new(Vec::new());
    for (graph, parts, method) in cases {
        let p = Partition::new(graph, parts, method).unwrap();
        for k in [13, 64] {
            InProcess::run(parts, Duration::from_secs(60), |comm| {
                let rank = comm.rank();
                let b = CudaBackend::new(Gpu::probe()?, Precision::F32, Impl::Auto)?;
                let blocks = &p.blocks[rank];
                let ids = halo_ids(blocks, &p.offsets);
                let layout = ExtendedLayout::new(blocks.first_row, blocks.rows, &ids);
                let halo = Halo::from_partition(&p, rank, ExchangeMethod::PointToPoint)?;
                let comm = Rc::new(comm);
                let host = HaloExchange::<CudaBackend, InProcess>::new(halo.clone(), comm.clone(), layout)?;
                let device = DeviceHaloExchange::new(b.gpu(), &halo, comm.clone(), layout, None)?;
                // Rows go from x in place exactly when every send list is a run.
                let runs = halo.send_lists().iter().all(|l| l.windows(2).all(|w| w[1] == w[0] + 1));
                assert_eq!(device.sends_in_place(), runs, "P = {parts} {method:?} rank {rank}");
                paths.lock().unwrap().push((parts, method, runs));
                // Owned rows: their global rows; halo rows: garbage the fill must overwrite.
                let mut m = Matrix::zeros(layout.rows(), k);
                for r in 0..layout.rows() {
                    let row =
                        if layout.owned_rows().contains(&r) { global_row(blocks.first_row + r - layout.below, k) } else { vec![-7.0; k] };
                    m.data[r * k..(r + 1) * k].copy_from_slice(&row);
                }
                let (mut x1, mut x2) = (b.upload(&m)?, b.upload(&m)?);
                host.fill(&b, &mut x1)?;
                device.fill(&b, &mut x2)?;
                let (h1, h2) = (b.download(&x1)?, b.download(&x2)?);
                assert_eq!(h1, h2, "P = {parts}, k = {k}, rank {rank}: fill");
                for (h, &g) in ids.iter().enumerate() {
                    let r = if h < layout.below { h } else { h + layout.owned };
                    assert_eq!(&h2.data[r * k..(r + 1) * k], &global_row(g as usize, k)[..], "rank {rank}: halo row {h} (global {g})");
                }
                // Gradients on every row, halo rows included.
                let mut rng = SplitMix64::new(100 + rank as u64);
                let grad = Matrix::from_vec(layout.rows(), k, (0..layout.rows() * k).map(|_| rng.next_f64() as f32 - 0.5).collect())?;
                let (mut g1, mut g2) = (b.upload(&grad)?, b.upload(&grad)?);
                host.give_back(&b, &mut g1)?;
                device.give_back(&b, &mut g2)?;
                let (d1, d2) = (b.download(&g1)?, b.download(&g2)?);
                assert_eq!(d1, d2, "P = {parts}, k = {k}, rank {rank}: give_back");
                assert!(
                    d2.data[..layout.below * k].iter().chain(&d2.data[(layout.below + layout.owned) * k..]).all(|&v| v == 0.0),
                    "halo rows zeroed"
                );
                let counted = device.take_counters()?;
                assert_eq!(counted.calls, 2);
                assert_eq!(counted.bytes, 2 * (ids.len() * x2.ld * 4) as u64);
                Ok(())
            })
            .unwrap();
        }
    }
    let paths = paths.into_inner().unwrap();
    assert!(paths.iter().any(|p| !p.2), "the gathered path was exercised");
    // Both ranks of the SBM's two lp parts send in place.
    assert!(paths.iter().filter(|p| p.0 == 2 && p.1 == PartitionMethod::LabelProp).all(|p| p.2), "{paths:?}");
}

fn data() -> Dataset {
    Dataset::load("sbm:3000:4:8", None, &SyntheticNodeData { features: 32, classes: 4, seed: 1 }).unwrap()
}

fn max_rel(got: &[EpochRecord], want: &[EpochRecord]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g.loss - w.loss).abs() / w.loss.abs().max(1.0)).fold(0.0, f64::max)
}

#[test]
fn device_path_curves_match_host_path_and_one_part() {
    if common::gpu_or_skip("device_path_curves_match_host_path_and_one_part").is_none() {
        return;
    }
    let data = data();
    for model in ["gcn", "agnn", "gat", "sage"] {
        let mut cfg = default_config(model).unwrap();
        cfg.seed = 3;
        let info = model_info(model).unwrap();
        let tcfg = TrainConfig { epochs: EPOCHS, lr: info.lr, weight_decay: info.weight_decay };
        let backend = |_| Ok(CudaBackend::new(Gpu::probe()?, Precision::F32, Impl::Auto)?.with_edge_layout(info.edge_layout));
        let run = |parts: usize, path: HaloPath| {
            let p = Partition::new(&data.graph, parts, PartitionMethod::Community).unwrap();
            let d = relabel(&data, &p.perm).unwrap();
            let run = InProcessRun::new(&d, &p, ExchangeMethod::PointToPoint, &cfg, &tcfg, Duration::from_secs(300));
            let options = run.options.with_path(path);
            train_in_process(&InProcessRun { options, ..run }, backend, |_| {}).unwrap()
        };
        let (one, _) = run(1, HaloPath::Device);
        for parts in [2, 3] {
            let (dev, timing) = run(parts, HaloPath::Device);
            let (host, _) = run(parts, HaloPath::Host);
            let (vs_host, vs_one) = (max_rel(&dev.epochs, &host.epochs), max_rel(&dev.epochs, &one.epochs));
            println!("{model} P = {parts}: device path vs host path {vs_host:.2e}, vs P = 1 {vs_one:.2e} (max relative loss difference)");
            assert!(vs_host <= TOL && vs_one <= TOL, "{model} P = {parts}: {vs_host:e} vs host path, {vs_one:e} vs P = 1");
            assert!(timing.iter().all(|t| t.halo.calls > 0 && t.halo.bytes > 0 && t.all_reduce_bytes > 0), "{timing:?}");
        }
    }
}
