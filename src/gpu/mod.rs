//! The GPU layer: the only place that talks to the CUDA driver and libraries.
//!
//! [`device`] finds a GPU without ever panicking, [`module`] holds the embedded PTX and the
//! kernel functions, [`memory`] the typed device buffers, [`timing`] event timing, [`launch`]
//! the one thin unsafe launch wrapper, [`cusparse`] the in-process baseline.

pub mod cusparse;
pub mod device;
pub mod launch;
pub mod memory;
pub mod module;
pub mod selftest;
pub mod shared;
pub mod timing;

pub use device::{Gpu, GpuInfo};
pub use memory::{DeviceMatrix, DeviceVec};
