//! Graphs on the host: the CSR hub, file readers, generators, operations and reorderings.

pub mod csr;
pub mod edgelist;
pub mod mtx;
pub mod rmat;
pub mod source;
pub mod text;

pub use csr::Csr;
