//! A trained link predictor on disk and `tcgnn predict MODEL GRAPH --pairs FILE`: the encoder's
//! weights in a safetensors file as node classification saves them, marked as a link model
//! (`tcgnn-link-model-1`) with the decoder in its metadata, so that node-classification
//! `predict` and link `predict` each refuse the other's files.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::embedding::EMBEDDING_NAME;
use crate::nn::input::{HostFeatures, InputFeatures};
use crate::nn::models;
use crate::ops::nn::Ops;
use crate::task::link::decoder::{Decoder, DecoderKind};
use crate::task::link::pairs::PairSet;
use crate::task::link::split::{Pair, symmetric_graph, undirected_edges};
use crate::task::saved::{FORMAT_KEY, ModelMeta, TensorFile, check_names, meta_map, read_meta};
use crate::tensor::Matrix;

/// The format tag of a link model file.
pub const LINK_FORMAT: &str = "tcgnn-link-model-1";
const LINK_KEY: &str = "tcgnn.link";

/// What a link model records besides the encoder's [`ModelMeta`] (whose `classes` is the
/// embedding width and whose accuracies are the validation and test AUC).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkMeta {
    pub decoder: DecoderKind,
    pub split_seed: u64,
}

pub struct SavedLinkModel {
    pub meta: ModelMeta,
    pub link: LinkMeta,
    pub weights: Vec<(String, Matrix)>,
}

impl SavedLinkModel {
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut md = meta_map(&self.meta, "link-model")?;
        md.insert(LINK_KEY.into(), serde_json::to_string(&self.link).map_err(|e| Error::Unsupported(format!("link metadata: {e}")))?);
        TensorFile::write(path, &self.weights, md)
    }

    /// Reads a link model; a file of another task is refused naming it.
    pub fn read(path: &Path) -> Result<Self> {
        let f = TensorFile::read(path)?;
        Self::from_file(path, f)
    }

    pub fn from_file(path: &Path, f: TensorFile) -> Result<Self> {
        let bad = |msg: String| Error::BadFile { path: path.to_path_buf(), msg };
        match f.metadata.get(FORMAT_KEY).map(String::as_str) {
            Some(LINK_FORMAT) => {}
            Some(other) => {
                return Err(bad(format!(
                    "a model of another task ({other}): `predict --pairs` takes a model saved by `tcgnn train --task link --save`"
                )));
            }
            None => return Err(bad("no tcgnn format tag: not a file written by `tcgnn train --save`".into())),
        }
        let meta = read_meta(path, &f.metadata)?;
        let link: LinkMeta = f
            .metadata
            .get(LINK_KEY)
            .ok_or_else(|| bad("no link-prediction metadata".into()))
            .and_then(|j| serde_json::from_str(j).map_err(|e| bad(format!("link metadata: {e}"))))?;
        Ok(SavedLinkModel { meta, link, weights: f.tensors })
    }
}

/// Whether the file's metadata marks a link model (node-classification `predict` refuses it).
pub fn is_link_model(metadata: &HashMap<String, String>) -> bool {
    metadata.get(FORMAT_KEY).map(String::as_str) == Some(LINK_FORMAT)
}

/// The scores (logits) of `pairs` (any order, each once, in range) under the saved model: the
/// encoder runs on `graph`'s undirected edges in both directions (the known graph: training
/// ran it on its training edges only), in evaluation mode. A model with a learnable input reads
/// its trained table (one row per node: the graph must have as many nodes as the one it was
/// trained on) and ignores `features`.
pub fn predict_pairs<B: Ops + 'static>(
    b: &Arc<B>,
    path: &Path,
    saved: &SavedLinkModel,
    features: &HostFeatures,
    graph: &Csr,
    pairs: &[Pair],
) -> Result<Vec<f32>> {
    let m = &saved.meta;
    let n = graph.n_rows();
    let bad = |msg: String| Error::BadFile { path: path.to_path_buf(), msg };
    let table = match m.learnable_input {
        true => {
            let t = saved
                .weights
                .iter()
                .find(|(name, _)| name == EMBEDDING_NAME)
                .map(|(_, t)| t)
                .ok_or_else(|| bad(format!("the learnable input '{EMBEDDING_NAME}' is missing")))?;
            if (t.rows, t.cols) != (n, m.features) {
                return Err(bad(format!(
                    "the learnable input is {} x {} (a row per node of the graph it was trained on, {} wide); this graph has {n} nodes",
                    t.rows, t.cols, m.features
                )));
            }
            Some(t)
        }
        false => None,
    };
    if table.is_none() && features.cols() != m.features {
        return Err(Error::BadFile {
            path: path.to_path_buf(),
            msg: format!("the model takes {} input features, the graph's node data has {}", m.features, features.cols()),
        });
    }
    if pairs.is_empty() {
        return Err(Error::Unsupported("no pairs to score".into()));
    }
    let mp = symmetric_graph(n, &undirected_edges(graph))?;
    let bk = &**b;
    let mut net = models::build(bk, &mp, m.features, m.classes, &m.model)?;
    let mut decoder = Decoder::new(bk, saved.link.decoder, n, m.classes, m.model.seed)?;
    let want: Vec<(String, (usize, usize))> =
        net.params().into_iter().chain(decoder.params()).map(|(name, p)| (name, B::shape(&p.value))).collect();
    check_names(path, &want, &saved.weights)?;
    let find = |name: &str| saved.weights.iter().find(|(n, _)| n == name).map(|(_, w)| w);
    for (name, p) in net.params().into_iter().chain(decoder.params()) {
        p.value = bk.upload(find(&name).expect("checked above"))?;
    }
    for (name, buf) in net.buffers() {
        let w = find(&name).ok_or_else(|| Error::BadFile { path: path.to_path_buf(), msg: format!("buffer '{name}' is missing") })?;
        *buf = bk.upload(w)?;
    }
    let mut input = match table {
        Some(t) => InputFeatures::learnable(bk, t)?,
        None => InputFeatures::for_model(bk, features, &m.model)?.with_half_features(bk, &m.model)?,
    };
    // The pattern sorts the pairs (and refuses repeats and ids out of range); scores are mapped
    // back to the caller's order.
    let mut set = PairSet::new(bk, n, pairs, &[])?;
    set.check_order(bk)?;
    let z = net.forward(bk, &mut input, false)?;
    decoder.score(bk, &mut set, z)?;
    let sorted = bk.download_edges(&set.scores, set.len())?;
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_unstable_by_key(|&i| pairs[i]);
    let mut out = vec![0f32; pairs.len()];
    for (k, &i) in order.iter().enumerate() {
        out[i] = sorted[k];
    }
    Ok(out)
}
