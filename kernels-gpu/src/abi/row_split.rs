// How the fused row kernels (GAT's and AGNN's attention, `nn/row_split.rs`) spread a pattern's
// rows over one launch: the argument part they share. Shared with the host (`include!`); no
// kernels of its own.
use super::*;

kernel_args! {
    /// One launch, three kinds of block: blocks [0, n_segs) a segment of a long row each
    /// (`segs`: (row, first entry, end) triples of at most a few thousand entries, the rows of
    /// at least `long_min` entries cut up), its warps sharing the segment and writing the
    /// segment's partial state to `partials` (`pstride` floats a segment); the next
    /// `warp_blocks` blocks a warp per listed row (`mid`: the rows of at least `short_max`
    /// entries; those of `long_min` or more skipped); the remaining blocks a slot of lanes per
    /// listed short row (`short`: the `n_short` rows shorter than `short_max`, longest first, so
    /// that a warp's slots walk rows of about one length instead of idling while the longest of
    /// them finishes).
    pub struct RowSplit {
        pub short: Ptr<u32>,
        pub n_short: u32,
        pub short_max: u32,
        pub long_min: u32,
        pub segs: Ptr<u32>,
        pub n_segs: u32,
        pub mid: Ptr<u32>,
        pub n_mid: u32,
        pub warp_blocks: u32,
        /// The combine launch (`combine` = 1): a warp per long row (`long`, `n_long` of them,
        /// its segments `seg_ptr[r] .. seg_ptr[r + 1]`), merging the row's partial states in
        /// segment order and writing the row's outputs.
        pub combine: u32,
        pub long: Ptr<u32>,
        pub n_long: u32,
        pub seg_ptr: Ptr<u32>,
        pub partials: PtrMut<f32>,
        pub pstride: u32,
    }
}
