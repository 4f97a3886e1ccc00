// SDDMM kernels (`sddmm/`) and the edge softmax over their outputs: argument structs and
// instances. Shared with the host (`include!`).
use super::*;

kernel_args! {
    /// HP-SDDMM, f32: `nnz_per_warp` consecutive nonzeros of the row-sorted COO per warp, a
    /// group of `1 << group_shift` lanes per edge.
    pub struct HpSddmmArgs {
        pub nnz: u32,
        /// Padded row stride of A and B, in elements (a multiple of 8).
        pub ld: u32,
        pub nnz_per_warp: u32,
        /// log2 of the lanes per edge.
        pub group_shift: u32,
        /// Row of each nonzero (the COO rows).
        pub row_of: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        /// S's value of each nonzero, CSR order.
        pub values: Ptr<f32>,
        /// Output slot of each nonzero; null: CSR order.
        pub slot_of: Ptr<u32>,
        pub a: Ptr<f32>,
        pub b: Ptr<f32>,
        pub out: PtrMut<f32>,
    }

    /// TC8 SDDMM on ME-BCRS (k = 8): a warp per work item of 16 vectors of one window.
    pub struct Tc8SddmmArgs {
        /// Work items in `item_win` / `item_v0`.
        pub n_items: u32,
        /// Rows of S.
        pub n_rows: u32,
        /// Padded row stride of A and B, in elements (a multiple of 8).
        pub ld: u32,
        /// First vector of each window (n_windows + 1).
        pub win_ptr: Ptr<u32>,
        /// Column of each vector.
        pub vec_col: Ptr<u32>,
        /// S's values in ME-BCRS slots (8 per vector).
        pub values: Ptr<f32>,
        /// CSR position of each slot (u32::MAX: no edge) to write CSR order; null: write slots.
        pub slot_to_csr: Ptr<u32>,
        /// Window of each work item.
        pub item_win: Ptr<u32>,
        /// First vector of each work item.
        pub item_v0: Ptr<u32>,
        /// A (n_rows x ld) in the kernel's precision, read as 32-bit words.
        pub a: Ptr<u32>,
        /// B (n_cols x ld) in the kernel's precision, read as 32-bit words.
        pub b: Ptr<u32>,
        pub out: PtrMut<f32>,
    }

    /// TC16 SDDMM on SGT with 16-column blocks: a warp per block, `TC16_SDDMM_WARPS` per thread
    /// block, each with a 16 x 16 f32 tile of dynamic shared memory.
    pub struct Tc16SddmmArgs {
        pub n_blocks: u32,
        /// Rows of S.
        pub n_rows: u32,
        /// Padded row stride of A and B, in elements (a multiple of 8).
        pub ld: u32,
        /// Window of each block.
        pub blk_win: Ptr<u32>,
        /// First unique column of each window in `win_cols` (n_windows + 1).
        pub win_ptr: Ptr<u32>,
        /// First block of each window (n_windows + 1).
        pub blk_ptr: Ptr<u32>,
        /// The windows' unique columns.
        pub win_cols: Ptr<u32>,
        /// First edge of each block (n_blocks + 1).
        pub blk_edge_ptr: Ptr<u32>,
        /// Position (row * 16 + column) of each edge in its 16 x 16 block.
        pub blk_edge_pos: Ptr<u8>,
        pub blk_edge_val: Ptr<f32>,
        /// CSR position of each edge (where its output goes).
        pub blk_edge_csr: Ptr<u32>,
        /// A (n_rows x ld) in the kernel's precision, read as 32-bit words.
        pub a: Ptr<u32>,
        /// B (n_cols x ld) in the kernel's precision, read as 32-bit words.
        pub b: Ptr<u32>,
        pub out: PtrMut<f32>,
    }

    /// In-place softmax of each row's edge values: a warp per row.
    pub struct EdgeSoftmaxArgs {
        pub n_rows: u32,
        pub row_ptr: Ptr<u32>,
        /// Slot of each CSR edge in `vals`; null: CSR order.
        pub slot_of: Ptr<u32>,
        pub vals: PtrMut<f32>,
    }
}

kernels! {
    sddmm_hp_f32(HpSddmmArgs) = crate::sddmm::hp::hp_sddmm;
    sddmm_tc8_f16(Tc8SddmmArgs) = crate::sddmm::tc8::tc8_sddmm::<crate::sddmm::precision::F16>;
    sddmm_tc8_tf32(Tc8SddmmArgs) = crate::sddmm::tc8::tc8_sddmm::<crate::sddmm::precision::Tf32>;
    sddmm_tc16_f16(Tc16SddmmArgs) = crate::sddmm::tc16::tc16_sddmm::<crate::sddmm::precision::F16>;
    sddmm_tc16_tf32(Tc16SddmmArgs) = crate::sddmm::tc16::tc16_sddmm::<crate::sddmm::precision::Tf32>;
    edge_softmax_f32(EdgeSoftmaxArgs) = crate::sddmm::softmax::edge_softmax;
}
