//! `tcgnn bench dtp`: HP SpMM on sampled batches with the nonzeros per warp chosen by Dynamic
//! Task Partition (HP-SpMM's InEq. 5 over its candidate set, what the launcher does:
//! `dtp_spmm_nnz_per_warp`) against the earlier waves rule (`hp_nnz_per_warp`: about two waves
//! of resident warps, at least 32) and fixed choices (HP-SpMM's Table III measure). Each batch is the matrix a GCN trains on (the
//! normalised subgraph, or GraphSAINT's weighted aggregation), K as the layers' widths.
//! Writes `OUT/dtp.json` and `OUT/dtp.md`.

use std::path::PathBuf;

use clap::ValueEnum;
use tcgnn::bench::train::{write_json, write_text};
use tcgnn::gpu::timing::time_gpu;
use tcgnn::gpu::{DeviceMatrix, Gpu};
use tcgnn::nn::models;
use tcgnn::ops::GraphHandle;
use tcgnn::ops::spmm::hp::{dtp_spmm_nnz_per_warp, hp_nnz_per_warp, spmm_hp_npw};
use tcgnn::tensor::Matrix;
use tcgnn::{Error, Result};

use super::sample_args::{SampleArgs, SamplerKind};
use super::train_cmd::{TrainArgs, load_dataset, model_config};

#[derive(clap::Args)]
pub struct BenchDtpArgs {
    #[arg(default_values_t = ["cora".to_string(), "citeseer".to_string()])]
    pub graphs: Vec<String>,
    #[arg(long, value_enum, value_delimiter = ',', default_value = "saint-rw,saint-node,saint-edge,neighbor")]
    pub samplers: Vec<SamplerKind>,
    /// Feature widths (GCN 2 x 16 and SAGE 2 x 64 multiply 16- and 64-wide rows).
    #[arg(long, value_delimiter = ',', default_value = "16,64,256")]
    pub k: Vec<usize>,
    /// Fixed nonzeros per warp to compare with (default: the paper's candidate set).
    #[arg(long, value_delimiter = ',', default_value = "8,32,64,128,256,512")]
    pub fixed: Vec<u32>,
    /// Batches per (graph, sampler): the first epoch's, at most this many.
    #[arg(long, default_value_t = 8)]
    pub batches: usize,
    #[arg(long, default_value_t = 30)]
    pub reps: usize,
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    #[command(flatten)]
    pub sample: SampleArgs,
}

#[derive(serde::Serialize)]
struct Row {
    graph: String,
    sampler: String,
    k: usize,
    batches: usize,
    mean_nodes: f64,
    mean_nnz: f64,
    /// DTP's choices over the batches (min, max).
    dtp_npw: (u32, u32),
    /// Summed medians over the batches, milliseconds.
    dtp_ms: f64,
    /// The waves rule's choices (min, max) and summed medians.
    waves_npw: (u32, u32),
    waves_ms: f64,
    fixed_ms: Vec<(u32, f64)>,
    /// DTP's speedup over each fixed choice and over the best fixed one.
    speedup_over_best_fixed: f64,
}

