//! Graphs on the host: the CSR hub, file readers, generators, operations and reorderings.

pub mod blocks;
pub mod csr;
pub mod edgelist;
pub mod gcn_norm;
pub mod generate;
pub mod mtx;
pub mod npy;
pub mod npz;
pub mod ops;
pub mod pad;
pub mod perm;
pub mod reorder;
pub mod rmat;
pub mod source;
pub mod spec;
pub mod tcg;
pub mod text;
pub mod transpose;
pub mod tu;

pub use csr::Csr;
pub use perm::Permutation;
