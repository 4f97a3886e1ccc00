//! The graph-layer CLI commands: `info`, `convert`, `gen`, `reorder`. Argument structs derive
//! `clap::Args` so the binary can mount them as subcommands.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tcgnn::error::{Error, Result};
use tcgnn::format::stats::{format_stats, render_table, render_vector_zeros, vector_zeros};
use tcgnn::format::{MeBcrs, Sgt, hybrid, worklist};
use tcgnn::graph::edgelist::{EdgeListOptions, read_edgelist};
use tcgnn::graph::generate::{SbmParams, complete, grid, path, sbm, star};
use tcgnn::graph::mtx::{read_mtx, write_mtx};
use tcgnn::graph::npz::{Features, read_npz, write_npz};
use tcgnn::graph::ops::{add_self_loops, degree_summary, symmetrize};
use tcgnn::graph::reorder::{Reorder, reorder};
use tcgnn::graph::rmat::{RmatParams, rmat};
use tcgnn::graph::{Csr, tcg};
use tcgnn::util::atomic::{check_outputs, write_atomic};

/// Input file kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// From the file name: `.mtx[.gz]` is Matrix Market, `.tcg` the binary CSR, anything else
    /// an edge list.
    Auto,
    Mtx,
    Edgelist,
    Tcg,
}

/// Output file kinds of `convert`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// From the file name: `.tcg` is the binary CSR, anything else Matrix Market.
    Auto,
    /// Matrix Market text (`.mtx`, gzip-compressed as `.mtx.gz`).
    Mtx,
    /// Binary CSR with a checksum: loads at disk speed (a cache for large graphs).
    Tcg,
}

/// Where a graph comes from.
#[derive(Clone, Debug, clap::Args)]
pub struct GraphInput {
    /// Graph file: Matrix Market (.mtx, .mtx.gz) or edge list (.txt, .csv, .tsv, optionally .gz);
    /// or a dataset name from $TCGNN_DATASETS, or rmat:SCALE:EDGE_FACTOR[:SEED][:relabel].
    pub input: PathBuf,
    #[arg(long, value_enum, default_value = "auto")]
    pub input_format: InputFormat,
    /// Node count for edge lists (default: largest id + 1).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Edge lists: the first non-comment line is a header even if numeric ("nodes edges").
    #[arg(long)]
    pub header: bool,
}

impl GraphInput {
    /// A file, or else a dataset name or generator spec (`pubmed`, `rmat:18:16`).
    pub fn load(&self) -> Result<Csr> {
        if !tcgnn::graph::source::entry_exists(&self.input) {
            return tcgnn::graph::source::load(&self.input.to_string_lossy());
        }
        load_graph(&self.input, self.input_format, EdgeListOptions { n_nodes: self.nodes, skip_first_line: self.header })
    }
}

/// Read a graph, choosing the reader from `format` or the file name.
pub fn load_graph(path: &Path, format: InputFormat, edge_opts: EdgeListOptions) -> Result<Csr> {
    let name = path.to_string_lossy();
    let format = match format {
        InputFormat::Auto if tcg::is_tcg(path) => InputFormat::Tcg,
        InputFormat::Auto if name.ends_with(".mtx") || name.ends_with(".mtx.gz") => InputFormat::Mtx,
        // A file's own first bytes outrank its name: a Matrix Market file saved as `.txt` read
        // as an edge list would turn its size line into an edge.
        InputFormat::Auto => match tcgnn::graph::mtx::sniff(path)? {
            Some(tcgnn::graph::mtx::Sniffed::MatrixMarket) => InputFormat::Mtx,
            Some(tcgnn::graph::mtx::Sniffed::Tcg) => InputFormat::Tcg,
            None => InputFormat::Edgelist,
        },
        f => f,
    };
    if format != InputFormat::Edgelist && (edge_opts.n_nodes.is_some() || edge_opts.skip_first_line) {
        return Err(Error::Unsupported("--nodes and --header apply to edge lists only".into()));
    }
    if format == InputFormat::Tcg {
        return tcg::read_tcg(path);
    }
    if format == InputFormat::Mtx {
        if edge_opts.n_nodes.is_some() || edge_opts.skip_first_line {
            return Err(Error::Unsupported("--nodes and --header apply to edge lists only".into()));
        }
        read_mtx(path)
    } else {
        read_edgelist(path, edge_opts)
    }
}

