//! One part's view of a partitioned graph for training: its *extended* square graph (its owned
//! rows with their whole neighbour lists, plus one empty row per halo node; see
//! [`crate::nn::halo_hook`]), and its rows of the node data.
//!
//! Local ids follow global ids: the halo nodes below the owned range, the owned rows, the halo
//! nodes above it ([`ExtendedLayout`]). The renumbering is monotone, so every row keeps the whole
//! matrix's entry order and stays sorted (the GPU's edge-value transposes need canonical rows),
//! and a part's edges are exactly edges `row_ptr[first]..row_ptr[end]` of the whole matrix, in
//! that order. Dropout masks are keyed by the ORIGINAL ids (before the partition relabelled
//! the graph: [`local_node_ids`], [`original_edge_ids`], [`feature_ids`]), so every partition
//! draws the masks of the unpartitioned run on the original graph.

use crate::dist::partition::PartBlocks;
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::input::HostFeatures;
use crate::task::node::data::Dataset;
use crate::tensor::Matrix;

/// Global ids of a part's halo columns, in halo order (`offsets` of the partition).
pub fn halo_ids(blocks: &PartBlocks, offsets: &[usize]) -> Vec<u32> {
    blocks.halo.iter().map(|&(q, r)| (offsets[q as usize] + r as usize) as u32).collect()
}

/// Where a part's rows sit in its extended matrices: `below` halo rows, then its `owned` rows,
/// then `above` halo rows. Local row r < below + owned + above is global row `r + first - below`
/// for the owned ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendedLayout {
    pub below: usize,
    pub owned: usize,
    pub above: usize,
}

impl ExtendedLayout {
    /// For a part owning `first..first + owned` with the sorted global `halo` ids.
    pub fn new(first: usize, owned: usize, halo: &[u32]) -> Self {
        let below = halo.partition_point(|&h| (h as usize) < first);
        ExtendedLayout { below, owned, above: halo.len() - below }
    }
    pub fn rows(&self) -> usize {
        self.below + self.owned + self.above
    }
    /// The owned rows' local range.
    pub fn owned_rows(&self) -> std::ops::Range<usize> {
        self.below..self.below + self.owned
    }
}

/// Rows `first..first + rows` of the square matrix `s` as an extended square matrix
/// ([`ExtendedLayout`]; `halo` the sorted global ids of the columns owned elsewhere), halo rows
/// empty. A column neither owned nor in `halo` is an error.
pub fn extended_rows(s: &Csr, first: usize, rows: usize, halo: &[u32]) -> Result<Csr> {
    let end = first + rows;
    if s.n_rows() != s.n_cols() || end > s.n_rows() {
        return Err(Error::Shape(format!("rows {first}..{end} of a {} x {} matrix", s.n_rows(), s.n_cols())));
    }
    let layout = ExtendedLayout::new(first, rows, halo);
    let n = layout.rows();
    let (lo, hi) = (s.row_ptr()[first] as usize, s.row_ptr()[end] as usize);
    let mut row_ptr = vec![0u32; layout.below];
    row_ptr.extend(s.row_ptr()[first..=end].iter().map(|&p| p - lo as u32));
    row_ptr.resize(n + 1, (hi - lo) as u32);
    let cols = s.col_idx()[lo..hi]
        .iter()
        .map(|&c| {
            let c = c as usize;
            if (first..end).contains(&c) {
                return Ok((layout.below + c - first) as u32);
            }
            let h = halo
                .binary_search(&(c as u32))
                .map_err(|_| Error::Shape(format!("column {c} of rows {first}..{end} is neither owned nor in the part's halo")))?;
            Ok((if h < layout.below { h } else { rows + h }) as u32)
        })
        .collect::<Result<Vec<u32>>>()?;
    Csr::new(n, n, row_ptr, cols, s.values()[lo..hi].to_vec())
}

/// The global row of every local row of a part ([`ExtendedLayout`]; `halo` the sorted global
/// ids of its halo rows).
pub fn global_rows(first: usize, layout: ExtendedLayout, halo: &[u32]) -> impl Iterator<Item = usize> + '_ {
    let (below, above) = halo.split_at(layout.below.min(halo.len()));
    below.iter().map(|&g| g as usize).chain(first..first + layout.owned).chain(above.iter().map(|&g| g as usize))
}

