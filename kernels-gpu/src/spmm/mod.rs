//! SpMM kernels: Y = S X (S sparse N x N, X dense N x K row-major, Y dense N x K row-major).

pub mod csr;
pub mod hp;
pub mod remainder;
pub mod tc16;
pub mod tc8;
pub mod windows;
