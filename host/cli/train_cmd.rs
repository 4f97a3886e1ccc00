//! `tcgnn train GRAPH --model gcn|agnn`: trains on the GPU (CPU without one), shows a progress
//! bar, and reports the test accuracy at the best validation epoch, the time split and a curve.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use tcgnn::bench::train::{TrainRun, curve_svg, mean_std, write_json, write_text};
use tcgnn::gpu::Gpu;
use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::models::{estimate_bytes, model_info, parse_model_name};
use tcgnn::nn::{CpuBackend, CudaBackend, ModelConfig, Ops};
use tcgnn::ops::{Impl, Precision};
use tcgnn::sample::layerwise::{self, LayerwiseInference, Targets};
use tcgnn::task::Flow;
use tcgnn::task::TaskKind;
use tcgnn::task::node::checkpoint::Checkpoint;
use tcgnn::task::node::train::EpochRecord;
use tcgnn::task::node::{Dataset, FeatureStorage, SyntheticNodeData, TrainConfig, Trainer};
use tcgnn::task::saved::{ModelMeta, SavedModel, check_names};
use tcgnn::tensor::Matrix;

use crate::cli::sample_args::Inference;
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
    /// What to train for: node classification, link prediction or graph classification.
    #[arg(long, value_enum, default_value = "node")]
    pub task: tcgnn::task::TaskKind,
    /// The model: gcn, agnn, gat, sage, gin (`tcgnn models` lists them with their defaults).
    #[arg(long, default_value = tcgnn::nn::models::DEFAULT_MODEL, value_parser = parse_model_name)]
    pub model: &'static str,
    /// Graph layers (default per model: GCN 2, AGNN 4, GAT 2, SAGE 2, GIN 2).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Hidden width, per head for GAT (default per model: GCN 16, AGNN 32, GAT 8, SAGE 64, GIN 64).
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Attention heads of the hidden layers (GAT; default 8).
    #[arg(long)]
    pub heads: Option<usize>,
    /// BatchNorm1d after every hidden layer (GCN, SAGE, GIN, GAT).
    #[arg(long)]
    pub batch_norm: bool,
    /// Residual connections around hidden layers of equal width (GCN, SAGE, GIN, GAT).
    #[arg(long)]
    pub residual: bool,
    /// GIN: learn eps (default: fixed 0). SAGE: L2-normalise each layer's output. GAT, AGNN: the
    /// unfused attention ops (default: fused).
    #[arg(long)]
    pub variant: bool,
    /// Training epochs (at most 10^6).
    #[arg(long, default_value_t = 200)]
    pub epochs: usize,
    /// Learning rate (default per model: 0.01, GAT 0.005).
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f32>,
    /// L2 weight decay (default 5e-4).
    #[arg(long, allow_negative_numbers = true)]
    pub weight_decay: Option<f32>,
    /// Dropout probability (default per model: 0.5, GAT 0.6 on features and attention).
    #[arg(long, allow_negative_numbers = true)]
    pub dropout: Option<f32>,
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
    /// Width of synthetic features (graphs without node data, and sbm:; default 500). Refused
    /// where it contradicts the graph's node data (a .npz fixes the features).
    /// `learnable:D` (--task link): a learnable D-wide input per node instead, trained with the
    /// model (OGB's torch.nn.Embedding baselines; xavier-uniform from the seed; saved with --save).
    #[arg(long)]
    pub features: Option<tcgnn::nn::embedding::FeatureSpec>,
    /// Classes of synthetic labels (graphs without node data; default 8). Refused where it
    /// contradicts the graph's node data (a .npz or an sbm: spec fixes the classes).
    #[arg(long)]
    pub classes: Option<usize>,
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
    /// Save the weights of the best-validation epoch to this .safetensors file (with the model
    /// config and the data's shape), for `tcgnn predict`.
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// Write a checkpoint (weights, Adam moments, step counter, loss curve) into this folder
    /// every --checkpoint-every epochs and at the end; Ctrl-C writes one and stops.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    #[arg(long, default_value_t = 10)]
    pub checkpoint_every: usize,
    /// Continue the run checkpointed in this folder (its model and optimiser settings) up to
    /// --epochs epochs in all.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    #[command(flatten)]
    pub dist: crate::cli::dist_train_cmd::DistArgs,
    #[command(flatten)]
    pub sample: crate::cli::sample_args::SampleArgs,
    #[command(flatten)]
    pub graph_task: crate::cli::train_graph::GraphArgs,
    #[command(flatten)]
    pub link: crate::cli::train_link::LinkArgs,
}

