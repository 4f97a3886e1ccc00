//! What a training step changes in a model (its parameters, Adam's moments, its buffers and the
//! backend's step counter), copied aside and put back in place. Recording a step as a CUDA graph
//! runs it once eagerly first, so that every lazily built plan and buffer exists before the
//! capture; that run must not train, or the recorded run's first epoch would be the eager run's
//! second.

use crate::error::{Error, Result};
use crate::nn::model::Model;
use crate::ops::nn::Ops;

/// Device copies of a model's step-changed tensors, in [`Model::params`] then
/// [`Model::buffers`] order, and the step counter.
pub struct KeptState<B: Ops> {
    copies: Vec<B::Mat>,
    steps: u32,
}

impl<B: Ops> KeptState<B> {
    pub fn keep(b: &B, net: &mut dyn Model<B>) -> Result<Self> {
        let mut copies = Vec::new();
        let mut keep = |m: &B::Mat| -> Result<()> {
            let (rows, cols) = B::shape(m);
            let mut copy = b.matrix(rows, cols)?;
            b.copy(m, &mut copy)?;
            copies.push(copy);
            Ok(())
        };
        for (_, p) in net.params() {
            keep(&p.value)?;
            let [m, v] = p.moments();
            keep(m)?;
            keep(v)?;
        }
        for (_, m) in net.buffers() {
            keep(m)?;
        }
        Ok(KeptState { copies, steps: b.steps()? })
    }

    /// Copies everything back into the same buffers (a recording keeps their addresses) and
    /// waits for the copies.
    pub fn put_back(self, b: &B, net: &mut dyn Model<B>) -> Result<()> {
        let mut kept = self.copies.into_iter();
        let mut next = || kept.next().ok_or_else(|| Error::Unsupported("the model's tensors changed while recording".into()));
        for (_, p) in net.params() {
            b.copy(&next()?, &mut p.value)?;
            let [m, v] = p.moments();
            b.copy(&next()?, m)?;
            b.copy(&next()?, v)?;
        }
        for (_, m) in net.buffers() {
            b.copy(&next()?, m)?;
        }
        b.set_steps(self.steps)?;
        b.synchronize()
    }
}
