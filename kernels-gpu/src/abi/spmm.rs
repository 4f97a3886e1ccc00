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
        /// Y (n_rows x ld), f32.
        pub y: PtrMut<f32>,
    }

    /// Clear the 8 rows of each listed window (those whose TC8 items add atomically).
    pub struct ZeroWindowsArgs {
        pub windows: Ptr<u32>,
        pub n_rows: u32,
        pub ld: u32,
        pub y: PtrMut<f32>,
    }
}

kernels! {
    spmm_tc8_f16_nt2(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<crate::spmm::tc8::F16, 2>;
    spmm_tc8_f16_nt4(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<crate::spmm::tc8::F16, 4>;
    spmm_tc8_tf32_nt2(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<crate::spmm::tc8::Tf32, 2>;
    spmm_tc8_tf32_nt4(Tc8SpmmArgs) = crate::spmm::tc8::tc8_spmm::<crate::spmm::tc8::Tf32, 4>;
    spmm_tc8a_f16(Tc8SpmmArgs) = crate::spmm::tc8_async::tc8_async_spmm::<crate::spmm::tc8_async::F16, 4, { crate::config::TC8_ASYNC_STAGES }>;
    spmm_tc8a_tf32(Tc8SpmmArgs) = crate::spmm::tc8_async::tc8_async_spmm::<crate::spmm::tc8_async::Tf32, 2, { crate::config::TC8_ASYNC_STAGES }>;
    tc8_zero_windows(ZeroWindowsArgs) = crate::spmm::tc8::zero_windows;
}
