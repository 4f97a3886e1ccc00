// Input dropout fused with the first feature transform (`nn/dropout_gemm.rs`): argument
// structs, tile sizes and instances. Shared with the host (`include!`).
use super::*;

/// Rows of X per forward block (4 warps of 16 rows).
pub const DG_BLOCK_ROWS: u32 = 64;
/// Columns of dW (rows of W) per weight-gradient block (4 warps of 16).
pub const DG_BLOCK_K: u32 = 64;
/// Threads per block of both product kernels.
pub const DG_THREADS: u32 = 128;
/// Threads per block of the streaming forward (8 warps, each a 16-row tile at a time).
pub const DG_STREAM_THREADS: u32 = 256;
/// Threads per block of the streaming weight gradient (4 warps, each a 32-column panel of x).
pub const DG_STREAM_DW_THREADS: u32 = 128;
/// Columns of f32 x per streaming forward iteration (its w fragments are staged for k rounded
/// up to a multiple of this; f16 x (`_h16` instances) takes twice as many).
pub const DG_STREAM_K_STEP: u32 = 64;

/// Threads per block of the wide f16 forward (8 warps, each a 16-row tile at a time).
pub const DG_WIDE_THREADS: u32 = 256;
/// Columns of x per wide-forward iteration (its w fragments are staged for k rounded up to a
/// multiple of this).
pub const DG_WIDE_K_STEP: u32 = 128;

/// Threads per block of the wide f16 weight gradient (4 warps, each a 32-column panel of x).
pub const DG_WIDE_DW_THREADS: u32 = 128;
/// Stages of 32 rows in flight in the wide weight gradient's shared memory.
pub const DG_WIDE_DW_STAGES: u32 = 4;
/// Its shared memory: per stage 32 rows of x (128 f16 columns, rows 288 bytes apart), of dy
/// (64 f32 columns, 272 bytes apart) and of the keep bits (16 bytes).
pub const DG_WIDE_DW_SMEM: u32 = DG_WIDE_DW_STAGES * 32 * (288 + 272 + 16);

/// Words of keep bits a row of the wide products' mask takes (4 per 128 columns, so that a
/// weight-gradient block's 4 words of a row are one 16-byte copy).
pub const fn keep_words_per_row(ldx: u32) -> u32 {
    4 * ldx.div_ceil(128)
}

/// X rows per step of the weight-gradient loop (and the multiple a split's rows are rounded to).
pub const DG_DW_STEP_ROWS: u32 = 32;

kernel_args! {
    /// y = dropout(x) w for x rows x k (stride ldx), w k x n and y rows x n (stride ldw): block
    /// b computes rows 64 (b / col_tiles).. and columns 8 NT (b % col_tiles)..; element (r, c) of
    /// x is kept iff `dropout_keep_keyed(seed_key, step, offset + r * ldx + c, threshold)`.
    /// The streaming instances also multiply by a transposed w (`w_trans` = 1: w is stored
    /// n x k with stride `ldb`, as a plain GEMM's op(B) = Bᵀ; the tiled ones need 0) and guard
    /// w's columns against `n`.
    pub struct DropoutGemmArgs {
        pub rows: u32,
        pub k: u32,
        pub ldx: u32,
        pub ldw: u32,
        /// Stride of w as stored (= ldw unless transposed).
        pub ldb: u32,
        /// Columns of y (w's columns; rows of the stored w when transposed).
        pub n: u32,
        pub w_trans: u32,
        pub col_tiles: u32,
        pub threshold: u32,
        /// f32 elements, or f16 ones in the `_h16` instances (same stride ldx in elements).
        pub x: Ptr<f32>,
        pub w: Ptr<f32>,
        pub y: PtrMut<f32>,
        /// 1 / (1 - p).
        pub scale: f32,
        pub seed_key: u64,
        /// The step counter, read when the kernel runs (as the dropout kernel's).
        pub step: Ptr<u32>,
        pub offset: u64,
        /// Where the wide `_bits` instance also writes the mask, a bit an element (rows x
        /// `keep_words_per_row(ldx)` words); null for the others.
        pub keep_bits: PtrMut<u32>,
        /// 1: x enters as ELU(x), then dropped out (the layer below's activation applied on
        /// load; the streaming kernels on f32 x only).
        pub elu: u32,
        /// x's rows' original ids (row r keyed as row ids[r], as `DropoutArgs::ids`), or null.
        pub ids: Ptr<u32>,
    }

    /// partial[s] = dropout(x[rows of split s])ᵀ dy[same rows] (k x ldw each, stride ldw):
    /// block b is split b / (k_tiles col_tiles), dW rows 64 ((b / col_tiles) % k_tiles)..,
    /// columns 8 NT (b % col_tiles)..; split s owns x rows s rows_per_split.. (a multiple of 32).
    /// The streaming instances (`_stream_`) take `k_tiles` as the number of groups of W
    /// 32-column panels of x, W the block's warps (block b: split b / k_tiles, panels
    /// W (b % k_tiles)..) and ignore `col_tiles` (one block covers all of dw's ≤ 32 columns).
    pub struct DropoutGemmDwArgs {
        pub rows: u32,
        pub k: u32,
        pub ldx: u32,
        pub ldw: u32,
        pub k_tiles: u32,
        pub col_tiles: u32,
        pub rows_per_split: u32,
        pub threshold: u32,
        /// f32 elements, or f16 ones in the `_h16` instances.
        pub x: Ptr<f32>,
        pub dy: Ptr<f32>,
        pub partial: PtrMut<f32>,
        pub scale: f32,
        pub seed_key: u64,
        pub step: Ptr<u32>,
        pub offset: u64,
        /// The wide instance reads the mask from these bits (the wide forward's) where not
        /// null; null for the others.
        pub keep_bits: Ptr<u32>,
        /// 1: x enters as ELU(x), then dropped out (as `DropoutGemmArgs::elu`).
        pub elu: u32,
        /// As `DropoutGemmArgs::ids`.
        pub ids: Ptr<u32>,
    }

    /// out[i] = sum over s < splits of partial[s n + i] (a warp per i, fixed order: deterministic).
    pub struct SplitSumArgs {
        pub n: u32,
        pub splits: u32,
        pub partial: Ptr<f32>,
        pub out: PtrMut<f32>,
    }
}

