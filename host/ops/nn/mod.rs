//! Primitive ops of GNN training, one file per op: a CPU version (generic over [`Real`](crate::util::Real), rayon
//! over independent rows; also the f64 reference), the launcher of the f32 CUDA kernel of the
//! same name in `kernels-gpu/src/nn/`, and the op's small trait (`ReluOp`, `SpmmOp`, ...)
//! implemented for both backends ([`crate::ops::backend`]); [`Ops`] names them all for the
//! layers.
//!
//! Conventions:
//! - CPU functions take plain row-major slices with explicit `(rows, cols)` and no padding
//!   (stride = cols); they panic on slices of the wrong length (like indexing would), and return
//!   `Result` only where a parameter can be out of range (dropout's `p`).
//! - GPU functions take [`DeviceMatrix`] (stride `ld`, padding columns zero: elementwise kernels
//!   run over whole padded buffers and keep the padding zero; kernels that write a matrix write
//!   its padding as zero) and [`DeviceVec`]. They check shapes first (`Error::Shape`, or
//!   `Error::Unsupported` for sizes the kernels cannot index), and then only enqueue work on the
//!   GPU's stream: no synchronisation, no host<->device copy, no allocation (a `memset` of an
//!   output some kernels accumulate into is the one extra node), so a whole training step can be
//!   captured in a CUDA graph. Counters that must change between replays (dropout's and Adam's
//!   `step`) are read by the kernels from device memory.
//! - The edge ops read the graph's CSR (and for ME-BCRS order its slot map) from the
//!   [`GraphHandle`](crate::ops::GraphHandle), which uploads them on first use: call each op
//!   once before capturing a graph.

pub mod adam;
pub mod add_assign;
pub mod all;
pub mod attention_tc;
pub mod batch_norm;
pub mod bce_column;
pub mod bce_logits;
pub mod bias_add;
pub mod col_sums;
pub mod copy;
pub mod cross_entropy;
pub mod dot;
pub mod dropout;
pub mod dropout_gemm;
pub mod edge_softmax;
pub mod elu;
pub mod elu_dropout;
pub mod fused_attention;
pub mod gat_attention;
pub mod gat_edge_logits;
pub mod gat_scores;
pub mod gather_rows;
pub mod gemm;
pub mod hadamard;
pub mod head_columns;
pub mod negative_pattern;
pub mod negative_sample;
pub mod pair_dot;
pub mod pair_hadamard;
pub mod relu;
pub mod relu_dropout;
pub mod row_normalize;
pub mod row_split;
pub mod scaled_add;
pub mod sddmm;
pub mod segment_pool;
pub mod spmm;
pub mod transpose_edges;

pub use adam::{AdamHyper, AdamTensors, adam, adam_cpu, adam_many, adam_table};
pub use add_assign::{add_assign, add_assign_cpu};
pub use all::{Ops, op_set};
pub use batch_norm::{BN_EPS, BN_MOMENTUM, BatchNormHyper, batch_norm, batch_norm_backward, batch_norm_backward_cpu, batch_norm_cpu};
pub use bias_add::{bias_add, bias_add_cpu, bias_relu, sum_bias_relu};
pub use col_sums::{col_sums, col_sums_cpu};
pub use cross_entropy::{MASK_TEST, MASK_TRAIN, MASK_VAL, cross_entropy, cross_entropy_cpu};
pub use dot::{dot, dot_cpu};
pub use dropout::{
    DropKey, dropout_at, dropout_backward, dropout_backward_cpu, dropout_backward_matrix, dropout_backward_matrix_cpu, dropout_cpu,
    dropout_cpu_at, dropout_matrix, dropout_matrix_at, dropout_matrix_cpu_at, input_dropout_matrix,
};
pub use edge_softmax::{Softmaxed, edge_softmax_backward, edge_softmax_backward_cpu, edge_softmax_scaled, edge_softmax_scaled_cpu};
pub use relu::{relu, relu_backward, relu_backward_cpu, relu_cpu};
pub use row_normalize::{row_normalize, row_normalize_backward, row_normalize_backward_cpu, row_normalize_cpu, row_normalize_with_half};
pub use scaled_add::{scaled_add, scaled_add_cpu};

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gpu::memory::padded_ld;
use crate::gpu::{DeviceMatrix, Gpu};
pub(crate) use crate::ops::launch_shape::{elementwise_shape, row_shape};
use crate::shared::config::{NN_BLOCK, NN_BLOCKS_PER_SM};

/// What a device matrix's elements may be (f32, f16).
pub(crate) trait DeviceElem: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Clone + Default + Unpin {}
impl<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Clone + Default + Unpin> DeviceElem for T {}

/// Rows per rayon task in the CPU reductions: fixed, so their sums do not depend on the
/// number of threads (deterministic results).
pub(crate) const ROW_BLOCK: usize = 1024;

