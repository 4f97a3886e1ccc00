//! A mini-batch of graphs as one graph: the graphs' adjacencies block-diagonal (graph i's nodes
//! renumbered to follow graph i - 1's), their node features stacked in the same order, and the
//! segment offsets (graph i owns rows `offsets[i]..offsets[i + 1]`) that the readout pools over.
//! Made on worker threads ahead of the step; the step uploads it.

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::tensor::Matrix;

use super::dataset::GraphSet;

pub struct GraphBatch {
    /// The set's graph ids, in batch order.
    pub graphs: Vec<u32>,
    pub adjacency: Csr,
    pub features: Matrix,
    /// graphs + 1 node offsets.
    pub offsets: Vec<u32>,
    /// Each graph's class.
    pub labels: Vec<i32>,
}

impl GraphBatch {
    /// The batch of graphs `ids` of `set` (any order; a graph may appear once).
    pub fn new(set: &GraphSet, ids: &[u32]) -> Result<Self> {
        if ids.is_empty() {
            return Err(Error::Shape("a batch of no graphs".into()));
        }
        set.check_ids(ids)?;
        let a = &set.tu.adjacency;
        let width = set.features.cols;
        let mut offsets = Vec::with_capacity(ids.len() + 1);
        offsets.push(0u32);
        for &g in ids {
            let r = set.tu.graph_nodes(g as usize);
            offsets.push(offsets.last().unwrap() + r.len() as u32);
        }
        let n = *offsets.last().unwrap() as usize;
        let nnz: usize = ids
            .iter()
            .map(|&g| {
                let r = set.tu.graph_nodes(g as usize);
                (a.row_ptr()[r.end] - a.row_ptr()[r.start]) as usize
            })
            .sum();
        let mut row_ptr = Vec::with_capacity(n + 1);
        row_ptr.push(0u32);
        let mut col_idx = Vec::with_capacity(nnz);
        let mut features = Matrix::zeros(n, width);
        for (i, &g) in ids.iter().enumerate() {
            let r = set.tu.graph_nodes(g as usize);
            let (from, to) = (r.start as u32, offsets[i]);
            for v in r.clone() {
                // The set's adjacency is block-diagonal (the reader refuses edges across graphs),
                // so every column of these rows lies in `r`: shifted, it lies in the batch's block.
                col_idx.extend(a.col_idx()[a.row_range(v)].iter().map(|&c| c - from + to));
                row_ptr.push(col_idx.len() as u32);
            }
            let dst = to as usize * width;
            features.data[dst..dst + r.len() * width].copy_from_slice(&set.features.data[r.start * width..r.end * width]);
        }
        let values = vec![1f32; col_idx.len()];
        let adjacency = Csr::new(n, n, row_ptr, col_idx, values)?;
        let labels = ids.iter().map(|&g| set.label(g as usize) as i32).collect();
        Ok(GraphBatch { graphs: ids.to_vec(), adjacency, features, offsets, labels })
    }

    pub fn len(&self) -> usize {
        self.graphs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.graphs.is_empty()
    }
    pub fn nodes(&self) -> usize {
        self.features.rows
    }
}
