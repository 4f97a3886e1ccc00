//! `tcgnn train GRAPH --task link`: link prediction (`tcgnn::task::link`) with any model of the
//! registry as encoder, on the GPU (CPU without one): progress bar, a final table of validation
//! and test AUC and Hits@K at the best validation epoch (mean ± std over seeds), JSON via --out.

use std::path::PathBuf;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use tcgnn::bench::train::{mean_std, write_json};
use tcgnn::nn::embedding::NodeInput;
use tcgnn::nn::models::{ModelConfig, model_info};
use tcgnn::nn::{CpuBackend, CudaBackend, EdgeLayout, Ops};
use tcgnn::task::Flow;
use tcgnn::task::link::checkpoint::LinkCheckpoint;
use tcgnn::task::link::decoder::DecoderKind;
use tcgnn::task::link::metric::HITS_K;
use tcgnn::task::link::predict::{LinkMeta, SavedLinkModel};
use tcgnn::task::link::split::LinkSplit;
use tcgnn::task::link::train::{BestBy, LinkConfig, LinkHistory, LinkTrainer};
use tcgnn::task::saved::ModelMeta;
use tcgnn::tensor::Matrix;
use tcgnn::{Error, Result};

use crate::cli::train_cmd::{TrainArgs, gpu_for, load_dataset};

/// Options of `--task link` (ignored by the other tasks).
#[derive(clap::Args, Clone, Debug)]
pub struct LinkArgs {
    /// The edge split: read from this file when it exists (checked against the graph), else
    /// made with --split-seed and written there (for `bench/pyg/link.py`).
    #[arg(long)]
    pub split_file: Option<PathBuf>,
    /// Seed of the edge split (validation 5%, test 10% of the undirected edges).
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,
    /// Training negatives per training edge, drawn every epoch.
    #[arg(long, default_value_t = 1.0)]
    pub neg_ratio: f64,
    /// How a pair is scored from its two node representations.
    #[arg(long, value_enum, default_value = "dot")]
    pub decoder: DecoderKind,
    /// Width of the node representations (the encoder's output; PyG's link_pred.py: 64).
    #[arg(long, default_value_t = 64)]
    pub embedding: usize,
    /// Training edges per optimiser step, each batch with its own negatives and the encoder
    /// recomputed (OGB's ogbl-ddi baseline: 65536); default: all of them, one step an epoch.
    #[arg(long)]
    pub batch_edges: Option<usize>,
    /// The validation metric that picks the reported epoch and the saved weights (PyG's
    /// link_pred.py: auc; OGB's ogbl-ddi leaderboard: hits20).
    #[arg(long, value_enum, default_value = "auc")]
    pub best_by: BestBy,
}

/// One seed's run, as written to link.json.
#[derive(serde::Serialize)]
struct LinkRun {
    graph: String,
    n: usize,
    undirected_edges: usize,
    features: usize,
    synthetic_features: bool,
    /// The input is a learnable `features`-wide table (`--features learnable:D`).
    #[serde(default)]
    learnable_input: bool,
    model: ModelConfig,
    embedding: usize,
    link: LinkConfig,
    split_seed: u64,
    backend: String,
    precision: String,
    seed: u64,
    setup_ms: f64,
    /// Link-neighbour sampling's settings and per-batch sizes (`None`: full-graph epochs).
    sampled: Option<String>,
    history: LinkHistory,
}

pub fn run(a: &TrainArgs) -> Result<()> {
    check_options(a)?;
    let gpu = gpu_for(a)?;
    let mut runs = Vec::new();
    for &seed in &a.seeds {
        let r = match &gpu {
            // Scores are read per pair: edge values stay in CSR order (see `PairSet::check_order`).
            Some(g) => train_one(a, seed, Arc::new(CudaBackend::new(g.clone(), a.precision, a.imp)?.with_edge_layout(EdgeLayout::Csr)))?,
            None if a.f64 => train_one(a, seed, Arc::new(CpuBackend::<f64>::new()))?,
            None => train_one(a, seed, Arc::new(CpuBackend::<f32>::new()))?,
        };
        runs.push(r);
    }
    print_table(&runs);
    if let Some(dir) = &a.out {
        let json = write_json(&dir.join("link.json"), &runs)?;
        eprintln!("wrote {}", json.display());
    }
    Ok(())
}

