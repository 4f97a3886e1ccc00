//! SDDMM kernels: O = (A B^T) .* S at the nonzeros of S, and edge softmax.

pub mod hp;
pub mod precision;
pub mod softmax;
pub mod tc16;
pub mod tc8;
