//! `tcgnn train GRAPH --partitions P | --gpus N | --rank R --world-size W --master ADDR:PORT`:
//! the partitioned training step (`tcgnn::dist::train`), the same loss curve as one device.
//!
//! - `--partitions P`: P ranks as threads of this process (the in-process communicator), each
//!   with its own backend and model: on the CPU, or all on one GPU (each thread its own stream;
//!   halo rows and gradients copied device to device, or staged through the host with
//!   `--halo-path host`): the checking mode.
//! - `--gpus N`: one process per GPU of this host, spawned here with `TCGNN_LOCAL_GPU` = r (the
//!   r-th visible device; every device stays visible, so NCCL can go GPU to GPU) and
//!   `NCCL_NVLS_ENABLE=0`, rendezvous on a free local port, exchanges over NCCL on device buffers.
//! - `--rank R --world-size W --master ADDR:PORT`: one rank of a multi-host run (rank 0 listens
//!   on ADDR:PORT and hands out NCCL's id). Every rank loads the graph and partitions it the same
//!   way (the partitioners are deterministic), then builds only its part's model.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tcgnn::bench::train::{TrainRun, curve_svg, write_json, write_text};
use tcgnn::dist::halo::{ALL_GATHER_THRESHOLD, ExchangeMethod, choose_exchange};
use tcgnn::dist::nccl::{NcclCommunicator, new_unique_id};
use tcgnn::dist::part_graph::relabel;
use tcgnn::dist::rendezvous::{join, serve_at};
use tcgnn::dist::{
    Communicator, DistOptions, DistTrainer, HaloPath, InProcessRun, OverlapSplit, Partition, PartitionMethod, StepTiming, train_in_process,
};
use tcgnn::gpu::Gpu;
use tcgnn::nn::{CpuBackend, CudaBackend, ModelConfig};
use tcgnn::task::node::train::{History, Recorded};
use tcgnn::task::node::{Dataset, TrainConfig};
use tcgnn::{Error, Result};

use crate::cli::train_cmd::{Device, TrainArgs, edge_layout, load_dataset, model_config, train_config};

/// How long a rank waits for its peers (rendezvous, in-process receives) before an error.
pub(crate) const PEER_TIMEOUT: Duration = Duration::from_secs(600);

/// The environment variable through which `--gpus` tells each rank its device: an ordinal among
/// the devices the process sees (all of the parent's: see [`spawn_ranks`]).
pub(crate) const LOCAL_GPU_VAR: &str = "TCGNN_LOCAL_GPU";

/// This rank's device: ordinal `TCGNN_LOCAL_GPU` where `--gpus` set it, else the first visible
/// one (a multi-host rank started by hand, with its own CUDA_VISIBLE_DEVICES).
fn rank_gpu() -> Result<Arc<Gpu>> {
    match std::env::var(LOCAL_GPU_VAR) {
        Ok(v) => {
            let n = v
                .trim()
                .parse::<usize>()
                .map_err(|_| Error::Unsupported(format!("{LOCAL_GPU_VAR}={v:?}: want a device ordinal (0, 1, ...)")))?;
            Gpu::new(n)
        }
        Err(_) => Gpu::probe(),
    }
}

/// This rank's GPU and its NCCL communicator: rank 0 makes the unique id and serves it at
/// `master`, the others fetch it from there (`train --rank` and `bench dist --rank` alike).
pub(crate) fn connect_nccl(rank: usize, world: usize, master: &str) -> Result<(Arc<Gpu>, Rc<NcclCommunicator>)> {
    let gpu = rank_gpu()?;
    let id = if rank == 0 {
        let id = new_unique_id()?;
        serve_at(master, world, &id, PEER_TIMEOUT)?;
        id
    } else {
        join(master, rank, world, PEER_TIMEOUT)?
    };
    let comm = Rc::new(NcclCommunicator::new(gpu.clone(), rank, world, &id)?);
    Ok((gpu, comm))
}

