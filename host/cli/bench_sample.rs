//! `tcgnn bench sample`: sampled (mini-batch) training against full-graph training of the same
//! model: test accuracy over seeds, epoch time, and for the samplers the split of the training
//! time (sampling on the worker threads, waiting for it, building each batch's model with its
//! uploads, the step), sampled edges per second and the GPU's idle share between steps.
//! Writes `OUT/sample.json` and `OUT/sample.md`.
//!
//! Timing: every sampled step is waited for before the next batch is taken (on the GPU too), so
//! the step time is the step's and the idle share is 1 - steps / training wall time. The
//! default loop (`train --sampler`) does not wait, so its idle share is at most this one.

use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;
use tcgnn::bench::train::{mean_std, write_json, write_text};
use tcgnn::gpu::Gpu;
use tcgnn::gpu::timing::StepSpans;
use tcgnn::nn::{CpuBackend, CudaBackend, Ops};
use tcgnn::ops::{Impl, Precision};
use tcgnn::sample::{SampleTimes, SampledTraining};
use tcgnn::task::node::Trainer;
use tcgnn::{Error, Result};

use super::sample_args::{SampleArgs, SamplerKind};
use super::train_cmd::{Device, TrainArgs, check_fits, load_dataset, model_config, train_config};

#[derive(clap::Args)]
pub struct BenchSampleArgs {
    /// Graphs (dataset names, paths, sbm:N[:CLASSES[:DEGREE]]).
    #[arg(default_values_t = ["cora".to_string(), "citeseer".to_string()])]
    pub graphs: Vec<String>,
    /// Models (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "gcn,sage", value_parser = tcgnn::nn::models::parse_model_name)]
    pub models: Vec<&'static str>,
    /// Samplers (comma separated); full-graph training of each model runs beside them.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "saint-rw,saint-node,saint-edge,neighbor")]
    pub samplers: Vec<SamplerKind>,
    /// Leave out the full-graph runs.
    #[arg(long)]
    pub no_full: bool,
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,3,4")]
    pub seeds: Vec<u64>,
    #[arg(long, default_value_t = 200)]
    pub epochs: usize,
    #[arg(long, value_enum, default_value = "auto")]
    pub device: Device,
    /// Epochs left out of the sampled runs' split and GPU idle (the first builds the model,
    /// chooses kernels and records the step; bench/pyg/sample.py leaves one out too).
    #[arg(long, default_value_t = 1)]
    pub warmup_epochs: usize,
    /// Wait for every sampled step before the next batch, so the host's time splits into
    /// sampling, build and step (the "idle" column is then the host-side share outside steps).
    /// Default: steps run ahead as in `train`, and the GPU's idle time between steps is read
    /// from events around each step.
    #[arg(long)]
    pub split: bool,
    /// Folder for sample.json and sample.md.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// Sampler settings for every run (--sampler itself is ignored: see --samplers).
    #[command(flatten)]
    pub sample: SampleArgs,
}

/// One (graph, model, sampler) setting over its seeds.
#[derive(serde::Serialize)]
struct Row {
    graph: String,
    model: String,
    /// "full" or the sampler.
    sampler: String,
    backend: String,
    /// Where the batches were made: "gpu", "cpu" (worker threads), or "" (full graph).
    sample_on: String,
    /// Epochs left out of the split and the idle share.
    warmup_epochs: usize,
    nodes: usize,
    edges: usize,
    epochs: usize,
    seeds: Vec<u64>,
    test_acc: Vec<f64>,
    test_acc_mean: f64,
    test_acc_std: f64,
    /// Training plus evaluation, per epoch, mean over seeds.
    epoch_ms: f64,
    /// Sampled runs: the split, summed over seeds (per epoch below).
    times: Option<SampleTimes>,
    train_ms_per_epoch: Option<f64>,
    sample_ms_per_epoch: Option<f64>,
    wait_ms_per_epoch: Option<f64>,
    build_ms_per_epoch: Option<f64>,
    step_ms_per_epoch: Option<f64>,
    batches_per_epoch: Option<f64>,
    nodes_per_batch: Option<f64>,
    sampled_edges_per_batch: Option<f64>,
    sampled_edges_per_s: Option<f64>,
    idle_fraction: Option<f64>,
    /// The GPU's idle share of the epochs' spans, from events around every step (steps not
    /// waited for; the batches' copies count as idle); `None` with --split or on the CPU.
    gpu_idle_fraction: Option<f64>,
    /// Device time of the steps per epoch (events), mean over seeds.
    gpu_step_ms_per_epoch: Option<f64>,
}

