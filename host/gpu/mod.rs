//! The GPU layer: the only place that talks to the CUDA driver and libraries.
//!
//! [`device`] finds a GPU without ever panicking, [`module`] holds the embedded PTX and the
//! kernel functions, [`abi`] a typed handle and argument struct per kernel, [`memory`] the typed
//! device buffers ([`pinned`]: large uploads through pinned staging; [`ledger`]: live bytes by allocating line), [`timing`] event timing, [`launch`] the one thin unsafe launch wrapper,
//! [`cusparse`] the in-process baseline, [`cublas`] dense
//! GEMM, [`graph`] CUDA graph capture and replay, [`csr`] a CSR on the device, [`translate`] the
//! CSR -> ME-BCRS / SGT translations on the GPU. All of it runs on the one stream the [`Gpu`]
//! owns ([`Gpu::stream`]).

pub mod abi;
pub mod csr;
pub mod cublas;
pub mod cusparse;
pub mod device;
pub mod graph;
pub mod launch;
pub mod ledger;
pub mod memory;
pub mod module;
pub mod pinned;
pub mod selftest;
pub mod setup_clock;
pub mod side_stream;
pub mod timing;
pub mod translate;

pub use cublas::{Blas, GemmMath};
pub use device::{Gpu, GpuInfo};
pub use graph::CapturedGraph;
pub use memory::{DeviceMatrix, DeviceVec};