#[derive(clap::Args, Clone, Debug, Default)]
pub struct DistArgs {
    /// Train on P parts of the graph in this process (P threads, each with its own backend and
    /// model, halo rows exchanged in memory): the distributed step checked on one device.
    #[arg(long)]
    pub partitions: Option<usize>,
    /// One process per GPU of this host (spawned, the r-th visible device for rank r), over NCCL.
    #[arg(long)]
    pub gpus: Option<usize>,
    /// This process's rank in a multi-host run (with --world-size and --master).
    #[arg(long, requires_all = ["world_size", "master"])]
    pub rank: Option<usize>,
    /// Ranks in all (one GPU each).
    #[arg(long, requires_all = ["rank", "master"])]
    pub world_size: Option<usize>,
    /// ADDR:PORT where rank 0 listens and hands out NCCL's id.
    #[arg(long, requires_all = ["rank", "world_size"])]
    pub master: Option<String>,
    /// How the graph is cut: metis, community (Louvain order cut into edge-balanced ranges),
    /// contiguous (the graph's own order cut the same way), lp (parallel label propagation: for
    /// graphs too large for METIS).
    #[arg(long, default_value = "metis")]
    pub partition_method: String,
    /// What a row weighs in the partition's balance, in edges (a part's weight: its edges + this
    /// per row; 1 balances edges alone).
    #[arg(long, default_value_t = tcgnn::dist::partition::DEFAULT_ROW_WEIGHT)]
    pub row_weight: u64,
    /// Rounds of balancing on measured time before training (NCCL ranks: --gpus or --rank):
    /// each rank times its part alone for a few steps, nodes are weighted by their part's cost
    /// per edge and row, and the graph is cut again. For graphs whose parts differ in cost beyond
    /// their edges and rows (R-MAT's hubs against its periphery); 0 keeps the row-weighted cut.
    #[arg(long, default_value_t = 0)]
    pub rebalance: u32,
    /// Halo exchange: auto (all-gather when a part's halo is over half of one), p2p, all-gather.
    #[arg(long, default_value = "auto")]
    pub exchange: String,
    /// Print the NCCL_* environment and per-rank timing.
    #[arg(long)]
    pub verbose: bool,
    /// Where a GPU rank's halo rows and gradient all-reduce travel: device (device buffers:
    /// NCCL, or device copies between in-process parts) or host (staged through host memory,
    /// the reference path).
    #[arg(long, value_enum, default_value = "device")]
    pub halo_path: HaloPath,
    /// Run each layer's halo exchange beside the product of what needs no halo row (GCN, SAGE,
    /// GIN, GAT) instead of before it (`--overlap false`: serial). The default: on two GPUs every
    /// graph measured steps faster overlapped, citeseer's recorded step included
    /// (bench/NOTES.md).
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub overlap: bool,
    /// Whether the input layer forms its halo rows from the halo nodes' own features (true:
    /// the input product over them too) or exchanges them as the other layers do (false,
    /// twice a step). Unset: as --overlap.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub local_input: Option<bool>,
    /// With --overlap: how a GCN / SAGE / GIN layer divides its product around the exchange:
    /// columns (every owned row's owned columns beside it, the halo columns added after) or
    /// rows (the interior rows beside it, the boundary rows whole after: no added work).
    #[arg(long, value_enum, default_value = "rows")]
    pub overlap_split: OverlapSplit,
    /// Sum the weight gradients over the ranks in buckets during the backward (PyTorch DDP's),
    /// a bucket started once its layers' gradients hold at least KIB KiB (0: one bucket per
    /// layer, the last layer's first), instead of in one buffer after the whole backward.
    #[arg(long, value_name = "KIB")]
    pub grad_buckets: Option<usize>,
}

impl DistArgs {
    pub fn is_distributed(&self) -> bool {
        self.partitions.is_some() || self.gpus.is_some() || self.rank.is_some()
    }
}

