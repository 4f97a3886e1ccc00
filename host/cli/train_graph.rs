//! `tcgnn train tu:NAME --task graph`: graph classification by k-fold stratified
//! cross-validation (the GIN paper's protocol): a progress bar over folds and epochs, a table of
//! per-fold results, the mean ± std of the held-out accuracy at the epoch of best mean (and at
//! the last epoch), JSON with every epoch of every fold via `--out`.

use std::path::PathBuf;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use tcgnn::graph::tu;
use tcgnn::nn::models::{default_graph_pooling, model_info};
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, ModelConfig, Ops};
use tcgnn::ops::nn::segment_pool::Pooling;
use tcgnn::task::graph::{FoldResult, Folds, GraphModel, GraphSet, GraphTrainConfig, summarize, train_fold};
use tcgnn::{Error, Result};

use crate::cli::train_cmd::{TrainArgs, gpu_for};

/// Options of `--task graph` (with `--batch-size` and `--sample-workers` of the sampled
/// training, which mean the same here).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct GraphArgs {
    /// Folds of the stratified cross-validation (graph task; default 10, or the folds file's).
    #[arg(long)]
    pub folds: Option<usize>,
    /// The folds' file: read (and checked against the set) if it exists, else written (graph
    /// task; `bench/pyg/graph.py --folds-file` reads the same).
    #[arg(long)]
    pub folds_file: Option<PathBuf>,
    /// Train only the first N folds (graph task; a partial run, labelled so in the output).
    #[arg(long)]
    pub only_folds: Option<usize>,
    /// Readout of the node rows per graph (graph task; default: sum for GIN, mean otherwise).
    #[arg(long, value_enum)]
    pub pooling: Option<Pooling>,
    /// Halve the learning rate every N epochs, 0 = never (graph task; the GIN paper: 50).
    #[arg(long, default_value_t = 50)]
    pub lr_halve_every: usize,
    /// No BatchNorm after the encoder's hidden layers (graph task; default: BatchNorm on).
    #[arg(long)]
    pub no_batch_norm: bool,
}

/// The graph task's protocol defaults for what the command line left open: 5 layers, an
/// output width of 64 (GAT: 8 heads of 8), BatchNorm, dropout 0.5 in the head, lr 0.01, no
/// weight decay.
fn config(a: &TrainArgs) -> Result<(GraphTrainConfig, usize)> {
    let g = &a.graph_task;
    let d = model_info(a.model)?.defaults;
    let heads = a.heads.unwrap_or(d.heads).max(1);
    let encoder = ModelConfig {
        layers: a.layers.unwrap_or(5),
        hidden: a.hidden.unwrap_or((64 / heads).max(1)),
        heads,
        dropout: a.dropout.unwrap_or(0.5),
        batch_norm: !g.no_batch_norm,
        residual: a.residual,
        variant: a.variant,
        seed: a.seeds.first().copied().unwrap_or(0),
        ..d
    };
    let workers = a.sample.workers();
    let cfg = GraphTrainConfig {
        model: GraphModel { encoder, pooling: g.pooling.unwrap_or(default_graph_pooling(a.model)), classes: 0, features: 0 },
        batch_size: a.sample.batch_size.unwrap_or(128),
        epochs: a.epochs,
        lr: a.lr.unwrap_or(0.01),
        lr_halve_every: g.lr_halve_every,
        weight_decay: a.weight_decay.unwrap_or(0.0),
        workers,
        rebind: !a.sample.build_per_batch,
        record: !a.sample.eager_steps,
    };
    Ok((cfg, g.folds.unwrap_or(10)))
}

#[derive(serde::Serialize)]
struct Report<'a> {
    dataset: &'a str,
    graphs: usize,
    classes: usize,
    features: tcgnn::task::graph::FeatureSource,
    device: String,
    config: &'a GraphTrainConfig,
    folds_total: usize,
    folds_run: usize,
    epoch_rule: &'static str,
    summary: tcgnn::task::graph::CvSummary,
    folds: &'a [FoldResult],
    date: String,
}

