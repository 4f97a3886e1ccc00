//! Primitive ops of GNN training (f32, CUDA cores): memory-bound elementwise kernels
//! (grid-stride over float4s of whole padded buffers) and row kernels (a warp per row,
//! grid-stride over rows). Sums over the whole launch go through `BlockSums`: per-thread
//! partials, one warp reduction, one shared-memory add per warp and one global atomic per block.
//!
//! Sizes (`crate::index`): a matrix may hold more than 2^32 elements, so the elementwise kernels
//! walk u64 positions (`grid_stride`) and split them with `split_offset`; the row kernels keep
//! u32 row ids (fewer than 2^31 rows, checked by the host) and form offsets as
//! `row as usize * ld`, in 64 bits; edge ids stay u32 (nnz < 2^31).

pub mod adam;
pub mod add_assign;
pub mod attention_tc;
pub mod batch_norm;
pub mod bce_column;
pub mod bce_logits;
pub mod bias_add;
pub mod col_sums;
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
pub mod segment_pool;

use crate::index::Strided;
use crate::ptx;

/// This thread's positions in a grid-stride loop over `n` items (u64: `index.rs`).
#[inline(always)]
pub fn grid_stride(n: u64) -> Strided {
    Strided::new(global_thread() as u64, grid_threads() as u64, n)
}

/// This thread's index in the grid (x only).
#[inline(always)]
pub fn global_thread() -> u32 {
    ptx::ctaid_x() * ptx::ntid_x() + ptx::tid_x()
}

/// Threads in the grid (the grid-stride step).
#[inline(always)]
pub fn grid_threads() -> u32 {
    ptx::nctaid_x() * ptx::ntid_x()
}

/// This warp's index in the grid and the number of warps in the grid (blocks of whole warps).
#[inline(always)]
pub fn global_warp() -> (u32, u32) {
    let per_block = ptx::ntid_x() / 32;
    (ptx::ctaid_x() * per_block + ptx::warp_id(), ptx::nctaid_x() * per_block)
}

/// Lane groups of `1 << shift` lanes, one row each (`crate::partition::nn_row_group_shift`):
/// (this lane's group in the warp, its index in the group, lanes per group, groups per warp).
#[inline(always)]
pub fn row_group(shift: u32) -> (u32, u32, u32, u32) {
    let lane = ptx::lane_id();
    (lane >> shift, lane & ((1 << shift) - 1), 1 << shift, 32 >> shift)
}

/// Sum over each aligned group of `lanes` lanes (a power of two; every lane of the warp must
/// call this with the same `lanes`).
#[inline(always)]
pub fn group_sum(mut v: f32, lanes: u32) -> f32 {
    let mut m = lanes >> 1;
    while m > 0 {
        v += ptx::shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

/// `N` block-wide sums added atomically to `out[0..N]`, through `4 * N` bytes of dynamic
/// shared memory at offset 0. Every thread of the block must call `new` and `flush` (they hold
/// barriers), so kernels using it never return early.
pub struct BlockSums<const N: usize>;

impl<const N: usize> BlockSums<N> {
    /// Zero the shared slots; a barrier makes them visible before any warp adds.
    #[inline(always)]
    pub fn new() -> Self {
        let t = ptx::tid_x() as usize;
        if t < N {
            unsafe { ptx::st_shared_f32(ptx::dyn_smem_base() + 4 * t as u32, 0.0) };
        }
        ptx::sync_threads();
        BlockSums
    }

    /// Sum `partial[k]` over the block and add it to `out[k]` (one `red.global.add` per slot).
    #[inline(always)]
    pub unsafe fn flush(self, partial: [f32; N], out: *mut f32) {
        let base = ptx::dyn_smem_base();
        let lane = ptx::lane_id();
        for (k, &p) in partial.iter().enumerate() {
            let s = ptx::warp_sum(p);
            if lane == 0 {
                unsafe { ptx::red_shared_add_f32(base + 4 * k as u32, s) };
            }
        }
        ptx::sync_threads();
        let t = ptx::tid_x() as usize;
        if t < N {
            unsafe { ptx::red_add_f32(out.add(t), ptx::ld_shared_f32(base + 4 * t as u32)) };
        }
    }
}

impl<const N: usize> Default for BlockSums<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Reduce `v` over the whole block with the warp reduction `op` (each warp, then warp 0 over
/// the warp results; `identity` fills the missing warps);
/// every thread gets the result. Uses the first 32 floats of dynamic shared memory, and ends
/// with a barrier so the next reduction may reuse them.
#[inline(always)]
pub fn block_reduce(v: f32, op: impl Fn(f32) -> f32, identity: f32) -> f32 {
    let base = ptx::dyn_smem_base();
    let (lane, warp) = (ptx::lane_id(), ptx::tid_x() / 32);
    let w = op(v);
    if lane == 0 {
        unsafe { ptx::st_shared_f32(base + 4 * warp, w) };
    }
    ptx::sync_threads();
    if warp == 0 {
        let x = if lane < ptx::ntid_x() / 32 { unsafe { ptx::ld_shared_f32(base + 4 * lane) } } else { identity };
        let r = op(x);
        if lane == 0 {
            unsafe { ptx::st_shared_f32(base, r) };
        }
    }
    ptx::sync_threads();
    let r = unsafe { ptx::ld_shared_f32(base) };
    ptx::sync_threads();
    r
}
