//! A link-prediction training checkpoint: `DIR/checkpoint.safetensors` with the encoder's and
//! the decoder's parameters, Adam's moments, the encoder's buffers, the best-validation weights
//! so far, and in its metadata the encoder ([`ModelMeta`], `classes` = the embedding width),
//! the task's settings ([`LinkConfig`], the split's seed), the step counter and the epochs so
//! far. Tagged `tcgnn-link-checkpoint-1`: node classification's `--resume` refuses it and this
//! refuses theirs. `tcgnn train --task link --resume DIR` continues; the resumed curve is the
//! uninterrupted one (the negatives are a function of (seed, epoch), Adam's bias correction
//! and dropout of the step counter).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::task::link::train::{LinkConfig, LinkEpoch};
use crate::task::saved::{FORMAT_KEY, ModelMeta, TensorFile, meta_map, read_meta};
use crate::tensor::Matrix;

pub struct LinkCheckpoint {
    /// The encoder; `epoch` is the number of epochs completed.
    pub meta: ModelMeta,
    pub link: LinkConfig,
    pub split_seed: u64,
    /// Steps begun (the backend's counter).
    pub steps: u32,
    pub history: Vec<LinkEpoch>,
    /// `param.NAME`, `m.NAME`, `v.NAME` for every parameter, `buffer.NAME` for every buffer.
    pub state: Vec<(String, Matrix)>,
    /// The best-validation epoch so far and its weights (by parameter name).
    pub best: Option<(LinkEpoch, Vec<(String, Matrix)>)>,
}

const FILE: &str = "checkpoint.safetensors";
const FORMAT: &str = "link-checkpoint";
const LINK: &str = "tcgnn.link";
const SPLIT_SEED: &str = "tcgnn.split_seed";
const STEPS: &str = "tcgnn.steps";
const HISTORY: &str = "tcgnn.history";
const BEST: &str = "tcgnn.best";

impl LinkCheckpoint {
    /// The checkpoint file in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE)
    }

    /// Writes `DIR/checkpoint.safetensors` atomically (creating `dir`).
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.to_path_buf(), source: e })?;
        let mut meta: HashMap<String, String> = meta_map(&self.meta, FORMAT)?;
        meta.insert(LINK.into(), to_json(&self.link)?);
        meta.insert(SPLIT_SEED.into(), self.split_seed.to_string());
        meta.insert(STEPS.into(), self.steps.to_string());
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

    /// Reads `DIR/checkpoint.safetensors`, refusing a file of another task or with metadata
    /// that cannot go on into training.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = Self::path(dir);
        if !path.is_file() {
            return Err(Error::BadFile { path, msg: "no checkpoint here (written by `tcgnn train --task link --checkpoint DIR`)".into() });
        }
        let f = TensorFile::read(&path)?;
        let bad = |msg: String| Error::BadFile { path: path.clone(), msg };
        let want = format!("tcgnn-{FORMAT}-1");
        match f.metadata.get(FORMAT_KEY) {
            Some(t) if *t == want => {}
            Some(t) => {
                return Err(bad(format!(
                    "a checkpoint of another task ({t}); --task link resumes one written by --task link --checkpoint"
                )));
            }
            None => return Err(bad("no tcgnn format tag: not a checkpoint written by tcgnn".into())),
        }
        let meta = read_meta(&path, &f.metadata)?;
        let field = |key: &str| f.metadata.get(key).ok_or_else(|| bad(format!("checkpoint metadata '{key}' is missing")));
        let parse = |key: &str, e: &dyn std::fmt::Display| bad(format!("checkpoint metadata '{key}': {e}"));
        let link: LinkConfig = serde_json::from_str(field(LINK)?).map_err(|e| parse(LINK, &e))?;
        let split_seed: u64 = field(SPLIT_SEED)?.parse().map_err(|e| parse(SPLIT_SEED, &e))?;
        let steps: u32 = field(STEPS)?.parse().map_err(|e| parse(STEPS, &e))?;
        let history: Vec<LinkEpoch> = serde_json::from_str(field(HISTORY)?).map_err(|e| parse(HISTORY, &e))?;
        if history.len() != meta.epoch || history.iter().enumerate().any(|(i, e)| e.epoch != i + 1) {
            return Err(bad(format!("{} epochs in the curve (numbered 1..), {} recorded", history.len(), meta.epoch)));
        }
        if let Some(e) = history.iter().find(|e| !e.loss.is_finite()) {
            return Err(bad(format!("epoch {}: loss {}", e.epoch, e.loss)));
        }
        // One step an epoch; room to go on counting (Adam's bias correction and dropout read it).
        if (steps as usize) < meta.epoch || steps > u32::MAX / 2 {
            return Err(bad(format!("checkpoint metadata: step counter {steps} after {} epochs", meta.epoch)));
        }
        if !(link.neg_ratio.is_finite() && link.neg_ratio > 0.0 && link.neg_ratio <= 1000.0 && link.lr.is_finite() && link.lr > 0.0) {
            return Err(bad(format!("checkpoint metadata: link settings out of range ({link:?})")));
        }
        let best = match f.metadata.get(BEST) {
            None => None,
            Some(j) => {
                let rec: LinkEpoch = serde_json::from_str(j).map_err(|e| parse(BEST, &e))?;
                if rec.epoch == 0 || rec.epoch > meta.epoch {
                    return Err(bad(format!("checkpoint metadata: best epoch {} of {} done", rec.epoch, meta.epoch)));
                }
                let weights = f.tensors.iter().filter_map(|(n, m)| n.strip_prefix("best.").map(|n| (n.to_string(), m.clone()))).collect();
                Some((rec, weights))
            }
        };
        let state = f.tensors.into_iter().filter(|(n, _)| !n.starts_with("best.")).collect();
        Ok(LinkCheckpoint { meta, link, split_seed, steps, history, state, best })
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Unsupported(format!("checkpoint metadata: {e}")))
}
