//! The NCCL [`Communicator`]: one communicator per process (one GPU per rank), through cudarc's
//! `nccl` feature, which loads `libnccl.so` at run time: the crate builds without CUDA, and a
//! machine without NCCL gets a "no NCCL" error from [`NcclCommunicator::new`], never a panic.
//!
//! The [`Communicator`] methods take host slices (the host-staged path, and small collectives
//! such as the loss): each call stages through device buffers on the communicator's stream and
//! waits. The GPU training step calls NCCL on its own device buffers through
//! [`crate::dist::DeviceComm`].
//!
//! NVLink multicast (NVLS) stays off: `NCCL_NVLS_ENABLE=0` is set before NCCL first runs, as the
//! shared GPU machines require.
//!
//! cudarc's `Comm` is not `Send`: create the communicator on the thread that uses it.

use std::any::TypeId;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DeviceRepr, ValidAsZeroBits};
use cudarc::nccl::{Comm, Id, NcclType, ReduceOp, group_end, group_start};

use crate::dist::comm::{Communicator, check_blocks, check_peer};
use crate::dist::rendezvous::UniqueId;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::util::Real;

/// `Ok` when `libnccl` can be loaded; otherwise the reason, as [`Error::NoGpu`].
pub fn nccl_present() -> Result<()> {
    // SAFETY: loading libnccl runs only its initialisers; cudarc keeps no state from the probe.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::NoGpu(
            "no NCCL: libnccl.so (libnccl.so.2) was not found on the library path; install NCCL or set LD_LIBRARY_PATH".into(),
        ))
    }
}

/// Keeps NVLink multicast off for every communicator this process creates.
fn disable_nvls() {
    if std::env::var("NCCL_NVLS_ENABLE").as_deref() != Ok("0") {
        // SAFETY: set before NCCL starts its threads; this library reads no environment elsewhere,
        // so no other thread of ours reads it concurrently.
        unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    }
}

/// Runs an NCCL call, turning both its error and a panic inside cudarc (a symbol missing from an
/// old libnccl) into [`Error::Comm`].
pub(crate) fn guarded<R>(what: &str, f: impl FnOnce() -> std::result::Result<R, cudarc::nccl::result::NcclError>) -> Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| Error::comm(what, "NCCL call panicked (an incompatible libnccl?)"))?
        .map_err(|e| Error::comm(what, format!("{e:?}")))
}

/// A new unique id (rank 0), to be sent to the other ranks ([`crate::dist::rendezvous`]).
pub fn new_unique_id() -> Result<UniqueId> {
    nccl_present()?;
    disable_nvls();
    let id = guarded("ncclGetUniqueId", Id::new)?;
    Ok(id.internal().map(|c| c as u8))
}

/// One rank's NCCL communicator on one GPU. NCCL runs on a stream of its own (high priority, so
/// its kernels take SMs as soon as a block of the compute beside it ends): the device
/// operations ([`crate::dist::DeviceComm`]) order it with the GPU's stream through events.
pub struct NcclCommunicator {
    comm: Comm,
    stream: Arc<CudaStream>,
    gpu: Arc<Gpu>,
}

impl NcclCommunicator {
    /// Joins the world `id` names as `rank` of `world`, on `gpu`'s stream. Blocks until every rank
    /// has joined (NCCL's own rule).
    pub fn new(gpu: Arc<Gpu>, rank: usize, world: usize, id: &UniqueId) -> Result<NcclCommunicator> {
        nccl_present()?;
        if rank >= world {
            return Err(Error::comm("ncclCommInitRank", format!("rank {rank} of a world of {world}")));
        }
        disable_nvls();
        gpu.stream().context().bind_to_thread().map_err(|e| Error::cuda("binding the context for NCCL", e))?;
        // The greatest priority: CUDA clamps a value beyond its range to the range's end.
        let stream = gpu.ctx.new_stream_with_priority(-1000).map_err(|e| Error::cuda("cuStreamCreateWithPriority (NCCL)", e))?;
        let id = Id::uninit(id.map(|b| b as core::ffi::c_char));
        let comm = guarded("ncclCommInitRank", || Comm::from_rank(stream.clone(), rank, world, id))?;
        Ok(NcclCommunicator { comm, stream, gpu })
    }