pub fn run(a: &BenchSampleArgs) -> Result<()> {
    if a.epochs == 0 || a.seeds.is_empty() {
        return Err(Error::Unsupported("bench sample needs --epochs >= 1 and at least one seed".into()));
    }
    let gpu = match a.device {
        Device::Cpu => None,
        Device::Gpu => Some(Gpu::probe()?),
        Device::Auto => Gpu::probe().map_err(|e| eprintln!("{e}: benchmarking on the CPU")).ok(),
    };
    let mut rows = Vec::new();
    for graph in &a.graphs {
        for &model in &a.models {
            let settings: Vec<Option<SamplerKind>> =
                (!a.no_full).then_some(None).into_iter().chain(a.samplers.iter().map(|&s| Some(s))).collect();
            for sampler in settings {
                let row = match &gpu {
                    Some(g) => setting(a, graph, model, sampler, || CudaBackend::new(g.clone(), Precision::F32, Impl::Auto), Some(g))?,
                    None => setting(a, graph, model, sampler, || Ok(CpuBackend::<f32>::new()), None)?,
                };
                eprintln!(
                    "{} {} {}: test {:.2} ± {:.2}%, epoch {:.2} ms{}",
                    row.graph,
                    row.model,
                    row.sampler,
                    row.test_acc_mean,
                    row.test_acc_std,
                    row.epoch_ms,
                    row.idle_fraction.or(row.gpu_idle_fraction).map_or(String::new(), |f| format!(", idle {:.1}%", 100.0 * f))
                );
                rows.push(row);
            }
        }
    }
    let json = write_json(&a.out.join("sample.json"), &rows)?;
    let md = write_text(&a.out.join("sample.md"), &markdown(&rows))?;
    eprintln!("wrote {} and {}", json.display(), md.display());
    Ok(())
}

fn setting<B: Ops + 'static>(
    a: &BenchSampleArgs,
    graph: &str,
    model: &'static str,
    sampler: Option<SamplerKind>,
    make: impl Fn() -> Result<B>,
    gpu: Option<&Arc<Gpu>>,
) -> Result<Row> {
    let mut t = TrainArgs::for_graph(graph);
    t.model = model;
    t.epochs = a.epochs;
    t.sample = SampleArgs { sampler, ..a.sample.clone() };
    let (mut accs, mut epoch_ms) = (Vec::new(), 0.0);
    let mut times = SampleTimes::default();
    let (mut backend_name, mut nodes, mut edges) = (String::new(), 0, 0);
    let mut sample_on = String::new();
    // Device milliseconds in steps and spanned by the epochs, over seeds.
    let (mut busy_ms, mut span_ms) = (0.0, 0.0);
    for &seed in &a.seeds {
        let data = load_dataset(&t, seed)?;
        let (cfg, tcfg) = (model_config(&t, seed)?, train_config(&t)?);
        if let Some(g) = gpu {
            check_fits(g, &data, &cfg)?;
        }
        let backend = Arc::new(make()?);
        backend_name = backend.describe();
        (nodes, edges) = (data.n(), data.graph.nnz());
        let mut trainer = Trainer::new(backend, &data, &cfg, &tcfg)?;
        match t.sample.training_on(&data, &cfg, seed, gpu.is_some())? {
            Some(mut s) => {
                s.sync_each_step = a.split;
                s.warmup_epochs = a.warmup_epochs.min(a.epochs.saturating_sub(1));
                if let (false, Some(g)) = (a.split, gpu) {
                    s.spans = Some(Box::new(StepSpans::new(g.clone())));
                }
                trainer.set_epoch_steps(Box::new(s));
            }
            None => {
                if gpu.is_some() {
                    trainer.record()?;
                }
            }
        }
        let h = trainer.fit(a.epochs, |_| {})?;
        accs.push(100.0 * h.test_acc);
        epoch_ms += 1e3 * h.seconds / a.epochs as f64 / a.seeds.len() as f64;
        if let Some(s) = trainer.epoch_steps().and_then(|s| s.as_any().downcast_ref::<SampledTraining>()) {
            sample_on = if s.sample_on_gpu { "gpu" } else { "cpu" }.into();
            if let Some(sp) = &s.spans {
                let (busy, span) = sp.totals()?;
                busy_ms += busy;
                span_ms += span;
            }
            let m = s.times;
            times = SampleTimes {
                epochs: times.epochs + m.epochs,
                batches: times.batches + m.batches,
                sample_s: times.sample_s + m.sample_s,
                wait_s: times.wait_s + m.wait_s,
                build_s: times.build_s + m.build_s,
                step_s: times.step_s + m.step_s,
                wall_s: times.wall_s + m.wall_s,
                sampled_edges: times.sampled_edges + m.sampled_edges,
                batch_nodes: times.batch_nodes + m.batch_nodes,
                rebound_batches: times.rebound_batches + m.rebound_batches,
                rebound_builds: times.rebound_builds + m.rebound_builds,
                recorded_batches: times.recorded_batches + m.recorded_batches,
                padded_by_workers: times.padded_by_workers + m.padded_by_workers,
            };
        }
    }
    let (mean, std) = mean_std(&accs);
    let sampled = sampler.is_some();
    let per_epoch = |s: f64| sampled.then(|| 1e3 * s / times.epochs.max(1) as f64);
    let per_batch = |x: f64| sampled.then(|| x / times.batches.max(1) as f64);
    Ok(Row {
        graph: graph.to_string(),
        model: model.to_string(),
        sampler: sampler.map_or("full".into(), |s| s.to_possible_value().expect("no skipped variants").get_name().to_string()),
        backend: backend_name,
        sample_on,
        warmup_epochs: if sampled { a.warmup_epochs.min(a.epochs.saturating_sub(1)) } else { 0 },
        nodes,
        edges,
        epochs: a.epochs,
        seeds: a.seeds.clone(),
        test_acc: accs,
        test_acc_mean: mean,
        test_acc_std: std,
        epoch_ms,
        train_ms_per_epoch: per_epoch(times.wall_s),
        sample_ms_per_epoch: per_epoch(times.sample_s),
        wait_ms_per_epoch: per_epoch(times.wait_s),
        build_ms_per_epoch: per_epoch(times.build_s),
        step_ms_per_epoch: per_epoch(times.step_s),
        batches_per_epoch: sampled.then(|| times.batches as f64 / times.epochs.max(1) as f64),
        nodes_per_batch: per_batch(times.batch_nodes as f64),
        sampled_edges_per_batch: per_batch(times.sampled_edges as f64),
        sampled_edges_per_s: sampled.then(|| times.sampled_edges as f64 / times.wall_s.max(1e-12)),
        idle_fraction: (sampled && a.split).then(|| times.idle_fraction()),
        gpu_idle_fraction: (span_ms > 0.0).then(|| (1.0 - busy_ms / span_ms).max(0.0)),
        gpu_step_ms_per_epoch: (span_ms > 0.0).then(|| busy_ms / times.epochs.max(1) as f64),
        times: sampled.then_some(times),
    })
}

fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| graph | model | sampler | test acc (%) | epoch ms (train + eval) | train ms | sampling (workers) | wait | build + upload | step | batches | nodes / batch | M sampled edges/s | idle (host, --split) | GPU step ms (events) | GPU idle (events) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let f = |x: Option<f64>, p: usize| x.map_or("".to_string(), |v| format!("{v:.p$}"));
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {:.2} ± {:.2} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.graph,
            r.model,
            if r.sample_on == "gpu" { format!("{} (on GPU)", r.sampler) } else { r.sampler.clone() },
            r.test_acc_mean,
            r.test_acc_std,
            r.epoch_ms,
            f(r.train_ms_per_epoch, 2),
            f(r.sample_ms_per_epoch, 2),
            f(r.wait_ms_per_epoch, 2),
            f(r.build_ms_per_epoch, 2),
            f(r.step_ms_per_epoch, 2),
            f(r.batches_per_epoch, 1),
            f(r.nodes_per_batch, 0),
            f(r.sampled_edges_per_s.map(|x| x / 1e6), 2),
            r.idle_fraction.map_or(String::new(), |x| format!("{:.1}%", 100.0 * x)),
            f(r.gpu_step_ms_per_epoch, 2),
            r.gpu_idle_fraction.map_or(String::new(), |x| format!("{:.1}%", 100.0 * x)),
        );
    }
    if let Some(r) = rows.first() {
        s += &format!(
            "\n{} epochs (the sampled runs' split and idle without the first {}), seeds {:?}, backend {}. {}\n",
            r.epochs,
            r.warmup_epochs,
            r.seeds,
            r.backend,
            if r.idle_fraction.is_some() {
                "Sampled steps are waited for one by one (--split): step = enqueue + wait, idle = host time outside steps."
            } else {
                "Sampled steps run ahead of the host as in `train` (step = host time to enqueue); GPU idle = 1 - (event time inside steps) / (event time spanned by each epoch's steps), batch copies counted as idle. Samplers marked (on GPU) make their batches on the GPU: their sampling kernels count as busy, and \"sampling\" is the host's time in them, waiting included."
            }
        );
    }
    s
}
