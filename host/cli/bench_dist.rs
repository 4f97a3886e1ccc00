//! `tcgnn bench dist`: the partitioned training step per part count, its time split into compute,
//! halo exchange and the gradient all-reduce, with the halo bytes; `bench/results/dist.{json,md}`.
//!
//! The ranks are threads of this process on one device (the in-process communicator; on a GPU
//! each thread has its own stream, and `--halo-path` says whether rows move device to device or
//! through the host), so the numbers
//! say what partitioning costs and what an exchange moves, not how P GPUs scale: the multi-GPU
//! runs are `tcgnn train GRAPH --gpus N --verbose` (per-rank step / exchange / all-reduce times).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tcgnn::bench::report::today;
use tcgnn::dist::balance::{OpTimes, SHARE_TOTAL, rebalanced, time_alone};
use tcgnn::dist::detached::Detached;
use tcgnn::dist::part_graph::relabel;
use tcgnn::dist::partition::node_weights;
use tcgnn::dist::{
    Communicator, DistBackend, DistOptions, DistTrainer, ExchangeMethod, HaloPath, InProcess, OverlapSplit, Partition, PartitionMethod,
    StepTiming,
};
use tcgnn::gpu::Gpu;
use tcgnn::nn::models::parse_model_name;
use tcgnn::nn::{CpuBackend, CudaBackend, ModelConfig};
use tcgnn::task::node::train::Recorded;
use tcgnn::task::node::{Dataset, TrainConfig};
use tcgnn::{Error, Result};

use crate::cli::train_cmd::{Device, TrainArgs, edge_layout, load_dataset, model_config, train_config};

#[derive(clap::Args)]
pub struct BenchDistArgs {
    /// Graphs (default: rmat:18:16 and sbm:1000000 on a GPU, sbm:20000 on the CPU).
    pub graphs: Vec<String>,
    /// Part counts (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub parts: Vec<usize>,
    /// Models (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "gcn,gat", value_parser = parse_model_name)]
    pub models: Vec<&'static str>,
    /// metis, community, contiguous or lp (see `train --partition-method`).
    #[arg(long, default_value = "metis")]
    pub partition_method: String,
    /// What a row weighs in the partition's balance, in edges (comma separated, each its own
    /// partition; 1 balances edges alone).
    #[arg(long, value_delimiter = ',', default_values_t = [tcgnn::dist::partition::DEFAULT_ROW_WEIGHT])]
    pub row_weight: Vec<u64>,
    /// Each part's step alone on this one device, one part after another, its exchanges moving
    /// nothing ([`tcgnn::dist::detached`]): the compute a rank of a P-GPU run does, without its
    /// waits, so a partition's balance is measured without P GPUs. The losses are not the run's.
    #[arg(long)]
    pub alone: bool,
    /// Rounds of balancing on measured time after the row-weighted partition: each part's step
    /// timed alone, nodes weighted by their part's cost, the graph cut again
    /// ([`tcgnn::dist::balance`]); every round is a point of its own.
    #[arg(long, default_value_t = 0)]
    pub rebalance: u32,
    /// With --alone: after the timed steps, each part's per-op time (5 steps with an event pair
    /// around every op) beside the whole graph's, as a table on stderr: where a part's step
    /// costs more than its share.
    #[arg(long, requires = "alone")]
    pub profile_ops: bool,
    /// auto (all-gather when a part's halo is over half of one), p2p, all-gather.
    #[arg(long, default_value = "auto")]
    pub exchange: String,
    /// Width of the synthetic features.
    #[arg(long, default_value_t = 64)]
    pub features: usize,
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    #[arg(long, default_value_t = 10)]
    pub reps: usize,
    #[arg(long, value_enum, default_value = "auto")]
    pub device: Device,
    /// Where the GPU ranks' halo rows and gradients travel (comma separated, each measured):
    /// device (device-to-device copies), host (staged through host memory).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "device")]
    pub halo_path: Vec<HaloPath>,
    /// Whether the halo exchanges overlap the products (GCN, SAGE, GIN, GAT on the device path;
    /// comma separated, each measured): true, false (serial), or true,false for both.
    #[arg(long, value_delimiter = ',', default_value = "false", action = clap::ArgAction::Set)]
    pub overlap: Vec<bool>,
    /// Whether the input layer forms its halo rows from the halo nodes' own features (true)
    /// or exchanges them as every other layer does (false); comma separated, each measured.
    /// Unset: as --overlap (overlapped steps local, serial ones exchanged).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set)]
    pub local_input: Vec<bool>,
    /// How an overlapped GCN / SAGE / GIN forward divides its product around the exchange
    /// (comma separated, each measured; serial steps ignore it): columns (every owned row's
    /// owned columns beside it, the halo columns added after), rows (the interior rows beside
    /// it, the boundary rows whole after).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rows")]
    pub overlap_split: Vec<OverlapSplit>,
    /// Whether the gradient all-reduce runs in buckets during the backward (true) or after it
    /// in one fused buffer (false, serial); comma separated, each measured: true,false for both.
    #[arg(long, value_delimiter = ',', default_value = "false", action = clap::ArgAction::Set)]
    pub grad_buckets: Vec<bool>,
    /// Whether each step replays a recorded CUDA graph (true) or queues its kernels one by one
    /// (false); comma separated, each measured. Recorded steps' halo and all-reduce times are not
    /// measured (their bytes are). Needs ranks that queue everything on the device: --gpus or
    /// --alone, the device path.
    #[arg(long, value_delimiter = ',', default_value = "false", action = clap::ArgAction::Set)]
    pub cuda_graph: Vec<bool>,
    /// Whether a GCN on a symmetric graph pulls in its backward (true: fills dY's halo rows and
    /// multiplies by Â's owned rows, as the forward) or forms Âᵀ's halo rows and gives them back
    /// (false, as other models do); comma separated, each measured.
    #[arg(long, value_delimiter = ',', default_value = "true", action = clap::ArgAction::Set)]
    pub pull_backward: Vec<bool>,
    /// With --grad-buckets true: a bucket is started once its layers' gradients hold at least
    /// this many KiB (0: one bucket per layer, as the backward finishes it).
    #[arg(long, default_value_t = 0)]
    pub grad_bucket_kib: usize,
    /// Folder for dist.json and dist.md.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// GPU counts to measure over NCCL, one process per GPU of this host (comma separated;
    /// each count is its own world with one part per GPU; replaces --parts). Speedup and
    /// efficiency are against the 1-GPU point when it is in the list.
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<usize>,
    /// Set by --gpus for the processes it spawns: this one is rank R of a world.
    #[arg(long, hide = true, requires_all = ["world_size", "master"])]
    pub rank: Option<usize>,
    #[arg(long, hide = true)]
    pub world_size: Option<usize>,
    #[arg(long, hide = true)]
    pub master: Option<String>,
}

