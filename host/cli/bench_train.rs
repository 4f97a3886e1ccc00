//! `tcgnn bench train`: step times of every registered model (at its defaults and the extra
//! shapes its `ModelInfo::bench_shapes` lists) in every precision on the suite graphs (median of >= 50 event-timed steps after warm-up, eager and as a CUDA
//! graph), the one-time setup, accuracy over seeds where the graph has real labels, and the
//! PyTorch Geometric figures of `bench/pyg/train.py` side by side.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use tcgnn::bench::floor::{copy_bandwidth_gbs, l2_bandwidth_gbs, step_floor_ms};
use tcgnn::bench::train::{mean_std, write_json, write_text};
use tcgnn::gpu::Gpu;
use tcgnn::nn::models::traffic::{StepShape, StepTraffic};
use tcgnn::nn::models::{MODELS, model_info};
use tcgnn::nn::{CudaBackend, ModelConfig};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::node::{TrainConfig, Trainer};
use tcgnn::{Error, Result};

use super::train_cmd::{TrainArgs, check_fits, load_dataset};

#[derive(clap::Args)]
pub struct BenchTrainArgs {
    /// Graphs (default: cora, citeseer, pubmed, rmat:18:16, sbm:1000000).
    pub graphs: Vec<String>,
    /// Models as NAME or NAME:LAYERSxHIDDEN, the rest at the model's defaults (default: every
    /// registered model at its defaults and at its `bench_shapes`: gcn:2x16, gcn:2x128,
    /// agnn:4x32, gat, sage, gin).
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    #[arg(long, value_enum, value_delimiter = ',', default_value = "f32,tf32,f16")]
    pub precisions: Vec<Precision>,
    /// Timed steps (median reported).
    #[arg(long, default_value_t = 50)]
    pub reps: usize,
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Seeds of the 200-epoch accuracy runs on graphs with real labels (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,3,4")]
    pub seeds: Vec<u64>,
    /// Width of synthetic features for graphs without node data.
    #[arg(long, default_value_t = 500)]
    pub features: usize,
    /// PyG results (bench/pyg/train.py --out) to compare with; repeat for several files.
    #[arg(long)]
    pub pyg: Vec<PathBuf>,
    /// Accuracy runs only on graphs with at most this many nodes (they rebuild the model per seed).
    #[arg(long, default_value_t = 100_000)]
    pub accuracy_max_nodes: usize,
    /// AGNN in f16 at width 32: rows shorter than this on the tensor-core attention kernels
    /// (at most 256; 0: all on the CUDA-core kernels; default: the library's choice).
    #[arg(long)]
    pub attention_tc: Option<u32>,
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// Print where each row's device memory is after the timed steps: live bytes by the source
    /// line that allocated them (the largest 12), and keep them in the JSON.
    #[arg(long)]
    pub memory_ledger: bool,
}

#[derive(Serialize, Clone, Debug)]
struct Row {
    graph: String,
    n: usize,
    nnz: usize,
    features: usize,
    model: String,
    precision: String,
    backend: String,
    setup_ms: f64,
    step_eager_ms: f64,
    step_graph_ms: Option<f64>,
    forward_ms: f64,
    backward_ms: f64,
    optimizer_ms: f64,
    evaluate_ms: f64,
    /// Test accuracy at the best validation epoch, mean and std over seeds (percent).
    accuracy: Option<(f64, f64)>,
    accuracies: Vec<f64>,
    /// Whether the step ran as a CUDA graph (the reason when capture failed).
    cuda_graph: tcgnn::task::node::train::Recorded,
    pyg_step_ms: Option<f64>,
    pyg_accuracy: Option<f64>,
    speedup_vs_pyg: Option<f64>,
    /// Device memory this row's model took (MiB): in use after the timed steps less what was in
    /// use before its backend was made (cuMemGetInfo; the CUDA context is in the baseline,
    /// library handles and workspaces are not). The step's buffers are allocated once and
    /// reused, so this is the step's peak (a replayed CUDA graph allocates nothing).
    gpu_memory_mb: Option<f64>,
    /// PyG's least peak over its configurations (`torch.cuda.max_memory_allocated`, MiB).
    pyg_peak_memory_mb: Option<f64>,
    /// With `--memory-ledger`: this row's live device buffers by allocating line (MiB, count).
    memory_ledger: Vec<(String, f64, u64)>,
    /// The fewest bytes a step moves ([`tcgnn::nn::models::traffic`]) and that over the
    /// measured bandwidths; `floor_fraction` = floor / step (1 = at the floor).
    traffic: Option<StepTraffic>,
    floor_ms: Option<f64>,
    floor_fraction: Option<f64>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    gpu: tcgnn::gpu::GpuInfo,
    date: String,
    commit: String,
    reps: usize,
    warmup: usize,
    /// Device copy (DRAM) and L2 read bandwidths the floors are computed with.
    copy_bandwidth_gbs: f64,
    l2_bandwidth_gbs: f64,
    rows: Vec<Row>,
}

/// `NAME` or `NAME:LAYERSxHIDDEN` into the model's default config with that shape; a `+variant`
/// suffix sets `--variant` (GAT: the unfused per-head ops; AGNN: the unfused attention ops).
fn parse_model(s: &str) -> Result<ModelConfig> {
    let bad = || Error::Unsupported(format!("model '{s}': use NAME or NAME:LAYERSxHIDDEN, e.g. gcn:2x16, with +variant for --variant"));
    let (s, variant) = s.strip_suffix("+variant").map_or((s, false), |m| (m, true));
    let (name, shape) = s.split_once(':').map_or((s, None), |(n, sh)| (n, Some(sh)));
    let d = ModelConfig { variant, ..model_info(name)?.defaults };
    let Some(shape) = shape else { return Ok(d) };
    let (l, h) = shape.split_once('x').ok_or_else(bad)?;
    Ok(ModelConfig { layers: l.parse().map_err(|_| bad())?, hidden: h.parse().map_err(|_| bad())?, ..d })
}

/// The models `bench train` times when none are named: every registered model at its defaults,
/// then at each of its `bench_shapes`.
fn default_suite() -> Vec<ModelConfig> {
    MODELS
        .iter()
        .flat_map(|m| {
            let d = m.defaults;
            std::iter::once(d).chain(m.bench_shapes.iter().map(move |&(layers, hidden)| ModelConfig { layers, hidden, ..d }))
        })
        .collect()
}

/// The name reports use for a model config: "gcn 2x16", "gat 2x8x8" (layers x heads x hidden).
fn model_label(cfg: &ModelConfig) -> String {
    let v = if cfg.variant { " variant" } else { "" };
    match cfg.heads {
        1 => format!("{} {}x{}{v}", cfg.model, cfg.layers, cfg.hidden),
        h => format!("{} {}x{}x{}{v}", cfg.model, cfg.layers, h, cfg.hidden),
    }
}

/// PyG's median step (of its fastest configuration, `fastest.step_ms`, where measured; the
/// least over every matching record) and mean
/// test accuracy (percent) for (graph, model, layers, hidden), as `bench/pyg/train.py` writes
/// them (`records[].config.{model,layers,hidden}`, `step_ms.median`,
/// `test_acc_mean` as a fraction). Graph names are file stems on both sides.
/// PyG's figures for one (graph, model, layers, hidden) from its JSON records.
#[derive(Default)]
struct PygFigures {
    step_ms: Option<f64>,
    accuracy: Option<f64>,
    /// The least `torch.cuda.max_memory_allocated` of its configurations (MiB): the leanest
    /// PyG, the strictest comparison for ours.
    peak_memory_mb: Option<f64>,
}

fn pyg_lookup(pyg: &Option<serde_json::Value>, graph: &str, model: &str, layers: usize, hidden: usize) -> PygFigures {
    let mut out = PygFigures::default();
    let Some(v) = pyg else { return out };
    let want_kind = model.to_lowercase();
    let records = v.get("records").and_then(|r| r.as_array()).into_iter().flatten();
    let min = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(f64::min(a, b)),
        (a, b) => a.or(b),
    };
    for r in records {
        let c = r.get("config").unwrap_or(r);
        let s = |o: &serde_json::Value, k: &str| o.get(k).and_then(|x| x.as_str()).unwrap_or("").to_lowercase();
        let u = |k: &str| c.get(k).and_then(|x| x.as_u64()).unwrap_or(0) as usize;
        if s(r, "graph") == graph.to_lowercase() && s(c, "model") == want_kind && u("layers") == layers && u("hidden") == hidden {
            // PyG's fastest configuration where train.py --fastest measured several, and the
            // fastest over every file given (e.g. torch.compile timed in a run of its own).
            let fastest = r.get("fastest").and_then(|f| f.get("step_ms")).and_then(|x| x.get("median")).and_then(|x| x.as_f64());
            let this = fastest.or_else(|| r.get("step_ms").and_then(|x| x.get("median")).and_then(|x| x.as_f64()));
            out.step_ms = min(out.step_ms, this);
            // A variant that failed records no memory (or 0): only measured peaks count.
            let peaks = std::iter::once(r).chain(r.get("variants").and_then(|v| v.as_array()).into_iter().flatten());
            for p in peaks.filter_map(|x| x.get("peak_memory_mb").and_then(|m| m.as_f64())).filter(|&m| m > 0.0) {
                out.peak_memory_mb = min(out.peak_memory_mb, Some(p));
            }
            let synthetic = r.get("synthetic_labels").and_then(|x| x.as_bool()).unwrap_or(false);
            if !synthetic {
                out.accuracy = out.accuracy.or_else(|| r.get("test_acc_mean").and_then(|x| x.as_f64()).map(|a| a * 100.0));
            }
        }
    }
    out
}

