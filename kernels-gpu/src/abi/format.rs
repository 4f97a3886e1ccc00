// The GPU translations CSR -> ME-BCRS / SGT (`format/`): argument structs and instances.
// Shared with the host (`include!`). Windows are runs of `win` rows (8 for ME-BCRS, 16 for SGT).
use super::*;

kernel_args! {
    /// Step 1: per row window, sort its edges' (column, offset) keys and number its unique
    /// columns; a block per window, keys in shared memory (longer windows return at once).
    pub struct WindowColsArgs {
        pub n_rows: u32,
        /// Rows per window.
        pub win: u32,
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        /// Per CSR edge: its column's position among the window's sorted unique columns.
        pub loc: PtrMut<u32>,
        /// The window's unique columns, from the window's first CSR edge on.
        pub ucol: PtrMut<u32>,
        /// Unique columns per window.
        pub counts: PtrMut<u32>,
        /// Per CSR edge: its duplicate chain (`translate::DUP_*`); null: not wanted.
        pub dup: PtrMut<u32>,
    }

    /// The windows too long to sort in shared memory: a block each, keys in global scratch.
    pub struct LargeWindowList {
        /// The window of each block.
        pub large: Ptr<u32>,
        /// First key of each listed window in `scratch`.
        pub scratch_off: Ptr<u32>,
        /// `sort_len(len)` keys per listed window.
        pub scratch: PtrMut<u64>,
    }

    /// Step 1 over the large windows.
    pub struct WindowColsLargeArgs {
        pub cols: WindowColsArgs,
        pub large: LargeWindowList,
    }

    /// Step 2: window pointers (and SGT block pointers) from per-window counts; one block of
    /// `SCAN_THREADS`.
    pub struct WindowScanArgs {
        /// Windows.
        pub n: u32,
        /// Unique columns per window.
        pub counts: Ptr<u32>,
        /// SGT block width (read only with `blk_ptr`).
        pub block_w: u32,
        /// n + 1 entries.
        pub win_ptr: PtrMut<u32>,
        /// n + 1 entries; null: not wanted (ME-BCRS).
        pub blk_ptr: PtrMut<u32>,
    }

    /// Step 3 of CSR -> ME-BCRS: each window's vector columns and each edge's value at its
    /// slot; a block per window of 8 rows.
    pub struct MebcrsScatterArgs {
        pub n_rows: u32,
        /// Vectors per block (4, 8 or 16).
        pub k: u32,
        pub row_ptr: Ptr<u32>,
        /// CSR values.
        pub values: Ptr<f32>,
        /// Step 1's outputs.
        pub loc: Ptr<u32>,
        pub ucol: Ptr<u32>,
        pub dup: Ptr<u32>,
        /// Step 2's output.
        pub win_ptr: Ptr<u32>,
        pub vec_col: PtrMut<u32>,
        /// 8 slots per vector, zero beforehand.
        pub values_out: PtrMut<f32>,
        pub csr_to_slot: PtrMut<u32>,
    }

    /// Step 3 of CSR -> SGT: each window's edges block by block (CSR order inside a block), its
    /// unique columns and the blocks' first edges; a block per window of 16 rows, keys in
    /// shared memory (longer windows return at once).
    pub struct SgtEdgesArgs {
        pub n_rows: u32,
        /// Unique columns per SGT block.
        pub block_w: u32,
        pub nnz: u32,
        pub n_windows: u32,
        pub row_ptr: Ptr<u32>,
        /// CSR values.
        pub values: Ptr<f32>,
        /// Step 1's outputs (`loc` is SGT's edge_to_col).
        pub loc: Ptr<u32>,
        pub ucol: Ptr<u32>,
        /// Step 2's outputs.
        pub win_ptr: Ptr<u32>,
        pub blk_ptr: Ptr<u32>,
        pub win_cols: PtrMut<u32>,
        pub blk_edge_ptr: PtrMut<u32>,
        pub blk_edge_pos: PtrMut<u8>,
        pub blk_edge_val: PtrMut<f32>,
        pub blk_edge_csr: PtrMut<u32>,
    }

    /// Step 3 of CSR -> SGT over the large windows.
    pub struct SgtEdgesLargeArgs {
        pub edges: SgtEdgesArgs,
        pub large: LargeWindowList,
    }
}

kernels! {
    window_cols(WindowColsArgs) = crate::format::window_cols::window_cols;
    window_cols_large(WindowColsLargeArgs) = crate::format::window_cols::window_cols_large;
    window_scan(WindowScanArgs) = crate::format::scan::window_scan;
    mebcrs_scatter(MebcrsScatterArgs) = crate::format::mebcrs::mebcrs_scatter;
    sgt_edges(SgtEdgesArgs) = crate::format::sgt::sgt_edges;
    sgt_edges_large(SgtEdgesLargeArgs) = crate::format::sgt::sgt_edges_large;
}