/// Refuses what `--task link` does not do, before anything is loaded.
fn check_options(a: &TrainArgs) -> Result<()> {
    crate::cli::train_cmd::check_epochs(a)?;
    if a.seeds.is_empty() {
        return Err(Error::Unsupported("--seeds needs at least one seed".into()));
    }
    if a.seeds.len() > 1 && (a.save.is_some() || a.checkpoint.is_some() || a.resume.is_some()) {
        return Err(Error::Unsupported("--save, --checkpoint and --resume follow one run: give one seed".into()));
    }
    if a.checkpoint_every == 0 {
        return Err(Error::Unsupported("--checkpoint-every must be at least 1".into()));
    }
    let unsupported = [
        ("--partitions / --gpus / --world-size", a.dist.is_distributed()),
        // The sampled loop keeps no optimizer state between runs (yet).
        ("--checkpoint / --resume with --sampler", a.sample.sampler.is_some() && (a.checkpoint.is_some() || a.resume.is_some())),
        ("--profile-ops", a.profile_ops),
    ];
    if let Some((what, _)) = unsupported.iter().find(|u| u.1) {
        return Err(Error::Unsupported(format!("{what} is not available with --task link yet")));
    }
    crate::cli::link_sampled::check(a)?;
    if a.sample.sampler.is_some() {
        // The sampled loop gathers each batch's rows of fixed features and builds a model per
        // batch: a learnable table's rows and gradients would need gathering and scattering.
        if a.features.is_some_and(|f| f.is_learnable()) {
            return Err(Error::Unsupported("--features learnable:D is not available with --sampler neighbor yet".into()));
        }
        if a.link.batch_edges.is_some() {
            return Err(Error::Unsupported(
                "--batch-edges batches the full-graph epoch; --sampler neighbor batches by --batch-size".into(),
            ));
        }
    }
    let l = &a.link;
    if !(l.neg_ratio.is_finite() && l.neg_ratio > 0.0 && l.neg_ratio <= 1000.0) {
        return Err(Error::Unsupported(format!("--neg-ratio {} must be a number in (0, 1000]", l.neg_ratio)));
    }
    if l.embedding == 0 || l.embedding > 1 << 16 {
        return Err(Error::Unsupported(format!("--embedding {} must be in [1, 65536]", l.embedding)));
    }
    if l.batch_edges == Some(0) {
        return Err(Error::Unsupported("--batch-edges 0: a step needs at least one training edge".into()));
    }
    if let Some(p) = &a.save {
        tcgnn::util::atomic::check_output_path(p)?;
    }
    // Refused now, not after the first --checkpoint-every epochs of training.
    if let Some(c) = &a.checkpoint
        && c.exists()
        && !c.is_dir()
    {
        return Err(Error::Unsupported(format!("--checkpoint {}: is a file, not a folder", c.display())));
    }
    super::train_cmd::check_out_folder(a)?;
    link_config(a, 0)?;
    Ok(())
}

/// The encoder: the model's registry defaults with PyG's link_pred.py widths (hidden 128) and no
/// dropout, unless given.
pub(crate) fn encoder_config(a: &TrainArgs, seed: u64) -> Result<ModelConfig> {
    let d = model_info(a.model)?.defaults;
    let cfg = ModelConfig {
        layers: a.layers.unwrap_or(d.layers),
        hidden: a.hidden.unwrap_or(128),
        heads: a.heads.unwrap_or(d.heads),
        dropout: a.dropout.unwrap_or(0.0),
        batch_norm: a.batch_norm || d.batch_norm,
        residual: a.residual || d.residual,
        variant: a.variant || d.variant,
        seed,
        ..d
    };
    tcgnn::nn::models::check(&cfg)?;
    Ok(cfg)
}