    /// The cudarc communicator, for collectives on device buffers (the GPU step).
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// Device buffers handed to NCCL must live on the communicator's GPU.
    pub(crate) fn check_stream(&self, gpu: &Gpu, what: &str) -> Result<()> {
        if gpu.stream().cu_stream() != self.gpu.stream().cu_stream() {
            return Err(Error::comm(what, "the buffers are on another GPU than the communicator's (build both from one Gpu)"));
        }
        Ok(())
    }

    /// NCCL's stream waits for everything queued on `gpu`'s stream so far.
    pub(crate) fn after_caller(&self, gpu: &Gpu, what: &str) -> Result<()> {
        self.stream.join(gpu.stream()).map_err(|e| Error::cuda(format!("{what}: ordering NCCL after the GPU's stream"), e))
    }

    /// `gpu`'s stream waits for everything queued on NCCL's stream so far.
    pub(crate) fn before_caller(&self, gpu: &Gpu, what: &str) -> Result<()> {
        gpu.stream().join(&self.stream).map_err(|e| Error::cuda(format!("{what}: ordering the GPU's stream after NCCL"), e))
    }

    /// NCCL's own stream (the overlapped exchange's timing events are recorded on it).
    pub(crate) fn nccl_stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    fn sync(&self, what: &str) -> Result<()> {
        self.stream.synchronize().map_err(|e| Error::cuda(what, e))
    }

    fn upload<E: DeviceRepr>(&self, v: &[E], what: &str) -> Result<cudarc::driver::CudaSlice<E>> {
        self.stream.clone_htod(v).map_err(|e| Error::cuda(what, e))
    }

    fn zeros<E: DeviceRepr + ValidAsZeroBits>(&self, n: usize, what: &str) -> Result<cudarc::driver::CudaSlice<E>> {
        self.stream.alloc_zeros::<E>(n).map_err(|e| Error::cuda(what, e))
    }

    fn download<E: DeviceRepr>(&self, d: &cudarc::driver::CudaSlice<E>, what: &str) -> Result<Vec<E>> {
        self.stream.clone_dtoh(d).map_err(|e| Error::cuda(what, e))
    }

    fn exchange_as<E: Wire, T: Real>(&self, sends: &[(usize, &[T])], recvs: &mut [(usize, &mut [T])]) -> Result<()> {
        const OP: &str = "ncclSend/ncclRecv";
        let (rank, world) = (self.rank(), self.world_size());
        for &(p, _) in sends {
            check_peer(rank, world, p, OP)?;
        }
        for (p, _) in recvs.iter() {
            check_peer(rank, world, *p, OP)?;
        }
        // Empty messages are skipped on both sides alike (lengths match); no zero-size allocations.
        let sends: Vec<(usize, &[T])> = sends.iter().filter(|(_, d)| !d.is_empty()).copied().collect();
        let mut recvs: Vec<&mut (usize, &mut [T])> = recvs.iter_mut().filter(|(_, b)| !b.is_empty()).collect();
        let send_bufs = sends.iter().map(|(_, d)| self.upload(&convert::<T, E>(d), OP)).collect::<Result<Vec<_>>>()?;
        let mut recv_bufs = recvs.iter().map(|(_, b)| self.zeros::<E>(b.len(), OP)).collect::<Result<Vec<_>>>()?;
        guarded("ncclGroupStart", group_start)?;
        // group_end runs even when a call inside the group failed, so NCCL is never left in a group.
        let mut inner = || -> Result<()> {
            for ((p, _), buf) in sends.iter().zip(&send_bufs) {
                guarded(OP, || self.comm.send(buf, *p as i32))?;
            }
            for ((p, _), buf) in recvs.iter().zip(recv_bufs.iter_mut()) {
                guarded(OP, || self.comm.recv(buf, *p as i32).map(|_| ()))?;
            }
            Ok(())
        };
        let posted = inner();
        let ended = guarded("ncclGroupEnd", group_end);
        posted?;
        ended?;
        self.sync(OP)?;
        for ((_, out), buf) in recvs.iter_mut().zip(&recv_bufs) {
            let v = self.download(buf, OP)?;
            out.iter_mut().zip(&v).for_each(|(o, &x)| *o = T::from_f64(x.to_f64()));
        }
        Ok(())
    }

