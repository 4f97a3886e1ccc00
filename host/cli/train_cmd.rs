//! `tcgnn train GRAPH --model gcn|agnn`: trains on the GPU (CPU without one), shows a progress
//! bar, and reports the test accuracy at the best validation epoch, the time split and a curve.

use std::path::PathBuf;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use tcgnn::bench::train::{TrainRun, curve_svg, mean_std, write_json, write_text};
use tcgnn::gpu::Gpu;
use tcgnn::nn::model::estimate_bytes;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, Dataset, FeatureStorage, ModelConfig, ModelKind, SyntheticNodeData, TrainConfig, Trainer};
use tcgnn::ops::{Impl, Precision};
use tcgnn::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// The GPU when one is usable, else the CPU (saying why).
    Auto,
    Gpu,
    Cpu,
}

#[derive(clap::Args, Clone)]
pub struct TrainArgs {
    /// A dataset name (with NAME.npz node data if present), a .mtx/.mtx.gz path,
    /// rmat:SCALE:EF[:SEED] or sbm:N[:CLASSES[:DEGREE]] (generated with label-correlated features).
    pub graph: String,
    #[arg(long, value_enum, default_value = "gcn")]
    pub model: ModelKind,
    /// Graph convolution layers (default: GCN 2, AGNN 4).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Hidden width (default: GCN 16, AGNN 32).
    #[arg(long)]
    pub hidden: Option<usize>,
    #[arg(long, default_value_t = 200)]
    pub epochs: usize,
    #[arg(long, default_value_t = 0.01)]
    pub lr: f32,
    #[arg(long, default_value_t = 5e-4)]
    pub weight_decay: f32,
    #[arg(long, default_value_t = 0.5)]
    pub dropout: f32,
    /// Sparse kernels' arithmetic: f32 (CUDA cores), tf32 or f16 (tensor cores). CPU: f32.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// Sparse kernels (auto: measured per graph and K in f32, TC8 in tf32/f16).
    #[arg(long = "impl", value_enum, default_value = "auto")]
    pub imp: Impl,
    #[arg(long, value_enum, default_value = "auto")]
    pub device: Device,
    /// Seeds (comma separated): one run each, accuracy reported as mean ± std.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub seeds: Vec<u64>,
    /// Node data (.npz); default: NAME.npz beside the graph, else synthetic.
    #[arg(long)]
    pub npz: Option<PathBuf>,
    /// Width of synthetic features (graphs without node data, and sbm:).
    #[arg(long, default_value_t = 500)]
    pub features: usize,
    /// Classes of synthetic labels.
    #[arg(long, default_value_t = 8)]
    pub classes: usize,
    /// Keep the node features as stored (default: non-negative features from node data get
    /// their rows scaled to sum 1, PyG's NormalizeFeatures).
    #[arg(long)]
    pub raw_features: bool,
    #[arg(long, value_enum, default_value = "auto")]
    pub feature_storage: FeatureStorage,
    /// Where the GPU keeps edge values with TC8 (tf32/f16): `kernel` = ME-BCRS slots, `csr` =
    /// compact, scattered before each product. Default: csr for AGNN (values change every
    /// step), kernel for GCN (fixed values).
    #[arg(long, value_enum)]
    pub edge_layout: Option<tcgnn::nn::EdgeLayout>,
    /// Run steps one kernel at a time instead of replaying a captured CUDA graph.
    #[arg(long)]
    pub no_cuda_graph: bool,
    /// CPU arithmetic in f64 (gradient checks; slow).
    #[arg(long)]
    pub f64: bool,
    /// Folder for train.json and the curve train.svg (nothing written when absent).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// After training, time every op of a few eager steps and print where a step's time goes.
    #[arg(long)]
    pub profile_ops: bool,
    /// No progress bar (logs, CI).
    #[arg(long)]
    pub quiet: bool,
}

impl TrainArgs {
    /// The arguments of `tcgnn train GRAPH` with every option at its command-line default (one
    /// source of truth for the demo and `bench train`).
    pub fn for_graph(graph: &str) -> TrainArgs {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            args: TrainArgs,
        }
        <Defaults as clap::Parser>::try_parse_from(["train", graph]).expect("the defaults parse").args
    }
}

