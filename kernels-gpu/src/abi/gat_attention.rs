// Fused multi-head GAT attention (`nn/gat_attention.rs`): the argument struct shared by its
// three kernels and their instances. Shared with the host (`include!`). Matrices are row-major
// f32 with a padded stride: Wh, out, dout and dWh are n x (heads * dim) with stride `ld`; the
// per-node scores s_src, s_dst, their gradients and D are n x heads with stride `hld`; the
// softmax statistics are n x (2 heads) with stride `sld`, (max, sum) per head.
use super::row_split::RowSplit;
use super::*;

kernel_args! {
    /// One GAT layer's attention over the edges of S (row i = target, its edges the sources j):
    /// e_ijh = LeakyReLU(s_dst[i][h] + s_src[j][h]), alpha = softmax over each row per head,
    /// alpha' = alpha after attention dropout (kept with 1 - p, scaled 1 / (1 - p)),
    /// out_i = [sum_j alpha'_ijh Wh_jh]_h + bias.
    pub struct GatAttentionArgs {
        /// S (forward and row pass), and Sᵀ with the S entry of each of its entries (column pass).
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        pub t_ptr: Ptr<u32>,
        pub t_cols: Ptr<u32>,
        pub t_of: Ptr<u32>,
        /// How the launch spreads the rows (S's for the forward and the row pass, Sᵀ's for the
        /// column pass); the combine launch merges the long rows' segments, a lane per head.
        pub split: RowSplit,
        pub heads: u32,
        pub dim: u32,
        /// log2 of the lanes of an edge slot (one per head: next_pow2(heads) <= 32).
        pub shift: u32,
        pub ld: u32,
        pub hld: u32,
        pub sld: u32,
        pub slope: f32,
        /// Attention dropout: keep edge e of head h iff its hash at index (first_edge + e) *
        /// heads + h is >= threshold (0: no dropout); kept values times `keep_scale`. The step
        /// is read when the kernel runs (a replayed graph draws new masks).
        pub threshold: u32,
        pub keep_scale: f32,
        pub seed_key: u64,
        pub first_edge: u64,
        /// 1 when every such index lies below 2^32: the kernels compute it in 32-bit
        /// arithmetic with the first span's key (the same draw, fewer instructions an edge).
        pub low_index: u32,
        pub step: Ptr<u32>,
        pub wh: Ptr<f32>,
        pub s_src: Ptr<f32>,
        pub s_dst: Ptr<f32>,
        pub bias: Ptr<f32>,
        pub stats: PtrMut<f32>,
        pub out: PtrMut<f32>,
        pub dout: Ptr<f32>,
        pub d_row: PtrMut<f32>,
        /// Per row and head (s_dst, lse, D, unused): n x heads x 4 floats, dense; written by
        /// the row pass, gathered by the column pass (16-byte aligned).
        pub row_state: PtrMut<f32>,
        pub ds_dst: PtrMut<f32>,
        pub ds_src: PtrMut<f32>,
        pub dwh: PtrMut<f32>,
        /// The attention vectors (1 x heads dim each), or null: given, the column pass writes
        /// dWh with the per-node scores' part ds_src ⊗ a_src + ds_dst ⊗ a_dst added, so the
        /// scores' backward need not read and write dWh again.
        pub a_src: Ptr<f32>,
        pub a_dst: Ptr<f32>,
        /// The edges' original indices (edge e keyed as first_edge + edge_ids[e]: a part of a
        /// partitioned graph draws the whole graph's masks), or null (first_edge + e).
        pub edge_ids: Ptr<u32>,
    }
}

// `_dN`: heads of at most N columns, gathered N at a time per lane; edges' gathers in flight per
// slot: 8-column heads 2 forward and 1 in the backward passes (fewer registers, more blocks an
// SM: faster on R-MAT 2^18 than 4, NOTES), 2 and 1 for 16 and 32 columns; one head of at most 8
// columns (GAT's output layer, a lane per edge) 1 forward (0.19 ms vs 0.21 on R-MAT 2^18).
// `_h16`: the 8-column forward writing out in f16 (a hidden layer whose output only the next
// layer's products and the ELU's backward read, f16 precision).
kernels! {
    gat_attention_forward_d8(GatAttentionArgs) = crate::nn::gat_attention::forward::<8, 2, false>;
    gat_attention_forward_d16(GatAttentionArgs) = crate::nn::gat_attention::forward::<16, 2, false>;
    gat_attention_forward_d32(GatAttentionArgs) = crate::nn::gat_attention::forward::<32, 1, false>;
    gat_attention_row_grad_d8(GatAttentionArgs) = crate::nn::gat_attention::row_grad::<8, 1>;
    gat_attention_row_grad_d16(GatAttentionArgs) = crate::nn::gat_attention::row_grad::<16, 2>;
    gat_attention_row_grad_d32(GatAttentionArgs) = crate::nn::gat_attention::row_grad::<32, 1>;
    gat_attention_col_grad_d8(GatAttentionArgs) = crate::nn::gat_attention::col_grad::<8, 1>;
    gat_attention_col_grad_d16(GatAttentionArgs) = crate::nn::gat_attention::col_grad::<16, 2>;
    gat_attention_col_grad_d32(GatAttentionArgs) = crate::nn::gat_attention::col_grad::<32, 1>;
    gat_attention_forward_d8_one_head(GatAttentionArgs) = crate::nn::gat_attention::forward::<8, 1, false>;
    gat_attention_forward_d8_h16(GatAttentionArgs) = crate::nn::gat_attention::forward::<8, 2, true>;
}
