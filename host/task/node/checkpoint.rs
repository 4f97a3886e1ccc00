//! A training checkpoint: `DIR/checkpoint.safetensors` with the parameters, Adam's moments,
//! the best-validation weights so far, and in its metadata the model ([`ModelMeta`]), the
//! optimiser settings, the step counter and the loss curve so far (the layout every task's
//! checkpoint shares, [`crate::task::checkpoint`], plus the settings). `tcgnn train --resume DIR`
//! rebuilds the trainer from it and continues; on the CPU the resumed curve equals the
//! uninterrupted one exactly (dropout masks and Adam's bias correction are functions of the
//! step counter, and the CPU reductions do not depend on the thread count).

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::task::checkpoint::{self as layout, Parts, Reader, to_json};
use crate::task::node::train::{EpochRecord, TrainConfig};
use crate::task::saved::{ModelMeta, check_tensor_sizes, read_meta};
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

const FORMAT: &str = "checkpoint";
const TRAIN: &str = "tcgnn.train";

impl Checkpoint {
    /// The checkpoint file in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        layout::path(dir)
    }

    /// Writes `DIR/checkpoint.safetensors` atomically (creating `dir`): a kill part-way leaves
    /// the previous checkpoint.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let parts = Parts {
            meta: &self.meta,
            format: FORMAT,
            steps: self.steps,
            history: &self.history,
            state: &self.state,
            best: self.best.as_ref(),
        };
        layout::write(dir, parts, vec![(TRAIN, to_json(&self.train)?)])
    }

    pub fn read(dir: &Path) -> Result<Self> {
        Self::from_file(Reader::open(dir, "tcgnn train --checkpoint DIR")?)
    }

    /// [`Checkpoint::read`] on the bytes of a checkpoint file; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        Self::from_file(Reader::parse(bytes, path)?)
    }

    fn from_file(f: Reader) -> Result<Self> {
        let meta = read_meta(&f.path, &f.file.metadata)?;
        let steps = f.steps()?;
        let train: TrainConfig = f.json(TRAIN)?;
        let history: Vec<EpochRecord> = f.history()?;
        if history.len() != meta.epoch {
            return Err(f.bad(format!("{} epochs in the loss curve, {} recorded", history.len(), meta.epoch)));
        }
        // The settings and counters go on into training: the CLI's rules for them apply here.
        let invalid = |msg: String| f.bad(format!("checkpoint metadata: {msg}"));
        if let Some(why) = train.problem() {
            return Err(invalid(why));
        }
        f.check_steps(steps, meta.epoch)?;
        if let Some(why) = history.iter().enumerate().find_map(|(i, r)| r.problem(i + 1)) {
            return Err(invalid(why));
        }
        check_tensor_sizes(&f.path, &meta, &f.file.tensors)?;
        let best = f.best(meta.epoch, |r: &EpochRecord| r.epoch)?;
        if let Some(why) = best.as_ref().and_then(|(rec, _)| rec.problem(rec.epoch)) {
            return Err(invalid(why));
        }
        let state = f.into_state();
        Ok(Checkpoint { meta, train, steps, history, state, best })
    }
}