pub fn run(a: &BenchTrainArgs) -> Result<()> {
    if a.attention_tc.is_some_and(|r| r > tcgnn::ops::nn::row_split::ROW_LONG_MIN) {
        return Err(Error::Unsupported(format!(
            "bench train: --attention-tc {} (at most {}: longer rows are the CUDA-core kernels' segments)",
            a.attention_tc.unwrap_or(0),
            tcgnn::ops::nn::row_split::ROW_LONG_MIN
        )));
    }
    let gpu = Gpu::probe()?;
    let graphs = if a.graphs.is_empty() {
        ["cora", "citeseer", "pubmed", "rmat:18:16", "sbm:1000000"].map(String::from).to_vec()
    } else {
        a.graphs.clone()
    };
    let models = if a.models.is_empty() { default_suite() } else { a.models.iter().map(|m| parse_model(m)).collect::<Result<Vec<_>>>()? };
    let mut pyg_records = Vec::new();
    for p in &a.pyg {
        let text = std::fs::read_to_string(p).map_err(|e| Error::Io { path: p.clone(), source: e })?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Unsupported(format!("{}: {e}", p.display())))?;
        pyg_records.extend(v.get("records").and_then(|r| r.as_array()).cloned().unwrap_or_default());
    }
    let pyg = (!pyg_records.is_empty()).then(|| serde_json::json!({ "records": pyg_records }));
    let bandwidths = Bandwidths { copy_gbs: copy_bandwidth_gbs(&gpu)?, l2_gbs: l2_bandwidth_gbs(&gpu)? };
    println!("floors at {:.0} GB/s (device copy) and {:.0} GB/s (L2 reads)", bandwidths.copy_gbs, bandwidths.l2_gbs);
    let mut rows = Vec::new();
    for graph in &graphs {
        // Loaded once per graph: the large generated graphs take seconds to parse.
        let data = match load_dataset(&train_args(a, graph), 0) {
            Ok(d) => d,
            Err(e) => {
                println!("{graph}: {e}");
                continue;
            }
        };
        for cfg in &models {
            for &prec in &a.precisions {
                let row = bench_one(&gpu, a, &data, cfg, prec, &pyg, &bandwidths);
                let row = row.unwrap_or_else(|e| Row {
                    graph: graph.clone(),
                    model: model_label(cfg),
                    precision: format!("{prec:?}").to_lowercase(),
                    error: Some(e.to_string()),
                    ..empty_row()
                });
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
        copy_bandwidth_gbs: bandwidths.copy_gbs,
        l2_bandwidth_gbs: bandwidths.l2_gbs,
        rows,
    };
    let json = write_json(&a.out.join("train.json"), &report)?;
    let md = write_text(&a.out.join("train.md"), &markdown(&report))?;
    let svg = write_text(&a.out.join("train.svg"), &speedup_svg(&report))?;
    eprintln!("wrote {}, {} and {}", json.display(), md.display(), svg.display());
    Ok(())
}

fn empty_row() -> Row {
    Row {
        graph: String::new(),
        n: 0,
        nnz: 0,
        features: 0,
        model: String::new(),
        precision: String::new(),
        backend: String::new(),
        setup_ms: f64::NAN,
        step_eager_ms: f64::NAN,
        step_graph_ms: None,
        forward_ms: f64::NAN,
        backward_ms: f64::NAN,
        optimizer_ms: f64::NAN,
        evaluate_ms: f64::NAN,
        accuracy: None,
        accuracies: vec![],
        cuda_graph: tcgnn::task::node::train::Recorded::NotSupported,
        pyg_step_ms: None,
        pyg_accuracy: None,
        speedup_vs_pyg: None,
        gpu_memory_mb: None,
        pyg_peak_memory_mb: None,
        memory_ledger: vec![],
        traffic: None,
        floor_ms: None,
        floor_fraction: None,
        error: None,
    }
}

/// The measured bandwidths of the step floor.
struct Bandwidths {
    copy_gbs: f64,
    l2_gbs: f64,
}

/// The `tcgnn train` arguments a benchmark row stands for (PyG's defaults).
fn train_args(a: &BenchTrainArgs, graph: &str) -> TrainArgs {
    TrainArgs {
        device: super::train_cmd::Device::Gpu,
        seeds: a.seeds.clone(),
        features: Some(a.features.into()),
        quiet: true,
        ..TrainArgs::for_graph(graph)
    }
}

fn bench_one(
    gpu: &Arc<Gpu>,
    a: &BenchTrainArgs,
    data: &tcgnn::task::node::Dataset,
    cfg: &ModelConfig,
    prec: Precision,
    pyg: &Option<serde_json::Value>,
    bw: &Bandwidths,
) -> Result<Row> {
    let cfg = *cfg;
    check_fits(gpu, data, &cfg)?;
    let info = model_info(cfg.model)?;
    let tcfg = TrainConfig { lr: info.lr, weight_decay: info.weight_decay, ..TrainConfig::default() };
    gpu.synchronize()?;
    let used_before = gpu.sample_used_memory()?;
    tcgnn::gpu::ledger::set_enabled(a.memory_ledger);
    let layout = super::train_cmd::edge_layout(cfg.model, None)?;
    let mut backend = CudaBackend::new(gpu.clone(), prec, Impl::Auto)?.with_edge_layout(layout);
    if let Some(row_max) = a.attention_tc {
        backend = backend.with_attention_tc(row_max);
    }
    let backend = Arc::new(backend);
    let mut trainer = Trainer::new(backend.clone(), data, &cfg, &tcfg)?;
    let setup_ms = trainer.setup_seconds * 1e3;
    let recorded = trainer.record()?;
    let phases = trainer.profile(a.warmup, a.reps)?;
    gpu.synchronize()?;
    let gpu_memory_mb = gpu.sample_used_memory()?.saturating_sub(used_before) as f64 / (1u64 << 20) as f64;
    let memory_ledger: Vec<(String, f64, u64)> =
        tcgnn::gpu::ledger::live().into_iter().map(|(site, l)| (site, l.bytes as f64 / (1u64 << 20) as f64, l.buffers)).collect();
    tcgnn::gpu::ledger::set_enabled(false);
    if a.memory_ledger {
        let counted: f64 = memory_ledger.iter().map(|x| x.1).sum();
        eprintln!(
            "{} {}: {gpu_memory_mb:.0} MiB on the device, {counted:.0} MiB in device vectors; the largest:",
            data.name,
            model_label(&cfg)
        );
        for (site, mib, n) in memory_ledger.iter().take(12) {
            eprintln!("  {mib:>9.1} MiB in {n:>4} buffers  {site}");
        }
    }
    drop(trainer);
    let mut accuracies = Vec::new();
    if !data.synthetic && data.n() <= a.accuracy_max_nodes {
        for &seed in &a.seeds {
            let cfg = ModelConfig { seed, ..cfg };
            let mut t = Trainer::new(backend.clone(), data, &cfg, &tcfg)?;
            let _ = t.record()?;
            accuracies.push(t.fit(tcfg.epochs, |_| {})?.test_acc * 100.0);
        }
    }
    let pyg = pyg_lookup(pyg, &data.name, cfg.model, cfg.layers, cfg.hidden);
    let (pyg_step_ms, pyg_accuracy) = (pyg.step_ms, pyg.accuracy);
    let step = phases.step_ms();
    let shape = StepShape {
        n: data.n(),
        nnz: data.graph.nnz(),
        features: data.features.cols(),
        classes: data.classes,
        act_bytes: if matches!(prec, Precision::F16) { 2 } else { 4 },
    };
    let traffic = (info.step_traffic)(&cfg, &shape);
    let floor_ms = step_floor_ms(&traffic, bw.copy_gbs, bw.l2_gbs);
    Ok(Row {
        graph: data.name.clone(),
        n: data.n(),
        nnz: data.graph.nnz(),
        features: data.features.cols(),
        model: model_label(&cfg),
        precision: format!("{prec:?}").to_lowercase(),
        backend: tcgnn::nn::Backend::describe(&*backend),
        setup_ms,
        step_eager_ms: phases.step_eager.median_ms,
        step_graph_ms: phases.step_recorded.as_ref().map(|t| t.median_ms),
        forward_ms: phases.forward.median_ms,
        backward_ms: phases.backward.median_ms,
        optimizer_ms: phases.optimizer.median_ms,
        evaluate_ms: phases.evaluate.median_ms,
        accuracy: (!accuracies.is_empty()).then(|| mean_std(&accuracies)),
        accuracies,
        cuda_graph: recorded,
        speedup_vs_pyg: pyg_step_ms.map(|p| p / step),
        gpu_memory_mb: Some(gpu_memory_mb),
        memory_ledger,
        pyg_peak_memory_mb: pyg.peak_memory_mb,
        pyg_step_ms,
        pyg_accuracy,
        traffic: Some(traffic),
        floor_ms: Some(floor_ms),
        floor_fraction: Some(floor_ms / step),
        error: None,
    })
}

fn print_row(r: &Row) {
    match &r.error {
        Some(e) => println!("{:<14} {:<14} {:<5} error: {e}", r.graph, r.model, r.precision),
        None => println!(
            "{:<14} {:<14} {:<5} step {:>8.3} ms (eager {:>8.3}) floor {:>5} setup {:>8.1} ms acc {:>13} pyg {:>8} speedup {:>7} memory {:>8} MiB (pyg {})",
            r.graph,
            r.model,
            r.precision,
            r.step_graph_ms.unwrap_or(r.step_eager_ms),
            r.step_eager_ms,
            r.floor_fraction.map_or("-".into(), |f| format!("{:.2}", f)),
            r.setup_ms,
            r.accuracy.map_or("-".into(), |(m, s)| format!("{m:.1} ± {s:.1}%")),
            r.pyg_step_ms.map_or("-".into(), |p| format!("{p:.3}")),
            r.speedup_vs_pyg.map_or("-".into(), |s| format!("{s:.1}x")),
            r.gpu_memory_mb.map_or("-".into(), |m| format!("{m:.0}")),
            r.pyg_peak_memory_mb.map_or("-".into(), |m| format!("{m:.0}")),
        ),
    }
}

fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# Training step times ({}, {}, commit {})\n\nMedian of {} event-timed steps after {} warm-up steps; a step is forward + loss + backward + Adam. \
         `graph` = the step replayed as a CUDA graph, `eager` = launched kernel by kernel. \
         `floor`: the step's fraction of its memory floor (the fewest bytes a step moves, `nn/models/traffic.rs`, over {:.0} GB/s device copy and {:.0} GB/s L2 reads, both measured; 1 = at the floor). Accuracy: test accuracy at the best validation epoch, 200 epochs, mean ± std over seeds.\n\n\
         | graph | model | precision | step (graph) ms | step (eager) ms | floor | fwd | bwd | adam | setup ms | accuracy | PyG step ms | PyG acc | speedup vs PyG | GPU MiB | PyG MiB |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        r.gpu.name, r.date, r.commit, r.reps, r.warmup, r.copy_bandwidth_gbs, r.l2_bandwidth_gbs
    );
    for x in &r.rows {
        if let Some(e) = &x.error {
            s += &format!("| {} | {} | {} | error: {e} ||||||||||||| \n", x.graph, x.model, x.precision);
            continue;
        }
        s += &format!(
            "| {} | {} | {} | {} | {:.3} | {} | {:.3} | {:.3} | {:.3} | {:.1} | {} | {} | {} | {} | {} | {} |\n",
            x.graph,
            x.model,
            x.precision,
            x.step_graph_ms.map_or("-".into(), |v| format!("{v:.3}")),
            x.step_eager_ms,
            x.floor_fraction.map_or("-".into(), |f| format!("{f:.2}")),
            x.forward_ms,
            x.backward_ms,
            x.optimizer_ms,
            x.setup_ms,
            x.accuracy.map_or("-".into(), |(m, sd)| format!("{m:.1} ± {sd:.1}")),
            x.pyg_step_ms.map_or("-".into(), |v| format!("{v:.3}")),
            x.pyg_accuracy.map_or("-".into(), |v| format!("{v:.1}")),
            x.speedup_vs_pyg.map_or("-".into(), |v| format!("{v:.1}x")),
            x.gpu_memory_mb.map_or("-".into(), |v| format!("{v:.0}")),
            x.pyg_peak_memory_mb.map_or("-".into(), |v| format!("{v:.0}")),
        );
    }
    s
}

