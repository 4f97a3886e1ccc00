// Row permutations (`perm.rs`): argument structs and instances. Shared with the host (`include!`).
use super::*;

kernel_args! {
    /// Gather rows of a dense row-major matrix: dst row r = src row idx[r]. Rows are `ld4`
    /// 16-byte chunks (f32 rows of ld floats: ld / 4; f16 rows: ld / 8); src and dst share the
    /// stride. A group of `1 << shift` lanes takes a row (`partition::nn_row_group_shift(ld4)`).
    pub struct GatherRowsArgs {
        /// Rows of dst (entries of idx).
        pub n_rows: u32,
        pub ld4: u32,
        pub shift: u32,
        /// Source row of every destination row (a permutation: `new_to_old` brings X into a
        /// reordered handle's order, `old_to_new` brings Y back).
        pub idx: Ptr<u32>,
        pub src: Ptr<u32>,
        pub dst: PtrMut<u32>,
    }

    /// Scatter-add rows of f32: dst row idx[r] += src row r (the halo gradients of one peer
    /// into their owner's rows, `host/dist/device_exchange.rs`). The indices of one launch are
    /// distinct (no two threads add into one row: deterministic, no atomics); rows are `ld4`
    /// float4s, src and dst share the stride; `1 << shift` lanes per row as in gather_rows.
    pub struct ScatterAddRowsArgs {
        /// Rows of src (entries of idx).
        pub n_rows: u32,
        pub ld4: u32,
        pub shift: u32,
        pub idx: Ptr<u32>,
        pub src: Ptr<f32>,
        pub dst: PtrMut<f32>,
    }
}

kernels! {
    gather_rows(GatherRowsArgs) = crate::perm::gather_rows;
    scatter_add_rows(ScatterAddRowsArgs) = crate::perm::scatter_add_rows;
}