kernels! {
    dropout_gemm_tf32_nt2(DropoutGemmArgs) = crate::nn::dropout_gemm::forward::<2, false>;
    dropout_gemm_tf32_nt4(DropoutGemmArgs) = crate::nn::dropout_gemm::forward::<4, false>;
    dropout_gemm_tf32_nt8(DropoutGemmArgs) = crate::nn::dropout_gemm::forward::<8, false>;
    dropout_gemm_f32_nt2(DropoutGemmArgs) = crate::nn::dropout_gemm::forward::<2, true>;
    dropout_gemm_f32_nt4(DropoutGemmArgs) = crate::nn::dropout_gemm::forward::<4, true>;
    dropout_gemm_f32_nt8(DropoutGemmArgs) = crate::nn::dropout_gemm::forward::<8, true>;
    dropout_gemm_dw_tf32_nt2(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad::<2, false>;
    dropout_gemm_dw_tf32_nt4(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad::<4, false>;
    dropout_gemm_dw_tf32_nt8(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad::<8, false>;
    dropout_gemm_dw_f32_nt2(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad::<2, true>;
    dropout_gemm_dw_f32_nt4(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad::<4, true>;
    dropout_gemm_dw_f32_nt8(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad::<8, true>;
    dropout_gemm_stream_tf32_nt2(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_stream::<2, false, 1, true>;
    dropout_gemm_stream_tf32_nt4(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_stream::<4, false, 1, false>;
    dropout_gemm_stream_f32_nt2(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_stream::<2, true, 1, false>;
    dropout_gemm_stream_f32_nt4(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_stream::<4, true, 1, false>;
    dropout_gemm_dw_stream_tf32_nt2(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad_stream::<2, false, 1>;
    dropout_gemm_dw_stream_tf32_nt4(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad_stream::<4, false, 1>;
    dropout_gemm_dw_stream_f32_nt2(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad_stream::<2, true, 1>;
    dropout_gemm_dw_stream_f32_nt4(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad_stream::<4, true, 1>;
    dropout_gemm_stream_tf32_h16_nt2(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_stream::<2, false, 2, true>;
    dropout_gemm_dw_stream_tf32_h16_nt2(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad_stream::<2, false, 2>;
    dropout_gemm_stream_tf32_h16_nt4(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_stream::<4, false, 2, false>;
    dropout_gemm_dw_stream_tf32_h16_nt4(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad_stream::<4, false, 2>;
    dropout_gemm_wide_h16(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_wide_h16::<false>;
    dropout_gemm_wide_h16_bits(DropoutGemmArgs) = crate::nn::dropout_gemm::forward_wide_h16::<true>;
    dropout_gemm_dw_wide_h16(DropoutGemmDwArgs) = crate::nn::dropout_gemm::weight_grad_wide_h16;
    split_sum_f32(SplitSumArgs) = crate::nn::dropout_gemm::split_sum;
}
