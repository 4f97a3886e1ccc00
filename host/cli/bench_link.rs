//! `tcgnn bench link GRAPH... --models gcn,sage`: link prediction's training step on the GPU
//! (the dot decoder's device-resident step: negatives drawn into their pair pattern on the
//! device, encoder, scores, loss, gradients, Adam), CUDA-event timed, median of `--reps`
//! steps after `--warmup`; besides, an epoch's wall time with its loss read back and the
//! evaluation's (validation and test scores to the host, AUC and Hits@K there), and PyG's
//! fastest configuration of `bench/pyg/link.py --out` side by side. Writes link.json and
//! link.md into `--out`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tcgnn::bench::train::{write_json, write_text};
use tcgnn::gpu::Gpu;
use tcgnn::nn::{CudaBackend, EdgeLayout, Ops};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::link::train::LinkTrainer;
use tcgnn::{Error, Result};

use super::train_cmd::{TrainArgs, load_dataset};
use super::train_link::{encoder_config, link_config, split_for};

#[derive(clap::Args)]
pub struct BenchLinkArgs {
    /// Graphs (dataset names, .mtx[.gz] paths, generators such as sbm:1000000).
    #[arg(required = true)]
    pub graphs: Vec<String>,
    /// Encoders (registry names).
    #[arg(long, value_delimiter = ',', default_value = "gcn,sage")]
    pub models: Vec<String>,
    #[arg(long, value_enum, value_delimiter = ',', default_value = "f32")]
    pub precisions: Vec<Precision>,
    /// Timed steps (median reported; at least 20).
    #[arg(long, default_value_t = 30)]
    pub reps: usize,
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Width of random node features for graphs without node data (ogbl-ddi: 64).
    #[arg(long, default_value_t = 64)]
    pub features: usize,
    /// Hidden width (PyG's link_pred.py: 128) and output width (64).
    #[arg(long, default_value_t = 128)]
    pub hidden: usize,
    #[arg(long, default_value_t = 64)]
    pub embedding: usize,
    /// Folder of the split files, GRAPHNAME.split: read when there, else written (for
    /// `bench/pyg/link.py --split-file`).
    #[arg(long)]
    pub split_dir: Option<PathBuf>,
    /// PyG results (`bench/pyg/link.py --out`); repeat for several files.
    #[arg(long)]
    pub pyg: Vec<PathBuf>,
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// After the timing, time every op of 5 eager steps and print where a step's time goes.
    #[arg(long)]
    pub profile_ops: bool,
}

#[derive(Serialize, Clone, Debug, Default)]
struct Row {
    graph: String,
    nodes: usize,
    undirected_edges: usize,
    train_pairs: usize,
    model: String,
    precision: String,
    setup_ms: f64,
    /// The training step (GPU events, median / min of `reps`).
    step_ms: f64,
    step_min_ms: f64,
    /// One epoch on the host's clock: the step plus reading back its loss and the negatives
    /// kept (median of 5).
    epoch_wall_ms: f64,
    /// The evaluation's wall time (median of 3).
    eval_ms: f64,
    pyg_ms: Option<f64>,
    pyg_config: Option<String>,
    speedup_vs_pyg: Option<f64>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    gpu: tcgnn::gpu::GpuInfo,
    date: String,
    commit: String,
    reps: usize,
    warmup: usize,
    rows: Vec<Row>,
}

pub fn run(a: &BenchLinkArgs) -> Result<()> {
    if a.reps < 20 {
        return Err(Error::Unsupported(format!("--reps {} (at least 20: medians of >= 20 steps)", a.reps)));
    }
    for m in &a.models {
        tcgnn::nn::models::model_info(m)?;
    }
    let pyg = read_pyg(&a.pyg)?;
    let gpu = Gpu::probe()?;
    let mut rows = Vec::new();
    for graph in &a.graphs {
        let mut args = TrainArgs { features: Some(a.features.into()), quiet: true, hidden: Some(a.hidden), ..TrainArgs::for_graph(graph) };
        args.link.embedding = a.embedding;
        let data = match load_dataset(&args, 0) {
            Ok(d) => d,
            Err(e) => {
                println!("{graph}: {e}");
                rows.push(Row { graph: graph.clone(), error: Some(e.to_string()), ..Row::default() });
                continue;
            }
        };
        if let Some(dir) = &a.split_dir {
            std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.clone(), source: e })?;
            args.link.split_file = Some(dir.join(format!("{}.split", data.name)));
        }
        let split = split_for(&args, &data.graph)?;
        for m in &a.models {
            for &prec in &a.precisions {
                let mut margs = args.clone();
                margs.model = tcgnn::nn::models::model_info(m)?.name;
                let mut row = Row {
                    graph: data.name.clone(),
                    nodes: data.n(),
                    undirected_edges: split.train.len() + split.val_pos.len() + split.test_pos.len(),
                    train_pairs: split.train.len(),
                    model: m.clone(),
                    precision: format!("{prec:?}").to_lowercase(),
                    ..Row::default()
                };
                let backend = CudaBackend::new(gpu.clone(), prec, Impl::Auto).map(|b| Arc::new(b.with_edge_layout(EdgeLayout::Csr)));
                match backend.and_then(|b| time_one(a, &margs, &data, &split, b, &mut row)) {
                    Ok(()) => {}
                    Err(e) => row.error = Some(e.to_string()),
                }
                if let Some((ms, cfg)) = pyg_lookup(&pyg, &row.graph, m) {
                    row.speedup_vs_pyg = (row.step_ms > 0.0).then(|| ms / row.step_ms);
                    row.pyg_ms = Some(ms);
                    row.pyg_config = Some(cfg);
                }
                print_row(&row);
                rows.push(row);
            }
        }
    }
    let report = Report {
        gpu: gpu.info().clone(),
        date: tcgnn::bench::report::today(),
        commit: env!("TCGNN_GIT_COMMIT").into(),
        reps: a.reps,
        warmup: a.warmup,
        rows,
    };
    let json = write_json(&a.out.join("link.json"), &report)?;
    let md = write_text(&a.out.join("link.md"), &markdown(&report))?;
    eprintln!("wrote {} and {}", json.display(), md.display());
    Ok(())
}