/// One rank's figures per step: the median step, the means of the rest.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct RankRecord {
    rank: usize,
    /// The median of its steps' wall times (the mean in reports before `step_mean_ms`).
    step_ms: f64,
    #[serde(default)]
    step_mean_ms: Option<f64>,
    halo_exchange_ms: f64,
    all_reduce_ms: f64,
    halo_bytes: u64,
    all_reduce_bytes: u64,
}

/// One (graph, model, parts) point: the slowest rank's step and its split, bytes summed over
/// the ranks (all per step).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct DistRecord {
    pub(crate) graph: String,
    pub(crate) nodes: usize,
    pub(crate) edges: usize,
    pub(crate) model: String,
    pub(crate) parts: usize,
    pub(crate) partition_method: String,
    /// The edges a row weighed in the partition's balance.
    #[serde(default = "one")]
    pub(crate) row_weight: u64,
    /// Rounds of balancing on measured time after the row-weighted cut.
    #[serde(default)]
    pub(crate) rebalanced: u32,
    pub(crate) exchange: String,
    /// device or host ("host" on the CPU, whose memory is both).
    pub(crate) halo_path: HaloPath,
    /// Whether the exchanges overlapped the products (the device path): then
    /// `halo_exchange_ms` is the exchanges' own time, partly hidden, and `compute_ms` is the
    /// step less the all-reduce (what of the exchange shows is in it).
    #[serde(default)]
    pub(crate) overlap: bool,
    /// Whether the input layer formed its halo rows locally ([`DistOptions::local_input`]; absent
    /// in reports before it was a choice, when it went with `overlap`).
    #[serde(default)]
    pub(crate) local_input: Option<bool>,
    /// How an overlapped product was divided (absent before it was a choice: columns).
    #[serde(default)]
    pub(crate) overlap_split: Option<OverlapSplit>,
    /// The gradient all-reduce in buckets of at least this many bytes during the backward
    /// (`None`: serial, after it); then `all_reduce_ms` is the buckets' own time, partly hidden,
    /// and `compute_ms` keeps it.
    #[serde(default)]
    pub(crate) grad_buckets: Option<usize>,
    /// Whether each step replayed a recorded CUDA graph: then `halo_exchange_ms` and
    /// `all_reduce_ms` are not measured (0) and `compute_ms` is the whole step.
    #[serde(default)]
    pub(crate) cuda_graph: bool,
    /// Whether a GCN on a symmetric graph was asked to pull in its backward
    /// ([`DistOptions::pull_backward`]; other models give back whatever it says). Absent in
    /// reports from before it was a choice, when every backward gave back.
    #[serde(default)]
    pub(crate) pull_backward: bool,
    /// Mean over parts of halo rows / all-gather rows, and the largest part's edges / the mean.
    pub(crate) halo_ratio: f64,
    pub(crate) edge_balance: f64,
    pub(crate) halo_rows: usize,
    /// Rows (all parts) that read no halo row: what an overlapped forward multiplies beside the
    /// exchange (each part puts them first).
    #[serde(default)]
    pub(crate) interior_rows: usize,
    /// The median over the steps: of the slowest rank's wall time in each where the ranks
    /// stepped together, of the slowest part's steps alone (`--alone`). Reports without
    /// `step_mean_ms` hold the slowest rank's mean here.
    pub(crate) step_ms: f64,
    /// The slowest rank's mean step.
    #[serde(default)]
    pub(crate) step_mean_ms: Option<f64>,
    /// `step_ms` less the means of the exchange and all-reduce where they do not overlap it.
    pub(crate) compute_ms: f64,
    pub(crate) halo_exchange_ms: f64,
    pub(crate) all_reduce_ms: f64,
    pub(crate) halo_bytes: u64,
    pub(crate) all_reduce_bytes: u64,
    /// --gpus: the 1-GPU step / this step, and that over the GPU count.
    pub(crate) speedup: Option<f64>,
    pub(crate) efficiency: Option<f64>,
    pub(crate) ranks: Vec<RankRecord>,
}