/// Print a graph's size, degrees, memory and the statistics of every tile format.
#[derive(Clone, Debug, clap::Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub graph: GraphInput,
    /// Also describe node data from this .npz.
    #[arg(long)]
    pub npz: Option<PathBuf>,
    /// Reorder before computing the format statistics: none, rcm, community, degree.
    #[arg(long, default_value = "none")]
    pub reorder: String,
    /// Randomly relabel the nodes (seeded) before any reordering: the original ids' locality gone.
    #[arg(long)]
    pub relabel: Option<u64>,
    /// Also print the TC8 SpMM work list (windows, blocks per window, items, modelled schedule).
    #[arg(long)]
    pub worklist: bool,
    /// SMs of the device the work list is built for.
    #[arg(long, default_value_t = 132, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub sm_count: u32,
    /// K slices of the TC8 launch (f16: ceil(K / 64); tf32: ceil(K / 32)).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub k_slices: u32,
}

pub fn run_info(args: &InfoArgs) -> Result<()> {
    let t = Instant::now();
    let mut g = args.graph.load()?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let how: Reorder = args.reorder.parse()?;
    if let Some(seed) = args.relabel {
        g = tcgnn::graph::Permutation::random(g.n_rows(), seed).apply_to_csr(&g)?;
    }
    if how != Reorder::Identity {
        g = reorder(&g, how)?.apply_to_csr(&g)?;
    }
    let (dmin, dmean, dmax) = degree_summary(&g);
    println!("graph      {}", tcgnn::graph::text::escaped(&args.graph.input.to_string_lossy()));
    println!("nodes      {} x {}", g.n_rows(), g.n_cols());
    println!("nnz        {}", g.nnz());
    println!("degree     min {dmin}  mean {dmean:.2}  max {dmax}");
    println!("memory     {} bytes (CSR, f32 values)", g.bytes());
    println!("load       {load_ms:.1} ms ({:.1} M nnz/s)", g.nnz() as f64 / load_ms / 1e3);
    if let Some(seed) = args.relabel {
        println!("relabelled randomly (seed {seed})");
    }
    if how != Reorder::Identity {
        println!("reordered  {how:?}");
    }
    if let Some(p) = &args.npz {
        let d = read_npz(p)?;
        let kind = match &d.x {
            Features::Dense { .. } => "dense",
            Features::SparseMultiHot { .. } => "sparse multi-hot",
        };
        println!(
            "node data  {} nodes, {} features ({kind}, {} bytes), {} classes, split: {}, standard splits: {}",
            d.n(),
            d.x.f(),
            d.x.bytes(),
            d.n_classes(),
            if d.split.is_some() { "yes" } else { "no" },
            d.splits_all.len()
        );
    }
    println!();
    if args.worklist {
        let model = worklist::DeviceModel::new(args.sm_count);
        print!("{}", worklist::render_worklist(&MeBcrs::from_csr(&g, 8)?, args.k_slices, &model));
        return Ok(());
    }
    print!("{}", render_table(&format_stats(&g)?));
    print!("{}", render_vector_zeros(&vector_zeros(&g)?));
    let models = [hybrid::CostModel::TF32_K128, hybrid::CostModel::F16_K128];
    print!("{}", hybrid::render_hybrid(&hybrid::hybrid_stats(&g)?, &models));
    // The same translations on the GPU when one is present (CSR already on the device).
    if let Ok(gpu) = tcgnn::gpu::Gpu::probe() {
        for (name, ms) in tcgnn::gpu::translate::gpu_translate_ms(&gpu, &g, 10)? {
            println!("GPU translation {name:<24} {ms:>10.3} ms");
        }
    }
    Ok(())
}

/// Convert a graph file to Matrix Market (`.mtx` or `.mtx.gz`) or the binary `.tcg`,
/// optionally symmetrized and with self-loops.
#[derive(Clone, Debug, clap::Args)]
pub struct ConvertArgs {
    #[command(flatten)]
    pub graph: GraphInput,
    /// Output file (.mtx, .mtx.gz or .tcg).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format (default: from the output name).
    #[arg(long, value_enum, default_value = "auto")]
    pub to: OutputFormat,
    /// Store every edge in both directions.
    #[arg(long)]
    pub symmetrize: bool,
    /// Add a self-loop (value 1) to every node that lacks one.
    #[arg(long)]
    pub self_loops: bool,
}

pub fn run_convert(args: &ConvertArgs) -> Result<()> {
    check_outputs(&[&args.graph.input], &[&args.output])?;
    let mut g = args.graph.load()?;
    if args.symmetrize {
        g = symmetrize(&g)?;
    }
    if args.self_loops {
        g = add_self_loops(&g, 1.0)?;
    }
    let t = Instant::now();
    match args.to {
        OutputFormat::Tcg => tcg::write_tcg(&args.output, &g)?,
        OutputFormat::Auto if tcg::is_tcg(&args.output) => tcg::write_tcg(&args.output, &g)?,
        _ => write_mtx(&args.output, &g)?,
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    println!("wrote {} ({} nodes, {} nnz, {ms:.0} ms)", tcgnn::graph::text::escaped(&args.output.to_string_lossy()), g.n_rows(), g.nnz());
    Ok(())
}

/// Synthetic graph kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GenKind {
    Rmat,
    Sbm,
    Path,
    Star,
    Complete,
    Grid,
}

