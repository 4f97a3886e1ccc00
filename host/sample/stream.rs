//! The random numbers of one batch: a counter-based stream keyed by (seed, epoch, batch).
//!
//! Every draw is a pure function of (seed, epoch, batch, counter) (the hash in
//! `kernels-gpu/src/rng.rs`, which the device crate shares), so a batch comes out the same
//! whichever thread makes it, in whatever order, and a GPU sampler that assigns the same
//! counters draws the same batch.

use crate::shared::rng::{sample_below, sample_draw, sample_stream_key, sample_substream, sample_unit};

/// The stream of one batch (or of one purpose inside it, see [`Stream::substream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    key: u64,
}

impl Stream {
    /// The stream of batch `batch` of `epoch` under `seed`.
    pub fn new(seed: u64, epoch: u32, batch: u32) -> Self {
        Stream { key: sample_stream_key(seed, epoch, batch) }
    }

    /// The stream's key (what a device sampler draws from: `sample_draw(key, counter)`).
    pub fn key(self) -> u64 {
        self.key
    }

    /// An independent stream for one part of the batch (a hop, a phase).
    pub fn substream(self, lane: u32) -> Self {
        Stream { key: sample_substream(self.key, lane) }
    }

    /// 64 random bits: draw `counter` of this stream.
    pub fn bits(self, counter: u64) -> u64 {
        sample_draw(self.key, counter)
    }

    /// Uniform integer in [0, n) from draw `counter`.
    pub fn below(self, counter: u64, n: u64) -> u64 {
        sample_below(self.bits(counter), n)
    }

    /// Uniform in [0, 1) from draw `counter`.
    pub fn unit(self, counter: u64) -> f64 {
        sample_unit(self.bits(counter))
    }
}
