//! A graph-classification set in memory: the TU set (every graph's nodes and edges in one
//! block-diagonal adjacency) and its node features as PyG builds them: the node labels one-hot
//! (`TUDataset`), or for a set without node labels the one-hot degree up to the largest degree
//! in the set (PyG's examples: `OneHotDegree(max_degree)`).

use crate::error::{Error, Result};
use crate::graph::tu::TuSet;
use crate::tensor::Matrix;

/// Where the node features come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureSource {
    /// The node labels, one-hot (`width` categories).
    NodeLabels { width: usize },
    /// The node's degree (edges listed from it), one-hot over 0..=max_degree.
    Degree { max_degree: usize },
}

pub struct GraphSet {
    pub tu: TuSet,
    /// nodes x width, one-hot rows.
    pub features: Matrix,
    pub source: FeatureSource,
}

impl GraphSet {
    pub fn new(tu: TuSet) -> Result<Self> {
        let n = tu.nodes();
        let (source, hot): (FeatureSource, Vec<usize>) = match &tu.node_labels {
            Some(l) => {
                let width = l.iter().copied().max().map_or(1, |m| m as usize + 1);
                (FeatureSource::NodeLabels { width }, l.iter().map(|&v| v as usize).collect())
            }
            None => {
                let deg: Vec<usize> = (0..n).map(|r| tu.adjacency.row_len(r)).collect();
                (FeatureSource::Degree { max_degree: deg.iter().copied().max().unwrap_or(0) }, deg)
            }
        };
        let width = source.width();
        crate::util::memory::check_host_alloc(4 * n as u64 * width as u64, &format!("one-hot node features of {n} nodes x {width}"))?;
        let mut features = Matrix::zeros(n, width);
        for (r, &h) in hot.iter().enumerate() {
            features.data[r * width + h] = 1.0;
        }
        Ok(GraphSet { tu, features, source })
    }

    pub fn graphs(&self) -> usize {
        self.tu.graphs()
    }
    pub fn classes(&self) -> usize {
        self.tu.num_classes()
    }
    pub fn label(&self, g: usize) -> u32 {
        self.tu.graph_labels[g]
    }

    /// The graph ids `ids` all exist.
    pub fn check_ids(&self, ids: &[u32]) -> Result<()> {
        match ids.iter().find(|&&g| g as usize >= self.graphs()) {
            Some(g) => Err(Error::Shape(format!("graph id {g} of a set of {} graphs", self.graphs()))),
            None => Ok(()),
        }
    }
}

impl FeatureSource {
    pub fn width(&self) -> usize {
        match *self {
            FeatureSource::NodeLabels { width } => width,
            FeatureSource::Degree { max_degree } => max_degree + 1,
        }
    }
}