pub fn run(a: &TrainArgs) -> Result<()> {
    if a.epochs == 0 {
        return Err(Error::Unsupported("--epochs must be at least 1".into()));
    }
    if a.seeds.is_empty() {
        return Err(Error::Unsupported("--seeds needs at least one seed".into()));
    }
    check_hyperparameters(a)?;
    if let Some(dir) = &a.out {
        // Checked now, not after training (a missing folder is created when writing).
        if dir.exists() && !dir.is_dir() {
            return Err(Error::Io { path: dir.clone(), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "--out is a file; give a folder") });
        }
    }
    let gpu = match a.device {
        Device::Cpu => None,
        Device::Gpu => Some(Gpu::probe()?),
        Device::Auto => match Gpu::probe() {
            Ok(g) => Some(g),
            Err(e) => {
                eprintln!("{e}: training on the CPU");
                None
            }
        },
    };
    if gpu.is_none() && (a.precision != Precision::F32 || a.imp != Impl::Auto) {
        // The CPU backend has one arithmetic (f32, or f64 with --f64) and one SpMM.
        let asked = format!("--precision {:?} --impl {:?}", a.precision, a.imp).to_lowercase();
        if a.device == Device::Cpu {
            return Err(Error::Unsupported(format!("{asked} needs the GPU; --device cpu trains in f32 with the CPU SpMM")));
        }
        eprintln!("warning: {asked} applies to the GPU only; training on the CPU in {}", if a.f64 { "f64" } else { "f32" });
    }
    let mut runs = Vec::new();
    for &seed in &a.seeds {
        let run = match &gpu {
            Some(gpu) => train_one(a, seed, || Ok(CudaBackend::new(gpu.clone(), a.precision, a.imp)?.with_edge_layout(edge_layout(a.model, a.edge_layout))), Some(gpu.clone()))?,
            None if a.f64 => train_one(a, seed, || Ok(CpuBackend::<f64>::new()), None)?,
            None => train_one(a, seed, || Ok(CpuBackend::<f32>::new()), None)?,
        };
        runs.push(run);
    }
    let accs: Vec<f64> = runs.iter().map(|r| r.history.test_acc * 100.0).collect();
    let (mean, std) = mean_std(&accs);
    let r0 = &runs[0];
    println!(
        "{} {:?} {}x{} on {} ({}): test accuracy at best validation epoch {mean:.2} ± {std:.2}% over {} seed(s){}",
        r0.graph,
        r0.model.kind,
        r0.model.layers,
        r0.model.hidden,
        r0.backend,
        r0.precision,
        runs.len(),
        if r0.synthetic_labels { " (synthetic labels: accuracy is meaningless)" } else { "" }
    );
    if let Some(p) = &r0.phases {
        println!(
            "time: setup {:.1} ms once; per step forward+loss {:.3} ms, backward {:.3} ms, optimizer {:.3} ms; step {:.3} ms eager{}; evaluation {:.3} ms",
            r0.setup_ms,
            p.forward.median_ms,
            p.backward.median_ms,
            p.optimizer.median_ms,
            p.step_eager.median_ms,
            p.step_recorded.as_ref().map_or(String::new(), |t| format!(", {:.3} ms as a CUDA graph", t.median_ms)),
            p.evaluate.median_ms
        );
    }
    if let Some(dir) = &a.out {
        let json = write_json(&dir.join("train.json"), &runs)?;
        let title = format!("{} {:?} {}x{} ({}), seed {}", r0.graph, r0.model.kind, r0.model.layers, r0.model.hidden, r0.precision, r0.seed);
        let svg = write_text(&dir.join("train.svg"), &curve_svg(&title, &r0.history.epochs))?;
        eprintln!("wrote {} and {}", json.display(), svg.display());
    }
    Ok(())
}

/// Learning rate, weight decay and sizes a careful user would not mean: refused up front rather
/// than trained into NaN or aborted on an allocation.
fn check_hyperparameters(a: &TrainArgs) -> Result<()> {
    if !(a.lr.is_finite() && a.lr > 0.0) {
        return Err(Error::Unsupported(format!("--lr {} must be a finite number > 0", a.lr)));
    }
    if !(a.weight_decay.is_finite() && a.weight_decay >= 0.0) {
        return Err(Error::Unsupported(format!("--weight-decay {} must be a finite number >= 0", a.weight_decay)));
    }
    // Beyond these no model fits any machine, and the size arithmetic below stays in u64.
    const MAX_WIDTH: usize = 1 << 24;
    for (what, v) in [("--hidden", a.hidden), ("--layers", a.layers), ("--features", Some(a.features)), ("--classes", Some(a.classes))] {
        if let Some(v) = v
            && v > MAX_WIDTH
        {
            return Err(Error::Unsupported(format!("{what} {v} is larger than {MAX_WIDTH}")));
        }
    }
    Ok(())
}