/// Adam at lr 0.01 without weight decay (link_pred.py), unless given.
pub(crate) fn link_config(a: &TrainArgs, seed: u64) -> Result<LinkConfig> {
    let (lr, weight_decay) = (a.lr.unwrap_or(0.01), a.weight_decay.unwrap_or(0.0));
    if !(lr.is_finite() && lr > 0.0) {
        return Err(Error::Unsupported(format!("--lr {lr} must be a finite number > 0")));
    }
    if !(weight_decay.is_finite() && weight_decay >= 0.0) {
        return Err(Error::Unsupported(format!("--weight-decay {weight_decay} must be a finite number >= 0")));
    }
    Ok(LinkConfig {
        lr,
        weight_decay,
        neg_ratio: a.link.neg_ratio,
        seed,
        decoder: a.link.decoder,
        batch_edges: a.link.batch_edges,
        best_by: a.link.best_by,
    })
}

/// The split of `graph`: read from --split-file when it exists, else made (and written there).
pub(crate) fn split_for(a: &TrainArgs, graph: &tcgnn::graph::Csr) -> Result<LinkSplit> {
    match &a.link.split_file {
        Some(p) if p.exists() => {
            let s = LinkSplit::read(p, graph)?;
            if s.seed != a.link.split_seed {
                eprintln!("note: {} holds the split of seed {}; --split-seed {} is not used", p.display(), s.seed, a.link.split_seed);
            }
            Ok(s)
        }
        Some(p) => {
            let s = LinkSplit::new(graph, a.link.split_seed)?;
            s.write(p)?;
            eprintln!("wrote the split (seed {}) to {}", s.seed, p.display());
            Ok(s)
        }
        None => LinkSplit::new(graph, a.link.split_seed),
    }
}