pub fn run(a: &TrainArgs) -> Result<()> {
    let d = &a.dist;
    let modes = [d.partitions.is_some(), d.gpus.is_some(), d.rank.is_some()].iter().filter(|&&m| m).count();
    if modes > 1 {
        return Err(Error::Unsupported("give one of --partitions, --gpus, --rank/--world-size/--master".into()));
    }
    let refused = [
        ("--save", a.save.is_some()),
        ("--checkpoint", a.checkpoint.is_some()),
        ("--resume", a.resume.is_some()),
        ("--profile-ops", a.profile_ops),
        ("several --seeds", a.seeds.len() > 1),
    ];
    let bad: Vec<&str> = refused.iter().filter(|r| r.1).map(|r| r.0).collect();
    if !bad.is_empty() {
        return Err(Error::Unsupported(format!("{} not supported with distributed training yet", bad.join(", "))));
    }
    crate::cli::train_cmd::check_epochs(a)?;
    if (d.gpus.is_some() || d.rank.is_some()) && (a.device == Device::Cpu || a.f64) {
        return Err(Error::Unsupported("--rank / --gpus train over NCCL on GPUs; on the CPU use --partitions P".into()));
    }
    if let Some(n) = d.gpus {
        return spawn_gpus(n);
    }
    if let (Some(rank), Some(world), Some(master)) = (d.rank, d.world_size, &d.master) {
        return run_rank(a, rank, world, master);
    }
    let parts = d.partitions.expect("one mode is set");
    // Each in-process rank is a thread with its own model: past this many the machine spends
    // its time switching threads, and the part count is checked against the nodes later.
    const MAX_PARTITIONS: usize = 1024;
    if parts == 0 || parts > MAX_PARTITIONS {
        return Err(Error::Unsupported(format!("--partitions {parts}: give 1..={MAX_PARTITIONS}")));
    }
    run_in_process(a, parts)
}

fn exchange_method(asked: &str, p: &Partition) -> Result<ExchangeMethod> {
    match asked {
        "auto" => Ok(choose_exchange(p.halo_ratio(), ALL_GATHER_THRESHOLD)),
        "p2p" => Ok(ExchangeMethod::PointToPoint),
        "all-gather" => Ok(ExchangeMethod::AllGather),
        o => Err(Error::Unsupported(format!("--exchange {o}: auto, p2p or all-gather"))),
    }
}

/// The dataset, partitioned and relabelled, with the model and optimiser settings: what every
/// rank computes the same way.
struct Setup {
    data: Dataset,
    partition: Partition,
    method: ExchangeMethod,
    cfg: ModelConfig,
    tcfg: TrainConfig,
    /// Whether the exchanges overlap the products (`--overlap`), and the input layer's halo
    /// rows are formed locally (`--local-input`, else as `overlap`).
    overlap: bool,
    local_input: bool,
    split: OverlapSplit,
    /// `--grad-buckets` in bytes.
    grad_buckets: Option<usize>,
    /// The dataset before the partition relabelled it, kept for `--rebalance`.
    original: Option<Dataset>,
}

impl Setup {
    fn options(&self) -> DistOptions {
        DistOptions::new(self.method)
            .with_overlap(self.overlap)
            .with_local_input(self.local_input)
            .with_split(self.split)
            .with_grad_buckets(self.grad_buckets)
    }

    /// The in-process run of this setup.
    fn run(&self) -> InProcessRun<'_> {
        InProcessRun {
            data: &self.data,
            partition: &self.partition,
            options: self.options(),
            model: &self.cfg,
            train: &self.tcfg,
            timeout: PEER_TIMEOUT,
        }
    }
}