/// Generate a synthetic graph (and node data for `sbm`).
#[derive(Clone, Debug, clap::Args)]
pub struct GenArgs {
    #[arg(value_enum)]
    pub kind: GenKind,
    /// Output graph (.mtx, .mtx.gz, or .tcg: the binary CSR that loads at disk speed).
    #[arg(short, long)]
    pub output: PathBuf,
    /// R-MAT: 2^scale nodes.
    #[arg(long, default_value_t = 16)]
    pub scale: u32,
    /// R-MAT: sampled edges per node.
    #[arg(long, default_value_t = 16)]
    pub edge_factor: u32,
    /// R-MAT quadrant probabilities (d = 1 - a - b - c).
    #[arg(long, default_value_t = 0.57, allow_negative_numbers = true)]
    pub a: f64,
    #[arg(long, default_value_t = 0.19, allow_negative_numbers = true)]
    pub b: f64,
    #[arg(long, default_value_t = 0.19, allow_negative_numbers = true)]
    pub c: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Nodes (sbm, path, star, complete) or grid rows.
    #[arg(long, default_value_t = 10000)]
    pub n: usize,
    /// Grid columns.
    #[arg(long, default_value_t = 100)]
    pub cols: usize,
    /// SBM: classes.
    #[arg(long, default_value_t = 8)]
    pub classes: usize,
    /// SBM: mean degree.
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true)]
    pub avg_degree: f64,
    /// SBM: probability an edge stays inside its class.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    pub p_in: f64,
    /// SBM: feature width.
    #[arg(long, default_value_t = 32)]
    pub features: usize,
    /// SBM: where to write node data (.npz); default: the output name with .npz.
    #[arg(long)]
    pub npz: Option<PathBuf>,
}

/// Node and stored-edge counts of the small shapes, checked before generating: 32-bit ids and
/// nonzero counts, and the host memory the edge list and CSR take (~32 bytes an edge).
fn check_shape_size(args: &GenArgs) -> Result<()> {
    let n = args.n as u64;
    let (nodes, edges) = match args.kind {
        GenKind::Path | GenKind::Star => (n, 2 * n),
        GenKind::Complete => (n, n.saturating_mul(n)),
        GenKind::Grid => (n.saturating_mul(args.cols as u64), n.saturating_mul(args.cols as u64).saturating_mul(4)),
        GenKind::Rmat | GenKind::Sbm => return Ok(()), // checked by their generators
    };
    if nodes > tcgnn::graph::spec::MAX_NODES || edges > tcgnn::graph::spec::MAX_NNZ {
        return Err(Error::Unsupported(format!(
            "{:?} of {nodes} nodes and {edges} edges: over 2^31 - 2 nodes or 2^31 - 1 edges",
            args.kind
        )));
    }
    tcgnn::util::memory::check_host_alloc(edges * 32, &format!("{:?} graph of {nodes} nodes", args.kind))
}

/// Where `gen sbm` writes its node data: `--npz`, else the output name with `.npz`.
fn gen_npz_path(args: &GenArgs) -> PathBuf {
    args.npz.clone().unwrap_or_else(|| {
        let s = args.output.to_string_lossy();
        PathBuf::from(format!("{}.npz", s.trim_end_matches(".gz").trim_end_matches(".mtx")))
    })
}

pub fn run_gen(args: &GenArgs) -> Result<()> {
    let npz = gen_npz_path(args);
    let outputs: Vec<&Path> = if args.kind == GenKind::Sbm { vec![&args.output, &npz] } else { vec![&args.output] };
    check_outputs(&[], &outputs)?;
    check_shape_size(args)?;
    let t = Instant::now();
    let g = match args.kind {
        GenKind::Rmat => {
            let p = RmatParams { scale: args.scale, edge_factor: args.edge_factor, a: args.a, b: args.b, c: args.c, seed: args.seed };
            p.check()?;
            rmat(p)
        }
        GenKind::Sbm => {
            let mut p = SbmParams::new(args.n, args.classes, args.seed);
            p.avg_degree = args.avg_degree;
            p.p_in = args.p_in;
            p.features = args.features;
            let (g, d) = sbm(p)?;
            write_npz(&npz, &d)?;
            println!("wrote {}", npz.display());
            g
        }
        GenKind::Path => path(args.n),
        GenKind::Star => star(args.n),
        GenKind::Complete => {
            if args.n > 1 << 14 {
                return Err(Error::Unsupported(format!("complete graph of {} nodes is too large", args.n)));
            }
            complete(args.n)
        }
        GenKind::Grid => grid(args.n, args.cols),
    };
    let ms = t.elapsed().as_secs_f64() * 1e3;
    // A `.tcg` output skips the text round trip (large generated graphs for setup benchmarks).
    if tcg::is_tcg(&args.output) {
        tcg::write_tcg(&args.output, &g)?;
    } else {
        write_mtx(&args.output, &g)?;
    }
    println!("wrote {} ({} nodes, {} nnz, generated in {ms:.1} ms)", args.output.display(), g.n_rows(), g.nnz());
    Ok(())
}