/// Where Ctrl-C leaves its checkpoint when no --checkpoint folder was given.
const INTERRUPT_DIR: &str = "tcgnn-checkpoint";

/// Set by the Ctrl-C handler; the training loop finishes its epoch, checkpoints and stops.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

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
    if a.task != TaskKind::Link
        && let Some(f) = a.features.filter(|f| f.is_learnable())
    {
        return Err(Error::Unsupported(format!(
            "--features learnable:{} is available with --task link only (node and graph classification train on the node data's features)",
            f.width()
        )));
    }
    match a.task {
        TaskKind::Node => {}
        TaskKind::Link => return crate::cli::train_link::run(a),
        TaskKind::Graph => return crate::cli::train_graph::run(a),
    }
    if a.dist.is_distributed() {
        if a.sample.sampler.is_some() {
            return Err(Error::Unsupported("--sampler trains on one device: leave out --partitions / --gpus / --world-size".into()));
        }
        check_hyperparameters(a)?;
        return crate::cli::dist_train_cmd::run(a);
    }
    check_epochs(a)?;
    if a.seeds.is_empty() {
        return Err(Error::Unsupported("--seeds needs at least one seed".into()));
    }
    if a.seeds.len() > 1 && (a.save.is_some() || a.checkpoint.is_some() || a.resume.is_some()) {
        return Err(Error::Unsupported("--save, --checkpoint and --resume follow one run: give one seed".into()));
    }
    if a.checkpoint_every == 0 {
        return Err(Error::Unsupported("--checkpoint-every must be at least 1".into()));
    }
    if let Some(p) = &a.save {
        // Never over the graph or node data it trains on, nor over the checkpoint it resumes.
        let mut inputs = tcgnn::task::node::data::input_files(&a.graph, a.npz.as_deref());
        inputs.extend(a.resume.as_deref().map(Checkpoint::path));
        let inputs: Vec<&std::path::Path> = inputs.iter().map(PathBuf::as_path).collect();
        tcgnn::util::atomic::check_outputs(&inputs, &[p])?;
        if let Some(c) = a.checkpoint.as_deref().map(Checkpoint::path)
            && tcgnn::util::atomic::same_file(&c, p)
        {
            return Err(Error::Io {
                path: p.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "is also another output (the checkpoint); give a different name",
                ),
            });
        }
    }
    // Ctrl-C: finish the epoch, checkpoint, stop (a second Ctrl-C kills as usual).
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nCtrl-C: finishing this epoch and writing a checkpoint (Ctrl-C again to kill)");
    });
    check_hyperparameters(a)?;
    a.sample.check_used()?;
    check_out_folder(a)?;
    let gpu = gpu_for(a)?;
    let mut runs = Vec::new();
    for &seed in &a.seeds {
        let run = match &gpu {
            Some(gpu) => train_one(
                a,
                seed,
                || Ok(CudaBackend::new(gpu.clone(), a.precision, a.imp)?.with_edge_layout(edge_layout(a.model, a.edge_layout)?)),
                Some(gpu.clone()),
            )?,
            None if a.f64 => train_one(a, seed, || Ok(CpuBackend::<f64>::new()), None)?,
            None => train_one(a, seed, || Ok(CpuBackend::<f32>::new()), None)?,
        };
        runs.push(run);
    }
    let accs: Vec<f64> = runs.iter().map(|r| r.history.test_acc * 100.0).collect();
    let (mean, std) = mean_std(&accs);
    let r0 = &runs[0];
    println!(
        "{} {} {}x{} on {} ({}): test accuracy at best validation epoch {mean:.2} ± {std:.2}% over {} seed(s){}",
        r0.graph,
        r0.model.model,
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
    println!("{}", r0.resources.summary());
    if let Some(dir) = &a.out {
        let json = write_json(&dir.join("train.json"), &runs)?;
        let title = format!("{} {} {}x{} ({}), seed {}", r0.graph, r0.model.model, r0.model.layers, r0.model.hidden, r0.precision, r0.seed);
        let svg = write_text(&dir.join("train.svg"), &curve_svg(&title, &r0.history.epochs))?;
        eprintln!("wrote {} and {}", json.display(), svg.display());
    }
    Ok(())
}