fn setup(a: &TrainArgs, parts: usize) -> Result<Setup> {
    let seed = a.seeds[0];
    let data = load_dataset(a, seed)?;
    crate::cli::train_cmd::check_synthetic_options(a, &data)?;
    let cfg = model_config(a, seed)?;
    tcgnn::nn::models::check(&cfg)?;
    let tcfg = train_config(a)?;
    let pm: PartitionMethod = a.dist.partition_method.parse()?;
    tcgnn::dist::partition::at_most_one_part_per_node(parts, data.graph.n_rows())?;
    let partition = Partition::with_row_weight(&data.graph, parts, pm, a.dist.row_weight)?;
    let method = exchange_method(&a.dist.exchange, &partition)?;
    let relabelled = relabel(&data, &partition.perm)?;
    let original = (a.dist.rebalance > 0).then_some(data);
    let grad_buckets = a.dist.grad_buckets.map(|kib| kib.saturating_mul(1024));
    let (overlap, local_input) = (a.dist.overlap, a.dist.local_input.unwrap_or(a.dist.overlap));
    let split = a.dist.overlap_split;
    Ok(Setup { data: relabelled, partition, method, cfg, tcfg, overlap, local_input, split, grad_buckets, original })
}

fn use_gpu(a: &TrainArgs) -> Result<bool> {
    Ok(match a.dist.rank.is_some() || a.device == Device::Gpu {
        true => true,
        false if a.device == Device::Cpu => false,
        false => match Gpu::probe() {
            Ok(_) => true,
            Err(e) => {
                eprintln!("{e}: training on the CPU");
                false
            }
        },
    })
}

fn cuda_backend(a: &TrainArgs, gpu: Arc<Gpu>) -> Result<CudaBackend> {
    Ok(CudaBackend::new(gpu, a.precision, a.imp)?.with_edge_layout(edge_layout(a.model, a.edge_layout)?))
}

fn run_in_process(a: &TrainArgs, parts: usize) -> Result<()> {
    if a.dist.rebalance > 0 {
        return Err(Error::Unsupported(
            "--rebalance times each rank's part on its own GPU: it needs NCCL ranks (--gpus N or --rank); in-process parts \
             share one device"
                .into(),
        ));
    }
    let s = setup(a, parts)?;
    let gpu = use_gpu(a)?;
    let show = |e: &tcgnn::task::node::train::EpochRecord| {
        if !a.quiet {
            eprintln!(
                "epoch {:>4} loss {:.6} train {:.2}% val {:.2}% test {:.2}%",
                e.epoch,
                e.loss,
                e.train_acc * 100.0,
                e.val_acc * 100.0,
                e.test_acc * 100.0
            );
        }
    };
    let (history, timing, backend) = if gpu {
        // Each thread opens the GPU itself: its own context handle, stream and kernels.
        let path = a.dist.halo_path;
        let run = InProcessRun { options: s.options().with_path(path), ..s.run() };
        let (h, t) = train_in_process(&run, |_| cuda_backend(a, Gpu::probe()?), show)?;
        (h, t, format!("{} threads on one GPU ({:?}, halo path {path:?})", parts, a.precision).to_lowercase())
    } else if a.f64 {
        let (h, t) = train_in_process(&s.run(), |_| Ok(CpuBackend::<f64>::new()), show)?;
        (h, t, format!("{parts} threads on the CPU (f64)"))
    } else {
        let (h, t) = train_in_process(&s.run(), |_| Ok(CpuBackend::<f32>::new()), show)?;
        (h, t, format!("{parts} threads on the CPU (f32)"))
    };
    report(a, &s, &history, &timing, &backend)
}

