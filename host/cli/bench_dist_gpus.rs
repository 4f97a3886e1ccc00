//! `tcgnn bench dist --gpus 1,2,...`: the distributed step over NCCL, one process per GPU of this
//! host (as `train --gpus`), one world per GPU count with one part per GPU. This process spawns
//! the ranks of each world (`--rank/--world-size/--master`, hidden), rank 0 of each writes its
//! points under `OUT/gpus-N/`, and this process merges them into `OUT/dist.{json,md}` with the
//! speedup and parallel efficiency against the 1-GPU point.

use std::sync::Arc;

use tcgnn::dist::balance::rebalance_ranks;
use tcgnn::dist::part_graph::relabel;
use tcgnn::dist::partition::node_weights;
use tcgnn::dist::{DistTrainer, Partition, PartitionMethod};
use tcgnn::nn::CudaBackend;
use tcgnn::{Error, Result};

use super::bench_dist::{
    BenchDistArgs, DistReport, Point, bucket_settings, exchange_method, fill_speedups, graphs, record, record_or_refuse, settings,
    write_report,
};
use super::dist_train_cmd::{connect_nccl, gather_timing, same_partition_everywhere, spawn_ranks, without_flag};
use crate::cli::train_cmd::{TrainArgs, edge_layout, load_dataset, model_config, train_config};

/// The parent: one world per GPU count, then the merged report.
pub fn run_gpus(a: &BenchDistArgs) -> Result<()> {
    if a.gpus.contains(&0) || a.reps == 0 {
        return Err(Error::Unsupported("--gpus needs GPU counts >= 1 and --reps >= 1".into()));
    }
    let base = without_flag(without_flag(std::env::args().skip(1).collect(), "--gpus"), "--out");
    let mut merged: Option<DistReport> = None;
    for &n in &a.gpus {
        let dir = a.out.join(format!("gpus-{n}"));
        let mut args = base.clone();
        args.extend(["--out".to_string(), dir.display().to_string()]);
        spawn_ranks(n, args, false)?;
        let path = dir.join("dist.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Io { path: path.clone(), source: e })?;
        let r: DistReport = serde_json::from_str(&text).map_err(|e| Error::Unsupported(format!("{}: {e}", path.display())))?;
        match &mut merged {
            None => merged = Some(r),
            Some(m) => m.records.extend(r.records),
        }
    }
    let mut report = merged.ok_or_else(|| Error::Unsupported("--gpus names no GPU count".into()))?;
    report.mode = format!(
        "NCCL, one process per GPU of one host ({:?} GPUs, one part per GPU); halo rows and gradients on device buffers \
         (path device) or staged through the host (path host)",
        a.gpus
    );
    fill_speedups(&mut report.records);
    write_report(&a.out, &report)
}

/// One rank of one world: every (graph, model, path) point, timing gathered to rank 0, which
/// writes `--out`.
pub fn run_rank(a: &BenchDistArgs) -> Result<()> {
    let (Some(rank), Some(world), Some(master)) = (a.rank, a.world_size, a.master.as_deref()) else {
        return Err(Error::Unsupported("--rank needs --world-size and --master".into()));
    };
    if world == 0 || rank >= world {
        return Err(Error::Unsupported(format!("--rank {rank} of --world-size {world}")));
    }
    let (gpu, comm) = connect_nccl(rank, world, master)?;
    let pm: PartitionMethod = a.partition_method.parse()?;
    let mut records = Vec::new();
    if a.row_weight.contains(&0) {
        return Err(Error::Unsupported("--row-weight 0: a row weighs at least 1 edge".into()));
    }
    for graph in &graphs(a, true) {
        // One graph, one partition per row weight for every model (METIS on 10M nodes takes
        // minutes); one part is the same whatever the weight.
        let mut args = TrainArgs::for_graph(graph);
        (args.features, args.quiet) = (Some(a.features.into()), true);
        let data = load_dataset(&args, 0)?;
        let weights = if world == 1 { &a.row_weight[..1] } else { &a.row_weight[..] };
        for &row_weight in weights {
            let p = Partition::with_row_weight(&data.graph, world, pm, row_weight)?;
            same_partition_everywhere(&*comm, &p)?;
            let d = relabel(&data, &p.perm)?;
            for &model in &a.models {
                args.model = model;
                let (cfg, tcfg) = (model_config(&args, 0)?, train_config(&args)?);
                let make = || Ok(CudaBackend::new(gpu.clone(), args.precision, args.imp)?.with_edge_layout(edge_layout(model, None)?));
                // --rebalance: this model's own partition, cut on its parts' measured times.
                let rounds = if world > 1 { a.rebalance } else { 0 };
                let balanced = match rounds {
                    0 => None,
                    _ => {
                        let first = settings(&a.halo_path, a, &bucket_settings(a))[0];
                        let options = first.options(exchange_method(a, &p)?);
                        let base = node_weights(&data.graph, row_weight);
                        let (moved, times) = rebalance_ranks(
                            &*comm,
                            make,
                            &data,
                            (&p, &d),
                            pm,
                            &base,
                            options,
                            &cfg,
                            &tcfg,
                            rounds,
                            (a.warmup, a.reps.min(10)),
                        )?;
                        if let Some((q, _)) = &moved {
                            same_partition_everywhere(&*comm, q)?;
                        }
                        if rank == 0 {
                            eprintln!("{graph} {model} {world} GPUs: parts alone before each rebalancing round {times:.3?} ms");
                        }
                        moved
                    }
                };
                let (p, d) = balanced.as_ref().map_or((&p, &d), |(q, e)| (q, e));
                let method = exchange_method(a, p)?;
                for setting in settings(&a.halo_path, a, &bucket_settings(a)) {
                    let options = setting.options(method);
                    let mut t = DistTrainer::with_options(Arc::new(make()?), comm.clone(), d, p, options, &cfg, &tcfg)?;
                    record_or_refuse(&mut t, setting.cuda_graph)?;
                    for _ in 0..a.warmup {
                        t.step()?;
                    }
                    t.take_timing();
                    for _ in 0..a.reps {
                        t.step()?;
                    }
                    let timing = gather_timing(&*comm, t.take_timing())?;
                    if rank == 0 {
                        let r = record(
                            &Point { graph, d, model, p, row_weight, rebalanced: rounds, options, cuda_graph: setting.cuda_graph },
                            &timing,
                            a.reps,
                            true,
                        );
                        eprintln!(
                            "{graph} {model} {world} GPU(s) ({}): step {:.3} ms = compute {:.3} + halo {:.3} + all-reduce {:.3}; halo {:.1} KiB per step",
                            setting.label(),
                            r.step_ms,
                            r.compute_ms,
                            r.halo_exchange_ms,
                            r.all_reduce_ms,
                            r.halo_bytes as f64 / 1024.0
                        );
                        records.push(r);
                    }
                }
            }
        }
    }
    if rank == 0 {
        let report = DistReport {
            op: "dist".into(),
            date: tcgnn::bench::report::today(),
            commit: env!("TCGNN_GIT_COMMIT").into(),
            device: gpu.info().name.clone(),
            mode: format!("NCCL, {world} process(es), one GPU each"),
            warmup: a.warmup,
            reps: a.reps,
            records,
        };
        write_report(&a.out, &report)?;
    }
    Ok(())
}