/// Most epochs a run takes: far past any schedule in the literature (hundreds to a few
/// thousand), and a count that ends in a human's lifetime on a tiny graph.
pub const MAX_EPOCHS: usize = 1_000_000;

/// Default synthetic feature width and classes (graphs without node data).
pub const SYNTHETIC_FEATURES: usize = 500;
pub const SYNTHETIC_CLASSES: usize = 8;

/// `--epochs` between 1 and [`MAX_EPOCHS`] (every task): 2^64 - 1 would loop for ever.
pub fn check_epochs(a: &TrainArgs) -> Result<()> {
    if a.epochs == 0 {
        return Err(Error::Unsupported("--epochs must be at least 1".into()));
    }
    if a.epochs > MAX_EPOCHS {
        return Err(Error::Unsupported(format!("--epochs {} is more than {MAX_EPOCHS}", a.epochs)));
    }
    Ok(())
}

/// Learning rate, weight decay and sizes a careful user would not mean: refused up front rather
/// than trained into NaN or aborted on an allocation.
fn check_hyperparameters(a: &TrainArgs) -> Result<()> {
    train_config(a)?;
    // Beyond these no model fits any machine, and the size arithmetic below stays in u64.
    use tcgnn::nn::models::{MAX_HEADS, MAX_LAYERS, MAX_WIDTH};
    for (what, v, max) in [
        ("--hidden", a.hidden, MAX_WIDTH),
        ("--layers", a.layers, MAX_LAYERS),
        ("--heads", a.heads, MAX_HEADS),
        ("--features", a.features.map(|f| f.width()), MAX_WIDTH),
        ("--classes", a.classes, MAX_WIDTH),
    ] {
        if let Some(v) = v
            && v > max
        {
            return Err(Error::Unsupported(format!("{what} {v} is larger than {max}")));
        }
    }
    Ok(())
}

/// `--out` checked before any work, not after training: a missing folder is created when the
/// report is written, a file there is refused (every task).
pub fn check_out_folder(a: &TrainArgs) -> Result<()> {
    match &a.out {
        Some(dir) if dir.exists() && !dir.is_dir() => Err(Error::Io {
            path: dir.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "--out is a file; give a folder"),
        }),
        _ => Ok(()),
    }
}

/// The GPU `--device` asks for (`None`: the CPU, saying why under `auto`); refuses or warns about
/// GPU-only options on the CPU. Every task's `train` starts here.
pub fn gpu_for(a: &TrainArgs) -> Result<Option<Arc<Gpu>>> {
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
    Ok(gpu)
}

/// Loads the data the way the CLI describes and checks it against the model before allocating.
pub fn load_dataset(a: &TrainArgs, seed: u64) -> Result<Dataset> {
    let synth = SyntheticNodeData { features: synthetic_width(a), classes: a.classes.unwrap_or(SYNTHETIC_CLASSES), seed };
    let mut data = Dataset::load(&a.graph, a.npz.as_deref(), &synth)?;
    if !a.raw_features && !data.synthetic && data.features.is_nonnegative() {
        data.features.normalize_rows();
    }
    data.store_features(a.feature_storage)?;
    Ok(data)
}

/// The width of synthetic features `--features` asks for: its width, the default without it,
/// and one column under a learnable input (which replaces them: nothing wide is drawn).
fn synthetic_width(a: &TrainArgs) -> usize {
    match a.features {
        Some(f) => f.random_width().unwrap_or(1),
        None => SYNTHETIC_FEATURES,
    }
}