fn one() -> u64 {
    1
}

#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct DistReport {
    pub(crate) op: String,
    pub(crate) date: String,
    pub(crate) commit: String,
    pub(crate) device: String,
    pub(crate) mode: String,
    pub(crate) warmup: usize,
    pub(crate) reps: usize,
    pub(crate) records: Vec<DistRecord>,
}

pub fn run(a: &BenchDistArgs) -> Result<()> {
    if a.rank.is_some() {
        return super::bench_dist_gpus::run_rank(a);
    }
    if !a.gpus.is_empty() {
        return super::bench_dist_gpus::run_gpus(a);
    }
    if a.parts.is_empty() || a.parts.contains(&0) || a.reps == 0 {
        return Err(Error::Unsupported("--parts needs part counts >= 1 and --reps >= 1".into()));
    }
    if a.row_weight.contains(&0) {
        return Err(Error::Unsupported("--row-weight 0: a row weighs at least 1 edge".into()));
    }
    if a.rebalance > 0 && !a.alone {
        return Err(Error::Unsupported(
            "--rebalance on one device needs --alone (threads sharing a device wait for each other, so their times are not \
             their parts' costs); with --gpus each rank times its own part"
                .into(),
        ));
    }
    let pm: PartitionMethod = a.partition_method.parse()?;
    let gpu = match a.device {
        Device::Cpu => None,
        Device::Gpu => Some(Gpu::probe()?),
        Device::Auto => Gpu::probe().ok(),
    };
    if gpu.is_none() && a.cuda_graph.contains(&true) {
        return Err(Error::Unsupported("--cuda-graph true records the step on a GPU: this run is on the CPU".into()));
    }
    let graphs = graphs(a, gpu.is_some());
    let device = gpu.as_ref().map_or_else(|| "cpu (f32)".to_string(), |g| g.info().name.clone());
    let mut records = Vec::new();
    for graph in &graphs {
        for &model in &a.models {
            let mut args = TrainArgs::for_graph(graph);
            (args.model, args.features, args.quiet) = (model, Some(a.features.into()), true);
            let data = load_dataset(&args, 0)?;
            let (cfg, tcfg) = (model_config(&args, 0)?, train_config(&args)?);
            // One part is the same whatever the row weight: measured once.
            let points = a.parts.iter().flat_map(|&p| a.row_weight.iter().take(if p == 1 { 1 } else { usize::MAX }).map(move |&w| (p, w)));
            for (parts, row_weight) in points {
                let p = Partition::with_row_weight(&data.graph, parts, pm, row_weight)?;
                let method = exchange_method(a, &p)?;
                let d = relabel(&data, &p.perm)?;
                // The CPU's memory is host and device at once: one path to measure there.
                let paths = if gpu.is_some() { a.halo_path.clone() } else { vec![HaloPath::Host] };
                for setting in settings(&paths, a, &bucket_settings(a)) {
                    let cuda =
                        |_| Ok(CudaBackend::new(Gpu::probe()?, args.precision, args.imp)?.with_edge_layout(edge_layout(model, None)?));
                    // Round 0 is the row-weighted partition; each --rebalance round cuts again on
                    // the last round's measured part times.
                    let mut moved: Option<(Partition, Dataset)> = None;
                    let weights = node_weights(&data.graph, row_weight);
                    let mut shares = vec![SHARE_TOTAL / parts as u64; parts];
                    for round in 0..=if parts > 1 { a.rebalance } else { 0 } {
                        let (p, d) = moved.as_ref().map_or((&p, &d), |(p, d)| (p, d));
                        let options = setting.options(method);
                        let at = Point { graph, d, model, p, row_weight, rebalanced: round, options, cuda_graph: setting.cuda_graph };
                        let timing = match (&gpu, a.alone) {
                            (Some(_), false) => measure(&at, &cfg, &tcfg, a, cuda)?,
                            (None, false) => measure(&at, &cfg, &tcfg, a, |_| Ok(CpuBackend::<f32>::new()))?,
                            (Some(_), true) => measure_alone(&at, &cfg, &tcfg, a, cuda)?,
                            (None, true) => measure_alone(&at, &cfg, &tcfg, a, |_| Ok(CpuBackend::<f32>::new()))?,
                        };
                        let r = record(&at, &timing, a.reps, !a.alone);
                        let per_part: Vec<String> = r.ranks.iter().map(|k| format!("{:.3}", k.step_ms)).collect();
                        eprintln!(
                            "{graph} {model} P = {parts} (row weight {row_weight}, rebalanced {round}x, {}): step {:.3} ms = compute {:.3} + halo {:.3} + all-reduce {:.3}; halo {:.1} KiB per step; parts' steps [{}] ms",
                            setting.label(),
                            r.step_ms,
                            r.compute_ms,
                            r.halo_exchange_ms,
                            r.all_reduce_ms,
                            r.halo_bytes as f64 / 1024.0,
                            per_part.join(", ")
                        );
                        if round < a.rebalance {
                            let part_ms: Vec<f64> = r.ranks.iter().map(|k| k.step_ms).collect();
                            let next;
                            (next, shares) = rebalanced(&data.graph, pm, &weights, &shares, &part_ms)?;
                            let d = relabel(&data, &next.perm)?;
                            moved = Some((next, d));
                        }
                        records.push(r);
                    }
                }
            }
        }
    }
    if a.alone {
        fill_speedups(&mut records);
    }
    let report = DistReport {
        op: "dist".into(),
        date: today(),
        commit: env!("TCGNN_GIT_COMMIT").into(),
        device,
        mode: if a.alone {
            "alone: each part's step on one device, one part after another, its exchanges moving nothing: a rank's \
             compute without its waits (step = the slowest part's)"
                .into()
        } else {
            "in-process: the parts as threads on one device, each with its own stream; halo rows and gradients \
             device to device (path device) or staged through the host (path host)"
                .into()
        },
        warmup: a.warmup,
        reps: a.reps,
        records,
    };
    write_report(&a.out, &report)
}

