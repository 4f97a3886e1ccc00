//! Graph sampling on the device: GraphSAINT and neighbour-sampled batches drawn, induced and
//! laid out for a rebound model without the host (the host's `tcgnn::sample::device_saint` and
//! `device_neighbor` launch them). Every draw comes from the counter streams of `rng.rs`, so a
//! batch equals the CPU sampler's bit for bit.

pub mod bind;
pub mod features;
pub mod neighbor;
pub mod saint;
pub mod scan;