fn train_one<B: Ops + 'static>(a: &TrainArgs, seed: u64, backend: Arc<B>) -> Result<LinkRun> {
    let data = load_dataset(a, seed)?;
    crate::cli::train_cmd::check_synthetic_options(a, &data)?;
    let split = split_for(a, &data.graph)?;
    let cfg = encoder_config(a, seed)?;
    let lcfg = link_config(a, seed)?;
    let embedding = a.link.embedding;
    let input = match a.features {
        Some(f) if f.is_learnable() => {
            if !data.synthetic {
                eprintln!("note: --features {}: a learnable input replaces {}'s node features", spec(f), data.name);
            }
            NodeInput::Learnable { width: f.width() }
        }
        _ => NodeInput::Features(&data.features),
    };
    let (input_width, learnable_input) = (input.cols(), input.is_learnable());
    let resumed = a.resume.as_deref().map(LinkCheckpoint::read).transpose()?;
    if let (Some(c), Some(dir)) = (&resumed, &a.resume) {
        check_resume(a, c, dir, &cfg, &lcfg, input_width, split.seed)?;
    }
    // Layer-wise evaluation keeps the whole-graph model out of memory: the trainer holds the
    // parameters only (the sampled batches borrow them).
    let mut representations = crate::cli::link_sampled::representations(a, &*backend, &split, &data.features, &cfg)?;
    let mut trainer = match representations {
        Some(_) => LinkTrainer::params_only(backend.clone(), input_width, &split, &cfg, embedding, &lcfg)?,
        None => LinkTrainer::new(backend.clone(), input, &split, &cfg, embedding, &lcfg)?,
    };
    let mut done = Vec::new();
    let mut best: Option<(tcgnn::task::link::train::LinkEpoch, Vec<(String, Matrix)>)> = None;
    if let Some(c) = resumed {
        trainer.load_optimizer_state(&c.state, c.steps)?;
        done = c.history;
        best = c.best;
    }
    let precision = if backend.describe().starts_with("cpu") {
        if a.f64 { "f64".to_string() } else { "f32".to_string() }
    } else {
        format!("{:?}", a.precision).to_lowercase()
    };
    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(a.epochs as u64) };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} epochs {msg}").expect("static template").progress_chars("=> "),
    );
    bar.set_prefix(format!("{} {} link seed {seed}", data.name, cfg.model));
    bar.set_position(done.len() as u64);
    let meta = |rec: &tcgnn::task::link::train::LinkEpoch| ModelMeta {
        model: cfg,
        features: input_width,
        classes: embedding,
        raw_features: a.raw_features,
        graph: data.name.clone(),
        epoch: rec.epoch,
        val_acc: rec.val.auc,
        test_acc: rec.test.auc,
        precision: precision.clone(),
        learnable_input,
    };
    let keep_best = a.save.is_some() || a.checkpoint.is_some();
    let mut curve = done.clone();
    let mut sampled = crate::cli::link_sampled::sampled(a, &split, &data.features, &cfg, seed)?;
    let mut on_epoch = |t: &mut LinkTrainer<B>, e: &tcgnn::task::link::train::LinkEpoch| {
        bar.set_message(format!("loss {:.4} val AUC {:.4} test AUC {:.4}", e.loss, e.val.auc, e.test.auc));
        bar.inc(1);
        curve.push(*e);
        // The first epoch of the highest validation metric, as the report picks it.
        if keep_best && best.as_ref().is_none_or(|(b, _)| lcfg.best_by.of(&e.val) > lcfg.best_by.of(&b.val)) {
            best = Some((*e, t.weights()?));
        }
        if let Some(dir) = &a.checkpoint
            && (e.epoch.is_multiple_of(a.checkpoint_every) || e.epoch == a.epochs)
        {
            let (state, steps) = t.optimizer_state()?;
            let link = LinkMeta { decoder: lcfg.decoder, split_seed: split.seed };
            let ckpt = LinkCheckpoint {
                meta: meta(e),
                link: lcfg,
                split_seed: link.split_seed,
                steps,
                history: curve.clone(),
                state,
                best: best.clone(),
            };
            ckpt.write(dir)?;
        }
        Ok(Flow::Continue)
    };
    let history = match &mut sampled {
        Some(s) => {
            let eval = representations.as_mut().map(|r| r as &mut dyn tcgnn::task::link::train::Representations<B>);
            s.fit(&mut trainer, a.epochs, eval, &mut on_epoch)?
        }
        None => trainer.fit(done, a.epochs, &mut on_epoch)?,
    };
    bar.finish_and_clear();
    let sampled = sampled.map(|s| format!("{}; {}", crate::cli::link_sampled::describe(a, &cfg), s.summary()));
    if let (Some(s), false) = (&sampled, a.quiet) {
        eprintln!("{s}");
    }
    if let (Some(path), Some((rec, weights))) = (&a.save, best) {
        SavedLinkModel { meta: meta(&rec), link: LinkMeta { decoder: lcfg.decoder, split_seed: split.seed }, weights }.write(path)?;
        eprintln!(
            "saved the weights of epoch {} (validation AUC {:.4}, test AUC {:.4}) to {}",
            rec.epoch,
            rec.val.auc,
            rec.test.auc,
            path.display()
        );
    }
    let dropped: usize = history.epochs.iter().map(|e| e.negatives_dropped).sum();
    if dropped > 0 {
        eprintln!(
            "note: {dropped} training negatives over {} epochs were drawn twice in their epoch or found no non-edge, and were left out",
            history.epochs.len()
        );
    }
    Ok(LinkRun {
        graph: data.name.clone(),
        n: data.n(),
        undirected_edges: split.train.len() + split.val_pos.len() + split.test_pos.len(),
        features: input_width,
        synthetic_features: data.synthetic && !learnable_input,
        learnable_input,
        model: cfg,
        embedding,
        link: lcfg,
        split_seed: split.seed,
        backend: backend.describe(),
        precision,
        seed,
        setup_ms: trainer.setup_seconds * 1e3,
        sampled,
        history,
    })
}

