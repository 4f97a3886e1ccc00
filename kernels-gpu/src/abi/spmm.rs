// SpMM kernels (`spmm/`): argument structs and instances. Shared with the host (`include!`).
use super::*;


kernel_args! {
    /// TC8 SpMM on ME-BCRS (k = 8): one warp per work item (a window or a run of its blocks) and
    /// one K slice per grid.y.
    pub struct Tc8SpmmArgs {
        /// Work items in `item_win` / `item_blocks`.
        pub n_items: u32,
        /// Rows of S (and of Y).
        pub n_rows: u32,
        /// Padded row stride of X and Y, in elements (a multiple of 8).
        pub ld: u32,
        /// First vector of each window (n_windows + 1).
        pub win_ptr: Ptr<u32>,
        /// Column of each vector.
        pub vec_col: Ptr<u32>,
        /// 8 values per vector (f32 or f16 as the kernel's precision), read as 32-bit words.
        pub values: Ptr<u32>,
        /// Window of each work item.
        pub item_win: Ptr<u32>,
        /// (first block, end block) of each work item, interleaved.
        pub item_blocks: Ptr<u32>,
        /// X (n_cols x ld) in the kernel's precision, read as 32-bit words.
        pub x: Ptr<u32>,
        /// Y (n_rows x ld) in the instance's output type (f32, or f16 for the `_h` instances).
        pub y: PtrMut<f32>,
        /// Row stride of X in elements (= ld, except e4m3 X: a multiple of 16).
        pub x_ld: u32,
        /// e4m3 only (else 0 / null): max |value| of the graph's (f16-rounded) values, the scale
        /// of each X row and the largest of them (f32 bits, written by `quantize_rows_e4m3`).
        pub value_max: f32,
        pub x_scales: Ptr<f32>,
        pub scale_max: Ptr<u32>,
    }

    /// X (f32, n_rows x ld_in) to e4m3 (n_rows x ld_out bytes, zero past ld_in) with one scale per
    /// row (max |x| / 448), the largest scale reduced into `scale_max` (cleared before).
    pub struct QuantizeE4m3Args {
        pub n_rows: u32,
        pub ld_in: u32,
        pub ld_out: u32,
        pub x: Ptr<f32>,
        pub out: PtrMut<u32>,
        pub scales: PtrMut<f32>,
        pub scale_max: PtrMut<u32>,
    }

    /// Clear the rows of each listed window (those whose items add atomically): 8 rows per
    /// window for TC8, 16 for TC16.
    pub struct ZeroWindowsArgs {
        pub windows: Ptr<u32>,
        pub n_rows: u32,
        /// 32-bit words per row of Y (ld for f32, ld / 2 for f16).
        pub row_words: u32,
        pub y: PtrMut<u32>,
    }

    /// CSR SpMM on CUDA cores (f32 or f16 X by instance, f32 values and Y): a group of
    /// `2^group_log2` lanes a row, each lane a 16-byte chunk of the row's columns.
    pub struct CsrSpmmArgs {
        pub n_rows: u32,
        /// Padded row stride of X and Y, in elements (a multiple of 8).
        pub ld: u32,
        /// log2 of the lanes a row (0..=5): the power of two covering a row's 16-byte chunks,
        /// at most 32.
        pub group_log2: u32,
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        /// One value per nonzero, CSR order.
        pub values: Ptr<f32>,
        /// X (n_cols x ld) in the instance's type, read as 32-bit words.
        pub x: Ptr<u32>,
        pub y: PtrMut<f32>,
        /// Rows of more than `CSR_SPMM_HUB_ROW` entries, ascending: block `body_blocks + i`
        /// sums row `hub_rows[i]`; the body's warps skip them.
        pub hub_rows: Ptr<u32>,
        pub n_hubs: u32,
        /// Blocks of the body (a lane group a row); the grid is `body_blocks + n_hubs`.
        pub body_blocks: u32,
    }

    /// HP-SpMM, f32: `nnz_per_warp` consecutive nonzeros of the row-sorted COO per warp, 128
    /// columns per grid.y; Y zeroed before the launch (shared rows add atomically).
    pub struct HpSpmmArgs {
        pub nnz: u32,
        /// Padded row stride of X and Y, in elements (a multiple of 8).
        pub ld: u32,
        pub nnz_per_warp: u32,
        pub row_ptr: Ptr<u32>,
        /// Row of each nonzero (the COO rows).
        pub row_of: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        /// One value per nonzero, CSR order.
        pub values: Ptr<f32>,
        pub x: Ptr<f32>,
        pub y: PtrMut<f32>,
    }

    /// TC16 SpMM on SGT (blocks 8 columns wide): a thread block per work item (grid.x), its
    /// warps and grid.y over K slices of 8 * NT dims.
    pub struct Tc16SpmmArgs {
        /// Rows of S (and of Y).
        pub n_rows: u32,
        /// Padded row stride of X and Y, in elements (a multiple of 8).
        pub ld: u32,
        /// First unique column of each window in `win_cols` (n_windows + 1).
        pub win_ptr: Ptr<u32>,
        /// The windows' unique columns.
        pub win_cols: Ptr<u32>,
        /// First block of each window (n_windows + 1).
        pub blk_ptr: Ptr<u32>,
        /// First edge of each block (n_blocks + 1); a block's edges are contiguous.
        pub blk_edge_ptr: Ptr<u32>,
        /// Position (row * 8 + column) of each edge in its 16 x 8 block.
        pub blk_edge_pos: Ptr<u8>,
        pub blk_edge_val: Ptr<f32>,
        /// Window of each work item.
        pub item_win: Ptr<u32>,
        /// (first block, end block) of each work item, relative to its window, interleaved.
        pub item_blocks: Ptr<u32>,
        /// X (n_cols x ld) in the kernel's precision, read as 32-bit words.
        pub x: Ptr<u32>,
        /// Y (n_rows x ld), f32.
        pub y: PtrMut<f32>,
    }
}

