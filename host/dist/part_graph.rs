//! One part's view of a partitioned graph for training: its *extended* square graph (owned rows
//! with their whole neighbour lists, then one empty row per halo node; see
//! [`crate::nn::halo_hook`]), and its rows of the node data.
//!
//! Entries keep the whole matrix's order within each row (the renumbered columns are then not
//! sorted; a CSR need not be): a part's edges are exactly edges `row_ptr[first]..row_ptr[end]`
//! of the whole matrix, in that order, which is what keys the attention dropout by global edge.

use crate::dist::partition::PartBlocks;
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::data::Dataset;
use crate::nn::input::HostFeatures;
use crate::tensor::Matrix;

/// Global ids of a part's halo columns, in halo order (`offsets` of the partition).
pub fn halo_ids(blocks: &PartBlocks, offsets: &[usize]) -> Vec<u32> {
    blocks.halo.iter().map(|&(q, r)| (offsets[q as usize] + r as usize) as u32).collect()
}

/// Rows `first..first + rows` of the square matrix `s` as an (rows + halo) square matrix: owned
/// columns renumbered `c - first`, halo columns `rows + their index in halo` (`halo` sorted
/// global ids), halo rows empty. A column neither owned nor in `halo` is an error.
pub fn extended_rows(s: &Csr, first: usize, rows: usize, halo: &[u32]) -> Result<Csr> {
    let end = first + rows;
    if s.n_rows() != s.n_cols() || end > s.n_rows() {
        return Err(Error::Shape(format!("rows {first}..{end} of a {} x {} matrix", s.n_rows(), s.n_cols())));
    }
    let n = rows + halo.len();
    let (lo, hi) = (s.row_ptr()[first] as usize, s.row_ptr()[end] as usize);
    let mut row_ptr: Vec<u32> = s.row_ptr()[first..=end].iter().map(|&p| p - lo as u32).collect();
    row_ptr.resize(n + 1, (hi - lo) as u32);
    let cols = s.col_idx()[lo..hi]
        .iter()
        .map(|&c| {
            let c = c as usize;
            if (first..end).contains(&c) {
                return Ok((c - first) as u32);
            }
            halo.binary_search(&(c as u32)).map(|h| (rows + h) as u32).map_err(|_| {
                Error::Shape(format!("column {c} of rows {first}..{end} is neither owned nor in the part's halo"))
            })
        })
        .collect::<Result<Vec<u32>>>()?;
    Csr::new(n, n, row_ptr, cols, s.values()[lo..hi].to_vec())
}

/// The part's rows of the node data (owned rows, then zero features, label 0 and no mask bit for
/// each halo row: halo rows are never in the loss), named after the whole.
pub fn part_data(data: &Dataset, first: usize, rows: usize, halo: usize) -> Result<Dataset> {
    let end = first + rows;
    if end > data.graph.n_rows() {
        return Err(Error::Shape(format!("rows {first}..{end} of a dataset of {} nodes", data.graph.n_rows())));
    }
    let features = match &data.features {
        HostFeatures::Dense(m) => {
            let mut d = m.data[first * m.cols..end * m.cols].to_vec();
            d.resize((rows + halo) * m.cols, 0.0);
            HostFeatures::Dense(Matrix::from_vec(rows + halo, m.cols, d)?)
        }
        HostFeatures::Sparse(c) => {
            let (lo, hi) = (c.row_ptr()[first] as usize, c.row_ptr()[end] as usize);
            let mut row_ptr: Vec<u32> = c.row_ptr()[first..=end].iter().map(|&p| p - lo as u32).collect();
            row_ptr.resize(rows + halo + 1, (hi - lo) as u32);
            HostFeatures::Sparse(Csr::new(rows + halo, c.n_cols(), row_ptr, c.col_idx()[lo..hi].to_vec(), c.values()[lo..hi].to_vec())?)
        }
    };
    let pad = |v: &[i32]| v[first..end].iter().copied().chain(std::iter::repeat_n(0, halo)).collect::<Vec<_>>();
    Ok(Dataset {
        name: data.name.clone(),
        // The model never reads this graph (it gets the extended one); kept for its size.
        graph: Csr::new(rows + halo, rows + halo, vec![0; rows + halo + 1], Vec::new(), Vec::new())?,
        features,
        labels: pad(&data.labels),
        mask_bits: data.mask_bits[first..end].iter().copied().chain(std::iter::repeat_n(0, halo)).collect(),
        classes: data.classes,
        synthetic: data.synthetic,
    })
}

/// Where the part's input dropout starts in the whole feature matrix's mask: `first * ld` for
/// dense features, the first owned nonzero for sparse ones.
pub fn feature_offset(features: &HostFeatures, first: usize) -> u64 {
    match features {
        HostFeatures::Dense(m) => (first * crate::gpu::memory::padded_ld(m.cols)) as u64,
        HostFeatures::Sparse(c) => c.row_ptr()[first] as u64,
    }
}

/// The whole dataset relabelled by a partition's permutation (features, labels and masks moved
/// with their nodes): the graph every part's rows are cut from, and the reference a one-part run
/// must reproduce.
pub fn relabel(data: &Dataset, perm: &crate::graph::Permutation) -> Result<Dataset> {
    let identity = perm.new_to_old().iter().enumerate().all(|(i, &o)| i == o as usize);
    if identity {
        return Ok(data.clone());
    }
    let features = match &data.features {
        HostFeatures::Dense(m) => HostFeatures::Dense(Matrix::from_vec(m.rows, m.cols, perm.apply_to_rows(&m.data, m.cols)?)?),
        HostFeatures::Sparse(c) => {
            let mut row_ptr = vec![0u32];
            let (mut cols, mut vals) = (Vec::with_capacity(c.nnz()), Vec::with_capacity(c.nnz()));
            for &old in perm.new_to_old() {
                let r = c.row_range(old as usize);
                cols.extend_from_slice(&c.col_idx()[r.clone()]);
                vals.extend_from_slice(&c.values()[r]);
                row_ptr.push(cols.len() as u32);
            }
            HostFeatures::Sparse(Csr::new(c.n_rows(), c.n_cols(), row_ptr, cols, vals)?)
        }
    };
    Ok(Dataset {
        name: data.name.clone(),
        graph: perm.apply_to_csr(&data.graph)?,
        features,
        labels: perm.apply_to_nodes(&data.labels)?,
        mask_bits: perm.apply_to_nodes(&data.mask_bits)?,
        classes: data.classes,
        synthetic: data.synthetic,
    })
}