fn report(a: &TrainArgs, s: &Setup, history: &History, timing: &[StepTiming], backend: &str) -> Result<()> {
    println!(
        "{} {} {}x{} on {} parts ({}, {:?} exchange, {backend}): test accuracy at best validation epoch {:.2}%{}",
        s.data.name,
        s.cfg.model,
        s.cfg.layers,
        s.cfg.hidden,
        s.partition.parts(),
        s.partition.method,
        s.method,
        history.test_acc * 100.0,
        if s.data.synthetic { " (synthetic labels: accuracy is meaningless)" } else { "" }
    );
    for (r, t) in timing.iter().enumerate() {
        let per = |x: f64| 1e3 * x / t.steps.max(1) as f64;
        if t.replayed > 0 {
            println!(
                "rank {r}: step {:.3} ms ({} of {} steps replayed as a CUDA graph: halo exchange {} KiB and gradient all-reduce {} KiB in {} call(s) a step, their times not measured; --no-cuda-graph measures them)",
                per(t.step_seconds),
                t.replayed,
                t.steps,
                t.halo.bytes / t.steps.max(1) / 1024,
                t.all_reduce_bytes / t.steps.max(1) / 1024,
                t.all_reduce_calls / t.steps.max(1),
            );
            continue;
        }
        println!(
            "rank {r}: step {:.3} ms (halo exchange {:.3} ms, {} KiB; gradient all-reduce {:.3} ms, {} KiB in {} call(s)) over {} steps",
            per(t.step_seconds),
            per(t.halo.seconds),
            t.halo.bytes / t.steps.max(1) / 1024,
            per(t.all_reduce_seconds),
            t.all_reduce_bytes / t.steps.max(1) / 1024,
            t.all_reduce_calls / t.steps.max(1),
            t.steps
        );
    }
    if let Some(dir) = &a.out {
        let run = TrainRun {
            graph: s.data.name.clone(),
            n: s.data.n(),
            nnz: s.data.graph.nnz(),
            features: s.data.features.cols(),
            classes: s.data.classes,
            synthetic_labels: s.data.synthetic,
            model: s.cfg,
            train: s.tcfg,
            backend: backend.to_string(),
            precision: if a.f64 { "f64".into() } else { format!("{:?}", a.precision).to_lowercase() },
            seed: a.seeds[0],
            setup_ms: 0.0,
            history: history.clone(),
            phases: None,
            // Host figures only: the ranks' GPUs keep their own clocks.
            resources: super::train_cmd::resources(0.0, 0.0, super::train_cmd::data_bytes(&s.data), None),
        };
        let json = write_json(&dir.join("train.json"), &[run])?;
        let title = format!("{} {} on {} parts", s.data.name, s.cfg.model, s.partition.parts());
        let svg = write_text(&dir.join("train.svg"), &curve_svg(&title, &history.epochs))?;
        eprintln!("wrote {} and {}", json.display(), svg.display());
    }
    Ok(())
}

/// One rank of an NCCL world: rendezvous, this GPU's backend, its part, the same epochs as
/// every other rank.
fn run_rank(a: &TrainArgs, rank: usize, world: usize, master: &str) -> Result<()> {
    if world == 0 || rank >= world {
        return Err(Error::Unsupported(format!("--rank {rank} of --world-size {world}")));
    }
    if a.dist.verbose {
        let mut nccl: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("NCCL_")).collect();
        nccl.sort();
        eprintln!(
            "rank {rank}/{world}: CUDA_VISIBLE_DEVICES={:?} {LOCAL_GPU_VAR}={:?} {nccl:?}",
            std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            std::env::var(LOCAL_GPU_VAR).ok()
        );
    }
    let (gpu, comm) = connect_nccl(rank, world, master)?;
    let mut s = setup(a, world)?;
    same_partition_everywhere(&*comm, &s.partition)?;
    let path = a.dist.halo_path;
    if let Some(original) = s.original.take() {
        let base = tcgnn::dist::partition::node_weights(&original.graph, a.dist.row_weight);
        let pm: PartitionMethod = a.dist.partition_method.parse()?;
        let (moved, times) = tcgnn::dist::balance::rebalance_ranks(
            &*comm,
            || cuda_backend(a, gpu.clone()),
            &original,
            (&s.partition, &s.data),
            pm,
            &base,
            s.options().with_path(path),
            &s.cfg,
            &s.tcfg,
            a.dist.rebalance,
            (3, 10),
        )?;
        if rank == 0 && !a.quiet {
            eprintln!("parts' steps alone before each rebalancing round: {times:.3?} ms");
        }
        if let Some((p, d)) = moved {
            same_partition_everywhere(&*comm, &p)?;
            (s.method, s.partition, s.data) = (exchange_method(&a.dist.exchange, &p)?, p, d);
        }
    }
    let backend = Arc::new(cuda_backend(a, gpu)?);
    let describe = format!("{} rank(s) over NCCL, halo path {path:?}, {}", world, tcgnn::nn::Backend::describe(&*backend));
    let mut t = DistTrainer::with_options(backend, comm.clone(), &s.data, &s.partition, s.options().with_path(path), &s.cfg, &s.tcfg)?;
    let quiet = a.quiet || rank != 0;
    if !a.no_cuda_graph {
        match t.record()? {
            Recorded::Failed(why) if rank == 0 => eprintln!("CUDA graph capture failed, training eagerly: {why}"),
            Recorded::NotSupported if rank == 0 && !quiet => {
                eprintln!("the {path:?} halo path waits on the host: training eagerly (no CUDA graph)")
            }
            _ => {}
        }
    }
    let history = t.fit(s.tcfg.epochs, |e| {
        if !quiet {
            eprintln!(
                "epoch {:>4} loss {:.6} train {:.2}% val {:.2}% test {:.2}%",
                e.epoch,
                e.loss,
                e.train_acc * 100.0,
                e.val_acc * 100.0,
                e.test_acc * 100.0
            );
        }
    })?;
    let timing = gather_timing(&*comm, t.take_timing())?;
    if rank == 0 {
        report(a, &s, &history, &timing, &describe)?;
    }
    Ok(())
}

