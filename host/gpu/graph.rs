//! CUDA graphs: a sequence of GPU work captured once from the GPU's stream and replayed with one
//! launch, which removes the per-call host overhead (argument marshalling, cuBLAS/cuSPARSE
//! dispatch, one driver call per kernel) of a training step made of many small launches.
//!
//! What a captured sequence may contain: anything this library queues asynchronously on the
//! GPU's stream (kernel launches, `DeviceMatrix::zero` and other memsets, device-to-device
//! copies, [`crate::gpu::cublas::Blas`] GEMMs, cuSPARSE plans' `run`). What it may not: stream
//! synchronisation, downloads or uploads from host memory (`upload`, `download`, `poison`), and
//! buffer allocation or freeing — do those outside, before the capture or between replays. Run
//! each operation once eagerly before capturing it, so that one-time set-up (cached graph
//! translations and uploads, kernel lookup, lazy module loading inside cuBLAS) happens outside
//! the capture.
//!
//! A graph records device addresses and scalar arguments as they were during the capture:
//! every buffer it touches (and the [`crate::gpu::cublas::Blas`] whose workspace its GEMMs
//! use) must stay alive, and keep its size, for as long as the graph is replayed. To feed new
//! inputs, write into the same buffers between replays.

use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus};
use cudarc::driver::{CudaGraph, CudaStream, result};

use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// A graph captured from the GPU's stream, instantiated and uploaded, ready to replay.
pub struct CapturedGraph {
    graph: CudaGraph,
    /// Keeps the context, the stream and the kernel module the graph's nodes refer to alive.
    gpu: Arc<Gpu>,
}

// SAFETY: the graph and its executable are plain driver handles that may be used from any
// thread as long as calls are not concurrent; `&self` methods are not `Sync`-shared because
// `CapturedGraph` is not `Sync`.
unsafe impl Send for CapturedGraph {}

impl std::fmt::Debug for CapturedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedGraph").field("gpu", &self.gpu.info().name).finish()
    }
}

impl CapturedGraph {
    /// Queue one run of the whole graph on the GPU's stream. Asynchronous, like a kernel launch:
    /// synchronise ([`Gpu::synchronize`]) before reading results on the host. Replays run in
    /// stream order with each other and with all other work on the stream.
    pub fn replay(&self) -> Result<()> {
        self.graph.launch().map_err(|e| Error::cuda("cuGraphLaunch (replaying a captured graph)", e))
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

/// Ends a capture that is still open when it goes out of scope (the closure failed or panicked,
/// or ending it through cudarc failed early), so the stream is usable again; the partial graph
/// is discarded.
struct CaptureGuard<'a>(&'a CudaStream);

impl Drop for CaptureGuard<'_> {
    fn drop(&mut self) {
        let s = self.0.cu_stream();
        // SAFETY: `s` is the Gpu's live stream; a graph returned here is owned by nobody else.
        unsafe {
            let open = result::stream::is_capturing(s).is_ok_and(|st| st != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE);
            if open
                && let Ok(g) = result::stream::end_capture(s)
                && !g.is_null()
            {
                result::graph::destroy(g).ok();
            }
        }
    }
}

impl Gpu {
    /// An error if this GPU's stream is being captured. cudarc allocates stream-ordered
    /// (`cuMemAllocAsync`), which a capture records as an allocation node instead of refusing:
    /// the graph then owns the buffer, and a second replay fails with CUDA_ERROR_INVALID_VALUE
    /// because the first one's allocation was never freed. Lazily allocated buffers must be
    /// made by an eager run before the capture; this names the one that was not.
    pub fn refuse_in_capture(&self, what: impl FnOnce() -> String) -> Result<()> {
        if self.is_capturing() {
            return Err(Error::Unsupported(format!(
                "{} while the step is being recorded as a CUDA graph (run it once eagerly first)",
                what()
            )));
        }
        Ok(())
    }

    /// Whether this GPU's stream is being captured (work queued now is recorded, not run:
    /// timing events recorded now would time nothing).
    pub fn is_capturing(&self) -> bool {
        // SAFETY: the Gpu's own live stream.
        let status = unsafe { result::stream::is_capturing(self.stream.cu_stream()) };
        matches!(status, Ok(s) if s != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// Capture the GPU work `f` queues on this GPU's stream into a graph (nothing runs during the
    /// capture), then instantiate and upload it. If `f` fails, the capture is still ended (the
    /// stream works normally afterwards) and `f`'s error is returned. See the module
    /// documentation for what `f` may do.
    ///
    /// The capture mode is `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`. Launches, memsets, cuBLAS and
    /// cuSPARSE calls are stream-ordered and capture in any mode. Thread-local mode makes a call
    /// from this thread that cannot be captured (a synchronize, a copy from pageable host memory,
    /// a synchronous allocation) fail at once, so `capture` returns an error instead of a graph
    /// that silently lacks it (what `RELAXED` would give), while calls from other threads, which
    /// do not touch this stream, are not affected (as `GLOBAL` would affect them). Work another
    /// thread queues on *this* stream during the capture would be captured too: do not share the
    /// `Gpu` between threads while capturing.
    pub fn capture(self: &Arc<Self>, f: impl FnOnce() -> Result<()>) -> Result<CapturedGraph> {
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| Error::cuda("cuStreamBeginCapture (is the stream already being captured?)", e))?;
        let guard = CaptureGuard(&self.stream);
        f()?; // the guard ends the capture
        let graph = self.stream.end_capture(CUgraphInstantiate_flags(0)).map_err(|e| {
            Error::cuda(
                "ending the capture / instantiating the graph (did the captured work synchronise, copy to or from host memory, or allocate?)",
                e,
            )
        })?;
        drop(guard);
        let graph = graph.ok_or_else(|| Error::cuda("cuStreamEndCapture", "the driver returned no graph"))?;
        graph.upload().map_err(|e| Error::cuda("cuGraphUpload", e))?;
        Ok(CapturedGraph { graph, gpu: self.clone() })
    }
}
