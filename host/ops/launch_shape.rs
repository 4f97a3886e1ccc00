//! Launch shapes of the plain CUDA-core kernels (elementwise and row kernels of `ops::nn`, the
//! row gather of `ops::permute`): grid-stride, `NN_BLOCK` threads a block, at most
//! `NN_BLOCKS_PER_SM` blocks per SM. Here, below both, so the permutation need not import the
//! nn ops.

use crate::gpu::Gpu;
use crate::gpu::launch::Shape;
use crate::shared::config::{NN_BLOCK, NN_BLOCKS_PER_SM};

/// Grid-stride launch over `items` (one per thread), at most `NN_BLOCKS_PER_SM` blocks per SM.
pub(crate) fn elementwise_shape(gpu: &Gpu, items: u64) -> Shape {
    let blocks = items.div_ceil(NN_BLOCK as u64).min((gpu.info().sm_count * NN_BLOCKS_PER_SM) as u64);
    Shape::linear(blocks as u32, NN_BLOCK, 0)
}

/// Row-kernel launch over `rows` (grid-stride) with `rows_per_warp` rows per warp and step
/// (`32 >> nn_row_group_shift(..)`, 1 for a warp per row) and `smem_bytes` of dynamic shared
/// memory.
pub(crate) fn row_shape(gpu: &Gpu, rows: u64, rows_per_warp: u32, smem_bytes: u32) -> Shape {
    let rows_per_block = (NN_BLOCK / 32 * rows_per_warp) as u64;
    let blocks = rows.div_ceil(rows_per_block).min((gpu.info().sm_count * NN_BLOCKS_PER_SM) as u64);
    Shape::linear(blocks as u32, NN_BLOCK, smem_bytes)
}
