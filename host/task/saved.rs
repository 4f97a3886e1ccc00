//! Trained models and checkpoints on disk, in safetensors (the format candle and Hugging Face
//! use): named f32 tensors plus string metadata. A model file holds the weights of one epoch
//! with the model config and the data's shape in its metadata, so `predict` can rebuild the
//! model and refuse a graph it does not fit; a checkpoint adds Adam's moments (`m.NAME`,
//! `v.NAME`), the step counter, the seeds and the loss curve so far, so `--resume` continues
//! the same run.
//!
//! Files are written atomically (temporary name, then rename) and read with every size checked
//! against the file before a tensor is built: a corrupt or truncated file is an error naming it.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::error::{Error, Result};
use crate::nn::models::{MAX_WIDTH, ModelConfig, model_info};
use crate::tensor::Matrix;
use crate::util::atomic::write_atomic;

/// What a model file records besides its weights.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelMeta {
    pub model: ModelConfig,
    /// Input feature width and classes the weights were trained for.
    pub features: usize,
    pub classes: usize,
    /// How the node features were prepared (`predict` prepares them the same way).
    pub raw_features: bool,
    /// The graph it was trained on and the epoch these weights are from (1-based).
    pub graph: String,
    pub epoch: usize,
    /// Validation and test accuracy reported for that epoch (fractions).
    pub val_acc: f64,
    pub test_acc: f64,
    /// The precision it trained in ("f32", "tf32", "f16", "f64").
    pub precision: String,
    /// The input is a learnable table (`features` wide, one row per node of the graph it was
    /// trained on), saved as the tensor `emb.weight` ([`crate::nn::embedding`]); else the node
    /// features. Absent in files from before it existed: features.
    #[serde(default)]
    pub learnable_input: bool,
}

/// Named tensors and their metadata, as read from or written to a file.
pub struct TensorFile {
    pub tensors: Vec<(String, Matrix)>,
    pub metadata: HashMap<String, String>,
}

const META_KEY: &str = "tcgnn.model";
/// The metadata key naming what a file is (`tcgnn-model-1`, `tcgnn-link-model-1`, ...).
pub const FORMAT_KEY: &str = "tcgnn.format";

impl TensorFile {
    pub fn get(&self, name: &str) -> Option<&Matrix> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, m)| m)
    }

    /// Writes `tensors` with `metadata` to `path` (atomically).
    pub fn write(path: &Path, tensors: &[(String, Matrix)], metadata: HashMap<String, String>) -> Result<()> {
        let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, m)| m.data.iter().flat_map(|v| v.to_le_bytes()).collect()).collect();
        let views = tensors
            .iter()
            .zip(&bytes)
            .map(|((name, m), b)| Ok((name.as_str(), TensorView::new(Dtype::F32, vec![m.rows, m.cols], b).map_err(|e| st_error(path, e))?)))
            .collect::<Result<Vec<_>>>()?;
        let out = safetensors::serialize(views, Some(metadata)).map_err(|e| st_error(path, e))?;
        write_atomic(path, &out)
    }

    /// Reads every tensor of `path` (f32, rank 1 or 2) with its metadata.
    pub fn read(path: &Path) -> Result<Self> {
        let io = |e| Error::Io { path: path.to_path_buf(), source: e };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len < 8 {
            return Err(bad(path, format!("{len} bytes is too short for a safetensors file (truncated?)")));
        }
        let bytes = std::fs::read(path).map_err(io)?;
        Self::parse(&bytes, path)
    }

    /// [`TensorFile::read`] on the bytes of a file; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        if bytes.len() < 8 {
            return Err(bad(path, format!("{} bytes is too short for a safetensors file (truncated?)", bytes.len())));
        }
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| st_error(path, e))?;
        let metadata = header.metadata().clone().unwrap_or_default();
        let st = SafeTensors::deserialize(bytes).map_err(|e| st_error(path, e))?;
        let mut tensors = Vec::new();
        for (name, view) in st.tensors() {
            if view.dtype() != Dtype::F32 {
                return Err(bad(path, format!("tensor '{name}' is {:?}; tcgnn files hold f32", view.dtype())));
            }
            let (rows, cols) = match *view.shape() {
                [n] => (1, n),
                [r, c] => (r, c),
                ref s => return Err(bad(path, format!("tensor '{name}' has shape {s:?}; want a vector or a matrix"))),
            };
            let data: Vec<f32> = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            if data.iter().any(|v| !v.is_finite()) {
                return Err(bad(path, format!("tensor '{name}' holds NaN or infinite values")));
            }
            tensors.push((name, Matrix::from_vec(rows, cols, data)?));
        }
        // safetensors orders by name; keep the writer's order for parameters (sorted too).
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(TensorFile { tensors, metadata })
    }
}

