//! tcgnn: sparse GNN kernels (SpMM, SDDMM) on NVIDIA tensor cores, written entirely in Rust.
//!
//! Layers, each a folder, each importing only those before it (`.ci/arrows.py` checks): [`error`],
//! [`util`], [`shared`] (constants and index arithmetic shared with the device crate), [`tensor`],
//! [`graph`] (CSR, readers, generators), [`format`] (tensor-core tile
//! formats translated from CSR), [`gpu`] (device, module, memory, timing, cuSPARSE), [`ops`]
//! (one entry per op, CPU and CUDA behind it), [`nn`] (layers, models, training), [`sample`]
//! (mini-batch graph samplers), [`task`] (node, link and graph tasks around any encoder), [`dist`] (partitions and communication for training across
//! GPUs), [`bench`] (the GPU benchmark harness); the `tcgnn` binary's commands live in
//! `host/cli/`.

pub mod bench;
pub mod dist;
pub mod error;
pub mod format;
pub mod gpu;
pub mod graph;
pub mod nn;
pub mod ops;
pub mod sample;
pub mod shared;
pub mod task;
pub mod tensor;
pub mod util;

pub use error::{Error, Result};