/// Elements per rayon task in the elementwise CPU ops.
pub(crate) const MIN_PAR_LEN: usize = 4096;

/// A device matrix the kernels can index: stride `padded_ld(cols)`, buffer large enough, fewer
/// than 2^31 rows and a stride below 2^31. Row and column ids are u32 in the kernels (a row
/// loop adds up to a grid's threads, < 2^31, to a row id below 2^31 without wrapping); element
/// offsets and counts are u64 (`kernels-gpu/src/index.rs`), so `rows * ld` may pass 2^32 and is
/// bounded only by the GPU's memory. Edge ops add their own limit: nnz < 2^31 (u32 edge ids
/// and `row_ptr`, as cuSPARSE's 32-bit indices); more would need u64 `row_ptr` and edge ids.
pub(crate) fn check_matrix_64<T: DeviceElem>(m: &DeviceMatrix<T>, what: &str) -> Result<()> {
    check_layout(m, what)?;
    if m.rows > (u32::MAX / 2) as usize || m.ld > (u32::MAX / 2) as usize {
        return Err(Error::Unsupported(format!("{what}: {} x {} has 2^31 or more rows or columns", m.rows, m.ld)));
    }
    Ok(())
}

/// `check_matrix_64` plus `rows * ld <= 2^32`: for the kernels that still compute element
/// offsets in 32 bits (GAT's edge logits, whose rewrite is under way; its score matrices are
/// n x heads, over 2^32 elements only past 2^29 nodes). Every other op uses `check_matrix_64`.
pub(crate) fn check_matrix(m: &DeviceMatrix<f32>, what: &str) -> Result<()> {
    check_matrix_64(m, what)?;
    if m.rows * m.ld > u32::MAX as usize {
        return Err(Error::Unsupported(format!("{what}: {} x {} is over 2^32 elements", m.rows, m.ld)));
    }
    Ok(())
}

/// Stride `padded_ld(cols)` and a buffer that holds `rows * ld` elements.
fn check_layout<T: DeviceElem>(m: &DeviceMatrix<T>, what: &str) -> Result<()> {
    if m.ld != padded_ld(m.cols) || m.buf.len() < m.rows * m.ld {
        return Err(Error::Shape(format!(
            "{what}: {} x {} matrix with stride {} over {} elements (want stride {})",
            m.rows,
            m.cols,
            m.ld,
            m.buf.len(),
            padded_ld(m.cols)
        )));
    }
    Ok(())
}

/// Both matrices valid, of one shape, on one GPU.
pub(crate) fn check_same(a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, what: &str) -> Result<()> {
    check_matrix_64(a, what)?;
    check_matrix_64(b, what)?;
    if a.rows != b.rows || a.cols != b.cols {
        return Err(Error::Shape(format!("{what}: {} x {} and {} x {}", a.rows, a.cols, b.rows, b.cols)));
    }
    check_gpu(a.gpu(), b.gpu(), what)
}

pub(crate) fn check_gpu(a: &Arc<Gpu>, b: &Arc<Gpu>, what: &str) -> Result<()> {
    if !Arc::ptr_eq(a, b) {
        return Err(Error::Unsupported(format!("{what}: operands on different GPU contexts")));
    }
    Ok(())
}

/// Float4s in a valid matrix's padded buffer (ld is a multiple of 8); u64, as the kernels'.
pub(crate) fn n4(m: &DeviceMatrix<f32>) -> u64 {
    (m.rows * m.ld / 4) as u64
}

/// Cut `data` (one value per CSR edge, CSR order) into runs of whole rows, `ROW_BLOCK` rows per
/// run: (first row, rows in the run, the run's values), for rayon over rows.
pub(crate) fn row_runs<'a, T>(row_ptr: &[u32], mut data: &'a mut [T]) -> Vec<(usize, usize, &'a mut [T])> {
    let n = row_ptr.len().saturating_sub(1);
    let mut runs = Vec::with_capacity(n.div_ceil(ROW_BLOCK));
    let mut r = 0;
    while r < n {
        let end = (r + ROW_BLOCK).min(n);
        let len = (row_ptr[end] - row_ptr[r]) as usize;
        let (head, tail) = std::mem::take(&mut data).split_at_mut(len);
        runs.push((r, end - r, head));
        data = tail;
        r = end;
    }
    runs
}

/// The edge count of a CSR `row_ptr`, checked to be a valid prefix sum starting at 0.
pub(crate) fn csr_nnz(row_ptr: &[u32]) -> usize {
    assert!(!row_ptr.is_empty() && row_ptr[0] == 0, "row_ptr must start with 0");
    assert!(row_ptr.windows(2).all(|w| w[0] <= w[1]), "row_ptr must be non-decreasing");
    row_ptr[row_ptr.len() - 1] as usize
}
