//! GPU translation of CSR into the tensor-core formats (ME-BCRS, SGT): per-window segmented
//! sorts of edge keys, a scan over windows, and scatters. Index arithmetic shared with the host
//! lives in `translate.rs`; launchers are in the host crate's `src/format/gpu/`.

pub mod block;
pub mod mebcrs;
pub mod scan;
pub mod sgt;
pub mod sort;
pub mod window_cols;
