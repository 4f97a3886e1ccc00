//! `tcgnn predict MODEL GRAPH --out predictions.csv|.npy`: the class of every node from a model
//! saved by `tcgnn train --save`, with probabilities or a hidden layer's embeddings on request,
//! and the accuracy per mask where the graph has labels.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use tcgnn::gpu::Gpu;
use tcgnn::graph::npy::{NpyArray, NpyData, write_npy};
use tcgnn::graph::text::escaped;
use tcgnn::nn::{CpuBackend, CudaBackend};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::node::FeatureStorage;
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::task::node::predict::{Prediction, predict};
use tcgnn::task::saved::SavedModel;
use tcgnn::util::atomic::{AtomicFile, check_outputs};
use tcgnn::{Error, Result};

use super::train_cmd::Device;

#[derive(clap::Args)]
pub struct PredictArgs {
    /// A model file written by `tcgnn train --save`.
    pub model: PathBuf,
    /// The graph to predict on (as `tcgnn train` takes it); its node data must have the
    /// model's feature width.
    pub graph: String,
    /// Node data (.npz); default: NAME.npz beside the graph. A graph without node data is
    /// refused unless --synthetic-features is given.
    #[arg(long)]
    pub npz: Option<PathBuf>,
    /// Predict on the random features (and labels) `train` made for a graph without node data,
    /// from the model's seed: only meaningful for a model trained that way (timing, tests).
    #[arg(long)]
    pub synthetic_features: bool,
    /// Output: .csv (node, class[, probabilities or embedding columns]) or .npy (classes as
    /// int32; probabilities or embeddings as an n x width float32 array).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Write class probabilities instead of classes (.npy) / beside them (.csv).
    #[arg(long)]
    pub probabilities: bool,
    /// Write the node representations after hidden layer LAYER (0-based) instead.
    #[arg(long)]
    pub embeddings: Option<usize>,
    #[arg(long, value_enum, default_value = "auto")]
    pub device: Device,
    /// Arithmetic on the GPU (default: the one the model trained in; CPU: f32).
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,
    /// Score these node pairs ("u v" a line) with a link-prediction model (`train --task link
    /// --save`) instead of classifying nodes; --out is then a .csv of u,v,score,probability.
    #[arg(long)]
    pub pairs: Option<PathBuf>,
}

pub fn run(a: &PredictArgs) -> Result<()> {
    // Never over the model, the graph or the node data it reads.
    let mut inputs = tcgnn::task::node::data::input_files(&a.graph, a.npz.as_deref());
    inputs.push(a.model.clone());
    if let Some(pairs) = &a.pairs {
        inputs.push(pairs.clone());
    }
    let inputs: Vec<&std::path::Path> = inputs.iter().map(PathBuf::as_path).collect();
    check_outputs(&inputs, &[&a.out])?;
    if let Some(pairs) = &a.pairs {
        return crate::cli::predict_link::run(a, pairs);
    }
    let ext = a.out.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    if ext != "csv" && ext != "npy" {
        return Err(Error::Unsupported(format!("{}: --out must end in .csv or .npy", a.out.display())));
    }
    let saved = SavedModel::read(&a.model)?;
    let m = &saved.meta;
    // The node data as training prepared it (synthetic data from the same seed).
    let synth = SyntheticNodeData { features: m.features, classes: m.classes, seed: m.model.seed };
    let mut data = Dataset::load(&a.graph, a.npz.as_deref(), &synth)?;
    if data.synthetic && !a.synthetic_features {
        return Err(Error::Unsupported(format!(
            "{}: no node data (no --npz, and no .npz beside the graph): predictions on invented features mean nothing; give --npz FILE, or --synthetic-features to predict on the random features training made",
            escaped(&a.graph)
        )));
    }
    // The model's buffers at this graph's size, before any is allocated (the sizes come from
    // the file's metadata, checked against its tensors when it was read).
    let need = tcgnn::nn::models::estimate_bytes(&m.model, data.n(), data.graph.nnz(), m.features, m.classes)?;
    tcgnn::util::memory::check_host_alloc(
        need,
        &format!("{} {} {}x{} on {}", a.model.display(), m.model.model, m.model.layers, m.model.hidden, data.name),
    )?;
    if !m.raw_features && !data.synthetic && data.features.is_nonnegative() {
        data.features.normalize_rows();
    }
    data.store_features(FeatureStorage::Auto)?;
    let gpu = match a.device {
        Device::Cpu => None,
        Device::Gpu => Some(Gpu::probe()?),
        Device::Auto => Gpu::probe().ok(),
    };
    let trained = match m.precision.as_str() {
        "tf32" => Precision::Tf32,
        "f16" => Precision::F16,
        _ => Precision::F32,
    };
    let p: Prediction = match gpu {
        Some(gpu) => {
            let layout = tcgnn::nn::models::model_info(m.model.model)?.edge_layout;
            let b = Arc::new(CudaBackend::new(gpu, a.precision.unwrap_or(trained), Impl::Auto)?.with_edge_layout(layout));
            predict(&b, &a.model, &saved, &data, a.embeddings)?
        }
        None if m.precision == "f64" => predict(&Arc::new(CpuBackend::<f64>::new()), &a.model, &saved, &data, a.embeddings)?,
        None => predict(&Arc::new(CpuBackend::<f32>::new()), &a.model, &saved, &data, a.embeddings)?,
    };
    write_output(a, &ext, &p)?;
    println!(
        "{}: {} {}x{} (epoch {} of training on {}) on {}: {} nodes predicted into {}",
        a.model.display(),
        m.model.model,
        m.model.layers,
        m.model.hidden,
        m.epoch,
        escaped(&m.graph),
        escaped(&data.name),
        data.n(),
        a.out.display()
    );
    for (name, acc) in ["train", "validation", "test"].iter().zip(p.accuracy) {
        if let Some(acc) = acc {
            println!("  {name} accuracy {:.2}%", acc * 100.0);
        }
    }
    if m.graph == data.name && p.accuracy[2].is_some() {
        println!("  (training reported test {:.2}% for this epoch)", m.test_acc * 100.0);
    }
    Ok(())
}

fn write_output(a: &PredictArgs, ext: &str, p: &Prediction) -> Result<()> {
    let extra = match (&p.embeddings, a.probabilities) {
        (Some(e), _) => Some(e),
        (None, true) => Some(&p.probabilities),
        (None, false) => None,
    };
    let mut f = AtomicFile::create(&a.out)?;
    let io = |e| Error::Io { path: a.out.clone(), source: e };
    if ext == "npy" {
        let arr = match extra {
            Some(m) => NpyArray { shape: vec![m.rows, m.cols], data: NpyData::F32(m.data.clone()) },
            None => NpyArray { shape: vec![p.classes.len()], data: NpyData::I32(p.classes.iter().map(|&c| c as i32).collect()) },
        };
        f.write_all(&write_npy(&arr)).map_err(io)?;
    } else {
        let cols = extra.map_or(0, |m| m.cols);
        let prefix = if p.embeddings.is_some() { "e" } else { "p" };
        let header: Vec<String> =
            ["node".to_string(), "class".to_string()].into_iter().chain((0..cols).map(|c| format!("{prefix}{c}"))).collect();
        writeln!(f, "{}", header.join(",")).map_err(io)?;
        for (node, class) in p.classes.iter().enumerate() {
            write!(f, "{node},{class}").map_err(io)?;
            if let Some(m) = extra {
                for v in &m.data[node * m.cols..(node + 1) * m.cols] {
                    write!(f, ",{v}").map_err(io)?;
                }
            }
            writeln!(f).map_err(io)?;
        }
    }
    f.commit()
}
