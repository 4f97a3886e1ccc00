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
    }

    /// Clear the 8 rows of each listed window (those whose TC8 items add atomically).
    pub struct ZeroWindowsArgs {
        pub windows: Ptr<u32>,
        pub n_rows: u32,
        /// 32-bit words per row of Y (ld for f32, ld / 2 for f16).
        pub row_words: u32,
        pub y: PtrMut<u32>,
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
    tc8_zero_windows(ZeroWindowsArgs) = crate::spmm::tc8::zero_windows;
}