/// `--features` / `--classes` shape synthetic node data only: where the graph's node data fixes
/// them (a .npz; an sbm: spec's classes), a different value would be silently ignored. Every
/// task's `train` checks it after loading (benchmarks pass a width meant for the graphs
/// without node data, and do not).
pub fn check_synthetic_options(a: &TrainArgs, data: &Dataset) -> Result<()> {
    if data.synthetic {
        return Ok(());
    }
    let from = if a.graph.starts_with("sbm:") { "its sbm: spec" } else { "its node data (.npz)" };
    let name = tcgnn::graph::text::escaped(&data.name);
    // sbm: draws its features at --features wide: only the classes come from the spec.
    if let Some(f) = a.features.and_then(|f| f.random_width())
        && f != data.features.cols()
    {
        return Err(Error::Unsupported(format!(
            "--features {f}: {name} has {} features from {from}; --features sets the width of synthetic features (graphs without node data): leave it out",
            data.features.cols()
        )));
    }
    if let Some(c) = a.classes
        && c != data.classes
    {
        return Err(Error::Unsupported(format!(
            "--classes {c}: {name} has {} classes from {from}; --classes sets the classes of synthetic labels (graphs without node data): leave it out",
            data.classes
        )));
    }
    Ok(())
}

/// The edge layout asked for, else the one that suits the model (see `--edge-layout`).
pub fn edge_layout(model: &str, asked: Option<tcgnn::nn::EdgeLayout>) -> Result<tcgnn::nn::EdgeLayout> {
    Ok(asked.unwrap_or(model_info(model)?.edge_layout))
}

/// The model's defaults from the registry with the options given on the command line.
pub fn model_config(a: &TrainArgs, seed: u64) -> Result<ModelConfig> {
    let d = model_info(a.model)?.defaults;
    Ok(ModelConfig {
        layers: a.layers.unwrap_or(d.layers),
        hidden: a.hidden.unwrap_or(d.hidden),
        heads: a.heads.unwrap_or(d.heads),
        dropout: a.dropout.unwrap_or(d.dropout),
        batch_norm: a.batch_norm || d.batch_norm,
        residual: a.residual || d.residual,
        variant: a.variant || d.variant,
        seed,
        ..d
    })
}

/// The optimiser's settings: the model's defaults unless given.
pub fn train_config(a: &TrainArgs) -> Result<TrainConfig> {
    let info = model_info(a.model)?;
    let (lr, weight_decay) = (a.lr.unwrap_or(info.lr), a.weight_decay.unwrap_or(info.weight_decay));
    if !(lr.is_finite() && lr > 0.0) {
        return Err(Error::Unsupported(format!("--lr {lr} must be a finite number > 0")));
    }
    if !(weight_decay.is_finite() && weight_decay >= 0.0) {
        return Err(Error::Unsupported(format!("--weight-decay {weight_decay} must be a finite number >= 0")));
    }
    Ok(TrainConfig { epochs: a.epochs, lr, weight_decay })
}

fn targets(data: &Dataset) -> Targets {
    Targets { classes: data.classes, labels: data.labels.clone(), mask_bits: data.mask_bits.clone() }
}

