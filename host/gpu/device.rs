//! GPU discovery: a missing driver or device is a value ("no GPU: <reason>"), never a panic.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys::CUdevice_attribute};

use crate::error::{Error, Result};
use crate::gpu::module::KernelModule;
use crate::gpu::setup_clock::SetupClock;

/// What the CLI and benchmark reports print about the device.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GpuInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    pub total_mem_bytes: usize,
    pub max_smem_per_block_optin: u32,
    pub l2_bytes: u32,
}

/// One device: context, the stream all work is queued on, the loaded kernel module.
///
/// The stream is a non-blocking stream the `Gpu` creates and owns (not the legacy default
/// stream, which cannot be captured into a CUDA graph). Every buffer allocation, copy, memset,
/// kernel launch, timing event, cuSPARSE and cuBLAS call of this library is queued there, so
/// work is ordered by the stream alone and a whole sequence can be captured (see
/// [`Gpu::capture`]).
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) kernels: KernelModule,
    info: GpuInfo,
    clock: SetupClock,
    /// Pinned staging buffers of large uploads ([`crate::gpu::pinned`]), made on first use.
    pub(crate) staging: crate::gpu::pinned::Staging,
    /// Pinned slots of small asynchronous copies ([`Gpu::copy_htod_pinned`]), made on first use.
    pub(crate) arena: crate::gpu::pinned::Arena,
    /// The second stream of [`Gpu::fork_join`], made on first use.
    pub(crate) side: std::sync::OnceLock<Arc<CudaStream>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("info", &self.info).finish()
    }
}

/// The driver library cudarc would load; probing it first keeps cudarc from panicking.
fn driver_library_present() -> std::result::Result<(), String> {
    let candidates = ["libcuda.so.1", "libcuda.so", "nvcuda.dll"];
    for c in candidates {
        // SAFETY: loading the CUDA driver runs only its initialisers, which are safe to run.
        if unsafe { libloading::Library::new(c) }.is_ok() {
            return Ok(());
        }
    }
    Err(format!("the CUDA driver library (libcuda.so.1) was not found; install an NVIDIA driver (tried {candidates:?})"))
}

impl Gpu {
    /// Open device `ordinal`, load the kernels. `Err(Error::NoGpu(reason))` when there is no
    /// driver or no device; other failures are `Error::Cuda`.
    pub fn new(ordinal: usize) -> Result<Arc<Gpu>> {
        driver_library_present().map_err(Error::NoGpu)?;
        // cudarc panics inside some paths when the driver misbehaves; keep that a value too.
        let count = std::panic::catch_unwind(CudaContext::device_count)
            .map_err(|_| Error::NoGpu("the CUDA driver failed to initialise".into()))?
            .map_err(|e| Error::NoGpu(format!("the CUDA driver reports no usable device ({e})")))?;
        if count <= 0 {
            return Err(Error::NoGpu("the CUDA driver found no device".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::NoGpu(format!("device {ordinal} requested, {count} present")));
        }
        let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal))
            .map_err(|_| Error::NoGpu("creating a CUDA context panicked".into()))?
            .map_err(|e| Error::cuda("cuCtxCreate", e))?;
        // One stream for everything: cudarc's cross-stream event tracking is pure overhead here
        // (and its event records would end up inside captured graphs).
        unsafe { ctx.disable_event_tracking() };
        // Our own non-blocking stream: the legacy default stream (null) cannot be captured.
        let stream = ctx.new_stream().map_err(|e| Error::cuda("cuStreamCreate", e))?;
        let attr = |a| ctx.attribute(a).map_err(|e| Error::cuda("cuDeviceGetAttribute", e));
        let info = GpuInfo {
            name: ctx.name().map_err(|e| Error::cuda("cuDeviceGetName", e))?,
            compute_capability: ctx.compute_capability().map_err(|e| Error::cuda("compute capability", e))?,
            sm_count: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            total_mem_bytes: ctx.total_mem().map_err(|e| Error::cuda("cuDeviceTotalMem", e))?,
            max_smem_per_block_optin: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32,
            l2_bytes: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32,
        };
        if info.compute_capability.0 < 8 {
            return Err(Error::Unsupported(format!(
                "{} has compute capability {}.{}; tcgnn's tensor-core kernels need 8.0 or newer",
                info.name, info.compute_capability.0, info.compute_capability.1
            )));
        }
        let kernels = KernelModule::load(&ctx)?;
        Ok(Arc::new(Gpu {
            ctx,
            stream,
            kernels,
            info,
            clock: SetupClock::default(),
            staging: Default::default(),
            arena: Default::default(),
            side: Default::default(),
        }))
    }

    /// The first device, or the reason there is none.
    pub fn probe() -> Result<Arc<Gpu>> {
        Gpu::new(0)
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// The stream all of the library's GPU work is queued on: allocations, copies, memsets,
    /// kernel launches, timing events, cuSPARSE ([`crate::gpu::cusparse`]) and cuBLAS
    /// ([`crate::gpu::cublas`]). It is a non-blocking stream owned by this `Gpu` (never the
    /// legacy default stream), so it can be captured into a CUDA graph ([`Gpu::capture`]).
    /// Work a caller queues here directly is ordered with the library's work; work on any other
    /// stream is not.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Free device memory in bytes right now (cuMemGetInfo: every process's allocations count).
    pub fn free_memory(&self) -> Result<usize> {
        let (free, _total) = self.ctx.mem_get_info().map_err(|e| Error::cuda("cuMemGetInfo", e))?;
        Ok(free)
    }

    /// Device memory in use now (`total - free`), also kept as a sample of the peak in
    /// [`Gpu::clock`].
    pub fn sample_used_memory(&self) -> Result<u64> {
        let (free, total) = self.ctx.mem_get_info().map_err(|e| Error::cuda("cuMemGetInfo", e))?;
        let used = total.saturating_sub(free) as u64;
        self.clock.sample_memory(used);
        Ok(used)
    }

    /// Translation and upload time spent for this GPU, and the sampled peak of its memory.
    pub fn clock(&self) -> &SetupClock {
        &self.clock
    }

    /// Wait for all queued work; surfaces asynchronous kernel faults.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(|e| Error::cuda("stream synchronize (a kernel failed?)", e))
    }
}
