//! The layout every task's training checkpoint shares: `DIR/checkpoint.safetensors` holding the
//! optimiser state (`param.NAME`, `m.NAME`, `v.NAME`, `buffer.NAME`) and the best-validation
//! weights so far (`best.NAME`), and in its metadata the encoder ([`ModelMeta`], under the
//! task's format tag), the step counter, the epochs so far and the best epoch's record. A task
//! adds its own settings and checks on top (`task::node::checkpoint`,
//! `task::link::checkpoint`); the writing, the reading and the checks they share are here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::task::saved::{ModelMeta, TensorFile, meta_map};
use crate::tensor::Matrix;

const FILE: &str = "checkpoint.safetensors";
const STEPS: &str = "tcgnn.steps";
const HISTORY: &str = "tcgnn.history";
const BEST: &str = "tcgnn.best";
const BEST_PREFIX: &str = "best.";

/// The checkpoint file in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Named tensors, as a file holds them.
pub type Tensors = Vec<(String, Matrix)>;

/// What every checkpoint holds, borrowed from a task's checkpoint for [`write`]; `E` is the
/// task's record of an epoch.
pub struct Parts<'a, E> {
    pub meta: &'a ModelMeta,
    /// The task's tag (`checkpoint`, `link-checkpoint`): the file's format is `tcgnn-TAG-1`.
    pub format: &'a str,
    pub steps: u32,
    pub history: &'a [E],
    pub state: &'a [(String, Matrix)],
    pub best: Option<&'a (E, Tensors)>,
}

/// Writes `DIR/checkpoint.safetensors` atomically (creating `dir`), with the task's own
/// metadata `extra` (key, JSON or number): a kill part-way leaves the previous checkpoint.
pub fn write<E: serde::Serialize>(dir: &Path, c: Parts<'_, E>, extra: Vec<(&str, String)>) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.to_path_buf(), source: e })?;
    let mut meta: HashMap<String, String> = meta_map(c.meta, c.format)?;
    meta.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
    meta.insert(STEPS.into(), c.steps.to_string());
    meta.insert(HISTORY.into(), to_json(&c.history)?);
    let mut tensors = c.state.to_vec();
    if let Some((rec, weights)) = c.best {
        meta.insert(BEST.into(), to_json(rec)?);
        tensors.extend(weights.iter().map(|(n, m)| (format!("{BEST_PREFIX}{n}"), m.clone())));
    }
    let path = path(dir);
    TensorFile::write(&path, &tensors, meta)?;
    Ok(path)
}

/// A task's metadata value as JSON.
pub fn to_json<T: serde::Serialize + ?Sized>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Unsupported(format!("checkpoint metadata: {e}")))
}

/// A checkpoint file as read, before the task takes its fields: every error names the file.
pub struct Reader {
    pub path: PathBuf,
    pub file: TensorFile,
}

impl Reader {
    /// Reads `DIR/checkpoint.safetensors`; `missing` says which command writes one.
    pub fn open(dir: &Path, missing: &str) -> Result<Self> {
        let path = path(dir);
        if !path.is_file() {
            return Err(Error::BadFile { path, msg: format!("no checkpoint here (written by `{missing}`)") });
        }
        let file = TensorFile::read(&path)?;
        Ok(Reader { path, file })
    }

    /// [`Reader::open`] on the bytes of a checkpoint file; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        Ok(Reader { path: path.to_path_buf(), file: TensorFile::parse(bytes, path)? })
    }

    /// An error about this file.
    pub fn bad(&self, msg: String) -> Error {
        Error::BadFile { path: self.path.clone(), msg }
    }

    /// Metadata `key`, which must be there.
    pub fn field(&self, key: &str) -> Result<&str> {
        self.file.metadata.get(key).map(String::as_str).ok_or_else(|| self.bad(format!("checkpoint metadata '{key}' is missing")))
    }

    /// Metadata `key` parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T> {
        serde_json::from_str(self.field(key)?).map_err(|e| self.bad(format!("checkpoint metadata '{key}': {e}")))
    }

    /// Metadata `key` parsed by [`str::parse`].
    pub fn number<T: std::str::FromStr<Err: std::fmt::Display>>(&self, key: &str) -> Result<T> {
        self.field(key)?.parse().map_err(|e| self.bad(format!("checkpoint metadata '{key}': {e}")))
    }

    /// The step counter (checked against the epochs by [`Reader::check_steps`]).
    pub fn steps(&self) -> Result<u32> {
        self.number(STEPS)
    }

    /// A step counter after `epochs` epochs: at least one step an epoch, and room to go on
    /// counting (dropout seeds and Adam's bias correction are functions of it).
    pub fn check_steps(&self, steps: u32, epochs: usize) -> Result<()> {
        if (steps as usize) < epochs || steps > u32::MAX / 2 {
            return Err(self.bad(format!("checkpoint metadata: step counter {steps} after {epochs} epochs")));
        }
        Ok(())
    }

    /// The epochs so far.
    pub fn history<E: serde::de::DeserializeOwned>(&self) -> Result<Vec<E>> {
        self.json(HISTORY)
    }

    /// The best epoch's record, if one was kept (its number read by `epoch_of`, within
    /// 1..=`epochs`), with its weights (by parameter name).
    pub fn best<E: serde::de::DeserializeOwned>(&self, epochs: usize, epoch_of: impl Fn(&E) -> usize) -> Result<Option<(E, Tensors)>> {
        if !self.file.metadata.contains_key(BEST) {
            return Ok(None);
        }
        let rec: E = self.json(BEST)?;
        let e = epoch_of(&rec);
        if e == 0 || e > epochs {
            return Err(self.bad(format!("checkpoint metadata: best epoch {e} of {epochs} done")));
        }
        let weights =
            self.file.tensors.iter().filter_map(|(n, m)| n.strip_prefix(BEST_PREFIX).map(|n| (n.to_string(), m.clone()))).collect();
        Ok(Some((rec, weights)))
    }

    /// The optimiser state: every tensor but the best weights.
    pub fn into_state(self) -> Tensors {
        self.file.tensors.into_iter().filter(|(n, _)| !n.starts_with(BEST_PREFIX)).collect()
    }
}