/// Bars of the step-time speedup over PyG per (graph, model), one colour per precision, on a
/// log scale with the 1x, 4x and 10x lines.
fn speedup_svg(r: &Report) -> String {
    use std::fmt::Write as _;
    let rows: Vec<&Row> = r.rows.iter().filter(|x| x.speedup_vs_pyg.is_some()).collect();
    let mut groups: Vec<(String, String)> = Vec::new();
    for x in &rows {
        let key = (x.graph.clone(), x.model.clone());
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    let precisions = ["f32", "tf32", "f16"];
    let colors = ["#4c72b0", "#55a868", "#c44e52"];
    let (bar, gap, left, top, height) = (12.0, 14.0, 60.0, 40.0, 300.0);
    let width = left + groups.len() as f64 * (3.0 * bar + gap) + 40.0;
    let max = rows.iter().filter_map(|x| x.speedup_vs_pyg).fold(10.0f64, f64::max) * 1.2;
    let y = |v: f64| top + height - height * (v.max(0.5).ln() - 0.5f64.ln()) / (max.ln() - 0.5f64.ln());
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{}" font-family="sans-serif" font-size="11">"#,
        top + height + 110.0
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="20" font-size="13">Training step speedup over PyTorch Geometric ({}, {})</text>"#,
        r.gpu.name, r.date
    );
    for (v, label) in [(1.0, "1x"), (4.0, "4x"), (10.0, "10x")] {
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#999" stroke-dasharray="3,3"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{label}</text>"##,
            y(v),
            width - 30.0,
            left - 5.0,
            y(v) + 4.0
        );
    }
    for (gi, (graph, model)) in groups.iter().enumerate() {
        let x0 = left + gi as f64 * (3.0 * bar + gap);
        for (pi, prec) in precisions.iter().enumerate() {
            if let Some(v) =
                rows.iter().find(|x| &x.graph == graph && &x.model == model && x.precision == *prec).and_then(|x| x.speedup_vs_pyg)
            {
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="{bar}" height="{:.1}" fill="{}"><title>{graph} {model} {prec}: {v:.1}x</title></rect>"#,
                    x0 + pi as f64 * bar,
                    y(v),
                    top + height - y(v),
                    colors[pi]
                );
            }
        }
        let _ = writeln!(s, r#"<text transform="translate({:.1},{:.1}) rotate(60)">{graph} {model}</text>"#, x0 + bar, top + height + 8.0);
    }
    for (pi, prec) in precisions.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="28" width="10" height="10" fill="{}"/><text x="{:.1}" y="37">{prec}</text>"#,
            width - 150.0 + 45.0 * pi as f64,
            colors[pi],
            width - 137.0 + 45.0 * pi as f64
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use tcgnn::nn::ModelConfig;
    use tcgnn::nn::models::{DEFAULT_MODEL, MODELS, agnn, gat, model_info};

    use super::{default_suite, model_label, parse_model, pyg_lookup};

    #[test]
    fn pyg_lookup_takes_the_fastest_over_every_record() {
        let (m, d) = (DEFAULT_MODEL, model_info(DEFAULT_MODEL).unwrap().defaults);
        let rec = |step: f64, fastest: Option<f64>| {
            let mut r = serde_json::json!({ "graph": "cora", "config": { "model": m, "layers": d.layers, "hidden": d.hidden }, "step_ms": { "median": step } });
            if let Some(f) = fastest {
                r["fastest"] = serde_json::json!({ "step_ms": { "median": f } });
            }
            r
        };
        let pyg = Some(serde_json::json!({ "records": [rec(2.0, Some(1.5)), rec(1.8, None), rec(3.0, Some(1.2))] }));
        assert_eq!(pyg_lookup(&pyg, "cora", m, d.layers, d.hidden).step_ms, Some(1.2));
        assert_eq!(pyg_lookup(&pyg, "cora", m, d.layers, d.hidden + 1).step_ms, None);
        assert_eq!(pyg_lookup(&None, "cora", m, d.layers, d.hidden).step_ms, None);
    }

    #[test]
    fn pyg_lookup_takes_the_least_measured_peak_memory() {
        let (m, d) = (DEFAULT_MODEL, model_info(DEFAULT_MODEL).unwrap().defaults);
        let other = MODELS.iter().find(|i| i.name != m).unwrap().name;
        let mut r = serde_json::json!({ "graph": "cora", "config": { "model": m, "layers": d.layers, "hidden": d.hidden }, "peak_memory_mb": 900.0 });
        // A failed variant records 0: not a measurement.
        r["variants"] = serde_json::json!([{ "peak_memory_mb": 700.0 }, { "peak_memory_mb": 0.0 }, { "name": "no figure" }]);
        let pyg = Some(serde_json::json!({ "records": [r] }));
        assert_eq!(pyg_lookup(&pyg, "cora", m, d.layers, d.hidden).peak_memory_mb, Some(700.0));
        assert_eq!(pyg_lookup(&pyg, "cora", other, d.layers, d.hidden).peak_memory_mb, None);
    }

    #[test]
    fn model_specs_take_a_shape_and_the_variant() {
        let (gat, agnn) = (gat::INFO.name, agnn::INFO.name);
        let c = parse_model(&format!("{gat}+variant")).unwrap();
        assert!(c.variant && c.model == gat && c == ModelConfig { variant: true, ..gat::INFO.defaults });
        let c = ModelConfig { layers: 3, heads: 4, hidden: 5, ..c };
        assert_eq!(model_label(&c), format!("{gat} 3x4x5 variant"));
        let c = parse_model(&format!("{agnn}:3x16+variant")).unwrap();
        assert!(c.variant && (c.layers, c.hidden) == (3, 16));
        assert_eq!(model_label(&c), format!("{agnn} 3x16 variant"));
        assert!(!parse_model(&format!("{DEFAULT_MODEL}:2x16")).unwrap().variant);
        assert!(parse_model(&format!("{DEFAULT_MODEL}:2x16+other")).is_err());
    }

    #[test]
    fn the_default_suite_is_every_model_then_its_bench_shapes() {
        let suite = default_suite();
        let mut want = Vec::new();
        for m in MODELS {
            want.push((m.name, m.defaults.layers, m.defaults.hidden));
            want.extend(m.bench_shapes.iter().map(|&(l, h)| (m.name, l, h)));
        }
        assert_eq!(suite.iter().map(|c| (c.model, c.layers, c.hidden)).collect::<Vec<_>>(), want);
        assert!(MODELS.iter().all(|m| suite.iter().any(|c| c.model == m.name)));
        assert!(suite.iter().all(|c| !c.variant && c.heads == model_info(c.model).unwrap().defaults.heads));
    }
}