pub fn run(a: &TrainArgs) -> Result<()> {
    crate::cli::train_cmd::check_epochs(a)?;
    if a.sample.sampler.is_some() || a.dist.is_distributed() || a.save.is_some() || a.checkpoint.is_some() || a.resume.is_some() {
        return Err(Error::Unsupported(
            "--task graph trains on mini-batches of whole graphs: --sampler, --partitions / --gpus, --save, --checkpoint and --resume do not apply"
                .into(),
        ));
    }
    if a.seeds.len() > 1 {
        return Err(Error::Unsupported("--task graph: one seed (the folds are the repetitions); give --seeds S".into()));
    }
    super::train_cmd::check_out_folder(a)?;
    let (mut cfg, k) = config(a)?;
    let set = GraphSet::new(tu::load(&a.graph)?)?;
    cfg.model.classes = set.classes();
    cfg.model.features = set.features.cols;
    let name = set.tu.name.clone();
    let seed = cfg.model.encoder.seed;
    let folds = match &a.graph_task.folds_file {
        Some(p) if p.exists() => Folds::read(p, &name, &set.tu.graph_labels)?,
        other => {
            let f = Folds::stratified(&name, &set.tu.graph_labels, k, seed)?;
            match other {
                Some(p) => f.write(p)?,
                None => {
                    if let Some(dir) = &a.out {
                        std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.clone(), source: e })?;
                        f.write(&dir.join("folds.json"))?;
                    }
                }
            }
            f
        }
    };
    if let Some(asked) = a.graph_task.folds
        && asked != folds.k()
    {
        return Err(Error::Unsupported(format!("--folds {asked}, but the folds file holds {} folds", folds.k())));
    }
    let run_folds = a.graph_task.only_folds.unwrap_or(folds.k()).min(folds.k());
    if run_folds == 0 {
        return Err(Error::Unsupported("--only-folds must be at least 1".into()));
    }
    let set = Arc::new(set);
    let gpu = gpu_for(a)?;
    // The rebound net pays on the GPU (no build, a replayed step); on the CPU the padding to the
    // fold's largest batch costs more than the build it saves (NCI1, one fold: 4.55 s an epoch
    // rebound, 4.05 s with a net per batch), so the CPU keeps a net per batch.
    cfg.rebind &= gpu.is_some();
    let (device, results) = match &gpu {
        Some(gpu) => {
            let b = CudaBackend::new(gpu.clone(), a.precision, a.imp)?;
            (b.describe(), run_folds_on(&b, a, &set, &folds, run_folds, &cfg)?)
        }
        None if a.f64 => ("cpu f64".to_string(), run_folds_on(&CpuBackend::<f64>::new(), a, &set, &folds, run_folds, &cfg)?),
        None => (
            format!("cpu f32 ({} threads)", rayon::current_num_threads()),
            run_folds_on(&CpuBackend::<f32>::new(), a, &set, &folds, run_folds, &cfg)?,
        ),
    };
    let summary = summarize(&results)?;
    println!(
        "{:>4} {:>6} {:>6} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9}",
        "fold", "train", "test", "acc@best", "acc@last", "best ep", "epoch ms", "build ms", "wait ms"
    );
    for f in &results {
        let best = f.epochs.iter().max_by(|x, y| x.test_acc.total_cmp(&y.test_acc).then(y.epoch.cmp(&x.epoch))).expect("epochs");
        let median = |get: fn(&tcgnn::task::graph::EpochLog) -> f64| {
            let mut t: Vec<f64> = f.epochs.iter().skip(1).map(get).collect();
            t.sort_by(f64::total_cmp);
            1e3 * t.get(t.len() / 2).copied().unwrap_or(get(&f.epochs[0]))
        };
        println!(
            "{:>4} {:>6} {:>6} {:>9.2}% {:>9.2}% {:>9} {:>10.1} {:>10.1} {:>9.1}",
            f.fold,
            f.train_graphs,
            f.test_graphs,
            100.0 * f.epochs[summary.best_epoch - 1].test_acc,
            100.0 * f.epochs.last().expect("epochs").test_acc,
            best.epoch,
            median(|e| e.train_s),
            median(|e| e.build_s),
            median(|e| e.wait_s)
        );
    }
    match results.first().and_then(|f| f.bound.as_ref()) {
        Some(r) => println!(
            "one net per fold, rebound per batch: capacity {} nodes, {} nonzeros, {} graphs; step {}",
            r.capacity.nodes,
            r.capacity.edges,
            r.capacity.graphs,
            match (&r.record_error, r.recordings) {
                (Some(e), _) => format!("eager (recording failed: {e})"),
                (None, 0) => "eager".to_string(),
                (None, n) => format!("replayed (recorded {n} time(s) in fold 0)"),
            }
        ),
        None => println!("a net per batch (build ms: building them)"),
    }
    let partial = if run_folds < folds.k() { format!(" (PARTIAL: {run_folds} of {} folds)", folds.k()) } else { String::new() };
    println!(
        "{name} {} {:?} pooling, {} folds{partial}: test accuracy {:.2} ± {:.2}% at epoch {} (best mean over folds), {:.2} ± {:.2}% at the last epoch; epoch {:.1} ms (median); {device}",
        a.model,
        cfg.model.pooling,
        run_folds,
        100.0 * summary.best_mean,
        100.0 * summary.best_std,
        summary.best_epoch,
        100.0 * summary.last_mean,
        100.0 * summary.last_std,
        1e3 * summary.epoch_s_median
    );
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.clone(), source: e })?;
        let report = Report {
            dataset: &name,
            graphs: set.graphs(),
            classes: set.classes(),
            features: set.source,
            device,
            config: &cfg,
            folds_total: folds.k(),
            folds_run: run_folds,
            epoch_rule: "the epoch of the best mean held-out accuracy over the folds (GIN paper); mean ± population std over folds",
            summary,
            folds: &results,
            date: chrono::Utc::now().to_rfc3339(),
        };
        let path = dir.join("graph.json");
        let text = serde_json::to_string_pretty(&report).map_err(|e| Error::BadFile { path: path.clone(), msg: e.to_string() })?;
        tcgnn::util::atomic::write_atomic(&path, text.as_bytes())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn run_folds_on<B: Ops + 'static>(
    b: &B,
    a: &TrainArgs,
    set: &Arc<GraphSet>,
    folds: &Folds,
    run_folds: usize,
    cfg: &GraphTrainConfig,
) -> Result<Vec<FoldResult>> {
    let total = (run_folds * cfg.epochs) as u64;
    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(total) };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} epochs {msg}").expect("static template").progress_chars("=> "),
    );
    bar.set_prefix(format!("{} {}", set.tu.name, a.model));
    let mut out = Vec::with_capacity(run_folds);
    for f in 0..run_folds {
        let r = train_fold(b, set, folds, f, cfg, &mut |e| {
            bar.inc(1);
            bar.set_message(format!(
                "fold {} epoch {} loss {:.3} train {:.1}% test {:.1}%",
                e.fold,
                e.epoch,
                e.train_loss,
                100.0 * e.train_acc,
                100.0 * e.test_acc
            ));
        })?;
        out.push(r);
    }
    bar.finish_and_clear();
    Ok(out)
}