/// Loads the data the way the CLI describes and checks it against the model before allocating.
pub fn load_dataset(a: &TrainArgs, seed: u64) -> Result<Dataset> {
    let synth = SyntheticNodeData { features: a.features, classes: a.classes, seed };
    let mut data = Dataset::load(&a.graph, a.npz.as_deref(), &synth)?;
    if !a.raw_features && !data.synthetic && data.features.is_nonnegative() {
        data.features.normalize_rows();
    }
    data.store_features(a.feature_storage)?;
    Ok(data)
}

/// The edge layout asked for, else the one that suits the model (see `--edge-layout`).
pub fn edge_layout(kind: ModelKind, asked: Option<tcgnn::nn::EdgeLayout>) -> tcgnn::nn::EdgeLayout {
    asked.unwrap_or(match kind {
        ModelKind::Agnn => tcgnn::nn::EdgeLayout::Csr,
        ModelKind::Gcn => tcgnn::nn::EdgeLayout::Kernel,
    })
}

pub fn model_config(a: &TrainArgs, seed: u64) -> ModelConfig {
    let d = ModelConfig::default_for(a.model);
    ModelConfig { layers: a.layers.unwrap_or(d.layers), hidden: a.hidden.unwrap_or(d.hidden), dropout: a.dropout, seed, ..d }
}

/// Refuses a model that does not fit in the GPU's free memory.
pub fn check_fits(gpu: &Gpu, data: &Dataset, cfg: &ModelConfig) -> Result<()> {
    let need = estimate_bytes(cfg, data.n(), data.graph.nnz(), data.features.cols(), data.classes);
    let free = tcgnn::bench::budget::gpu_free_bytes(gpu)?;
    if need > free {
        return Err(Error::Unsupported(format!(
            "{} {:?} {}x{} needs about {:.1} GiB of GPU memory, {:.1} GiB are free; use a smaller --hidden or graph",
            data.name,
            cfg.kind,
            cfg.layers,
            cfg.hidden,
            need as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        )));
    }
    Ok(())
}

fn train_one<B: Backend>(a: &TrainArgs, seed: u64, make: impl FnOnce() -> Result<B>, gpu: Option<Arc<Gpu>>) -> Result<TrainRun> {
    let data = load_dataset(a, seed)?;
    let cfg = model_config(a, seed);
    cfg.check()?;
    match &gpu {
        Some(gpu) => check_fits(gpu, &data, &cfg)?,
        // The CPU backend holds about what the GPU one would (weights, activations, gradients).
        None => {
            let need = estimate_bytes(&cfg, data.n(), data.graph.nnz(), data.features.cols(), data.classes);
            let what = format!("{} {:?} {}x{}", data.name, cfg.kind, cfg.layers, cfg.hidden);
            tcgnn::util::memory::check_host_alloc(need, &what)?;
        }
    }
    let tcfg = TrainConfig { epochs: a.epochs, lr: a.lr, weight_decay: a.weight_decay };
    let backend = Arc::new(make()?);
    let mut trainer = Trainer::new(backend.clone(), &data, &cfg, &tcfg)?;
    if gpu.is_some()
        && !a.no_cuda_graph
        && let tcgnn::nn::train::Recorded::Failed(why) = trainer.record()?
    {
        eprintln!("CUDA graph capture failed, training eagerly: {why}");
    }
    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(a.epochs as u64) };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} epochs {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} {:?} seed {seed}", data.name, cfg.kind));
    let history = trainer.fit(a.epochs, |e| {
        bar.set_message(format!("loss {:.4} val {:.1}% test {:.1}%", e.loss, e.val_acc * 100.0, e.test_acc * 100.0));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    if a.profile_ops {
        let ops = trainer.op_profile(5)?;
        let total: f64 = ops.iter().map(|o| o.1).sum();
        println!("per-op time of an eager step ({}; sum {total:.3} ms):", backend.describe());
        for (name, ms, calls) in &ops {
            println!("  {name:<24} {ms:>8.3} ms {:>5.1}%  {calls:>4.0} calls", 100.0 * ms / total);
        }
    }
    // Phase timing after training (the weights no longer matter): event-timed medians.
    let phases = if seed == a.seeds[0] { Some(trainer.profile(3, if gpu.is_some() { 20 } else { 3 })?) } else { None };
    Ok(TrainRun {
        graph: data.name.clone(),
        n: data.n(),
        nnz: data.graph.nnz(),
        features: data.features.cols(),
        classes: data.classes,
        synthetic_labels: data.synthetic,
        model: cfg,
        train: tcfg,
        backend: backend.describe(),
        precision: if gpu.is_some() { format!("{:?}", a.precision).to_lowercase() } else if a.f64 { "f64".into() } else { "f32".into() },
        seed,
        setup_ms: trainer.setup_seconds * 1e3,
        history,
        phases,
    })
}