/// Refuses a layer-wise inference that cannot run: a model or backend it does not run, a
/// dense copy of sparse features that the host cannot hold, or (on the GPU) more memory than is free: the features and one layer's input
/// and output over all nodes, and a one-layer model at a batch's size.
fn check_layerwise<B: Ops>(b: &B, gpu: Option<&Gpu>, data: &Dataset, cfg: &ModelConfig, batch_edges: usize) -> Result<()> {
    if !layerwise::supports(cfg) {
        return Err(Error::Unsupported(format!("--inference layerwise runs GCN, SAGE and GIN without --batch-norm, not {}", cfg.model)));
    }
    if !b.can_bind() {
        return Err(Error::Unsupported(
            "--inference layerwise rebinds batches into one model: use --precision f32 (the HP kernels)".into(),
        ));
    }
    if let HostFeatures::Sparse(c) = &data.features {
        // Evaluated from a dense copy.
        tcgnn::util::memory::check_host_alloc(
            4 * c.n_rows() as u64 * c.n_cols() as u64,
            "a dense copy of the sparse features for layer-wise inference",
        )?;
    }
    let Some(gpu) = gpu else { return Ok(()) };
    let n = data.n() as u64;
    let w = tcgnn::nn::models::widths(data.features.cols(), cfg.hidden, cfg.layers, data.classes);
    let widest = *w.iter().max().expect("widths") as u64;
    // A batch reads at most its nonzeros' columns plus its rows; its rows are at least one.
    let rows = (2 * batch_edges as u64).min(n).max(1) as usize;
    let one = ModelConfig { layers: 1, residual: false, batch_norm: false, ..*cfg };
    let model = estimate_bytes(&one, rows, batch_edges.min(data.graph.nnz() + data.n()), widest as usize, widest as usize)?;
    // The features, a layer's input and output over all nodes, the one-layer model.
    let need = tcgnn::nn::models::mat_bytes(n, data.features.cols() as u64) + 2 * tcgnn::nn::models::mat_bytes(n, widest) + model;
    let free = tcgnn::bench::budget::gpu_free_bytes(gpu)?;
    if need > free {
        return Err(Error::Unsupported(format!(
            "layer-wise inference of {} on {} needs about {:.1} GiB of GPU memory, {:.1} GiB are free; use a smaller --hidden or --inference-batch-edges",
            cfg.model,
            data.name,
            need as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        )));
    }
    Ok(())
}

/// Refuses a model that does not fit in the GPU's free memory.
pub fn check_fits(gpu: &Gpu, data: &Dataset, cfg: &ModelConfig) -> Result<()> {
    let need = estimate_bytes(cfg, data.n(), data.graph.nnz(), data.features.cols(), data.classes)?;
    let free = tcgnn::bench::budget::gpu_free_bytes(gpu)?;
    if need > free {
        return Err(Error::Unsupported(format!(
            "{} {} {}x{} needs about {:.1} GiB of GPU memory, {:.1} GiB are free; use a smaller --hidden or graph",
            data.name,
            cfg.model,
            cfg.layers,
            cfg.hidden,
            need as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        )));
    }
    Ok(())
}

