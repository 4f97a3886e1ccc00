//! Tensor-core tile formats translated from CSR on the CPU (rayon, parallel over windows).

pub mod coo;
pub mod hybrid;
pub mod mebcrs;
pub mod sgt;
pub mod stats;

pub use coo::Coo;
pub use mebcrs::{MeBcrs, MEBCRS_WINDOW};
pub use sgt::{Sgt, SGT_WINDOW};
