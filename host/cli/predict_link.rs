//! `tcgnn predict MODEL GRAPH --pairs FILE --out scores.csv`: the score of every given pair
//! under a link-prediction model saved by `tcgnn train --task link --save` (the encoder runs on
//! GRAPH's edges); a model of another task is refused.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use tcgnn::gpu::Gpu;
use tcgnn::nn::{CpuBackend, CudaBackend, EdgeLayout};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::link::predict::{SavedLinkModel, predict_pairs};
use tcgnn::task::node::FeatureStorage;
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::util::atomic::AtomicFile;
use tcgnn::{Error, Result};

use super::predict_cmd::PredictArgs;
use super::train_cmd::Device;

pub fn run(a: &PredictArgs, pairs_file: &Path) -> Result<()> {
    let ext = a.out.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    if ext != "csv" {
        return Err(Error::Unsupported(format!("{}: --out must end in .csv with --pairs (u,v,score,probability)", a.out.display())));
    }
    if a.probabilities || a.embeddings.is_some() {
        return Err(Error::Unsupported(
            "--probabilities / --embeddings are for node classification; --pairs writes scores and probabilities".into(),
        ));
    }
    let saved = SavedLinkModel::read(&a.model)?;
    let m = &saved.meta;
    let synth = SyntheticNodeData { features: m.features, classes: 8, seed: m.model.seed };
    let mut data = Dataset::load(&a.graph, a.npz.as_deref(), &synth)?;
    if !m.raw_features && !data.synthetic && data.features.is_nonnegative() {
        data.features.normalize_rows();
    }
    data.store_features(FeatureStorage::Auto)?;
    let pairs = read_pairs(pairs_file, data.n())?;
    let gpu = match a.device {
        Device::Cpu => None,
        Device::Gpu => Some(Gpu::probe()?),
        Device::Auto => Gpu::probe().ok(),
    };
    let scores = match gpu {
        Some(g) => {
            let b = Arc::new(CudaBackend::new(g, a.precision.unwrap_or(Precision::F32), Impl::Auto)?.with_edge_layout(EdgeLayout::Csr));
            predict_pairs(&b, &a.model, &saved, &data.features, &data.graph, &pairs)?
        }
        None => predict_pairs(&Arc::new(CpuBackend::<f32>::new()), &a.model, &saved, &data.features, &data.graph, &pairs)?,
    };
    let mut f = AtomicFile::create(&a.out)?;
    let io = |e| Error::Io { path: a.out.clone(), source: e };
    writeln!(f, "u,v,score,probability").map_err(io)?;
    for (p, s) in pairs.iter().zip(&scores) {
        writeln!(f, "{},{},{s},{}", p[0], p[1], 1.0 / (1.0 + (-s).exp())).map_err(io)?;
    }
    f.commit()?;
    println!(
        "{}: {} {}x{} -> {} link predictor (epoch {} of training on {}, validation AUC {:.4}) on {}: {} pairs scored into {}",
        a.model.display(),
        m.model.model,
        m.model.layers,
        m.model.hidden,
        m.classes,
        m.epoch,
        m.graph,
        m.val_acc,
        data.name,
        pairs.len(),
        a.out.display()
    );
    Ok(())
}

/// Reads a pairs file ("u v" or "u,v" a line, `#` comments).
pub fn read_pairs(path: &Path, n: usize) -> Result<Vec<[u32; 2]>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.to_path_buf(), source: e })?;
    let mut out = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let bad = |msg: String| Error::Unsupported(format!("{}:{}: {msg}", path.display(), i + 1));
        let mut it = l.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| !t.is_empty());
        let (Some(u), Some(v), None) = (it.next(), it.next(), it.next()) else {
            return Err(bad(format!("expected a pair 'u v', got '{l}'")));
        };
        let (Ok(u), Ok(v)) = (u.parse::<u32>(), v.parse::<u32>()) else {
            return Err(bad(format!("'{l}' is not two node ids")));
        };
        if u as usize >= n || v as usize >= n {
            return Err(bad(format!("pair ({u}, {v}) is out of range: the graph has {n} nodes")));
        }
        if let Some(first) = seen.insert([u, v], i + 1) {
            return Err(bad(format!("pair ({u}, {v}) is given twice (also line {first})")));
        }
        out.push([u, v]);
    }
    if out.is_empty() {
        return Err(Error::Unsupported(format!("{}: no pairs", path.display())));
    }
    Ok(out)
}