/// Every rank partitioned the graph itself: check they agree (a different graph file or
/// partitioner build on one host would otherwise exchange the wrong rows).
pub(crate) fn same_partition_everywhere<C: Communicator>(comm: &C, p: &Partition) -> Result<()> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&p.offsets, p.perm.new_to_old()).hash(&mut h);
    let f = h.finish();
    // Two exact 32-bit halves: f64 carries them without rounding.
    let mine = [(f >> 32) as f64, (f & 0xffff_ffff) as f64];
    let mut all = vec![0.0f64; 2 * comm.world_size()];
    comm.all_gather(&mine, &mut all)?;
    match all.chunks(2).position(|c| *c != all[..2]) {
        Some(r) => Err(Error::comm(
            "partition",
            format!(
                "rank {r} partitioned the graph differently from rank 0 (same graph, --partition-method and tcgnn build on every host?)"
            ),
        )),
        None => Ok(()),
    }
}

/// Every rank's timing on every rank (an all-gather of a few numbers, then of each step's wall
/// time where every rank timed as many steps: they stepped together).
pub(crate) fn gather_timing<C: Communicator>(comm: &C, t: StepTiming) -> Result<Vec<StepTiming>> {
    let mine = [
        t.steps as f64,
        t.step_seconds,
        t.halo.seconds,
        t.halo.bytes as f64,
        t.halo.calls as f64,
        t.all_reduce_seconds,
        t.all_reduce_bytes as f64,
        t.all_reduce_calls as f64,
        t.replayed as f64,
        t.halo.gave_back as f64,
    ];
    let mut all = vec![0.0f64; mine.len() * comm.world_size()];
    comm.all_gather(&mine, &mut all)?;
    let mut walls = vec![0.0f64; t.step_walls.len() * comm.world_size()];
    let same_steps = all.chunks(mine.len()).all(|v| v[0] as usize == t.step_walls.len());
    if same_steps {
        comm.all_gather(&t.step_walls, &mut walls)?;
    }
    let steps = t.step_walls.len().max(1);
    Ok(all
        .chunks(mine.len())
        .zip(walls.chunks(steps).map(|w| w.to_vec()).chain(std::iter::repeat(Vec::new())))
        .map(|(v, step_walls)| StepTiming {
            steps: v[0] as u64,
            step_seconds: v[1],
            step_walls: if same_steps { step_walls } else { Vec::new() },
            halo: tcgnn::dist::exchange::ExchangeCounters { seconds: v[2], bytes: v[3] as u64, calls: v[4] as u64, gave_back: v[9] as u64 },
            all_reduce_seconds: v[5],
            all_reduce_bytes: v[6] as u64,
            all_reduce_calls: v[7] as u64,
            replayed: v[8] as u64,
        })
        .collect())
}

