// Hybrid SpMM kernels (`spmm/remainder.rs`): the CUDA-core remainder S_cc of the FTC-GNN split
// (`ops::spmm::hybrid`). Argument structs, launch constants and instances, shared with the host
// (`include!`).
use super::*;

/// Warps per block of the remainder SpMM.
pub const HYBRID_CC_WARPS: u32 = 8;

/// Set in `item_row` when the item's row is shared with other items (a long row cut by nonzero
/// count): its partial sums are added atomically (`red.global.add.f32`) instead of stored.
pub const HYBRID_CC_SPLIT_ROW: u32 = 1 << 31;

kernel_args! {
    /// Y (+)= S_cc X on CUDA cores. A group of `1 << group_shift` lanes takes one work item (a
    /// row, or a run of a long row's nonzeros: `item_ptr[i]..item_ptr[i + 1]` of the S_cc CSR),
    /// each lane one 16-byte chunk of the X row (4 f32 or 8 f16 features); grid.y covers the
    /// row in slices of `1 << group_shift` chunks.
    pub struct CcSpmmArgs {
        /// Work items in `item_ptr` / `item_row`.
        pub n_items: u32,
        /// log2 of the lanes per item (0..=5).
        pub group_shift: u32,
        /// 16-byte chunks per padded X row (`ld * feature bytes / 16`).
        pub chunks: u32,
        /// Padded row stride of Y in floats (a multiple of 8; X has the same stride in its type).
        pub ld: u32,
        /// 1: Y += S_cc X (Y holds the tensor-core part); 0: Y = S_cc X (every row is an item;
        /// split rows were cleared by `spmm_cc_zero_rows`).
        pub accumulate: u32,
        /// First nonzero of every item, and the end of the last (n_items + 1).
        pub item_ptr: Ptr<u32>,
        /// Row of every item, `| HYBRID_CC_SPLIT_ROW` when other items add into the same row.
        pub item_row: Ptr<u32>,
        /// Column of every S_cc nonzero.
        pub col_idx: Ptr<u32>,
        /// Value of every S_cc nonzero: f32, or f16 with f16 features (read through this pointer).
        pub values: Ptr<u32>,
        /// X (n_cols x ld) in the kernel's feature type, read as 32-bit words.
        pub x: Ptr<u32>,
        /// Y (n_rows x ld), f32.
        pub y: PtrMut<f32>,
    }

    /// Clear the listed rows of Y (the split rows, before an overwriting remainder launch).
    pub struct CcZeroRowsArgs {
        pub rows: Ptr<u32>,
        pub ld: u32,
        pub y: PtrMut<f32>,
    }
}

kernels! {
    spmm_cc_f32_u4(CcSpmmArgs) = crate::spmm::remainder::cc_spmm::<crate::spmm::remainder::F32, 4>;
    spmm_cc_f32_u8(CcSpmmArgs) = crate::spmm::remainder::cc_spmm::<crate::spmm::remainder::F32, 8>;
    spmm_cc_f16_u4(CcSpmmArgs) = crate::spmm::remainder::cc_spmm::<crate::spmm::remainder::F16, 4>;
    spmm_cc_f16_u8(CcSpmmArgs) = crate::spmm::remainder::cc_spmm::<crate::spmm::remainder::F16, 8>;
    spmm_cc_zero_rows(CcZeroRowsArgs) = crate::spmm::remainder::zero_rows;
}