/// The part's rows of the node data in its [`ExtendedLayout`]: the halo rows with their
/// features (the input layer multiplies them where they are, instead of receiving its product's
/// rows: see [`crate::nn::halo_hook::HaloHook`]), label 0 and no mask bit (halo rows are never
/// in the loss).
pub fn part_data(data: &Dataset, first: usize, layout: ExtendedLayout, halo: &[u32]) -> Result<Dataset> {
    let end = first + layout.owned;
    let nodes = data.graph.n_rows();
    if end > nodes || halo.len() != layout.below + layout.above || halo.iter().any(|&g| g as usize >= nodes) {
        return Err(Error::Shape(format!("rows {first}..{end} and {} halo rows of a dataset of {nodes} nodes", halo.len())));
    }
    let n = layout.rows();
    let features = match &data.features {
        HostFeatures::Dense(m) => {
            let mut d = Vec::with_capacity(n * m.cols);
            for g in global_rows(first, layout, halo) {
                d.extend_from_slice(&m.data[g * m.cols..(g + 1) * m.cols]);
            }
            HostFeatures::Dense(Matrix::from_vec(n, m.cols, d)?)
        }
        HostFeatures::Sparse(c) => {
            let (mut row_ptr, mut cols, mut vals) = (vec![0u32], Vec::new(), Vec::new());
            for g in global_rows(first, layout, halo) {
                cols.extend_from_slice(&c.col_idx()[c.row_range(g)]);
                vals.extend_from_slice(&c.values()[c.row_range(g)]);
                row_ptr.push(cols.len() as u32);
            }
            HostFeatures::Sparse(Csr::new(n, c.n_cols(), row_ptr, cols, vals)?)
        }
    };
    fn spread<T: Copy + Default>(v: &[T], l: ExtendedLayout) -> Vec<T> {
        std::iter::repeat_n(T::default(), l.below).chain(v.iter().copied()).chain(std::iter::repeat_n(T::default(), l.above)).collect()
    }
    Ok(Dataset {
        name: data.name.clone(),
        // The model never reads this graph (it gets the extended one); kept for its size.
        graph: Csr::new(n, n, vec![0; n + 1], Vec::new(), Vec::new())?,
        features,
        labels: spread(&data.labels[first..end], layout),
        mask_bits: spread(&data.mask_bits[first..end], layout),
        classes: data.classes,
        synthetic: data.synthetic,
    })
}

/// The original node id (before the partition relabelled the graph: `new_to_old`) of every
/// local row of a part ([`ExtendedLayout`]: the halo rows below, the owned rows
/// `first..first + owned`, the halo rows above; `halo` their sorted global ids). Dropout masks
/// are keyed by it, so any partition draws the unpartitioned run's masks.
pub fn local_node_ids(new_to_old: &[u32], first: usize, layout: ExtendedLayout, halo: &[u32]) -> Vec<u32> {
    let (below, above) = halo.split_at(layout.below);
    let old = |g: &u32| new_to_old[*g as usize];
    below.iter().map(old).chain(new_to_old[first..first + layout.owned].iter().copied()).chain(above.iter().map(old)).collect()
}

/// Where each row of the original matrix starts: `s` is the original matrix relabelled by a
/// partition (`new_to_old`), so original row u has the entries of relabelled row
/// `old_to_new[u]`.
fn original_row_starts(s: &Csr, new_to_old: &[u32]) -> Vec<u64> {
    let mut len = vec![0u64; s.n_rows()];
    for (r, &u) in new_to_old.iter().enumerate() {
        len[u as usize] = s.row_len(r) as u64;
    }
    let mut start = Vec::with_capacity(len.len());
    let mut at = 0u64;
    for l in len {
        start.push(at);
        at += l;
    }
    start
}

/// The original index of each edge of rows `first..first + rows` of `s`, the original square
/// matrix relabelled by `new_to_old` (rows sorted by column, as the original's are): relabelled
/// row r is original row u = `new_to_old[r]`, and its k-th entry (in relabelled column order)
/// is the entry of u whose original column ranks where its own does among the row's original
/// columns. The attention dropout is keyed by it.
pub fn original_edge_ids(s: &Csr, new_to_old: &[u32], first: usize, rows: usize) -> Result<Vec<u32>> {
    let start = original_row_starts(s, new_to_old);
    if start.last().map_or(0, |&l| l + s.row_len(s.n_rows() - 1) as u64) > u32::MAX as u64 {
        return Err(Error::Unsupported(format!("original edge ids of a matrix of {} entries (u32 ids)", s.nnz())));
    }
    let mut ids = Vec::with_capacity(s.row_ptr()[first + rows] as usize - s.row_ptr()[first] as usize);
    let mut order: Vec<(u32, u32)> = Vec::new();
    for r in first..first + rows {
        let base = start[new_to_old[r] as usize] as u32;
        // (original column, position in the relabelled row), sorted by original column: the
        // rank of each entry in the original row.
        order.clear();
        order.extend(s.col_idx()[s.row_range(r)].iter().enumerate().map(|(k, &c)| (new_to_old[c as usize], k as u32)));
        order.sort_unstable();
        let at = ids.len();
        ids.resize(at + order.len(), 0);
        for (rank, &(_, k)) in order.iter().enumerate() {
            ids[at + k as usize] = base + rank as u32;
        }
    }
    Ok(ids)
}

/// The keys of the part's input dropout: dense features by row (its local rows' original node
/// ids, `row_ids`), sparse ones by nonzero (each local nonzero's index in the original feature
/// matrix; relabelling moves whole rows, so a row's nonzeros keep their order), the halo rows'
/// included ([`part_data`] gives them their features).
pub fn feature_ids(
    features: &HostFeatures,
    new_to_old: &[u32],
    first: usize,
    layout: ExtendedLayout,
    halo: &[u32],
    row_ids: &[u32],
) -> Result<Vec<u32>> {
    let c = match features {
        HostFeatures::Dense(_) => return Ok(row_ids.to_vec()),
        HostFeatures::Sparse(c) => c,
    };
    let start = original_row_starts(c, new_to_old);
    if c.nnz() > u32::MAX as usize {
        return Err(Error::Unsupported(format!("original nonzero ids of {} feature nonzeros (u32 ids)", c.nnz())));
    }
    let mut ids = Vec::new();
    for r in global_rows(first, layout, halo) {
        let base = start[new_to_old[r] as usize] as u32;
        ids.extend((0..c.row_len(r) as u32).map(|k| base + k));
    }
    Ok(ids)
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
