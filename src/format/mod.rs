//! Tensor-core tile formats translated from CSR on the CPU (rayon, parallel over windows).

pub mod mebcrs;
pub mod sgt;
