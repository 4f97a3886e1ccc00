//! `tcgnn bench setup GRAPH`: how long a training run takes to get to its first step, split into
//! reading the graph, making the node features, translating formats and uploading, with the
//! peak host and GPU memory (issue 15: "SBM 10M nodes x 64 features from .tcg under 3 s").
//! A graph file gets random features (`--features`, timed apart from the read); an `sbm:` spec
//! is generated with its features (one "read" figure).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tcgnn::gpu::Gpu;
use tcgnn::graph::source;
use tcgnn::ops::backend::cuda::CudaBackend;
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::task::node::train::Trainer;

use super::train_cmd::{TrainArgs, edge_layout, model_config, train_config};

#[derive(clap::Args)]
pub struct BenchSetupArgs {
    /// A graph file (`.tcg` from `tcgnn convert G --to tcg`, `.mtx[.gz]`, edge list), a dataset
    /// name, or `sbm:N[:CLASSES[:DEGREE]]`.
    pub graph: String,
    #[arg(long, default_value_t = 64)]
    pub features: usize,
    #[arg(long, default_value_t = 8)]
    pub classes: usize,
    #[arg(long, default_value = tcgnn::nn::models::DEFAULT_MODEL)]
    pub model: String,
    #[arg(long, value_enum, default_value = "tf32")]
    pub precision: Precision,
    /// Also time the first training step (lazy translations and kernel choices land there).
    #[arg(long)]
    pub first_step: bool,
    /// Write setup.json in this folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct SetupReport {
    graph: String,
    n: usize,
    nnz: usize,
    features: usize,
    model: String,
    precision: String,
    device: String,
    read_graph_s: f64,
    node_data_s: f64,
    translate_s: f64,
    upload_s: f64,
    upload_bytes: u64,
    other_s: f64,
    /// read_graph + node_data + the model's setup (translate + upload + other).
    total_s: f64,
    first_step_s: Option<f64>,
    peak_host_bytes: Option<u64>,
    peak_device_bytes: u64,
}

pub fn run(a: &BenchSetupArgs) -> tcgnn::Result<()> {
    let gpu = Gpu::probe()?;
    let mut ta = TrainArgs::for_graph(&a.graph);
    ta.features = Some(a.features.into());
    ta.classes = Some(a.classes);
    ta.precision = a.precision;
    ta.model = tcgnn::nn::models::model_info(&a.model)?.name;
    let seed = 0;
    let synth = SyntheticNodeData { features: a.features, classes: a.classes, seed };

    let t = Instant::now();
    let (mut data, read_graph_s, node_data_s) = if a.graph.starts_with("sbm:") {
        let d = Dataset::load(&a.graph, None, &synth)?;
        (d, t.elapsed().as_secs_f64(), 0.0)
    } else {
        let g = source::load(&a.graph)?;
        let read = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let d = Dataset::synthetic(source::display_name(&a.graph), g, &synth)?;
        (d, read, t.elapsed().as_secs_f64())
    };
    let (n, nnz) = (data.n(), data.graph.nnz());
    let cfg = model_config(&ta, seed)?;
    let tcfg = train_config(&ta)?;
    super::train_cmd::check_fits(&gpu, &data, &cfg)?;
    let backend = Arc::new(CudaBackend::new(gpu.clone(), a.precision, Impl::Auto)?.with_edge_layout(edge_layout(ta.model, None)?));
    let mut trainer = Trainer::new_taking_features(backend, &mut data, &cfg, &tcfg)?;
    gpu.sample_used_memory()?;
    let setup_s = trainer.setup_seconds;
    let clock = gpu.clock().snapshot();
    let first_step_s = if a.first_step {
        let t = Instant::now();
        trainer.step_eager()?;
        gpu.synchronize()?;
        gpu.sample_used_memory()?;
        Some(t.elapsed().as_secs_f64())
    } else {
        None
    };
    let r = SetupReport {
        graph: data.name.clone(),
        n,
        nnz,
        features: a.features,
        model: ta.model.to_string(),
        precision: format!("{:?}", a.precision).to_lowercase(),
        device: gpu.info().name.clone(),
        read_graph_s,
        node_data_s,
        translate_s: clock.translate_s,
        upload_s: clock.upload_s,
        upload_bytes: clock.upload_bytes,
        other_s: (setup_s - clock.translate_s - clock.upload_s).max(0.0),
        total_s: read_graph_s + node_data_s + setup_s,
        first_step_s,
        peak_host_bytes: tcgnn::util::memory::peak_rss_bytes(),
        peak_device_bytes: gpu.clock().snapshot().peak_device_used_bytes,
    };
    println!(
        "{} ({n} nodes, {nnz} edges) x {} features, {} {} on {}:\n  read graph {:.3} s, node data {:.3} s, translate {:.3} s, upload {:.3} s ({:.2} GB), other {:.3} s: total {:.3} s{}\n  peak memory: host {}, GPU {:.2} GB (in use on the device)",
        r.graph,
        r.features,
        r.model,
        r.precision,
        r.device,
        r.read_graph_s,
        r.node_data_s,
        r.translate_s,
        r.upload_s,
        r.upload_bytes as f64 / 1e9,
        r.other_s,
        r.total_s,
        r.first_step_s.map_or(String::new(), |s| format!("; first step {s:.3} s")),
        r.peak_host_bytes.map_or("n/a".into(), |b| format!("{:.2} GB", b as f64 / 1e9)),
        r.peak_device_bytes as f64 / 1e9
    );
    if let Some(dir) = &a.out {
        let path = tcgnn::bench::train::write_json(&dir.join("setup.json"), &r)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
