//! The seam between a model's backward and a distributed step's gradient all-reduce (`dist`
//! builds on it; nn never imports dist): the backward tells a [`GradReady`] hook as soon as a
//! layer's parameter gradients are final (the last layer's first), so the step can start summing
//! them over the ranks while the earlier layers' backward runs (PyTorch DDP's gradient buckets).
//!
//! The one-device backward ([`crate::nn::model::Model::backward`]) runs the same code with
//! [`NoHook`], whose [`GradReady::wants`] is `false`: the calls and the parameter lists are
//! compiled out.

use crate::error::Result;
use crate::nn::param::Param;
use crate::ops::backend::Backend;

/// Told, during a backward, which parameters' gradients are final.
pub trait GradReady<B: Backend> {
    /// `params`' gradients are final: nothing later in this backward writes them. Every
    /// parameter of the model is announced exactly once per backward.
    fn ready(&mut self, b: &B, params: &mut [&mut Param<B>]) -> Result<()>;

    /// Whether [`GradReady::ready`] does anything (the backward skips building the lists
    /// when not).
    fn wants(&self) -> bool {
        true
    }
}

/// The one-device backward's hook: nothing to do.
pub struct NoHook;

impl<B: Backend> GradReady<B> for NoHook {
    #[inline(always)]
    fn ready(&mut self, _b: &B, _params: &mut [&mut Param<B>]) -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn wants(&self) -> bool {
        false
    }
}

/// Announces the parameters `params()` lists (each with its name, as the layers list them) to
/// `ready` when it wants them; `params` is not called otherwise.
pub fn announce<'a, B: Backend + 'a, R: GradReady<B> + ?Sized, I: IntoIterator<Item = (&'static str, &'a mut Param<B>)>>(
    ready: &mut R,
    b: &B,
    params: impl FnOnce() -> I,
) -> Result<()> {
    if !ready.wants() {
        return Ok(());
    }
    let mut list: Vec<&mut Param<B>> = params().into_iter().map(|(_, p)| p).collect();
    ready.ready(b, &mut list)
}