/// Each record's speedup and efficiency against the one-part point of the same graph, model
/// and setting (the first measured: one part is the same whatever the row weight).
pub(crate) fn fill_speedups(records: &mut [DistRecord]) {
    let same = |a: &DistRecord, b: &DistRecord| {
        a.graph == b.graph
            && a.model == b.model
            && a.halo_path == b.halo_path
            && a.overlap == b.overlap
            && a.local_input == b.local_input
            && a.overlap_split == b.overlap_split
            && a.grad_buckets == b.grad_buckets
            && a.cuda_graph == b.cuda_graph
            && a.pull_backward == b.pull_backward
    };
    let ones: Vec<usize> = (0..records.len()).filter(|&i| records[i].parts == 1).collect();
    for i in 0..records.len() {
        if let Some(&o) = ones.iter().find(|&&o| same(&records[o], &records[i])) {
            let one = records[o].step_ms;
            let r = &mut records[i];
            r.speedup = Some(one / r.step_ms);
            r.efficiency = Some(one / r.step_ms / r.parts as f64);
        }
    }
}

/// The --exchange choice for partition `p`.
pub(crate) fn exchange_method(a: &BenchDistArgs, p: &Partition) -> Result<ExchangeMethod> {
    Ok(match a.exchange.as_str() {
        "auto" => tcgnn::dist::choose_exchange(p.halo_ratio(), tcgnn::dist::ALL_GATHER_THRESHOLD),
        "p2p" => ExchangeMethod::PointToPoint,
        "all-gather" => ExchangeMethod::AllGather,
        o => return Err(Error::Unsupported(format!("--exchange {o}: auto, p2p or all-gather"))),
    })
}

