// Fused AGNN attention (`nn/fused_attention.rs`): argument structs and instances (the lanes of a
// slot, which share one edge, are the instance's: `_lN`). Shared with the host (`include!`).
// Matrices are row-major f32 with a padded stride of `4 * ld4` floats (padding zero); per-row
// vectors (inv_norm, the softmax statistics, D) live in the first values of a matrix buffer,
// `inv_norm[r]`, `stats[2 r]`, `stats[2 r + 1]`, `d_row[r]`.
use super::*;
use super::row_split::RowSplit;

kernel_args! {
    /// The rows a fused attention kernel walks and how its lanes split a row.
    pub struct AttnRows {
        /// The pattern the kernel walks: S (forward, row gradients) or Sᵀ (column gradients).
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        /// float4s per row of every matrix (all are n x d with the same stride).
        pub ld4: u32,
        /// How the launch spreads the pattern's rows (`row_split.rs`); the combine launch
        /// merges the long rows' segments, a lane per float4 of slot 0.
        pub split: RowSplit,
    }

    /// out_i = sum_j alpha_ij h_j, alpha = softmax_j(beta n_i . n_j), n_j = h_j inv_norm_j;
    /// writes out (padding 0) and per row (max, sum) of the softmax ((0, 0) for empty rows).
    pub struct AttentionForwardArgs {
        pub rows: AttnRows,
        /// One value, read when the kernel runs.
        pub beta: Ptr<f32>,
        pub n: Ptr<f32>,
        /// The rows gathered per edge: h itself (`_f32` instances) or its f16 copy (`_f16`: an
        /// f16 matrix of the same stride, at this address).
        pub h_gather: Ptr<f32>,
        pub inv_norm: Ptr<f32>,
        pub out: PtrMut<f32>,
        pub stats: PtrMut<f32>,
    }

    /// The backward's pass over the rows of S: D_i = dout_i . out_i, the row part of dn
    /// (dn_i = beta sum_j ds_ij n_j) and dbeta (sum ds_ij cos_ij; zeroed by the launcher, one
    /// atomic per block).
    pub struct AttentionRowGradArgs {
        pub rows: AttnRows,
        pub beta: Ptr<f32>,
        pub n: Ptr<f32>,
        /// h or its f16 copy, as the forward's.
        pub h_gather: Ptr<f32>,
        pub inv_norm: Ptr<f32>,
        pub stats: Ptr<f32>,
        pub out: Ptr<f32>,
        pub dout: Ptr<f32>,
        pub dn: PtrMut<f32>,
        pub d_row: PtrMut<f32>,
        pub dbeta: PtrMut<f32>,
    }

    /// The backward's pass over the rows of Sᵀ (the in-edges of each node j): adds
    /// beta sum_i ds_ij n_i to the row part of dn_j and writes
    /// dh_j = sum_i alpha_ij dout_i + the normalisation's backward of dn_j.
    pub struct AttentionColGradArgs {
        pub rows: AttnRows,
        pub beta: Ptr<f32>,
        pub n: Ptr<f32>,
        pub h: Ptr<f32>,
        /// h or its f16 copy, as the forward's.
        pub h_gather: Ptr<f32>,
        pub inv_norm: Ptr<f32>,
        pub stats: Ptr<f32>,
        /// dout or its f16 copy, as `h_gather`.
        pub dout_gather: Ptr<f32>,
        pub d_row: Ptr<f32>,
        pub dn: Ptr<f32>,
        pub dh: PtrMut<f32>,
    }
}

kernel_args! {
    /// The windows a tensor-core attention kernel (`nn/attention_tc.rs`) walks: 8 consecutive
    /// rows of the pattern (S, or Sᵀ for the column pass) each, a list of blocks of 16 unique
    /// neighbours, as `host/ops/nn/attention_tc.rs` builds them. Matrices have 32 columns at
    /// stride 32; the kernels write the windows' rows only.
    pub struct TcWindows {
        pub n_rows: u32,
        pub row_ptr: Ptr<u32>,
        /// Rows of at least this many entries are not the windows' (left to the CUDA-core
        /// kernels: not written here).
        pub row_max: u32,
        /// The windows in the order warps take them (most blocks first).
        pub order: Ptr<u32>,
        pub n_windows: u32,
        /// Window w's blocks are win_ptr[w] .. win_ptr[w + 1].
        pub win_ptr: Ptr<u32>,
        /// 16 neighbour ids a block (a short block's padding repeats one of its ids, with its
        /// mask bits 0).
        pub blk_cols: Ptr<u32>,
        /// 16 bytes a block: bit r of byte c set where window row r has an edge to the
        /// block's neighbour c.
        pub blk_mask: Ptr<u8>,
    }

    /// The forward on the tensor cores: out and stats as `AttentionForwardArgs`.
    pub struct AttentionTcForwardArgs {
        pub win: TcWindows,
        /// One value, read when the kernel runs.
        pub beta: Ptr<f32>,
        /// n in f16 (as u32 words, f16 pairs).
        pub n16: Ptr<u32>,
        pub inv_norm: Ptr<f32>,
        pub out: PtrMut<f32>,
        pub stats: PtrMut<f32>,
    }

    /// The row pass on the tensor cores: as `AttentionRowGradArgs`, the gathered rows from an
    /// f16 copy of n; the window's own dout rows read in f32 and written to `dout16`.
    pub struct AttentionTcRowGradArgs {
        pub win: TcWindows,
        pub beta: Ptr<f32>,
        pub n16: Ptr<u32>,
        /// Written: dout in f16 (every row), for the column pass to gather.
        pub dout16: PtrMut<u32>,
        pub inv_norm: Ptr<f32>,
        pub stats: Ptr<f32>,
        pub out: Ptr<f32>,
        pub dout: Ptr<f32>,
        pub dn: PtrMut<f32>,
        pub d_row: PtrMut<f32>,
        pub dbeta: PtrMut<f32>,
    }

    /// The column pass on the tensor cores (windows of Sᵀ): as `AttentionColGradArgs`, the
    /// gathered rows from f16 copies of n and dout.
    pub struct AttentionTcColGradArgs {
        pub win: TcWindows,
        pub beta: Ptr<f32>,
        pub n16: Ptr<u32>,
        pub dout16: Ptr<u32>,
        pub n: Ptr<f32>,
        pub inv_norm: Ptr<f32>,
        pub stats: Ptr<f32>,
        pub d_row: Ptr<f32>,
        pub dn: Ptr<f32>,
        pub dh: PtrMut<f32>,
    }
}

