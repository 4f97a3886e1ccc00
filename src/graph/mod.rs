//! Graphs on the host: the CSR hub, file readers, generators.

pub mod csr;
pub mod mtx;
pub mod rmat;
pub mod source;

pub use csr::Csr;