/// The graphs to measure (`gpu`: defaults for a GPU run).
pub(crate) fn graphs(a: &BenchDistArgs, gpu: bool) -> Vec<String> {
    match (&a.graphs[..], gpu) {
        ([], true) => vec!["rmat:18:16".to_string(), "sbm:1000000".to_string()],
        ([], false) => vec!["sbm:20000".to_string()],
        (g, _) => g.to_vec(),
    }
}

/// `dir/dist.json` and `dir/dist.md`.
pub(crate) fn write_report(dir: &std::path::Path, report: &DistReport) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.to_path_buf(), source: e })?;
    let json = dir.join("dist.json");
    let text = serde_json::to_string_pretty(report).map_err(|e| Error::Unsupported(format!("dist.json: {e}")))?;
    tcgnn::util::atomic::write_atomic(&json, text.as_bytes())?;
    let md = dir.join("dist.md");
    tcgnn::util::atomic::write_atomic(&md, markdown(report).as_bytes())?;
    eprintln!("wrote {} and {}", json.display(), md.display());
    Ok(())
}

/// How one measured point's ranks move rows and gradients ([`DistOptions`] less the exchange
/// method, which comes with the partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Setting {
    pub(crate) path: HaloPath,
    pub(crate) overlap: bool,
    pub(crate) local_input: bool,
    pub(crate) split: OverlapSplit,
    pub(crate) grad_buckets: Option<usize>,
    /// Steps replayed as a recorded CUDA graph.
    pub(crate) cuda_graph: bool,
    pub(crate) pull_backward: bool,
}

impl Setting {
    pub(crate) fn options(self, method: ExchangeMethod) -> DistOptions {
        let Setting { path, overlap, local_input, split, grad_buckets, pull_backward, .. } = self;
        DistOptions { method, path, overlap, local_input, split, grad_buckets, pull_backward }
    }

    /// For the progress lines.
    pub(crate) fn label(self) -> String {
        let input = if self.local_input { "input local" } else { "input exchanged" };
        let overlap = if self.overlap { format!("overlap by {:?}", self.split).to_lowercase() } else { "serial".into() };
        let graph = if self.cuda_graph { ", CUDA graph" } else { "" };
        let pull = if self.pull_backward { "" } else { ", backward gives back" };
        format!("{:?} path, {overlap}, {input}, {}{graph}{pull}", self.path, buckets_label(self.grad_buckets))
    }
}