/// A model file: weights and [`ModelMeta`].
pub struct SavedModel {
    pub meta: ModelMeta,
    pub weights: Vec<(String, Matrix)>,
}

impl SavedModel {
    pub fn write(&self, path: &Path) -> Result<()> {
        TensorFile::write(path, &self.weights, meta_map(&self.meta, "model")?)
    }

    pub fn read(path: &Path) -> Result<Self> {
        Self::from_file(path, TensorFile::read(path)?)
    }

    /// [`SavedModel::read`] on the bytes of a file; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        Self::from_file(path, TensorFile::parse(bytes, path)?)
    }

    fn from_file(path: &Path, f: TensorFile) -> Result<Self> {
        // A model of another task (a link predictor) holds an encoder only: refused here.
        if let Some(format) = f.metadata.get(FORMAT_KEY)
            && format != "tcgnn-model-1"
            && format != "tcgnn-checkpoint-1"
        {
            return Err(bad(
                path,
                format!(
                    "a '{format}' file, not a node-classification model (a link-prediction model scores pairs: `tcgnn predict MODEL GRAPH --pairs FILE`)"
                ),
            ));
        }
        let meta = read_meta(path, &f.metadata)?;
        if meta.learnable_input {
            return Err(bad(path, "a model with a learnable input: node classification takes node features".into()));
        }
        check_tensor_sizes(path, &meta, &f.tensors)?;
        Ok(SavedModel { meta, weights: f.tensors })
    }

    /// Refuses a graph whose features or classes the weights do not fit.
    pub fn check_data(&self, path: &Path, features: usize, classes: usize) -> Result<()> {
        if self.meta.features != features {
            return Err(bad(path, format!("the model takes {} input features, the graph's node data has {features}", self.meta.features)));
        }
        if classes > self.meta.classes {
            return Err(bad(path, format!("the model predicts {} classes, the graph's labels have {classes}", self.meta.classes)));
        }
        Ok(())
    }
}

/// Metadata of a model or checkpoint file.
pub fn meta_map(meta: &ModelMeta, format: &str) -> Result<HashMap<String, String>> {
    let json = serde_json::to_string(meta).map_err(|e| Error::Unsupported(format!("model metadata: {e}")))?;
    Ok(HashMap::from([(META_KEY.to_string(), json), (FORMAT_KEY.to_string(), format!("tcgnn-{format}-1"))]))
}

/// The [`ModelMeta`] of a file's metadata.
pub fn read_meta(path: &Path, metadata: &HashMap<String, String>) -> Result<ModelMeta> {
    let json = metadata
        .get(META_KEY)
        .ok_or_else(|| bad(path, "no tcgnn model metadata: not a file written by `tcgnn train --save` or `--checkpoint`".into()))?;
    let meta: ModelMeta = serde_json::from_str(json).map_err(|e| bad(path, format!("model metadata: {e}")))?;
    model_info(meta.model.model)?;
    crate::nn::models::check(&meta.model).map_err(|e| bad(path, e.to_string()))?;
    Ok(meta)
}

