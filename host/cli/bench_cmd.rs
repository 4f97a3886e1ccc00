//! `tcgnn bench spmm|sddmm [--suite] [GRAPH...]` and `tcgnn bench train` (see bench_train.rs).

use std::path::PathBuf;

use tcgnn::bench::budget::{check_feature_width, check_sddmm_command, check_spmm_command};
use tcgnn::bench::report::{Report, summarize, today, write};
use tcgnn::bench::sddmm::bench_sddmm;
use tcgnn::bench::spmm::{SpmmBenchOptions, bench_spmm};
use tcgnn::bench::spmm_reorder::bench_spmm_reordered;
use tcgnn::bench::suite::{Values, run_suite, standard_graphs};
use tcgnn::gpu::Gpu;
use tcgnn::graph::reorder::Reorder;

use super::table::print_records;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub op: BenchCmd,
}

#[derive(clap::Subcommand)]
pub enum BenchCmd {
    /// SpMM: every implementation against cuSPARSE (K = 32, 128, 256 by default).
    Spmm(KernelBenchArgs),
    /// SDDMM: every implementation against cuSPARSE SDDMM (K = 32, 128 by default).
    Sddmm(KernelBenchArgs),
    /// GNN training steps (GCN, AGNN) in every precision, side by side with PyTorch Geometric.
    Train(super::bench_train::BenchTrainArgs),
    /// Setup of a training run from a graph file (`.tcg`) or generator: read, node data,
    /// translate, upload, peak memory.
    Setup(super::bench_setup::BenchSetupArgs),
    /// The partitioned training step per part count: compute / halo exchange / all-reduce, halo bytes.
    Dist(super::bench_dist::BenchDistArgs),
    /// Sampled (mini-batch) training against full-graph training: accuracy over seeds, epoch
    /// time split (sampling, build + upload, step), sampled edges/s, idle share between steps.
    Sample(super::bench_sample::BenchSampleArgs),
    /// One AGNN or GAT attention layer, fused against the unfused ops (forward, forward + backward).
    Attention(super::bench_attention::BenchAttentionArgs),
    /// HP SpMM on sampled batches: Dynamic Task Partition against fixed nonzeros per warp.
    Dtp(super::bench_dtp::BenchDtpArgs),
    /// Link prediction's training step on the GPU (per encoder), with PyG's fastest
    /// configuration of bench/pyg/link.py side by side.
    Link(super::bench_link::BenchLinkArgs),
}

#[derive(clap::Args)]
pub struct KernelBenchArgs {
    /// Graphs (paths, dataset names, rmat:SCALE:EF[:SEED][:relabel]); with --suite, the standard
    /// suite is added.
    pub graphs: Vec<String>,
    /// Every dataset in $TCGNN_DATASETS plus R-MAT 2^18 x 16 and 2^20 x 8 (generator order) and
    /// R-MAT 2^19 x 16 and 2^20 x 8 with randomly relabelled nodes (rmat:19:16:1:relabel,
    /// rmat:20:8:1:relabel).
    #[arg(long)]
    pub suite: bool,
    /// Feature widths (comma separated). Default: 32,128,256 for spmm, 32,128 for sddmm.
    #[arg(long, value_delimiter = ',')]
    pub k: Vec<usize>,
    /// Only these implementations (comma separated; cuSPARSE is always measured as the baseline).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<tcgnn::ops::Impl>,
    /// SpMM: also time TC8 with every gather source the device runs (registers, cp.async, bulk
    /// copies) and with f16 output, as extra rows.
    #[arg(long)]
    pub tc8_sources: bool,
    /// SpMM `hybrid`: run these thresholds (comma separated, >= 1; 9 puts every nonzero on the
    /// CUDA cores) instead of the cost model's choice, one variant "hybrid t=T" each.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    pub hybrid_t: Vec<u64>,
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// SpMM: also run every implementation through a graph handle reordered by this method
    /// (rcm, community, degree; none = off), end to end (X rows permuted in, SpMM, Y rows
    /// permuted back: "<variant> <method> e2e") and the SpMM alone ("<variant> <method>
    /// kernel"), against cuSPARSE on the original order; each row notes the reordering's
    /// one-time host cost. Reports go to spmm_<method>.json/.md/.svg.
    #[arg(long, default_value = "none")]
    pub reorder: String,
    /// Folder for <op>.json/.md/.svg.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
}

#[derive(Clone, Copy)]
enum BenchOp {
    Spmm,
    Sddmm,
}