/// The settings `a` asks for on `paths`: overlap only where it can differ (the device path),
/// split only when overlapped; each overlap with every `--local-input` value (none given:
/// local exactly when overlapped); recorded only on the device path (the host path waits on
/// the host).
pub(crate) fn settings(paths: &[HaloPath], a: &BenchDistArgs, buckets: &[Option<usize>]) -> Vec<Setting> {
    let mut out = Vec::new();
    for &path in paths {
        for &o in &a.overlap {
            let overlap = o && path == HaloPath::Device;
            let inputs = if a.local_input.is_empty() { std::slice::from_ref(&overlap) } else { &a.local_input };
            let splits = if overlap { &a.overlap_split[..] } else { &[OverlapSplit::Columns][..] };
            for &local_input in inputs {
                for &split in splits {
                    for &grad_buckets in buckets {
                        for &g in &a.cuda_graph {
                            let cuda_graph = g && path == HaloPath::Device;
                            for &pull_backward in &a.pull_backward {
                                let s = Setting { path, overlap, local_input, split, grad_buckets, cuda_graph, pull_backward };
                                if !out.contains(&s) {
                                    out.push(s);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// `--grad-buckets` as [`DistOptions::grad_buckets`] values (bytes, or `None`: serial).
pub(crate) fn bucket_settings(a: &BenchDistArgs) -> Vec<Option<usize>> {
    a.grad_buckets.iter().map(|&on| on.then_some(a.grad_bucket_kib.saturating_mul(1024))).collect()
}

/// How a run's gradient all-reduce went, for the progress lines.
fn buckets_label(grad_buckets: Option<usize>) -> String {
    match grad_buckets {
        None => "all-reduce serial".into(),
        Some(0) => "all-reduce in per-layer buckets".into(),
        Some(b) => format!("all-reduce in buckets of >= {} KiB", b / 1024),
    }
}

/// One measured point: the graph (its spec and relabelled data), the model, the partition and
/// how the ranks exchange.
pub(crate) struct Point<'a> {
    pub(crate) graph: &'a str,
    pub(crate) d: &'a Dataset,
    pub(crate) model: &'a str,
    pub(crate) p: &'a Partition,
    pub(crate) row_weight: u64,
    pub(crate) rebalanced: u32,
    pub(crate) options: DistOptions,
    /// Steps replayed as a recorded CUDA graph.
    pub(crate) cuda_graph: bool,
}

/// Records `t`'s step when `cuda_graph` (every rank calls it); an error where it cannot be, so
/// that no eager figure is labelled a recorded one.
pub(crate) fn record_or_refuse<B: DistBackend<C>, C: Communicator + 'static>(t: &mut DistTrainer<B, C>, cuda_graph: bool) -> Result<()> {
    if !cuda_graph {
        return Ok(());
    }
    match t.record()? {
        Recorded::Yes => Ok(()),
        Recorded::NotSupported => Err(Error::Unsupported(
            "--cuda-graph true: these ranks cannot record their step (the in-process ranks and the host path wait on the host; \
             use --gpus or --alone on the device path)"
                .into(),
        )),
        Recorded::Failed(why) => Err(Error::Unsupported(format!("--cuda-graph true: recording the step failed: {why}"))),
    }
}

/// Every rank's step timing over `reps` steps after `warmup`.
fn measure<B: DistBackend<InProcess>>(
    at: &Point<'_>,
    cfg: &ModelConfig,
    tcfg: &TrainConfig,
    a: &BenchDistArgs,
    make: impl Fn(usize) -> Result<B> + Sync,
) -> Result<Vec<StepTiming>> {
    let Point { d, p, options, cuda_graph, .. } = *at;
    InProcess::run(p.parts(), Duration::from_secs(600), |comm| {
        let rank = comm.rank();
        let mut t = DistTrainer::with_options(Arc::new(make(rank)?), Rc::new(comm), d, p, options, cfg, tcfg)?;
        record_or_refuse(&mut t, cuda_graph)?;
        for _ in 0..a.warmup {
            t.step()?;
        }
        t.take_timing();
        for _ in 0..a.reps {
            t.step()?;
        }
        Ok(t.take_timing())
    })
}

/// Every part's step timing, each part alone on this device after the others
/// ([`Detached`]: exchanges that move nothing).
fn measure_alone<B: DistBackend<Detached>>(
    at: &Point<'_>,
    cfg: &ModelConfig,
    tcfg: &TrainConfig,
    a: &BenchDistArgs,
    make: impl Fn(usize) -> Result<B>,
) -> Result<Vec<StepTiming>> {
    let Point { graph, model, d, p, options, cuda_graph, .. } = *at;
    let op_steps = if a.profile_ops { 5 } else { 0 };
    let mut timing = Vec::new();
    let mut profiles = Vec::new();
    for rank in 0..p.parts() {
        let (t, ops) = time_alone(Arc::new(make(rank)?), d, p, rank, options, cfg, tcfg, (a.warmup, a.reps, op_steps), cuda_graph)?;
        timing.push(t);
        profiles.push(ops);
    }
    if a.profile_ops {
        match profiles.iter().all(|p| p.is_empty()) {
            true => eprintln!("--profile-ops: this backend keeps no per-op events (the GPU's does)"),
            false => eprintln!("{}", op_table(&format!("{graph} {model}, {} part(s) alone", p.parts()), &profiles)),
        }
    }
    Ok(timing)
}

/// Per-op ms per step of every part side by side (rows: ops by the slowest part's time).
fn op_table(title: &str, parts: &[OpTimes]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for ops in parts {
        for (name, ..) in ops {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let ms = |p: &[(String, f64, f64)], name: &str| p.iter().find(|o| o.0 == name).map_or(0.0, |o| o.1);
    let slowest = |name: &str| parts.iter().map(|p| ms(p, name)).fold(0.0, f64::max);
    names.sort_by(|a, b| slowest(b).total_cmp(&slowest(a)));
    let mut s = format!("per-op ms per step, {title}:\n{:<28}", "op");
    for r in 0..parts.len() {
        let _ = write!(s, " {:>9}", format!("part {r}"));
    }
    for name in names {
        let _ = write!(s, "\n{name:<28}");
        for p in parts {
            let _ = write!(s, " {:>9.3}", ms(p, name));
        }
    }
    let _ = write!(s, "\n{:<28}", "sum");
    for p in parts {
        let _ = write!(s, " {:>9.3}", p.iter().fold(0.0, |t, o| t + o.1));
    }
    s
}

/// The point's record from every rank's timing over `reps` steps; `together`: the ranks
/// stepped together (each step waits for the slowest), else each part alone.
pub(crate) fn record(at: &Point<'_>, timing: &[StepTiming], reps: usize, together: bool) -> DistRecord {
    let Point { graph, d, model, p, row_weight, rebalanced, options, cuda_graph } = *at;
    let DistOptions { method, path, overlap, local_input, split, grad_buckets, pull_backward } = options;
    // The device path sends exactly the halo rows whatever the method (device_exchange.rs).
    let method = if path == HaloPath::Device { ExchangeMethod::PointToPoint } else { method };
    let per = |s: f64| 1e3 * s / reps as f64;
    let ranks: Vec<RankRecord> = timing
        .iter()
        .enumerate()
        .map(|(rank, t)| RankRecord {
            rank,
            step_ms: 1e3 * t.median_step_seconds(),
            step_mean_ms: Some(per(t.step_seconds)),
            halo_exchange_ms: per(t.halo.seconds),
            all_reduce_ms: per(t.all_reduce_seconds),
            halo_bytes: t.halo.bytes / reps as u64,
            all_reduce_bytes: t.all_reduce_bytes / reps as u64,
        })
        .collect();
    let slowest =
        ranks.iter().max_by(|a, b| a.step_mean_ms.unwrap_or(0.0).total_cmp(&b.step_mean_ms.unwrap_or(0.0))).expect("at least one rank");
    let step_ms = match together.then(|| StepTiming::median_slowest_step_seconds(timing)).flatten() {
        Some(s) => 1e3 * s,
        None => ranks.iter().map(|r| r.step_ms).fold(0.0, f64::max),
    };
    DistRecord {
        graph: graph.to_string(),
        nodes: d.n(),
        edges: d.graph.nnz(),
        model: model.to_string(),
        parts: p.parts(),
        partition_method: p.method.to_string(),
        row_weight,
        rebalanced,
        exchange: format!("{method:?}"),
        halo_path: path,
        overlap,
        local_input: Some(local_input),
        overlap_split: overlap.then_some(split),
        grad_buckets,
        cuda_graph,
        pull_backward,
        halo_ratio: p.halo_ratio(),
        edge_balance: p.edge_balance(),
        halo_rows: p.blocks.iter().map(|b| b.halo_rows()).sum(),
        interior_rows: p.blocks.iter().map(|b| (0..b.rows).filter(|&r| b.remote.row_len(r) == 0).count()).sum(),
        step_ms,
        step_mean_ms: slowest.step_mean_ms,
        // Overlapped, the exchanges' time is partly hidden in the step: not subtracted; nor is
        // the all-reduce's in buckets; recorded, neither is measured (both 0).
        compute_ms: step_ms
            - if overlap { 0.0 } else { slowest.halo_exchange_ms }
            - if grad_buckets.is_some() { 0.0 } else { slowest.all_reduce_ms },
        halo_exchange_ms: slowest.halo_exchange_ms,
        all_reduce_ms: slowest.all_reduce_ms,
        halo_bytes: ranks.iter().map(|r| r.halo_bytes).sum(),
        all_reduce_bytes: ranks.iter().map(|r| r.all_reduce_bytes).sum(),
        speedup: None,
        efficiency: None,
        ranks,
    }
}

fn markdown(r: &DistReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Partitioned training step ({}, {}, commit {})\n\n{}; step: median of {} steps after {} warm-up, the slowest rank's in each; exchange and all-reduce: the slowest rank's means.\n",
        r.device, r.date, r.commit, r.mode, r.reps, r.warmup
    );
    let _ = writeln!(
        s,
        "| graph | model | parts | method | row weight | exchange | path | overlap | grad buckets | interior | halo/all | balance | step ms | compute | halo | all-reduce | halo KiB/step | speedup | efficiency |"
    );
    let _ = writeln!(s, "|---|---|---:|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for x in &r.records {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:?}{}{} | {} | {} | {:.0}% | {:.3} | {:.2} | {:.3} | {:.3} | {} | {} | {:.1} | {} | {} |",
            x.graph,
            x.model,
            x.parts,
            x.partition_method,
            if x.rebalanced == 0 { x.row_weight.to_string() } else { format!("{}, measured x{}", x.row_weight, x.rebalanced) },
            x.exchange,
            x.halo_path,
            if x.cuda_graph { ", CUDA graph" } else { "" },
            if x.pull_backward { "" } else { ", backward gives back" },
            match (x.overlap, x.local_input, x.overlap_split) {
                (true, Some(false), Some(OverlapSplit::Rows)) => "by rows, input exchanged",
                (true, Some(false), _) => "yes, input exchanged",
                (true, _, Some(OverlapSplit::Rows)) => "by rows",
                (true, _, _) => "yes",
                (false, Some(true), _) => "no, input local",
                (false, _, _) => "no",
            },
            x.grad_buckets.map_or("no".into(), |b| format!("{} KiB", b / 1024)),
            100.0 * x.interior_rows as f64 / x.nodes.max(1) as f64,
            x.halo_ratio,
            x.edge_balance,
            x.step_ms,
            x.compute_ms,
            // Not measured in a recorded step.
            if x.cuda_graph { "-".into() } else { format!("{:.3}", x.halo_exchange_ms) },
            if x.cuda_graph { "-".into() } else { format!("{:.3}", x.all_reduce_ms) },
            x.halo_bytes as f64 / 1024.0,
            x.speedup.map_or("".into(), |v| format!("{v:.2}x")),
            x.efficiency.map_or("".into(), |v| format!("{:.0}%", 100.0 * v)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_pair_the_input_with_the_overlap_unless_told() {
        let (dev, host) = (HaloPath::Device, HaloPath::Host);
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            a: BenchDistArgs,
        }
        let args = |extra: &[&str]| {
            let mut v = vec!["bench", "cora"];
            v.extend_from_slice(extra);
            <Wrap as clap::Parser>::try_parse_from(v).unwrap().a
        };
        let got = settings(&[dev, host], &args(&["--overlap", "true,false"]), &[None]);
        let pairs: Vec<_> = got.iter().map(|s| (s.path, s.overlap, s.local_input)).collect();
        // The host path never overlaps: its two overlaps are one setting.
        assert_eq!(pairs, vec![(dev, true, true), (dev, false, false), (host, false, false)]);
        let got = settings(&[dev], &args(&["--overlap", "true", "--local-input", "false,true"]), &[None, Some(0)]);
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(|s| s.overlap) && got.iter().filter(|s| !s.local_input).count() == 2);
        assert!(!got[0].options(ExchangeMethod::AllGather).local_input);
        // Splits only where overlapped.
        let got = settings(&[dev], &args(&["--overlap", "true,false", "--overlap-split", "columns,rows"]), &[None]);
        let splits: Vec<_> = got.iter().map(|s| (s.overlap, s.split)).collect();
        assert_eq!(splits, vec![(true, OverlapSplit::Columns), (true, OverlapSplit::Rows), (false, OverlapSplit::Columns)]);
        assert_eq!(got[1].options(ExchangeMethod::AllGather).split, OverlapSplit::Rows);
    }

    #[test]
    fn op_table_lines_up_the_parts_slowest_first() {
        let part = |ops: &[(&str, f64)]| ops.iter().map(|&(n, ms)| (n.to_string(), ms, 1.0)).collect::<Vec<_>>();
        let t = op_table("g", &[part(&[("spmm", 1.0), ("gemm", 0.5)]), part(&[("gemm", 2.0)])]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "per-op ms per step, g:");
        assert!(lines[2].starts_with("gemm") && lines[2].ends_with("    0.500     2.000"), "{t}");
        assert!(lines[3].starts_with("spmm") && lines[3].ends_with("    1.000     0.000"), "{t}");
        assert!(lines[4].starts_with("sum") && lines[4].ends_with("    1.500     2.000"), "{t}");
    }
}
