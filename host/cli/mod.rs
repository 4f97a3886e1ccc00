//! The `tcgnn` command line: argument definitions and one file per command.

pub mod bench_attention;
pub mod bench_cmd;
pub mod bench_dist;
pub mod bench_dist_gpus;
pub mod bench_dtp;
pub mod bench_link;
pub mod bench_sample;
pub mod bench_setup;
pub mod bench_train;
pub mod demo;
pub mod dist_train_cmd;
pub mod graph_cmds;
pub mod link_sampled;
pub mod partition_cmd;
pub mod predict_cmd;
pub mod predict_link;
pub mod sample_args;
pub mod spmm_cmd;
pub mod table;
pub mod train_cmd;
pub mod train_graph;
pub mod train_link;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tcgnn",
    version,
    about = "GNN training (GCN, AGNN, GAT, GraphSAGE, GIN) on sparse tensor-core kernels (SpMM, SDDMM), in Rust",
    long_about = "GNN training (GCN, AGNN, GAT, GraphSAGE, GIN) on sparse tensor-core kernels (SpMM, SDDMM), in Rust.\n\n\
        With no command, trains a GCN on a generated stochastic block model (GPU if present, \
        CPU otherwise), then runs SpMM on a generated R-MAT graph: the CPU implementation \
        always, the GPU kernels and cuSPARSE when a GPU is present.\n\n\
        GRAPH arguments accept a .mtx/.mtx.gz path, a .tcg binary cache (written by \
        `tcgnn convert GRAPH --to tcg -o FILE.tcg`; loads at disk speed), a dataset name from \
        $TCGNN_DATASETS (default ../shared/datasets, e.g. 'pubmed'; NAME.tcg there is preferred \
        to NAME.mtx.gz), or a generator spec 'rmat:SCALE:EDGE_FACTOR[:SEED][:relabel]' \
        (':relabel' renames the nodes by a random permutation seeded from SEED, so hubs are not \
        the first ids; e.g. rmat:19:16:1:relabel)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Print a graph's size, degrees, memory and the statistics of every tile format
    /// (blocks, MMAs at K = 16, zeros inside blocks, bytes, translation time).
    Info(graph_cmds::InfoArgs),
    /// Convert a graph file to Matrix Market (.mtx / .mtx.gz) or the binary .tcg cache,
    /// optionally symmetrized.
    Convert(graph_cmds::ConvertArgs),
    /// Generate a graph (R-MAT, stochastic block model with node data, small test graphs).
    Gen(graph_cmds::GenArgs),
    /// Reorder a graph (RCM, community, degree) and report the effect on block counts.
    Reorder(graph_cmds::ReorderArgs),
    /// Partition a graph's nodes into P edge-balanced parts (for training across GPUs): per-part
    /// nodes, edges, halo rows and halo / all-gather volume; `-o DIR` writes each part's blocks.
    Partition(partition_cmd::PartitionArgs),
    /// Run one SpMM implementation on a graph; report time, GFLOPS, error and speedup over cuSPARSE.
    Spmm(spmm_cmd::SpmmArgs),
    /// Benchmark suites (GPU): every implementation against cuSPARSE, reports in bench/results/.
    Bench(Box<bench_cmd::BenchArgs>),
    /// Train a model (GPU if present, CPU otherwise): progress, test accuracy at the best
    /// validation epoch, time per phase, JSON report and curve; save, checkpoint and resume.
    Train(Box<train_cmd::TrainArgs>),
    /// Predict every node's class with a model saved by `train --save` (CSV or .npy; with
    /// probabilities or embeddings on request; accuracy per mask where there are labels).
    Predict(predict_cmd::PredictArgs),
    /// List the models with their defaults (what `train --model` takes).
    Models,
    /// The default demo (what `tcgnn` with no command runs).
    Demo(demo::DemoArgs),
    /// Print the embedded PTX (for ptxas checks).
    Ptx,
}

pub fn run(cli: Cli) -> tcgnn::Result<()> {
    match cli.command {
        None => demo::run(&demo::DemoArgs::default()),
        Some(Command::Demo(a)) => demo::run(&a),
        Some(Command::Info(a)) => graph_cmds::run_info(&a),
        Some(Command::Convert(a)) => graph_cmds::run_convert(&a),
        Some(Command::Gen(a)) => graph_cmds::run_gen(&a),
        Some(Command::Reorder(a)) => graph_cmds::run_reorder(&a),
        Some(Command::Partition(a)) => partition_cmd::run(&a),
        Some(Command::Spmm(a)) => spmm_cmd::run(&a),
        Some(Command::Train(a)) => train_cmd::run(&a),
        Some(Command::Predict(a)) => predict_cmd::run(&a),
        Some(Command::Models) => {
            for m in tcgnn::nn::MODELS {
                let d = &m.defaults;
                println!(
                    "{:<6} {}\n       defaults: {} layers x {} hidden{}, dropout {}, lr {}, weight decay {}",
                    m.name,
                    m.about,
                    d.layers,
                    d.hidden,
                    if d.heads > 1 { format!(" x {} heads", d.heads) } else { String::new() },
                    d.dropout,
                    m.lr,
                    m.weight_decay
                );
            }
            Ok(())
        }
        Some(Command::Bench(a)) => bench_cmd::run(&a),
        Some(Command::Ptx) => {
            print!("{}", tcgnn::gpu::module::KERNELS_PTX);
            Ok(())
        }
    }
}