    fn all_reduce_as<E: Wire, T: Real>(&self, buf: &mut [T]) -> Result<()> {
        const OP: &str = "ncclAllReduce";
        if buf.is_empty() {
            return Ok(());
        }
        let src = self.upload(&convert::<T, E>(buf), OP)?;
        let mut dst = self.zeros::<E>(buf.len(), OP)?;
        guarded(OP, || self.comm.all_reduce(&src, &mut dst, &ReduceOp::Sum).map(|_| ()))?;
        self.sync(OP)?;
        write_back(&self.download(&dst, OP)?, buf);
        Ok(())
    }

    fn all_gather_as<E: Wire, T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        const OP: &str = "ncclAllGather";
        check_blocks(self.world_size(), send.len(), recv.len(), OP)?;
        if send.is_empty() {
            return Ok(());
        }
        let src = self.upload(&convert::<T, E>(send), OP)?;
        let mut dst = self.zeros::<E>(recv.len(), OP)?;
        guarded(OP, || self.comm.all_gather(&src, &mut dst).map(|_| ()))?;
        self.sync(OP)?;
        write_back(&self.download(&dst, OP)?, recv);
        Ok(())
    }

    fn reduce_scatter_as<E: Wire, T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        const OP: &str = "ncclReduceScatter";
        check_blocks(self.world_size(), recv.len(), send.len(), OP)?;
        if recv.is_empty() {
            return Ok(());
        }
        let src = self.upload(&convert::<T, E>(send), OP)?;
        let mut dst = self.zeros::<E>(recv.len(), OP)?;
        guarded(OP, || self.comm.reduce_scatter(&src, &mut dst, &ReduceOp::Sum).map(|_| ()))?;
        self.sync(OP)?;
        write_back(&self.download(&dst, OP)?, recv);
        Ok(())
    }
}

/// The element types NCCL moves for us: f32 and f64.
trait Wire: Real + NcclType + DeviceRepr + ValidAsZeroBits {}
impl Wire for f32 {}
impl Wire for f64 {}

/// T → E through f64: exact, since the methods below choose E = T.
fn convert<T: Real, E: Real>(x: &[T]) -> Vec<E> {
    x.iter().map(|&v| E::from_f64(v.to_f64())).collect()
}

fn write_back<E: Real, T: Real>(v: &[E], out: &mut [T]) {
    out.iter_mut().zip(v).for_each(|(o, &x)| *o = T::from_f64(x.to_f64()));
}

fn is_f32<T: 'static>() -> bool {
    TypeId::of::<T>() == TypeId::of::<f32>()
}

impl Communicator for NcclCommunicator {
    fn rank(&self) -> usize {
        self.comm.rank()
    }
    fn world_size(&self) -> usize {
        self.comm.world_size()
    }
    fn exchange<T: Real>(&self, sends: &[(usize, &[T])], recvs: &mut [(usize, &mut [T])]) -> Result<()> {
        if is_f32::<T>() { self.exchange_as::<f32, T>(sends, recvs) } else { self.exchange_as::<f64, T>(sends, recvs) }
    }
    fn all_reduce_sum<T: Real>(&self, buf: &mut [T]) -> Result<()> {
        if is_f32::<T>() { self.all_reduce_as::<f32, T>(buf) } else { self.all_reduce_as::<f64, T>(buf) }
    }
    fn all_gather<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        if is_f32::<T>() { self.all_gather_as::<f32, T>(send, recv) } else { self.all_gather_as::<f64, T>(send, recv) }
    }
    fn reduce_scatter_sum<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        if is_f32::<T>() { self.reduce_scatter_as::<f32, T>(send, recv) } else { self.reduce_scatter_as::<f64, T>(send, recv) }
    }
}
