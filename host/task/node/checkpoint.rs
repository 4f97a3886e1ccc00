//! A training checkpoint: `DIR/checkpoint.safetensors` with the parameters, Adam's moments,
//! the best-validation weights so far, and in its metadata the model ([`ModelMeta`]), the
//! optimiser settings, the step counter and the loss curve so far. `tcgnn train --resume DIR`
//! rebuilds the trainer from it and continues; on the CPU the resumed curve equals the
//! uninterrupted one exactly (dropout masks and Adam's bias correction are functions of the
//! step counter, and the CPU reductions do not depend on the thread count).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::task::node::train::{EpochRecord, TrainConfig};
use crate::task::saved::{ModelMeta, TensorFile, check_tensor_sizes, meta_map, read_meta};
use crate::tensor::Matrix;

pub struct Checkpoint {
    /// The model; `epoch` is the number of epochs completed.
    pub meta: ModelMeta,
    pub train: TrainConfig,
    /// Steps begun (the backend's counter).
    pub steps: u32,
    pub history: Vec<EpochRecord>,
    /// `param.NAME`, `m.NAME`, `v.NAME` for every parameter.
    pub state: Vec<(String, Matrix)>,
    /// The best-validation epoch so far and its weights (by parameter name).
    pub best: Option<(EpochRecord, Vec<(String, Matrix)>)>,
}

const FILE: &str = "checkpoint.safetensors";
const STEPS: &str = "tcgnn.steps";
const TRAIN: &str = "tcgnn.train";
const HISTORY: &str = "tcgnn.history";
const BEST: &str = "tcgnn.best";

impl Checkpoint {
    /// The checkpoint file in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE)
    }

    /// Writes `DIR/checkpoint.safetensors` atomically (creating `dir`): a kill part-way leaves
    /// the previous checkpoint.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.to_path_buf(), source: e })?;
        let mut meta: HashMap<String, String> = meta_map(&self.meta, "checkpoint")?;
        meta.insert(STEPS.into(), self.steps.to_string());
        meta.insert(TRAIN.into(), to_json(&self.train)?);
        meta.insert(HISTORY.into(), to_json(&self.history)?);
        let mut tensors = self.state.clone();
        if let Some((rec, weights)) = &self.best {
            meta.insert(BEST.into(), to_json(rec)?);
            tensors.extend(weights.iter().map(|(n, m)| (format!("best.{n}"), m.clone())));
        }
        let path = Self::path(dir);
        TensorFile::write(&path, &tensors, meta)?;
        Ok(path)
    }

    pub fn read(dir: &Path) -> Result<Self> {
        let path = Self::path(dir);
        if !path.is_file() {
            return Err(Error::BadFile { path, msg: "no checkpoint here (written by `tcgnn train --checkpoint DIR`)".into() });
        }
        Self::from_file(path.clone(), TensorFile::read(&path)?)
    }

    /// [`Checkpoint::read`] on the bytes of a checkpoint file; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        Self::from_file(path.to_path_buf(), TensorFile::parse(bytes, path)?)
    }

    fn from_file(path: PathBuf, f: TensorFile) -> Result<Self> {
        let meta = read_meta(&path, &f.metadata)?;
        let field = |key: &str| {
            f.metadata.get(key).ok_or_else(|| Error::BadFile { path: path.clone(), msg: format!("checkpoint metadata '{key}' is missing") })
        };
        let parse_err =
            |key: &str, e: &dyn std::fmt::Display| Error::BadFile { path: path.clone(), msg: format!("checkpoint metadata '{key}': {e}") };
        let steps: u32 = field(STEPS)?.parse().map_err(|e| parse_err(STEPS, &e))?;
        let train: TrainConfig = serde_json::from_str(field(TRAIN)?).map_err(|e| parse_err(TRAIN, &e))?;
        let history: Vec<EpochRecord> = serde_json::from_str(field(HISTORY)?).map_err(|e| parse_err(HISTORY, &e))?;
        if history.len() != meta.epoch {
            return Err(Error::BadFile { path, msg: format!("{} epochs in the loss curve, {} recorded", history.len(), meta.epoch) });
        }
        // The settings and counters go on into training: the CLI's rules for them apply here.
        let invalid = |msg: String| Error::BadFile { path: path.clone(), msg: format!("checkpoint metadata: {msg}") };
        if let Some(why) = train.problem() {
            return Err(invalid(why));
        }
        // At least one step an epoch, and room to go on counting (dropout seeds and Adam's bias
        // correction are functions of it).
        if (steps as usize) < meta.epoch || steps > u32::MAX / 2 {
            return Err(invalid(format!("step counter {steps} after {} epochs", meta.epoch)));
        }
        if let Some(why) = history.iter().enumerate().find_map(|(i, r)| r.problem(i + 1)) {
            return Err(invalid(why));
        }
        check_tensor_sizes(&path, &meta, &f.tensors)?;
        let best = match f.metadata.get(BEST) {
            None => None,
            Some(j) => {
                let rec: EpochRecord = serde_json::from_str(j).map_err(|e| parse_err(BEST, &e))?;
                if rec.epoch == 0 || rec.epoch > meta.epoch {
                    return Err(invalid(format!("best epoch {} of {} done", rec.epoch, meta.epoch)));
                }
                if let Some(why) = rec.problem(rec.epoch) {
                    return Err(invalid(why));
                }
                let weights = f.tensors.iter().filter_map(|(n, m)| n.strip_prefix("best.").map(|n| (n.to_string(), m.clone()))).collect();
                Some((rec, weights))
            }
        };
        let state = f.tensors.into_iter().filter(|(n, _)| !n.starts_with("best.")).collect();
        Ok(Checkpoint { meta, train, steps, history, state, best })
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Unsupported(format!("checkpoint metadata: {e}")))
}