fn train_one<B: Ops + 'static>(a: &TrainArgs, seed: u64, make: impl FnOnce() -> Result<B>, gpu: Option<Arc<Gpu>>) -> Result<TrainRun> {
    let resumed = a.resume.as_deref().map(Checkpoint::read).transpose()?;
    let t_read = std::time::Instant::now();
    let mut data = load_dataset(a, seed)?;
    check_synthetic_options(a, &data)?;
    let read_s = t_read.elapsed().as_secs_f64();
    let (cfg, tcfg) = match &resumed {
        Some(c) => {
            let dir = a.resume.as_deref().expect("resumed from a folder");
            if a.epochs <= c.meta.epoch {
                return Err(Error::Unsupported(format!(
                    "--epochs {}: the checkpoint in {} has trained {} epochs already; --epochs counts all of them, give more to continue",
                    a.epochs,
                    dir.display(),
                    c.meta.epoch
                )));
            }
            // The checkpoint's model and optimiser go on (the same command plus --resume is how
            // a run resumes): a different setting asked for here would be silently ignored.
            let m = &c.meta.model;
            // (flag, asked, the checkpoint's): an option given here that differs from it.
            let asked = |v: Option<String>, had: String| v.filter(|v| *v != had).map(|v| (v, had));
            let on = |b: bool| b.then(|| "given".to_string());
            let differs = [
                // --model has a default: a checkpoint of another model needs --model given.
                ("--model", asked(Some(a.model.to_string()), m.model.to_string())),
                ("--layers", asked(a.layers.map(|v| v.to_string()), m.layers.to_string())),
                ("--hidden", asked(a.hidden.map(|v| v.to_string()), m.hidden.to_string())),
                ("--heads", asked(a.heads.map(|v| v.to_string()), m.heads.to_string())),
                ("--dropout", asked(a.dropout.map(|v| v.to_string()), m.dropout.to_string())),
                ("--lr", asked(a.lr.map(|v| v.to_string()), c.train.lr.to_string())),
                ("--weight-decay", asked(a.weight_decay.map(|v| v.to_string()), c.train.weight_decay.to_string())),
                ("--batch-norm", on(a.batch_norm && !m.batch_norm).map(|v| (v, "off".into()))),
                ("--residual", on(a.residual && !m.residual).map(|v| (v, "off".into()))),
                ("--variant", on(a.variant && !m.variant).map(|v| (v, "off".into()))),
            ];
            if let Some((flag, Some((asked, had)))) = differs.iter().find(|g| g.1.is_some()) {
                let dir = dir.display();
                let keep = "--resume continues with the checkpoint's model and optimiser settings";
                return Err(Error::Unsupported(match (*flag, asked.as_str()) {
                    (_, "given") => {
                        format!("{flag} differs from the checkpoint in {dir} (trained without {flag}); {keep}: leave {flag} out")
                    }
                    ("--model", _) => format!(
                        "--model {asked}{} differs from the checkpoint in {dir} (a {had} model); {keep}: give --model {had}",
                        if *asked == a.model && a.model == tcgnn::nn::models::DEFAULT_MODEL {
                            " (the default when --model is left out)"
                        } else {
                            ""
                        }
                    ),
                    _ => format!(
                        "{flag} {asked} differs from the checkpoint in {dir} ({flag} {had} there); {keep}: give {flag} {had} or leave it out"
                    ),
                }));
            }
            eprintln!(
                "resuming {} after epoch {} of {} (its model and optimiser settings)",
                c.meta.model.model,
                c.meta.epoch,
                tcgnn::graph::text::escaped(&c.meta.graph)
            );
            (c.meta.model, TrainConfig { epochs: a.epochs, ..c.train })
        }
        None => (model_config(a, seed)?, train_config(a)?),
    };
    tcgnn::nn::models::check(&cfg)?;
    let full_fits = match &gpu {
        Some(gpu) => check_fits(gpu, &data, &cfg),
        // The CPU backend holds about what the GPU one would (weights, activations, gradients).
        None => {
            let need = estimate_bytes(&cfg, data.n(), data.graph.nnz(), data.features.cols(), data.classes)?;
            let what = format!("{} {} {}x{}", data.name, cfg.model, cfg.layers, cfg.hidden);
            tcgnn::util::memory::check_host_alloc(need, &what)
        }
    };
    let backend = Arc::new(make()?);
    // Sampled training evaluates layer by layer where asked, or where the full-graph model
    // does not fit and the layer-wise inference runs the model.
    let layerwise = match (a.sample.sampler.is_some(), a.sample.inference) {
        (true, Some(Inference::Layerwise)) => true,
        (true, None)
            if let Err(why) = &full_fits
                && layerwise::supports(&cfg)
                && backend.can_bind() =>
        {
            eprintln!("the full-graph model does not fit ({why}): evaluating layer-wise in node batches");
            true
        }
        _ => {
            full_fits?;
            false
        }
    };
    if layerwise {
        check_layerwise(&*backend, gpu.as_deref(), &data, &cfg, a.sample.inference_batch_edges())?;
    }
    let data_bytes = data_bytes(&data);
    // The features move into the backend: held once (freed on the host after a GPU upload);
    // sampled training keeps them on the host, where its workers gather each batch's rows.
    let mut trainer = if layerwise {
        let mut t = Trainer::params_only(backend.clone(), &data, &cfg, &tcfg)?;
        // Sparse features are evaluated from a dense copy (the layer's rows are gathered on the
        // device by node id; check_layerwise counted its memory).
        let dense;
        let x = match &data.features {
            HostFeatures::Dense(x) => x,
            sparse => {
                dense = sparse.to_dense();
                &dense
            }
        };
        let t0 = std::time::Instant::now();
        let e = LayerwiseInference::new(&*backend, &data.graph, x, targets(&data), &cfg, a.sample.inference_batch_edges())?;
        let sizes = e.batch_sizes();
        eprintln!(
            "layer-wise inference: {} batches of up to {} output rows reading up to {} nodes (prepared in {:.1} s)",
            sizes.len(),
            sizes.iter().map(|s| s.0).max().unwrap_or(0),
            sizes.iter().map(|s| s.1).max().unwrap_or(0),
            t0.elapsed().as_secs_f64()
        );
        t.set_evaluator(Box::new(e));
        t
    } else if a.sample.sampler.is_some() {
        Trainer::new(backend.clone(), &data, &cfg, &tcfg)?
    } else {
        Trainer::new_taking_features(backend.clone(), &mut data, &cfg, &tcfg)?
    };
    let data = data;
    let precision = if gpu.is_some() {
        format!("{:?}", a.precision).to_lowercase()
    } else if a.f64 {
        "f64".into()
    } else {
        "f32".into()
    };
    let meta = |epoch: usize, rec: Option<&EpochRecord>| ModelMeta {
        model: cfg,
        features: data.features.cols(),
        classes: data.classes,
        raw_features: a.raw_features,
        graph: data.name.clone(),
        epoch,
        val_acc: rec.map_or(0.0, |r| r.val_acc),
        test_acc: rec.map_or(0.0, |r| r.test_acc),
        precision: precision.clone(),
        learnable_input: false,
    };
    let sample_gpu = || gpu.as_ref().map(|g| g.sample_used_memory()).transpose();
    sample_gpu()?;
    let mut done = Vec::new();
    let mut best: Option<(EpochRecord, Vec<(String, Matrix)>)> = None;
    if let (Some(c), Some(dir)) = (&resumed, &a.resume) {
        let mut want: Vec<_> =
            trainer.param_shapes().into_iter().flat_map(|(n, s)| ["param", "m", "v"].map(|k| (format!("{k}.{n}"), s))).collect();
        want.extend(trainer.buffer_shapes().into_iter().map(|(n, s)| (format!("buffer.{n}"), s)));
        check_names(&Checkpoint::path(dir), &want, &c.state)?;
        if data.features.cols() != c.meta.features || data.classes != c.meta.classes {
            return Err(Error::BadFile {
                path: Checkpoint::path(dir),
                msg: format!(
                    "checkpoint of {} features and {} classes; this graph has {} and {}",
                    c.meta.features,
                    c.meta.classes,
                    data.features.cols(),
                    data.classes
                ),
            });
        }
        trainer.load_optimizer_state(&c.state, c.steps)?;
        done = c.history.clone();
        best = c.best.clone();
    }
    // Mini-batch training: the trainer's model keeps the parameters and evaluates on the full graph.
    let sampled = match a.sample.training_on(&data, &cfg, seed, gpu.is_some())? {
        Some(mut s) => {
            // The GPU's idle time between steps, on its own clock (the summary reports it).
            s.spans = gpu.as_ref().map(|g| Box::new(tcgnn::gpu::timing::StepSpans::new(g.clone())) as Box<dyn tcgnn::gpu::timing::Spans>);
            trainer.set_epoch_steps(Box::new(s));
            true
        }
        None => false,
    };
    if gpu.is_some()
        && !sampled
        && !a.no_cuda_graph
        && let tcgnn::task::node::train::Recorded::Failed(why) = trainer.record()?
    {
        eprintln!("CUDA graph capture failed, training eagerly: {why}");
    }
    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(a.epochs as u64) };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} epochs {msg}").expect("static template").progress_chars("=> "),
    );
    bar.set_prefix(format!("{} {} seed {seed}", data.name, cfg.model));
    bar.set_position(done.len() as u64);
    let keep_best = a.save.is_some() || a.checkpoint.is_some();
    let mut curve = done.clone();
    let mut interrupted_at = None;
    let history = trainer.fit_from(done, a.epochs, |t, e| {
        bar.set_message(format!("loss {:.4} val {:.1}% test {:.1}%", e.loss, e.val_acc * 100.0, e.test_acc * 100.0));
        bar.inc(1);
        curve.push(*e);
        sample_gpu()?;
        // The first epoch of the highest validation accuracy, as the report picks it.
        if keep_best && best.as_ref().is_none_or(|(b, _)| e.val_acc > b.val_acc) {
            best = Some((*e, t.weights()?));
        }
        let stop = INTERRUPTED.load(Ordering::SeqCst);
        let dir = match (&a.checkpoint, stop) {
            (Some(d), _) => Some(d.clone()),
            (None, true) => Some(PathBuf::from(INTERRUPT_DIR)),
            (None, false) => None,
        };
        if let Some(dir) = dir
            && (stop || e.epoch % a.checkpoint_every == 0 || e.epoch == a.epochs)
        {
            let (state, steps) = t.optimizer_state()?;
            let ckpt = Checkpoint { meta: meta(e.epoch, Some(e)), train: tcfg, steps, history: curve.clone(), state, best: best.clone() };
            ckpt.write(&dir)?;
        }
        if stop {
            interrupted_at = Some(e.epoch);
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    })?;
    if let Some(epoch) = interrupted_at {
        bar.finish_and_clear();
        let dir = a.checkpoint.clone().unwrap_or_else(|| PathBuf::from(INTERRUPT_DIR));
        return Err(Error::Unsupported(format!(
            "interrupted after epoch {epoch}; checkpoint written to {}. Resume with the same command plus --resume {}",
            dir.display(),
            dir.display()
        )));
    }
    if let (Some(path), Some((rec, weights))) = (&a.save, &best) {
        SavedModel { meta: meta(rec.epoch, Some(rec)), weights: weights.clone() }.write(path)?;
        eprintln!(
            "saved the weights of epoch {} (validation {:.2}%, test {:.2}%) to {}",
            rec.epoch,
            rec.val_acc * 100.0,
            rec.test_acc * 100.0,
            path.display()
        );
    }
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
    if let Some(s) = trainer.epoch_steps() {
        println!("{}", s.summary());
    }
    if let Some(e) = trainer.evaluator() {
        println!("{}", e.summary());
    }
    let phases = if seed == a.seeds[0] && !sampled { Some(trainer.profile(3, if gpu.is_some() { 20 } else { 3 })?) } else { None };
    sample_gpu()?;
    let resources = resources(read_s, trainer.setup_seconds, data_bytes, gpu.as_deref());
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
        precision,
        seed,
        setup_ms: trainer.setup_seconds * 1e3,
        history,
        phases,
        resources,
    })
}

