//! A node-classification problem: the graph, node features, labels and the train / validation /
//! test masks, from a dataset (`.mtx.gz` + `.npz`), a generator, or a graph with synthetic node
//! data for timing runs. Every size is checked here, before anything is allocated.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::graph::generate::{SbmParams, sbm};
use crate::graph::npz::{Features, NodeData, read_npz};
use crate::graph::{Csr, source};
use crate::nn::backend::{TEST_BIT, TRAIN_BIT, VAL_BIT};
use crate::nn::input::HostFeatures;
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

#[derive(Clone)]
pub struct Dataset {
    pub name: String,
    pub graph: Csr,
    pub features: HostFeatures,
    pub labels: Vec<i32>,
    /// [`TRAIN_BIT`] | [`VAL_BIT`] | [`TEST_BIT`] per node.
    pub mask_bits: Vec<u8>,
    pub classes: usize,
    /// Labels, features and masks were drawn at random (timing runs: accuracy means nothing).
    pub synthetic: bool,
}

/// How to store the node features on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
pub enum FeatureStorage {
    /// Sparse when at most 10% of the entries are nonzero (bag-of-words features such as
    /// cora's), dense otherwise.
    Auto,
    Dense,
    Sparse,
}

/// What to do for a graph without node data.
#[derive(Clone, Copy, Debug)]
pub struct SyntheticNodeData {
    pub features: usize,
    pub classes: usize,
    pub seed: u64,
}

impl Default for SyntheticNodeData {
    fn default() -> Self {
        SyntheticNodeData { features: 500, classes: 8, seed: 0 }
    }
}

impl Dataset {
    /// `spec` as the CLI takes it: a dataset name or `.mtx[.gz]` path (node data from `npz`, or
    /// from the `.npz` of the same name, or synthetic), `rmat:SCALE:EF[:SEED]` (synthetic node
    /// data), or `sbm:N[:CLASSES[:DEGREE]]` (a stochastic block model with label-correlated
    /// features and masks).
    pub fn load(spec: &str, npz: Option<&Path>, synthetic: &SyntheticNodeData) -> Result<Self> {
        if let Some(rest) = spec.strip_prefix("sbm:") {
            return Self::sbm(spec, rest, synthetic);
        }
        let graph = source::load(spec)?;
        let name = source::display_name(spec);
        let npz_path = match npz {
            Some(p) => Some(p.to_path_buf()),
            None => find_npz(spec),
        };
        match npz_path {
            Some(p) => {
                let data = read_npz(&p)?;
                Self::from_node_data(name, graph, data, &p, synthetic.seed)
            }
            None => Self::synthetic(name, graph, synthetic),
        }
    }

    fn sbm(spec: &str, rest: &str, s: &SyntheticNodeData) -> Result<Self> {
        let spec_ = crate::graph::spec::parse_sbm(spec, rest)?;
        let n = spec_.n;
        let mut p = SbmParams::new(n, spec_.classes, s.seed);
        p.avg_degree = spec_.avg_degree;
        p.features = s.features;
        let (graph, data) = sbm(p)?;
        Self::from_node_data(format!("sbm{n}"), graph, data, Path::new(spec), s.seed)
    }

    /// Random features (uniform in [-1, 1)), labels and a 60/20/20 split: for timing only.
    pub fn synthetic(name: String, graph: Csr, s: &SyntheticNodeData) -> Result<Self> {
        if s.features == 0 || s.classes == 0 {
            return Err(Error::Unsupported(format!("{name}: synthetic node data needs --features >= 1 and --classes >= 1")));
        }
        let n = graph.n_rows();
        check_dense_size(&name, n, s.features)?;
        let mut rng = SplitMix64::new(s.seed ^ 0x1AB5);
        let labels = (0..n).map(|_| rng.below(s.classes as u64) as i32).collect();
        Ok(Dataset {
            features: HostFeatures::Dense(Matrix::random(n, s.features, s.seed ^ 0xFEA7)),
            mask_bits: random_split(n, s.seed),
            labels,
            classes: s.classes,
            synthetic: true,
            name,
            graph,
        })
    }

