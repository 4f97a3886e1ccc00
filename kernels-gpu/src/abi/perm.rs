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
}

kernels! {
    gather_rows(GatherRowsArgs) = crate::perm::gather_rows;
}
