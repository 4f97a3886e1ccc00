//! The graph-layer commands as a stand-alone tool until the main binary mounts them:
//! `cargo run --release --example graph_cli -- info ../shared/datasets/cora.mtx.gz`.

use clap::{Parser, Subcommand};
use tcgnn::cli::graph_cmds::{run_convert, run_gen, run_info, run_reorder, ConvertArgs, GenArgs, InfoArgs, ReorderArgs};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Nodes, nnz, degrees, memory and tile-format statistics.
    Info(InfoArgs),
    /// Convert to Matrix Market.
    Convert(ConvertArgs),
    /// Generate a synthetic graph.
    Gen(GenArgs),
    /// Reorder and report the effect on block counts.
    Reorder(ReorderArgs),
}

fn main() {
    let result = match Cli::parse().cmd {
        Cmd::Info(a) => run_info(&a),
        Cmd::Convert(a) => run_convert(&a),
        Cmd::Gen(a) => run_gen(&a),
        Cmd::Reorder(a) => run_reorder(&a),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