/// The setup split and memory peaks of a run (`bench::train::Resources`). With a GPU, its clock
/// holds the translations and uploads of every run on it in this process: the first run's
/// figures are its own, a later seed's include the earlier ones.
pub(super) fn resources(read_s: f64, setup_s: f64, data_bytes: u64, gpu: Option<&Gpu>) -> tcgnn::bench::train::Resources {
    let clock = gpu.map(|g| g.clock().snapshot()).unwrap_or_default();
    tcgnn::bench::train::Resources {
        read_s,
        translate_s: clock.translate_s,
        upload_s: clock.upload_s,
        other_s: (setup_s - clock.translate_s - clock.upload_s).max(0.0),
        upload_bytes: clock.upload_bytes,
        data_bytes,
        peak_host_bytes: tcgnn::util::memory::peak_rss_bytes(),
        peak_device_bytes: gpu.map(|_| clock.peak_device_used_bytes),
    }
}

/// Bytes of the data a run holds on the host: features, graph (CSR), labels and masks.
pub(super) fn data_bytes(data: &Dataset) -> u64 {
    let features = match &data.features {
        tcgnn::nn::input::HostFeatures::Dense(m) => 4 * m.data.len(),
        tcgnn::nn::input::HostFeatures::Sparse(c) => c.bytes(),
    };
    (features + data.graph.bytes() + 5 * data.labels.len()) as u64
}
