//! Graphs on the host: the CSR hub, file readers, generators, operations and reorderings.

pub mod csr;
pub mod edgelist;
pub mod mtx;
pub mod npy;
pub mod npz;
pub mod rmat;
pub mod text;

pub use csr::Csr;
