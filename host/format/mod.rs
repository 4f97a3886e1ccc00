//! Tensor-core tile formats translated from CSR on the CPU (rayon, parallel over windows) and,
//! for ME-BCRS and SGT, on the GPU (`crate::gpu::translate`, a layer up: it launches kernels).

pub mod coo;
pub mod hybrid;
pub mod mebcrs;
pub mod sgt;
pub mod stats;
pub mod worklist;

pub use coo::Coo;
pub use mebcrs::{MEBCRS_WINDOW, MeBcrs};
pub use sgt::{SGT_WINDOW, Sgt};