/// `--gpus N`: this command again once per GPU, as ranks 0..N of a world on a free local port.
fn spawn_gpus(n: usize) -> Result<()> {
    spawn_ranks(n, without_flag(std::env::args().skip(1).collect(), "--gpus"), true)
}

/// `tcgnn ARGS --rank r --world-size n --master ...` once per GPU, r = 0..n; returns when all
/// have exited (stopping the others when one fails). `quiet`: ranks above 0 get `--quiet`.
pub(crate) fn spawn_ranks(n: usize, args: Vec<String>, quiet: bool) -> Result<()> {
    // One process per GPU of one host: no host has more than this many.
    if n == 0 || n > 64 {
        return Err(Error::Unsupported(format!("--gpus {n}: give 1..=64 (one process per GPU of this host)")));
    }
    let exe = std::env::current_exe().map_err(|e| Error::Io { path: PathBuf::from("tcgnn"), source: e })?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| Error::comm("--gpus", format!("no free local port for the rendezvous: {e}")))?
        .port();
    // Child r uses the r-th device this process may use (all of them when unrestricted), chosen
    // by ordinal, every device left visible to every child: hiding the peers with a per-child
    // CUDA_VISIBLE_DEVICES can keep NCCL off its direct GPU-to-GPU (P2P over NVLink) transport,
    // which needs the peer device in the process (NCCL then stages through host memory or a
    // socket: the likely cause of the 1.5-2 ms exchanges measured on 2 x H200, bench/NOTES.md).
    if let Ok(v) = std::env::var("CUDA_VISIBLE_DEVICES")
        && !v.trim().is_empty()
        && v.split(',').count() < n
    {
        return Err(Error::Unsupported(format!("--gpus {n}, but CUDA_VISIBLE_DEVICES names {} device(s)", v.split(',').count())));
    }
    let mut children = Vec::with_capacity(n);
    for r in 0..n {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(&args)
            .args(["--rank", &r.to_string(), "--world-size", &n.to_string(), "--master", &format!("127.0.0.1:{port}")])
            .env(LOCAL_GPU_VAR, r.to_string())
            .env("NCCL_NVLS_ENABLE", "0");
        // Only rank 0 shows progress (a flag given twice is a clap error: add it only if absent).
        if quiet && r > 0 && !args.iter().any(|x| x == "--quiet") {
            cmd.arg("--quiet");
        }
        let child = cmd.spawn().map_err(|e| Error::Io { path: exe.clone(), source: e })?;
        children.push(child);
    }
    // A rank that fails leaves its peers waiting on NCCL: stop them (only the children we
    // started) and report the first failure.
    let mut failed = None;
    loop {
        let mut running = 0;
        for (r, c) in children.iter_mut().enumerate() {
            match c.try_wait() {
                Ok(Some(st)) if !st.success() && failed.is_none() => failed = Some((r, st)),
                Ok(Some(_)) => {}
                Ok(None) => running += 1,
                Err(e) => return Err(Error::comm("--gpus", format!("rank {r}: {e}"))),
            }
        }
        if running == 0 {
            break;
        }
        if failed.is_some() {
            for c in children.iter_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    match failed {
        Some((r, st)) => Err(Error::comm("--gpus", format!("rank {r} failed ({st}); its peers were stopped"))),
        None => Ok(()),
    }
}

/// The arguments without `FLAG VALUE` / `FLAG=VALUE`.
pub(crate) fn without_flag(args: Vec<String>, flag: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == flag {
            skip = true;
            continue;
        }
        if a.strip_prefix(flag).is_some_and(|v| v.starts_with('=')) {
            continue;
        }
        out.push(a);
    }
    out
}