/// Compute a reordering, report its effect on tensor-core block counts, optionally write the
/// reordered graph and the permutation.
#[derive(Clone, Debug, clap::Args)]
pub struct ReorderArgs {
    #[command(flatten)]
    pub graph: GraphInput,
    /// none, rcm, community, degree.
    #[arg(long, default_value = "community")]
    pub method: String,
    /// Write the reordered graph here (.mtx or .mtx.gz).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Write the permutation here: line i holds the old id of new node i.
    #[arg(long)]
    pub perm_out: Option<PathBuf>,
}

/// (SGT 16x8 blocks, SGT 16x16 blocks, ME-BCRS 8x8 blocks).
fn block_counts(g: &Csr) -> Result<(usize, usize, usize)> {
    Ok((Sgt::from_csr(g, 8)?.n_blocks(), Sgt::from_csr(g, 16)?.n_blocks(), MeBcrs::from_csr(g, 8)?.n_blocks()))
}

pub fn run_reorder(args: &ReorderArgs) -> Result<()> {
    let outputs: Vec<&Path> = args.output.iter().chain(&args.perm_out).map(PathBuf::as_path).collect();
    check_outputs(&[&args.graph.input], &outputs)?;
    let g = args.graph.load()?;
    let how: Reorder = args.method.parse()?;
    let t = Instant::now();
    let p = reorder(&g, how)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let r = p.apply_to_csr(&g)?;
    let before = block_counts(&g)?;
    let after = block_counts(&r)?;
    println!("{how:?} order of {} nodes in {ms:.1} ms", g.n_rows());
    println!("{:<20} {:>12} {:>12} {:>8}", "blocks", "original", "reordered", "ratio");
    for (name, b, a) in [("SGT 16x8", before.0, after.0), ("SGT 16x16", before.1, after.1), ("ME-BCRS 8x8", before.2, after.2)] {
        let ratio = if b == 0 { 1.0 } else { a as f64 / b as f64 };
        println!("{name:<20} {b:>12} {a:>12} {ratio:>8.3}");
    }
    if let Some(out) = &args.output {
        write_mtx(out, &r)?;
        println!("wrote {}", out.display());
    }
    if let Some(out) = &args.perm_out {
        let text: String = p.new_to_old().iter().map(|v| format!("{v}\n")).collect();
        write_atomic(out, text.as_bytes())?;
        println!("wrote {}", out.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_run_end_to_end() {
        let dir = std::env::temp_dir().join(format!("tcgnn-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("g.mtx.gz");
        let mut gen_args = GenArgs {
            kind: GenKind::Sbm,
            output: out.clone(),
            scale: 8,
            edge_factor: 4,
            a: 0.57,
            b: 0.19,
            c: 0.19,
            seed: 1,
            n: 500,
            cols: 10,
            classes: 5,
            avg_degree: 6.0,
            p_in: 0.9,
            features: 8,
            npz: None,
        };
        run_gen(&gen_args).unwrap();
        assert!(dir.join("g.npz").exists());
        let input = GraphInput { input: out.clone(), input_format: InputFormat::Auto, nodes: None, header: false };
        run_info(&InfoArgs {
            graph: input.clone(),
            npz: Some(dir.join("g.npz")),
            reorder: "rcm".into(),
            relabel: None,
            worklist: false,
            sm_count: 132,
            k_slices: 2,
        })
        .unwrap();
        let conv = dir.join("c.mtx");
        run_convert(&ConvertArgs {
            graph: input.clone(),
            output: conv.clone(),
            to: OutputFormat::Auto,
            symmetrize: true,
            self_loops: true,
        })
        .unwrap();
        assert_eq!(read_mtx(&conv).unwrap().nnz(), read_mtx(&out).unwrap().nnz() + 500);
        run_reorder(&ReorderArgs {
            graph: input,
            method: "community".into(),
            output: Some(dir.join("r.mtx")),
            perm_out: Some(dir.join("p.txt")),
        })
        .unwrap();
        gen_args.kind = GenKind::Rmat;
        gen_args.a = 0.9;
        assert!(run_gen(&gen_args).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