    fn from_node_data(name: String, graph: Csr, d: NodeData, path: &Path, seed: u64) -> Result<Self> {
        let n = graph.n_rows();
        if graph.n_cols() != n {
            return Err(Error::Shape(format!(
                "{name}: the graph is {} x {}; node classification needs a square adjacency",
                n,
                graph.n_cols()
            )));
        }
        let err = |array: &str, msg: String| Error::Npz { path: path.to_path_buf(), array: array.into(), msg };
        if d.n() != n {
            return Err(err("y", format!("{} labels for a graph of {n} nodes", d.n())));
        }
        if d.x.n() != n {
            return Err(err("x", format!("features for {} nodes, the graph has {n}", d.x.n())));
        }
        if d.x.f() == 0 {
            return Err(err("x", "feature width 0".into()));
        }
        let classes = d.n_classes();
        if classes > i32::MAX as usize {
            return Err(err("y", format!("label {} does not fit in 32 bits", classes - 1)));
        }
        let mask_bits = match &d.split {
            Some(s) => {
                for (m, what) in [(&s.train, "train_mask"), (&s.val, "val_mask"), (&s.test, "test_mask")] {
                    if m.len() != n {
                        return Err(err(what, format!("{} entries for {n} nodes", m.len())));
                    }
                    // An empty mask makes its accuracy 0/0 and the best-validation epoch arbitrary.
                    if !m.iter().any(|&b| b) {
                        return Err(err(what, "selects no node".into()));
                    }
                }
                let overlap = (0..n).find(|&i| u8::from(s.train[i]) + u8::from(s.val[i]) + u8::from(s.test[i]) > 1);
                if let Some(i) = overlap {
                    return Err(err("val_mask", format!("node {i} is in more than one of train/val/test: the masks must not overlap")));
                }
                (0..n)
                    .map(|i| (u8::from(s.train[i]) * TRAIN_BIT) | (u8::from(s.val[i]) * VAL_BIT) | (u8::from(s.test[i]) * TEST_BIT))
                    .collect()
            }
            None => random_split(n, seed),
        };
        let features = match d.x {
            Features::Dense { n, f, data } => HostFeatures::Dense(Matrix::from_vec(n, f, data)?),
            Features::SparseMultiHot { n, f, indptr, indices } => {
                let row_ptr = indptr
                    .iter()
                    .map(|&p| u32::try_from(p))
                    .collect::<std::result::Result<Vec<u32>, _>>()
                    .map_err(|_| err("x_indptr", "more than 2^32 nonzeros".into()))?;
                let vals = vec![1.0f32; indices.len()];
                HostFeatures::Sparse(Csr::new(n, f, row_ptr, indices, vals).map_err(|e| err("x_indices", e.to_string()))?)
            }
        };
        let labels = d.y.iter().map(|&y| y as i32).collect();
        Ok(Dataset { name, graph, features, labels, mask_bits, classes, synthetic: false })
    }

    /// Features as `storage` asks (see [`FeatureStorage::Auto`]).
    pub fn store_features(&mut self, storage: FeatureStorage) -> Result<()> {
        let (n, f) = (self.features.rows(), self.features.cols());
        let nnz = match &self.features {
            HostFeatures::Dense(m) => m.data.iter().filter(|&&v| v != 0.0).count(),
            HostFeatures::Sparse(c) => c.nnz(),
        };
        let sparse = match storage {
            FeatureStorage::Dense => false,
            FeatureStorage::Sparse => true,
            FeatureStorage::Auto => (nnz as f64) <= 0.1 * (n as f64) * (f as f64),
        };
        self.features = match (std::mem::replace(&mut self.features, HostFeatures::Dense(Matrix::zeros(0, 0))), sparse) {
            (HostFeatures::Dense(m), true) => {
                let mut t = Vec::with_capacity(nnz);
                for r in 0..m.rows {
                    for (c, &v) in m.row(r).iter().enumerate() {
                        if v != 0.0 {
                            t.push((r as u32, c as u32, v));
                        }
                    }
                }
                HostFeatures::Sparse(Csr::from_triplets(n, f, &t)?)
            }
            (HostFeatures::Sparse(c), false) => {
                check_dense_size(&self.name, n, f)?;
                let mut m = Matrix::zeros(n, f);
                for r in 0..n {
                    for (col, v) in c.row(r) {
                        m.data[r * f + col as usize] = v;
                    }
                }
                HostFeatures::Dense(m)
            }
            (other, _) => other,
        };
        Ok(())
    }

    pub fn n(&self) -> usize {
        self.graph.n_rows()
    }
}

/// `NAME.npz` beside a dataset name or a `.mtx[.gz]` path.
/// The files [`Dataset::load`] reads for `spec` and `npz`: the graph's and the node data's (an
/// output must not be one of them).
pub fn input_files(spec: &str, npz: Option<&Path>) -> Vec<PathBuf> {
    let npz = npz.map(Path::to_path_buf).or_else(|| if spec.starts_with("sbm:") { None } else { find_npz(spec) });
    source::input_file(spec).into_iter().chain(npz).collect()
}

fn find_npz(spec: &str) -> Option<PathBuf> {
    let p = Path::new(spec);
    if p.exists() {
        let s = spec.trim_end_matches(".tcg").trim_end_matches(".gz").trim_end_matches(".mtx");
        let cand = PathBuf::from(format!("{s}.npz"));
        return cand.exists().then_some(cand);
    }
    let cand = source::datasets_dir().join(format!("{spec}.npz"));
    cand.exists().then_some(cand)
}

/// A seeded 60/20/20 split.
fn random_split(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed ^ 0x5917);
    (0..n)
        .map(|_| match rng.next_f64() {
            x if x < 0.6 => TRAIN_BIT,
            x if x < 0.8 => VAL_BIT,
            _ => TEST_BIT,
        })
        .collect()
}

/// Refuses dense features that would not fit in host memory (16 GiB as a sane bound).
fn check_dense_size(name: &str, n: usize, f: usize) -> Result<()> {
    const LIMIT: usize = 16 << 30;
    let bytes = n.checked_mul(f).and_then(|x| x.checked_mul(4)).unwrap_or(usize::MAX);
    crate::util::memory::check_host_alloc(bytes as u64, &format!("{name}: dense features {n} x {f}"))?;
    if bytes > LIMIT {
        return Err(Error::Unsupported(format!(
            "{name}: dense features {n} x {f} need {:.1} GiB (limit {} GiB); use fewer --features",
            bytes as f64 / (1u64 << 30) as f64,
            LIMIT >> 30
        )));
    }
    Ok(())
}
