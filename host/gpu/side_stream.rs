//! A second stream for two independent pieces of work that each leave SMs idle — the
//! tensor-core attention's windows and the CUDA-core kernels of the hub rows, which write
//! disjoint rows: [`Gpu::fork_join`] queues one on a side stream beside the other, so each
//! fills the other's tail. Under a CUDA-graph capture the fork and the join become the graph's
//! edges (the side stream joins the capture through the event it waits on).
//!
//! Kernel launches made by the `side` closure go to the side stream through a thread-local
//! override that [`crate::gpu::launch`] reads, so the launchers need no stream argument.
//! Anything else the closure queues (the uploads and zeroed scratch of a first call) stays on
//! the GPU's stream, so each side launch first waits for what the GPU's stream holds then —
//! before `main` has queued anything.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::Gpu;
use crate::error::{Error, Result};

thread_local! {
    /// The stream this thread's launches on the GPU at this address go to, while a `side`
    /// closure runs.
    static LAUNCH_ON: RefCell<Option<(usize, Arc<CudaStream>)>> = const { RefCell::new(None) };
    /// Whether the running `side` closure launched anything (only then is there a side to join:
    /// under capture, joining a side stream that never joined the capture is an isolation
    /// error).
    static LAUNCHED: Cell<bool> = const { Cell::new(false) };
}

/// The stream a kernel launch on `gpu` from this thread goes to: the side stream inside a
/// `side` closure, having waited for the GPU's stream; else the GPU's stream.
pub(crate) fn launch_stream(gpu: &Gpu) -> Result<Arc<CudaStream>> {
    let side = LAUNCH_ON.with(|s| match &*s.borrow() {
        Some((at, stream)) if *at == gpu as *const Gpu as usize => Some(stream.clone()),
        _ => None,
    });
    match side {
        Some(s) => {
            s.join(&gpu.stream).map_err(|e| Error::cuda("side stream: fork", e))?;
            LAUNCHED.with(|l| l.set(true));
            Ok(s)
        }
        None => Ok(gpu.stream.clone()),
    }
}

/// Clears the override when the side closure ends, returned early or not.
struct Override;

impl Drop for Override {
    fn drop(&mut self) {
        LAUNCH_ON.with(|s| *s.borrow_mut() = None);
    }
}

impl Gpu {
    /// Runs `side` with its kernel launches on a side stream (each waiting for everything the
    /// GPU's stream holds at its launch), then `main` on the GPU's stream, then makes the GPU's
    /// stream wait for the side's work: what either queued is done before anything queued
    /// after. The two must not touch each other's outputs. Not nested.
    pub fn fork_join(&self, side: impl FnOnce() -> Result<()>, main: impl FnOnce() -> Result<()>) -> Result<()> {
        let err = |what: &str, e| Error::cuda(format!("side stream: {what}"), e);
        let s = match self.side.get() {
            Some(s) => s.clone(),
            None => {
                let s = self.ctx.new_stream().map_err(|e| err("cuStreamCreate", e))?;
                self.side.get_or_init(|| s).clone()
            }
        };
        LAUNCHED.with(|l| l.set(false));
        let sided = {
            LAUNCH_ON.with(|o| *o.borrow_mut() = Some((self as *const Gpu as usize, s.clone())));
            let _clear = Override;
            side()
        };
        let launched = LAUNCHED.with(|l| l.replace(false));
        // Joined even when a side launch failed (a capture must not end with the side open);
        // not at all when the side launched nothing (it never forked).
        let main_done = if sided.is_ok() { main() } else { Ok(()) };
        if launched {
            self.stream.join(&s).map_err(|e| err("join", e))?;
        }
        sided.and(main_done)
    }
}