/// Entries a slot keeps in flight (the instances' `U`; the host derives from them the rows a
/// slot walks alone): one-chunk instances 4, their column pass 2 (its entries carry two rows, and
/// at four it held two blocks an SM), the 8-lane row pass 3 (four blocks an SM); four-chunk
/// instances 1 (registers).
pub const ATTN_U: usize = 4;
pub const ATTN_U_COLUMN: usize = 2;
pub const ATTN_U_ROW_L8: usize = 3;
pub const ATTN_U_C4: usize = 1;

// `_c1_lN`: rows of at most N float4s (d <= 4 N), one float4 per lane of a slot of N lanes;
// `_c4`: up to 128 float4s (d <= 512), four per lane of a warp-wide slot; entries in flight as
// the `ATTN_U*` constants above. `_f32` / `_f16`: the type of the gathered rows.
kernels! {
    attention_forward_c1_l8_f32(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G32, 1, 8, ATTN_U>;
    attention_forward_c1_l16_f32(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G32, 1, 16, ATTN_U>;
    attention_forward_c1_l32_f32(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G32, 1, 32, ATTN_U>;
    attention_forward_c4_f32(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G32, 4, 32, ATTN_U_C4>;
    attention_forward_c1_l8_f16(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G16, 1, 8, ATTN_U>;
    attention_forward_c1_l16_f16(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G16, 1, 16, ATTN_U>;
    attention_forward_c1_l32_f16(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G16, 1, 32, ATTN_U>;
    attention_forward_c4_f16(AttentionForwardArgs) = crate::nn::fused_attention::forward::<G16, 4, 32, ATTN_U_C4>;
    attention_row_grad_c1_l8_f32(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G32, 1, 8, ATTN_U_ROW_L8>;
    attention_row_grad_c1_l16_f32(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G32, 1, 16, ATTN_U>;
    attention_row_grad_c1_l32_f32(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G32, 1, 32, ATTN_U>;
    attention_row_grad_c4_f32(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G32, 4, 32, ATTN_U_C4>;
    attention_row_grad_c1_l8_f16(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G16, 1, 8, ATTN_U_ROW_L8>;
    attention_row_grad_c1_l16_f16(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G16, 1, 16, ATTN_U>;
    attention_row_grad_c1_l32_f16(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G16, 1, 32, ATTN_U>;
    attention_row_grad_c4_f16(AttentionRowGradArgs) = crate::nn::fused_attention::row_grad::<G16, 4, 32, ATTN_U_C4>;
    attention_col_grad_c1_l8_f32(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G32, 1, 8, ATTN_U_COLUMN>;
    attention_col_grad_c1_l16_f32(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G32, 1, 16, ATTN_U_COLUMN>;
    attention_col_grad_c1_l32_f32(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G32, 1, 32, ATTN_U_COLUMN>;
    attention_col_grad_c4_f32(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G32, 4, 32, ATTN_U_C4>;
    attention_col_grad_c1_l8_f16(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G16, 1, 8, ATTN_U_COLUMN>;
    attention_col_grad_c1_l16_f16(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G16, 1, 16, ATTN_U_COLUMN>;
    attention_col_grad_c1_l32_f16(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G16, 1, 32, ATTN_U_COLUMN>;
    attention_col_grad_c4_f16(AttentionColGradArgs) = crate::nn::fused_attention::col_grad::<G16, 4, 32, ATTN_U_C4>;
    attention_forward_tc_d32(AttentionTcForwardArgs) = crate::nn::attention_tc::forward_tc;
    attention_row_grad_tc_d32(AttentionTcRowGradArgs) = crate::nn::attention_tc::row_grad_tc;
    attention_col_grad_tc_d32(AttentionTcColGradArgs) = crate::nn::attention_tc::col_grad_tc;
}
