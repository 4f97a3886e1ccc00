//! `tcgnn partition GRAPH --parts P`: nodes into P edge-balanced parts; the per-part table
//! (nodes, edges, edge balance, halo rows, halo / all-gather) and, with `-o DIR`, each part's
//! local / remote blocks and ids for ranks that load only their own part.

use std::path::PathBuf;
use std::time::Instant;

use tcgnn::Result;
use tcgnn::dist::halo::{ALL_GATHER_THRESHOLD, choose_exchange};
use tcgnn::dist::part_file::write_partition;
use tcgnn::dist::{Partition, PartitionMethod};

use crate::cli::graph_cmds::GraphInput;

#[derive(clap::Args)]
pub struct PartitionArgs {
    #[command(flatten)]
    pub graph: GraphInput,
    /// Number of parts (one per GPU).
    #[arg(long, default_value_t = 2)]
    pub parts: usize,
    /// contiguous (the graph's order cut into edge-balanced ranges), community (Louvain order,
    /// then cut), metis (METIS k-way), lp (parallel label propagation: clusters packed into
    /// balanced parts, then refined; for graphs too large for METIS).
    #[arg(long, default_value = "metis")]
    pub method: String,
    /// What a row weighs in the balance, in edges (a part's weight: its edges + this per row;
    /// 1 balances edges alone).
    #[arg(long, default_value_t = tcgnn::dist::partition::DEFAULT_ROW_WEIGHT)]
    pub row_weight: u64,
    /// Write partition.json and each part's blocks (partP.json, partP.{local,remote}.mtx.gz) into
    /// this existing folder.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

pub fn run(args: &PartitionArgs) -> Result<()> {
    let method: PartitionMethod = args.method.parse()?;
    if let Some(dir) = &args.output {
        tcgnn::util::atomic::check_output_dir(dir)?;
    }
    let t = Instant::now();
    let g = load(&args.graph)?;
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    tcgnn::dist::partition::at_most_one_part_per_node(args.parts, g.n_rows())?;
    let p = Partition::with_row_weight(&g, args.parts, method, args.row_weight)?;
    let part_s = t.elapsed().as_secs_f64();
    println!(
        "{}: {} nodes, {} edges into {} parts by {method} in {part_s:.2} s (load {load_s:.2} s)",
        args.graph.input.display(),
        g.n_rows(),
        g.nnz(),
        p.parts()
    );
    let stats = p.stats();
    let mean = g.nnz() as f64 / p.parts() as f64;
    println!(
        "{:>5} {:>11} {:>12} {:>8} {:>12} {:>11} {:>10}",
        "part", "nodes", "edges", "balance", "remote edges", "halo rows", "halo/all"
    );
    for s in &stats {
        let bal = if mean > 0.0 { s.edges as f64 / mean } else { 1.0 };
        println!(
            "{:>5} {:>11} {:>12} {:>8.3} {:>12} {:>11} {:>10.3}",
            s.part,
            s.nodes,
            s.edges,
            bal,
            s.remote_edges,
            s.halo_rows,
            s.halo_ratio()
        );
    }
    let ratio = p.halo_ratio();
    let weights: Vec<f64> = stats.iter().map(|s| (s.edges as u64 + args.row_weight * s.nodes as u64) as f64).collect();
    let weight_mean = weights.iter().sum::<f64>() / weights.len() as f64;
    let weight_balance = if weight_mean > 0.0 { weights.iter().fold(0.0f64, |m, &w| m.max(w)) / weight_mean } else { 1.0 };
    println!(
        "balance (max / mean) of edges {:.3}, of edges + {} x rows {weight_balance:.3}; halo / all-gather {ratio:.3} -> exchange by {:?} (threshold {ALL_GATHER_THRESHOLD})",
        p.edge_balance(),
        args.row_weight,
        choose_exchange(ratio, ALL_GATHER_THRESHOLD)
    );
    if let Some(dir) = &args.output {
        let t = Instant::now();
        write_partition(dir, &p)?;
        println!("wrote {} parts to {} in {:.2} s", p.parts(), dir.display(), t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// The graph, or for `sbm:N[:CLASSES[:DEGREE]]` a stochastic block model generated with one
/// feature (partitioning needs only the graph; 10M nodes x 32 features would cost 1.3 GB).
fn load(input: &GraphInput) -> Result<tcgnn::graph::Csr> {
    let spec = input.input.to_string_lossy();
    let Some(rest) = spec.strip_prefix("sbm:").filter(|_| !input.input.exists()) else {
        return input.load();
    };
    let s = tcgnn::graph::spec::parse_sbm(&spec, rest)?;
    let mut p = tcgnn::graph::generate::SbmParams::new(s.n, s.classes, 0);
    (p.avg_degree, p.features) = (s.avg_degree, 1);
    Ok(tcgnn::graph::generate::sbm(p)?.0)
}
