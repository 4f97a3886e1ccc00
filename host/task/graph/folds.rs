//! k-fold stratified cross-validation splits of a set of graphs, kept in a file so that every
//! run and the PyG baseline (`bench/pyg/graph.py`) train on the same folds.
//!
//! Stratified: each class's graphs, shuffled (seeded), are dealt round-robin over the folds, the
//! deal continuing from class to class, so every fold holds each class's share to within one
//! graph and the folds' sizes differ by at most one. Fold f is the test set of split f; the
//! other k - 1 folds are its training set (the GIN paper's protocol: no separate validation set,
//! see `train.rs` for the epoch rule).
//!
//! The file (JSON) records the set's name, its graph count and every graph's class, so a fold
//! file made for another set (or another version of it) is refused, not silently used.

use std::path::Path;

use crate::error::{Error, Result};
use crate::util::rng::SplitMix64;

pub const FORMAT: &str = "tcgnn-folds-1";

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Folds {
    pub format: String,
    pub dataset: String,
    pub graphs: usize,
    pub seed: u64,
    /// Every graph's class (what the folds were stratified on).
    pub labels: Vec<u32>,
    /// The test graphs of each fold, sorted.
    pub test: Vec<Vec<u32>>,
}

impl Folds {
    /// `k` stratified folds of graphs with classes `labels`.
    pub fn stratified(dataset: &str, labels: &[u32], k: usize, seed: u64) -> Result<Self> {
        if k < 2 || k > labels.len() {
            return Err(Error::Unsupported(format!("--folds {k}: need 2 <= folds <= graphs ({})", labels.len())));
        }
        let classes = labels.iter().copied().max().map_or(0, |m| m as usize + 1);
        let mut by_class: Vec<Vec<u32>> = vec![Vec::new(); classes];
        for (g, &c) in labels.iter().enumerate() {
            by_class[c as usize].push(g as u32);
        }
        let mut rng = SplitMix64::new(seed ^ 0xF01D_5000);
        let mut test: Vec<Vec<u32>> = vec![Vec::new(); k];
        let mut next = 0usize;
        for ids in &mut by_class {
            // Fisher-Yates with the project's generator (reproducible everywhere).
            for i in (1..ids.len()).rev() {
                ids.swap(i, rng.below(i as u64 + 1) as usize);
            }
            for &g in ids.iter() {
                test[next % k].push(g);
                next += 1;
            }
        }
        test.iter_mut().for_each(|f| f.sort_unstable());
        Ok(Folds { format: FORMAT.into(), dataset: dataset.into(), graphs: labels.len(), seed, labels: labels.to_vec(), test })
    }

    pub fn k(&self) -> usize {
        self.test.len()
    }

    /// The training graphs of split `f` (every graph not in fold f), sorted.
    pub fn train(&self, f: usize) -> Vec<u32> {
        let mut in_test = vec![false; self.graphs];
        self.test[f].iter().for_each(|&g| in_test[g as usize] = true);
        (0..self.graphs as u32).filter(|&g| !in_test[g as usize]).collect()
    }

    /// The folds are a partition of the graphs into non-empty sets, and `labels` are the set's.
    pub fn check(&self, path: &Path, dataset: &str, labels: &[u32]) -> Result<()> {
        let bad = |msg: String| Err(Error::BadFile { path: path.to_path_buf(), msg });
        if self.format != FORMAT {
            return bad(format!("format '{}', expected '{FORMAT}'", self.format));
        }
        if self.graphs != labels.len() || self.labels.len() != self.graphs {
            return bad(format!(
                "made for {} graphs ({} labels) of '{}', but {dataset} has {} graphs",
                self.graphs,
                self.labels.len(),
                self.dataset,
                labels.len()
            ));
        }
        if let Some(g) = (0..labels.len()).find(|&g| self.labels[g] != labels[g]) {
            return bad(format!(
                "graph {g} has class {} in the file ('{}') but {} in {dataset}: folds of another set",
                self.labels[g], self.dataset, labels[g]
            ));
        }
        if self.test.len() < 2 {
            return bad(format!("{} folds (at least 2)", self.test.len()));
        }
        let mut seen = vec![usize::MAX; self.graphs];
        for (f, fold) in self.test.iter().enumerate() {
            if fold.is_empty() {
                return bad(format!("fold {f} is empty"));
            }
            for &g in fold {
                match seen.get(g as usize) {
                    None => return bad(format!("fold {f} lists graph {g}, past the set's {} graphs", self.graphs)),
                    Some(&prev) if prev != usize::MAX => return bad(format!("graph {g} is in fold {prev} and fold {f}")),
                    _ => seen[g as usize] = f,
                }
            }
        }
        if let Some(g) = seen.iter().position(|&f| f == usize::MAX) {
            return bad(format!("graph {g} is in no fold"));
        }
        Ok(())
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string(self).map_err(|e| Error::BadFile { path: path.to_path_buf(), msg: e.to_string() })?;
        crate::util::atomic::write_atomic(path, text.as_bytes())
    }

    /// Reads a folds file and checks it against the set `dataset` with classes `labels`.
    pub fn read(path: &Path, dataset: &str, labels: &[u32]) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.to_path_buf(), source: e })?;
        let folds: Folds = serde_json::from_str(&text).map_err(|e| Error::parse(path, e.line(), format!("not a folds file: {e}")))?;
        folds.check(path, dataset, labels)?;
        Ok(folds)
    }
}
