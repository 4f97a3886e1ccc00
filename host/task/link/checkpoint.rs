//! A link-prediction training checkpoint: `DIR/checkpoint.safetensors` with the encoder's and
//! the decoder's parameters, Adam's moments, the encoder's buffers, the best-validation weights
//! so far, and in its metadata the encoder ([`ModelMeta`], `classes` = the embedding width),
//! the task's settings ([`LinkConfig`], the split's seed), the step counter and the epochs so
//! far (the layout every task's checkpoint shares, [`crate::task::checkpoint`]). Tagged
//! `tcgnn-link-checkpoint-1`: node classification's `--resume` refuses it and this
//! refuses theirs. `tcgnn train --task link --resume DIR` continues; the resumed curve is the
//! uninterrupted one (the negatives are a function of (seed, epoch), Adam's bias correction
//! and dropout of the step counter).

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::task::checkpoint::{self as layout, Parts, Reader, to_json};
use crate::task::link::train::{LinkConfig, LinkEpoch};
use crate::task::saved::{FORMAT_KEY, ModelMeta, read_meta};
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

const FORMAT: &str = "link-checkpoint";
const LINK: &str = "tcgnn.link";
const SPLIT_SEED: &str = "tcgnn.split_seed";

impl LinkCheckpoint {
    /// The checkpoint file in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        layout::path(dir)
    }

    /// Writes `DIR/checkpoint.safetensors` atomically (creating `dir`).
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let parts = Parts {
            meta: &self.meta,
            format: FORMAT,
            steps: self.steps,
            history: &self.history,
            state: &self.state,
            best: self.best.as_ref(),
        };
        layout::write(dir, parts, vec![(LINK, to_json(&self.link)?), (SPLIT_SEED, self.split_seed.to_string())])
    }

    /// Reads `DIR/checkpoint.safetensors`, refusing a file of another task or with metadata
    /// that cannot go on into training.
    pub fn read(dir: &Path) -> Result<Self> {
        let f = Reader::open(dir, "tcgnn train --task link --checkpoint DIR")?;
        let want = format!("tcgnn-{FORMAT}-1");
        match f.file.metadata.get(FORMAT_KEY) {
            Some(t) if *t == want => {}
            Some(t) => {
                return Err(
                    f.bad(format!("a checkpoint of another task ({t}); --task link resumes one written by --task link --checkpoint"))
                );
            }
            None => return Err(f.bad("no tcgnn format tag: not a checkpoint written by tcgnn".into())),
        }
        let meta = read_meta(&f.path, &f.file.metadata)?;
        let link: LinkConfig = f.json(LINK)?;
        let split_seed: u64 = f.number(SPLIT_SEED)?;
        let steps = f.steps()?;
        let history: Vec<LinkEpoch> = f.history()?;
        if history.len() != meta.epoch || history.iter().enumerate().any(|(i, e)| e.epoch != i + 1) {
            return Err(f.bad(format!("{} epochs in the curve (numbered 1..), {} recorded", history.len(), meta.epoch)));
        }
        if let Some(e) = history.iter().find(|e| !e.loss.is_finite()) {
            return Err(f.bad(format!("epoch {}: loss {}", e.epoch, e.loss)));
        }
        f.check_steps(steps, meta.epoch)?;
        if !(link.neg_ratio.is_finite() && link.neg_ratio > 0.0 && link.neg_ratio <= 1000.0 && link.lr.is_finite() && link.lr > 0.0) {
            return Err(f.bad(format!("checkpoint metadata: link settings out of range ({link:?})")));
        }
        let best = f.best(meta.epoch, |r: &LinkEpoch| r.epoch)?;
        let state = f.into_state();
        Ok(LinkCheckpoint { meta, link, split_seed, steps, history, state, best })
    }
}