// TC8 instances: precision, gather source, output, 16-dim tiles per warp (`spmm/tc8/`).
// `_nt2` / `_nt4`: registers; `a`: cp.async into shared memory; `b`: bulk copies (sm_90; traps
// elsewhere, the host only picks it on sm_90); `_h`: f16 output.
kernels! {
    spmm_tc8_f16_nt2(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, Registers, F32Out, 2>;
    spmm_tc8_f16_nt4(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, Registers, F32Out, 4>;
    spmm_tc8_tf32_nt2(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<Tf32, Registers, F32Out, 2>;
    spmm_tc8_tf32_nt4(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<Tf32, Registers, F32Out, 4>;
    spmm_tc8a_f16(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, CpAsync<2>, F32Out, 4>;
    spmm_tc8a_tf32(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<Tf32, CpAsync<2>, F32Out, 2>;
    spmm_tc8b_f16(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, Bulk<2>, F32Out, 4>;
    spmm_tc8b_tf32(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<Tf32, Bulk<2>, F32Out, 2>;
    spmm_tc8_f16_nt2_h(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, Registers, F16Out, 2>;
    spmm_tc8_f16_nt4_h(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, Registers, F16Out, 4>;
    spmm_tc8a_f16_h(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, CpAsync<2>, F16Out, 4>;
    spmm_tc8b_f16_h(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<F16, Bulk<2>, F16Out, 4>;
    spmm_tc8a_e4m3(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<E4m3, CpAsync<2>, F32Out, 8>;
    quantize_rows_e4m3(QuantizeE4m3Args) = crate::spmm::tc8::quantize::quantize_rows_e4m3;
    tc8_zero_windows(ZeroWindowsArgs) = crate::spmm::windows::zero_windows::<{ crate::config::TC8_BLOCK_VECTORS }>;
    spmm_csr_f32(CsrSpmmArgs) = crate::spmm::csr::csr_spmm::<crate::spmm::csr::F32>;
    spmm_csr_f16(CsrSpmmArgs) = crate::spmm::csr::csr_spmm::<crate::spmm::csr::F16>;
    spmm_hp_f32(HpSpmmArgs) = crate::spmm::hp::hp_spmm;
    spmm_tc16s_f16_nt4(Tc16SpmmArgs) = crate::spmm::tc16::tc16_spmm::<crate::spmm::tc16::F16, 4>;
    spmm_tc16s_f16_nt8(Tc16SpmmArgs) = crate::spmm::tc16::tc16_spmm::<crate::spmm::tc16::F16, 8>;
    spmm_tc16s_tf32_nt2(Tc16SpmmArgs) = crate::spmm::tc16::tc16_spmm::<crate::spmm::tc16::Tf32, 2>;
    spmm_tc16s_tf32_nt4(Tc16SpmmArgs) = crate::spmm::tc16::tc16_spmm::<crate::spmm::tc16::Tf32, 4>;
    tc16_zero_windows(ZeroWindowsArgs) = crate::spmm::windows::zero_windows::<{ crate::config::TC16_WINDOW }>;
}