fn time_one<B: Ops + 'static>(
    a: &BenchLinkArgs,
    args: &TrainArgs,
    data: &tcgnn::task::node::Dataset,
    split: &tcgnn::task::link::split::LinkSplit,
    backend: Arc<B>,
    row: &mut Row,
) -> Result<()> {
    let cfg = encoder_config(args, 0)?;
    let lcfg = link_config(args, 0)?;
    let mut t = LinkTrainer::new(backend.clone(), &data.features, split, &cfg, a.embedding, &lcfg)?;
    row.setup_ms = t.setup_seconds * 1e3;
    let mut epoch = 0;
    let timing = backend.time(a.warmup, a.reps, &mut || {
        epoch += 1;
        t.step(epoch)
    })?;
    row.step_ms = timing.median_ms;
    row.step_min_ms = timing.min_ms;
    let mut wall = Vec::new();
    for _ in 0..5 {
        epoch += 1;
        let t0 = Instant::now();
        t.train_epoch(epoch)?;
        wall.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let mut eval = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        t.evaluate()?;
        eval.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    row.epoch_wall_ms = median(&mut wall);
    row.eval_ms = median(&mut eval);
    if a.profile_ops {
        const STEPS: usize = 5;
        let ops = backend.time_ops(&mut || {
            for _ in 0..STEPS {
                epoch += 1;
                t.step(epoch)?;
            }
            Ok(())
        })?;
        let total: f64 = ops.iter().map(|o| o.1).sum::<f64>() / STEPS as f64;
        println!("{} {} {}: per-op time of a step (sum {total:.3} ms)", row.graph, row.model, row.precision);
        for (name, ms, calls) in &ops {
            let ms = ms / STEPS as f64;
            println!("  {name:<28} {ms:>8.3} ms {:>5.1}%  {:>4.1} calls", 100.0 * ms / total, *calls as f64 / STEPS as f64);
        }
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The records of `bench/pyg/link.py --out` files.
fn read_pyg(paths: &[PathBuf]) -> Result<Vec<serde_json::Value>> {
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| Error::Io { path: p.clone(), source: e })?;
            serde_json::from_str(&text).map_err(|e| Error::Unsupported(format!("{}: not JSON: {e}", p.display())))
        })
        .collect()
}

/// PyG's fastest step (ms) and its configuration for (graph, model).
fn pyg_lookup(pyg: &[serde_json::Value], graph: &str, model: &str) -> Option<(f64, String)> {
    let mut best: Option<(f64, String)> = None;
    for v in pyg {
        if v.pointer("/facts/graph").and_then(|g| g.as_str()) != Some(graph) {
            continue;
        }
        let Some(timing) = v.pointer(&format!("/models/{model}/timing")).and_then(|t| t.as_object()) else { continue };
        for (cfg, t) in timing {
            if let Some(ms) = t.get("median_ms").and_then(|m| m.as_f64())
                && best.as_ref().is_none_or(|b| ms < b.0)
            {
                best = Some((ms, cfg.clone()));
            }
        }
    }
    best
}

fn print_row(r: &Row) {
    if let Some(e) = &r.error {
        println!("{} {} {}: {e}", r.graph, r.model, r.precision);
        return;
    }
    let pyg = match (r.pyg_ms, &r.pyg_config, r.speedup_vs_pyg) {
        (Some(ms), Some(c), Some(x)) => format!("; PyG {ms:.3} ms ({c}): {x:.1}x"),
        _ => String::new(),
    };
    println!(
        "{} {} {}: step {:.3} ms (min {:.3}), epoch {:.3} ms wall, evaluation {:.2} ms, setup {:.0} ms{pyg}",
        r.graph, r.model, r.precision, r.step_ms, r.step_min_ms, r.epoch_wall_ms, r.eval_ms, r.setup_ms
    );
}

fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# Link prediction training step on {} ({}, commit {})\n\nMedian of {} CUDA-event-timed steps after {} warm-up steps; PyG: the fastest configuration of bench/pyg/link.py.\n\n",
        r.gpu.name, r.date, r.commit, r.reps, r.warmup
    );
    s += "| graph | nodes | edges | model | precision | step ms | epoch wall ms | eval ms | PyG ms | PyG config | speedup |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
    for x in &r.rows {
        let opt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
        if let Some(e) = &x.error {
            s += &format!("| {} | | | {} | {} | error: {e} | | | | | |\n", x.graph, x.model, x.precision);
            continue;
        }
        s += &format!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.2} | {} | {} | {} |\n",
            x.graph,
            x.nodes,
            x.undirected_edges,
            x.model,
            x.precision,
            x.step_ms,
            x.epoch_wall_ms,
            x.eval_ms,
            opt(x.pyg_ms, 3),
            x.pyg_config.as_deref().unwrap_or("-"),
            opt(x.speedup_vs_pyg, 1)
        );
    }
    s
}
