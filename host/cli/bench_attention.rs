//! `tcgnn bench attention`: one attention layer, fused against the unfused ops, forward alone
//! and forward + backward, in one process on the same inputs. AGNN ([`tcgnn::ops::nn::fused_attention`]
//! against row-normalise, SDDMM, edge softmax, SpMM and the backward's SDDMM, softmax backward,
//! transposes and three SpMMs) on the GPU backend the AGNN model trains with (edge values in CSR
//! order); GAT (`--model gat`: [`tcgnn::ops::nn::gat_attention`] against the per-head logits,
//! softmax and SpMM), a K -> heads x K/heads layer with its transform, training mode without
//! attention dropout.

use std::path::PathBuf;

use tcgnn::bench::suite::standard_graphs;
use tcgnn::bench::train::write_json;
use tcgnn::gpu::Gpu;
use tcgnn::graph::source;
use tcgnn::nn::agnn_conv::{AgnnConv, AgnnGraph, loops_pattern};
use tcgnn::nn::gat_conv::{GatConv, GatGraph, GatShape};
use tcgnn::nn::operand::Operand;
use tcgnn::nn::{Backend, CudaBackend, EdgeLayout};
use tcgnn::ops::{Impl, Precision};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

#[derive(clap::Args)]
pub struct BenchAttentionArgs {
    /// Graphs (paths, dataset names, rmat:SCALE:EF[:SEED][:relabel]); with --suite, the
    /// standard SpMM suite is added. Self-loops are added (AGNN's A + I).
    pub graphs: Vec<String>,
    #[arg(long)]
    pub suite: bool,
    /// Feature widths (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "32,64,128")]
    pub k: Vec<usize>,
    #[arg(long, value_enum, default_value = "f16")]
    pub precision: Precision,
    /// The layer: agnn, or gat (`--heads` heads of K / heads columns, concatenated).
    #[arg(long, value_enum, default_value_t = AttentionModel::Agnn)]
    pub model: AttentionModel,
    #[arg(long, default_value_t = 8)]
    pub heads: usize,
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// AGNN in f16 at K = 32: rows shorter than this on the tensor-core kernels, on every graph
    /// (at most 256; 0: all on the CUDA-core kernels, as every other width and precision;
    /// default: the library's choice).
    #[arg(long)]
    pub tc_row_max: Option<u32>,
    /// Folder for attention.json.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AttentionModel {
    Agnn,
    Gat,
}

impl AttentionModel {
    /// The registry's name of the model whose layer this is (the reports' `model`).
    fn name(self) -> &'static str {
        match self {
            AttentionModel::Agnn => tcgnn::nn::models::agnn::INFO.name,
            AttentionModel::Gat => tcgnn::nn::models::gat::INFO.name,
        }
    }
}

#[derive(serde::Serialize)]
struct Row {
    model: String,
    graph: String,
    nodes: usize,
    /// Edges of A + I.
    edges: usize,
    k: usize,
    precision: String,
    unfused_forward_ms: f64,
    fused_forward_ms: f64,
    unfused_step_ms: f64,
    fused_step_ms: f64,
}

/// Widths above this are refused up front (the layer holds several N x K matrices).
const MAX_K: usize = 4096;