pub fn run(a: &BenchDtpArgs) -> Result<()> {
    if a.fixed.iter().any(|&f| f == 0 || f > 1 << 20) || a.batches == 0 || a.k.is_empty() {
        return Err(Error::Unsupported("bench dtp: --fixed values must be in 1..=1048576, --batches >= 1, --k not empty".into()));
    }
    let gpu = Gpu::probe()?;
    let sm = gpu.info().sm_count;
    let mut rows = Vec::new();
    for graph in &a.graphs {
        for &sampler in &a.samplers {
            let mut t = TrainArgs::for_graph(graph);
            t.model = tcgnn::nn::models::DEFAULT_MODEL;
            t.sample = SampleArgs { sampler: Some(sampler), ..a.sample.clone() };
            let data = load_dataset(&t, 0)?;
            let cfg = model_config(&t, 0)?;
            let training = t.sample.training(&data, &cfg, 0)?.expect("a sampler was set");
            let mut handles = Vec::new();
            for i in 0..a.batches.min(training.steps()) {
                let b = training.batch(0, i as u32)?;
                let s = match b.adjacency {
                    Some(adj) => adj,
                    None => models::gcn::model_graph(&b.graph)?,
                };
                handles.push(GraphHandle::new(s, Some(gpu.clone())));
            }
            let name = sampler.to_possible_value().expect("no skipped variants").get_name().to_string();
            for &k in &a.k {
                let (mut dtp_ms, mut waves_ms, mut fixed_ms) = (0.0, 0.0, vec![0.0; a.fixed.len()]);
                let (mut npw_range, mut waves_range) = ((u32::MAX, 0), (u32::MAX, 0));
                for h in &handles {
                    let n = h.csr().n_rows();
                    let x = DeviceMatrix::upload(&gpu, &Matrix::random(n, k, 1))?;
                    let mut y = DeviceMatrix::<f32>::zeros(&gpu, n, k)?;
                    let k_chunks = (x.ld as u32 / 4).div_ceil(32);
                    let nnz = h.csr().nnz() as u32;
                    let npw = dtp_spmm_nnz_per_warp(&gpu, nnz, x.ld as u32)?;
                    npw_range = (npw_range.0.min(npw), npw_range.1.max(npw));
                    dtp_ms += time_gpu(&gpu, 3, a.reps, || spmm_hp_npw(h, None, &x, &mut y, None))?.median_ms;
                    let waves = hp_nnz_per_warp(nnz, sm, 64, 2, k_chunks);
                    waves_range = (waves_range.0.min(waves), waves_range.1.max(waves));
                    waves_ms += time_gpu(&gpu, 3, a.reps, || spmm_hp_npw(h, None, &x, &mut y, Some(waves)))?.median_ms;
                    for (f, &fixed) in fixed_ms.iter_mut().zip(&a.fixed) {
                        *f += time_gpu(&gpu, 3, a.reps, || spmm_hp_npw(h, None, &x, &mut y, Some(fixed)))?.median_ms;
                    }
                }
                let best = fixed_ms.iter().cloned().fold(f64::INFINITY, f64::min);
                let nb = handles.len().max(1) as f64;
                let row = Row {
                    graph: graph.clone(),
                    sampler: name.clone(),
                    k,
                    batches: handles.len(),
                    mean_nodes: handles.iter().map(|h| h.csr().n_rows() as f64).sum::<f64>() / nb,
                    mean_nnz: handles.iter().map(|h| h.csr().nnz() as f64).sum::<f64>() / nb,
                    dtp_npw: npw_range,
                    dtp_ms,
                    waves_npw: waves_range,
                    waves_ms,
                    fixed_ms: a.fixed.iter().cloned().zip(fixed_ms).collect(),
                    speedup_over_best_fixed: best / dtp_ms.max(1e-12),
                };
                eprintln!(
                    "{graph} {name} K={k}: DTP (npw {}-{}) {:.4} ms over {} batches; waves rule (npw {}-{}) {:.4} ms; fixed {}; DTP / best fixed {:.2}x",
                    row.dtp_npw.0,
                    row.dtp_npw.1,
                    row.dtp_ms,
                    row.batches,
                    row.waves_npw.0,
                    row.waves_npw.1,
                    row.waves_ms,
                    row.fixed_ms.iter().map(|(f, ms)| format!("{f}: {ms:.4}")).collect::<Vec<_>>().join(", "),
                    row.speedup_over_best_fixed
                );
                rows.push(row);
            }
        }
    }
    let json = write_json(&a.out.join("dtp.json"), &rows)?;
    let md = write_text(&a.out.join("dtp.md"), &markdown(&rows, &a.fixed, &gpu.info().name))?;
    eprintln!("wrote {} and {}", json.display(), md.display());
    Ok(())
}

fn markdown(rows: &[Row], fixed: &[u32], device: &str) -> String {
    let mut s = format!(
        "| graph | sampler | K | batches | nodes | nnz | DTP npw | DTP ms | waves npw | waves ms |{} DTP speedup over best fixed |\n",
        fixed.iter().map(|f| format!(" fixed {f} ms |")).collect::<String>()
    );
    s += &format!("|---|---|---|---|---|---|---|---|---|---|{}---|\n", "---|".repeat(fixed.len()));
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {:.0} | {:.0} | {}-{} | {:.4} | {}-{} | {:.4} |{} {:.2}x |\n",
            r.graph,
            r.sampler,
            r.k,
            r.batches,
            r.mean_nodes,
            r.mean_nnz,
            r.dtp_npw.0,
            r.dtp_npw.1,
            r.dtp_ms,
            r.waves_npw.0,
            r.waves_npw.1,
            r.waves_ms,
            r.fixed_ms.iter().map(|(_, ms)| format!(" {ms:.4} |")).collect::<String>(),
            r.speedup_over_best_fixed
        );
    }
    s += &format!(
        "\nHP SpMM f32 on {device}; DTP = HP-SpMM's InEq. 5 (alpha 1) over the candidates 8-512, the launcher's default; waves = the earlier rule (two waves of resident warps, at least 32); times are the sums over the batches of the median of the repetitions (CUDA events).\n"
    );
    s
}