/// Refuses to resume `c` (read from `dir`) under settings other than its own: the same command
/// plus `--resume` continues a run; anything else would be silently another run.
fn check_resume(
    a: &TrainArgs,
    c: &LinkCheckpoint,
    dir: &std::path::Path,
    cfg: &ModelConfig,
    lcfg: &LinkConfig,
    features: usize,
    split_seed: u64,
) -> Result<()> {
    let path = LinkCheckpoint::path(dir);
    let bad = |msg: String| Error::BadFile {
        path: path.clone(),
        msg: format!("{msg}; --resume continues a run: give the options of the checkpointed run"),
    };
    if c.meta.model != *cfg {
        return Err(bad(format!("the checkpoint's encoder is {:?}, this command's {:?}", c.meta.model, cfg)));
    }
    if c.link != *lcfg {
        return Err(bad(format!("the checkpoint's link settings are {:?}, this command's {:?}", c.link, lcfg)));
    }
    if c.meta.classes != a.link.embedding || c.meta.features != features {
        return Err(bad(format!(
            "the checkpoint is of {} features -> embedding {}, this command's {features} -> {}",
            c.meta.features, c.meta.classes, a.link.embedding
        )));
    }
    let learnable = a.features.is_some_and(|f| f.is_learnable());
    if c.meta.learnable_input != learnable {
        return Err(bad(format!(
            "the checkpoint's input is {}, this command's {}",
            if c.meta.learnable_input { "a learnable table" } else { "node features" },
            if learnable { "a learnable table" } else { "node features" }
        )));
    }
    if c.split_seed != split_seed {
        return Err(bad(format!("the checkpoint trained on the split of seed {}, this command's is of seed {split_seed}", c.split_seed)));
    }
    if a.epochs <= c.meta.epoch {
        return Err(bad(format!(
            "--epochs {}: the checkpoint has trained {} epochs already (--epochs counts all of them)",
            a.epochs, c.meta.epoch
        )));
    }
    Ok(())
}

/// `--features learnable:D` as given.
fn spec(f: tcgnn::nn::embedding::FeatureSpec) -> String {
    if f.is_learnable() { format!("learnable:{}", f.width()) } else { f.width().to_string() }
}

fn best_by_name(b: BestBy) -> &'static str {
    match b {
        BestBy::Auc => "val AUC",
        BestBy::Hits20 => "val H@20",
        BestBy::Hits50 => "val H@50",
        BestBy::Hits100 => "val H@100",
    }
}

fn print_table(runs: &[LinkRun]) {
    let r0 = &runs[0];
    println!(
        "{} link prediction, {} {}x{} -> {} ({} decoder) on {} ({}), split seed {}, {} seed(s){}",
        r0.graph,
        r0.model.model,
        r0.model.layers,
        r0.model.hidden,
        r0.embedding,
        format!("{:?}", r0.link.decoder).to_lowercase(),
        r0.backend,
        r0.precision,
        r0.split_seed,
        runs.len(),
        if r0.learnable_input {
            format!(" (learnable input {})", r0.features)
        } else if r0.synthetic_features {
            " (random node features)".to_string()
        } else {
            String::new()
        }
    );
    if let Some(s) = &r0.sampled {
        println!("{}", s.split("; ").next().unwrap_or(s));
    }
    let col = |f: &dyn Fn(&LinkHistory) -> f64| {
        let v: Vec<f64> = runs.iter().map(|r| 100.0 * f(&r.history)).collect();
        let (m, s) = mean_std(&v);
        format!("{m:>7.2} ± {s:<5.2}")
    };
    println!(
        "{:<14} {:>15} {:>15} {:>15} {:>15}",
        format!("best {}", best_by_name(r0.link.best_by)),
        "AUC %",
        "Hits@20 %",
        "Hits@50 %",
        "Hits@100 %"
    );
    println!(
        "{:<14} {} {} {} {}",
        "validation",
        col(&|h| h.best_val.auc),
        col(&|h| h.best_val.hits[0]),
        col(&|h| h.best_val.hits[1]),
        col(&|h| h.best_val.hits[2])
    );
    println!(
        "{:<14} {} {} {} {}",
        "test",
        col(&|h| h.test.auc),
        col(&|h| h.test.hits[0]),
        col(&|h| h.test.hits[1]),
        col(&|h| h.test.hits[2])
    );
    let epochs: Vec<String> = runs.iter().map(|r| r.history.best_epoch.to_string()).collect();
    println!(
        "best epochs {}; per epoch: training {:.2} ms, evaluation {:.2} ms (medians, seed {}); setup {:.1} ms",
        epochs.join(", "),
        r0.history.train_ms,
        r0.history.eval_ms,
        r0.seed,
        r0.setup_ms
    );
    debug_assert_eq!(HITS_K.len(), 3);
}