pub fn run(a: &BenchAttentionArgs) -> tcgnn::Result<()> {
    if a.k.is_empty() || a.k.iter().any(|&k| k == 0 || k > MAX_K) || a.reps == 0 {
        return Err(tcgnn::Error::Unsupported(format!(
            "bench attention: --k needs widths in 1..={MAX_K} and --reps >= 1 (got --k {:?}, --reps {})",
            a.k, a.reps
        )));
    }
    if a.model == AttentionModel::Gat
        && (a.heads == 0 || a.k.iter().any(|&k| k % a.heads != 0 || !GatConv::<CudaBackend>::fuses(a.heads, k / a.heads, true)))
    {
        return Err(tcgnn::Error::Unsupported(format!(
            "bench attention --model gat: every --k must split into --heads {} heads the fused kernels take (at most 32 heads of at most 32 columns; got --k {:?})",
            a.heads, a.k
        )));
    }
    if a.tc_row_max.is_some_and(|r| r > tcgnn::ops::nn::row_split::ROW_LONG_MIN) {
        return Err(tcgnn::Error::Unsupported(format!(
            "bench attention: --tc-row-max {} (at most {}: longer rows are the CUDA-core kernels' segments)",
            a.tc_row_max.unwrap_or(0),
            tcgnn::ops::nn::row_split::ROW_LONG_MIN
        )));
    }
    let gpu = Gpu::probe()?;
    let mut graphs = a.graphs.clone();
    if a.suite {
        graphs.extend(standard_graphs());
    }
    if graphs.is_empty() {
        return Err(tcgnn::Error::Unsupported("no graphs: name some or pass --suite".into()));
    }
    let mut b = CudaBackend::new(gpu.clone(), a.precision, Impl::Auto)?.with_edge_layout(EdgeLayout::Csr);
    if let Some(row_max) = a.tc_row_max {
        b = b.with_attention_tc(row_max);
    }
    println!(
        "{:<28} {:>9} {:>10} {:>4} | {:>9} {:>9} {:>6} | {:>9} {:>9} {:>6}",
        "graph", "nodes", "edges", "K", "fwd", "fused", "x", "fwd+bwd", "fused", "x"
    );
    let mut rows = Vec::new();
    for spec in &graphs {
        let name = source::display_name(spec);
        let s = match source::load(spec).and_then(|g| loops_pattern(&g)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipping {name}: {e}");
                continue;
            }
        };
        let (n, nnz) = (s.n_rows(), s.nnz());
        if s.n_rows() != s.n_cols() {
            eprintln!("skipping {name}: {} x {} is not square", s.n_rows(), s.n_cols());
            continue;
        }
        let (agnn, gat) = match a.model {
            AttentionModel::Agnn => (Some(AgnnGraph::from_pattern(&b, s, None)?), None),
            AttentionModel::Gat => (None, Some(GatGraph::from_pattern(&b, s, None)?)),
        };
        for &k in &a.k {
            let h = b.upload(&Matrix::random(n, k, 1))?;
            let dout = b.upload(&Matrix::random(n, k, 2))?;
            let mut dh = b.matrix(n, k)?;
            let mut time = |fused: bool, backward: bool| -> tcgnn::Result<f64> {
                let t = if let Some(g) = &agnn {
                    let mut conv = if fused { AgnnConv::new(&b, g, n, k)? } else { AgnnConv::new_unfused(&b, g, n, k)? };
                    b.time(a.warmup, a.reps, &mut || {
                        conv.forward(&b, g, &h)?;
                        if backward {
                            conv.backward(&b, g, &h, &dout, &mut dh)?;
                        }
                        Ok(())
                    })?
                } else {
                    let g = gat.as_ref().expect("one of the two graphs is built");
                    let (heads, dim, mut rng) = (a.heads, k / a.heads, SplitMix64::new(3));
                    let shape = GatShape { rows: n, fan_in: k, heads, dim, concat: true };
                    let conv = if fused { GatConv::new } else { GatConv::new_unfused };
                    let mut conv = conv(&b, g, shape, 0.0, 4, &mut rng)?;
                    let x = Operand::Dense(&h);
                    b.time(a.warmup, a.reps, &mut || {
                        conv.forward(&b, g, &x, true)?;
                        if backward {
                            conv.backward(&b, g, &x, &dout, Some(&mut dh), false)?;
                        }
                        Ok(())
                    })?
                };
                Ok(t.median_ms)
            };
            let r = Row {
                model: a.model.name().to_string(),
                graph: name.clone(),
                nodes: n,
                edges: nnz,
                k,
                precision: format!("{:?}", a.precision).to_lowercase(),
                unfused_forward_ms: time(false, false)?,
                fused_forward_ms: time(true, false)?,
                unfused_step_ms: time(false, true)?,
                fused_step_ms: time(true, true)?,
            };
            println!(
                "{:<28} {:>9} {:>10} {:>4} | {:>9.4} {:>9.4} {:>6.2} | {:>9.4} {:>9.4} {:>6.2}",
                r.graph,
                n,
                nnz,
                k,
                r.unfused_forward_ms,
                r.fused_forward_ms,
                r.unfused_forward_ms / r.fused_forward_ms,
                r.unfused_step_ms,
                r.fused_step_ms,
                r.unfused_step_ms / r.fused_step_ms
            );
            rows.push(r);
        }
    }
    let file = match a.model {
        AttentionModel::Agnn => "attention.json",
        AttentionModel::Gat => "attention_gat.json",
    };
    let path = write_json(&a.out.join(file), &rows)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