pub fn run(a: &BenchArgs) -> tcgnn::Result<()> {
    match &a.op {
        BenchCmd::Spmm(k) => run_kernels(BenchOp::Spmm, k),
        BenchCmd::Sddmm(k) => run_kernels(BenchOp::Sddmm, k),
        BenchCmd::Train(t) => super::bench_train::run(t),
        BenchCmd::Setup(s) => super::bench_setup::run(s),
        BenchCmd::Dist(d) => super::bench_dist::run(d),
        BenchCmd::Sample(s) => super::bench_sample::run(s),
        BenchCmd::Attention(t) => super::bench_attention::run(t),
        BenchCmd::Dtp(d) => super::bench_dtp::run(d),
        BenchCmd::Link(l) => super::bench_link::run(l),
    }
}

fn run_kernels(op: BenchOp, a: &KernelBenchArgs) -> tcgnn::Result<()> {
    let how: Reorder = a.reorder.parse()?;
    if matches!(op, BenchOp::Sddmm) && how != Reorder::Identity {
        return Err(tcgnn::Error::Unsupported("--reorder applies to bench spmm only".into()));
    }
    for &k in &a.k {
        check_feature_width(k)?;
    }
    let gpu = Gpu::probe()?;
    let mut graphs = a.graphs.clone();
    if a.suite {
        graphs.extend(standard_graphs());
    }
    if graphs.is_empty() {
        return Err(tcgnn::Error::Unsupported("no graphs: name some or pass --suite".into()));
    }
    let copy_gbs = tcgnn::bench::copy_bandwidth_gbs(&gpu)?;
    eprintln!("{}: copy bandwidth {copy_gbs:.0} GB/s", gpu.info().name);
    let (name, ks) = match op {
        BenchOp::Spmm => ("spmm".to_string(), if a.k.is_empty() { vec![32, 128, 256] } else { a.k.clone() }),
        BenchOp::Sddmm => ("sddmm".to_string(), if a.k.is_empty() { vec![32, 128] } else { a.k.clone() }),
    };
    // Reordered runs get their own report (spmm_rcm.*), not the suite's spmm.*.
    let name = if how == Reorder::Identity { name } else { format!("{name}_{}", format!("{how:?}").to_lowercase()) };
    let only = if a.only.is_empty() { vec![] } else { [a.only.as_slice(), &[tcgnn::ops::Impl::Cusparse]].concat() };
    let records = match op {
        BenchOp::Spmm => {
            let opt = SpmmBenchOptions {
                warmup: a.warmup,
                reps: a.reps,
                copy_gbs,
                only: only.clone(),
                tc8_sources: a.tc8_sources,
                hybrid_t: a.hybrid_t.iter().map(|&t| t as usize).collect(),
            };
            run_suite(&gpu, &graphs, &ks, Values::Random, |name, g, k| {
                check_spmm_command(g.csr(), k, Some(&gpu))?;
                match how {
                    Reorder::Identity => bench_spmm(&gpu, name, g, k, &opt),
                    how => bench_spmm_reordered(&gpu, name, g, k, &opt, how),
                }
            })
        }
        BenchOp::Sddmm => {
            let opt = SpmmBenchOptions {
                warmup: a.warmup,
                reps: a.reps,
                copy_gbs,
                only: only.clone(),
                tc8_sources: a.tc8_sources,
                hybrid_t: vec![],
            };
            // Unit values: cuSPARSE SDDMM samples the pattern (see bench::sddmm).
            run_suite(&gpu, &graphs, &ks, Values::Unit, |name, g, k| {
                check_sddmm_command(g.csr(), k, &gpu)?;
                bench_sddmm(&gpu, name, g, k, &opt)
            })
        }
    };
    print_records(&records);
    let report = Report {
        op: name,
        gpu: gpu.info().clone(),
        date: today(),
        commit: env!("TCGNN_GIT_COMMIT").into(),
        ptx_arch: tcgnn::gpu::module::KERNELS_ARCH.into(),
        copy_bandwidth_gbs: copy_gbs,
        warmup: a.warmup,
        reps: a.reps,
        summary: summarize(&records),
        records,
    };
    println!();
    for row in &report.summary {
        let f16 = row.geomean_speedup_vs_cusparse_f16.map_or(String::new(), |v| format!(", {v:>6.2}x vs cuSPARSE f16"));
        println!(
            "K={:<4} {:<16} geomean {:>6.2}x vs cuSPARSE f32{f16}, floor fraction {:.2}, max err {:.1e}, {} graphs, {} failed",
            row.k, row.variant, row.geomean_speedup_vs_cusparse, row.geomean_floor_fraction, row.max_rel_error, row.graphs, row.failures
        );
    }
    for p in write(&report, &a.out)? {
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
