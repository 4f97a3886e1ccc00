//! Small helpers shared by every layer.

pub mod rng;
pub mod split;
