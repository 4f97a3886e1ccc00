//! Small helpers shared by every layer.

pub mod atomic;
pub mod memory;
pub mod prefetch;
pub mod real;
pub mod rng;
pub mod split;

pub use real::Real;