/// The sizes `meta` declares must be held by the file's tensors: every model's weights take
/// at least `features x first-layer columns` and `hidden x classes` values (one layer:
/// `features x classes`), so a metadata that declares more than the file holds is refused
/// before a model of that size is built (its shapes are compared exactly once built).
pub fn check_tensor_sizes(path: &Path, meta: &ModelMeta, tensors: &[(String, Matrix)]) -> Result<()> {
    let c = &meta.model;
    if meta.features == 0 || meta.classes == 0 || meta.features > MAX_WIDTH || meta.classes > MAX_WIDTH {
        return Err(bad(
            path,
            format!("metadata declares {} features and {} classes: need 1..={MAX_WIDTH} of each", meta.features, meta.classes),
        ));
    }
    if meta.epoch == 0 {
        return Err(bad(path, "metadata declares epoch 0: weights come from a completed epoch (1 or later)".into()));
    }
    for (what, a) in [("validation", meta.val_acc), ("test", meta.test_acc)] {
        if !(0.0..=1.0).contains(&a) {
            return Err(bad(path, format!("metadata declares {what} accuracy {a}, outside [0, 1]")));
        }
    }
    if !["f32", "tf32", "f16", "f64"].contains(&meta.precision.as_str()) {
        return Err(bad(path, format!("metadata declares precision '{}': f32, tf32, f16 or f64", show_meta(&meta.precision))));
    }
    let (f, h, k) = (meta.features as u128, c.hidden as u128, meta.classes as u128);
    let least = if c.layers == 1 { f * k } else { f * c.first_product_columns() as u128 + h * k };
    let held: u128 = tensors.iter().map(|(_, m)| m.rows as u128 * m.cols as u128).sum();
    if least > held {
        return Err(bad(
            path,
            format!(
                "metadata declares a {} of {} features, {} layers x {} hidden ({} heads) and {} classes: at least {least} weights, but the file holds {held}",
                c.model, meta.features, c.layers, c.hidden, c.heads, meta.classes
            ),
        ));
    }
    Ok(())
}

/// A string from a file's metadata for a message: control characters escaped, shortened.
fn show_meta(s: &str) -> String {
    crate::graph::text::show(s.as_bytes())
}

/// Every tensor the model wants is in `saved` with its shape.
pub fn check_names(path: &Path, want: &[(String, (usize, usize))], saved: &[(String, Matrix)]) -> Result<()> {
    for (name, (r, c)) in want {
        match saved.iter().find(|(n, _)| n == name) {
            None => return Err(bad(path, format!("tensor '{name}' is missing (the file is for another model shape)"))),
            Some((_, m)) if (m.rows, m.cols) != (*r, *c) => {
                return Err(bad(path, format!("tensor '{name}' is {}x{}, the model wants {r}x{c}", m.rows, m.cols)));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn bad(path: &Path, msg: String) -> Error {
    Error::BadFile { path: path.to_path_buf(), msg }
}

fn st_error(path: &Path, e: safetensors::SafeTensorError) -> Error {
    bad(path, format!("not a valid safetensors file: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::models::{MODELS, build};
    use crate::ops::backend::cpu::CpuBackend;
    use crate::ops::nn::Ops;

    fn zero_tensors<B: Ops + 'static>(net: &mut dyn crate::nn::models::Model<B>) -> Vec<(String, Matrix)> {
        let mut t: Vec<(String, Matrix)> =
            net.params().into_iter().map(|(n, p)| (n, B::shape(&p.value))).map(|(n, (r, c))| (n, Matrix::zeros(r, c))).collect();
        t.extend(net.buffers().into_iter().map(|(n, m)| (n, B::shape(m))).map(|(n, (r, c))| (n, Matrix::zeros(r, c))));
        t
    }

    /// The bound [`check_tensor_sizes`] asks of a file holds for every model as built: a
    /// genuine file is never refused by it.
    #[test]
    fn tensor_size_bound_holds_for_every_model() {
        let t: Vec<(u32, u32, f32)> = (0..12u32).flat_map(|i| [(i, (i + 1) % 12, 1.0), ((i + 1) % 12, i, 1.0)]).collect();
        let g = crate::graph::Csr::from_triplets(12, 12, &t).unwrap();
        let b = CpuBackend::<f32>::new();
        for info in MODELS {
            for layers in 1..=3 {
                let cfg = ModelConfig { layers, hidden: 4, ..info.defaults };
                let Ok(mut net) = build(&b, &g, 5, 3, &cfg) else { continue };
                let tensors = zero_tensors::<CpuBackend<f32>>(net.as_mut());
                let meta = ModelMeta {
                    model: cfg,
                    features: 5,
                    classes: 3,
                    raw_features: false,
                    graph: "g".into(),
                    epoch: 1,
                    val_acc: 0.5,
                    test_acc: 0.5,
                    precision: "f32".into(),
                    learnable_input: false,
                };
                check_tensor_sizes(Path::new("m"), &meta, &tensors).unwrap_or_else(|e| panic!("{} {layers} layers: {e}", info.name));
                let mut big = meta.clone();
                big.classes = 1 << 20;
                assert!(check_tensor_sizes(Path::new("m"), &big, &tensors).is_err(), "{}", info.name);
            }
        }
    }
}
