//! What ranks say to each other over DEVICE buffers (the GPU step): the halo exchange and the
//! gradient all-reduce without a trip through the host.
//!
//! Both operations are ordered with the caller's stream (the rank's [`crate::gpu::Gpu::stream`],
//! where the backend queues everything): the buffers are read and written after what was queued
//! there before, and work the caller queues afterwards sees the results. An exchange may also be
//! only started ([`DeviceComm::exchange_device_start`]): it then runs beside what the caller
//! queues next, until [`DeviceComm::join_device`] (the overlapped step); so may an all-reduce
//! ([`DeviceComm::all_reduce_device_start`]: the gradient buckets).
//! - NCCL ([`NcclCommunicator`]): grouped `ncclSend`/`ncclRecv` and `ncclAllReduce` on the device
//!   pointers, enqueued on NCCL's own stream, which waits for the caller's through an event (and
//!   the caller's for it, unless only started); nothing waits on the host.
//! - In-process ([`InProcess`], P ranks as threads on one GPU sharing its primary context): the
//!   ranks hand each other device addresses over their channels and copy device to device. A rank
//!   waits for its stream before it hands out an address (the data is there) and for its peers'
//!   acknowledgements before it returns (they have copied it, so the caller may overwrite it).

use std::ops::Range;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};
use cudarc::nccl::{ReduceOp, group_end, group_start};

use crate::dist::comm::{Communicator, check_peer};
use crate::dist::inproc::InProcess;
use crate::dist::nccl::{NcclCommunicator, guarded};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::gpu::abi::nn::{AddAssignArgs, add_assign_f32};
use crate::gpu::launch::{Ptr, PtrMut};

/// What one message of an exchange sends: a view of a buffer of its own, or a range of the
/// exchange's receive buffer `into` (rows that lie in place beside the rows received, so that no
/// kernel copies them into a send buffer first; disjoint from every receive range).
pub enum SendRows<'a> {
    View(CudaView<'a, f32>),
    Within(Range<usize>),
}

impl SendRows<'_> {
    pub fn len(&self) -> usize {
        match self {
            SendRows::View(v) => v.len(),
            SendRows::Within(r) => r.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub trait DeviceComm: Communicator {
    /// Grouped point-to-point on `gpu`'s stream: every `(peer, rows)` in `sends` goes to `peer`,
    /// and for every `(peer, range)` in `recvs` elements `range` of `into` are filled from `peer`
    /// (one message per peer and direction; lengths must match the peer's send). Receiving into
    /// ranges of one buffer lets the halo rows land where they belong (x's own rows).
    fn exchange_device(
        &self,
        gpu: &Gpu,
        sends: &[(usize, SendRows<'_>)],
        into: &mut CudaViewMut<'_, f32>,
        recvs: &[(usize, Range<usize>)],
    ) -> Result<()>;

    /// Element-wise sum over the ranks, in place, identical on every rank. `buf.len()` is a
    /// multiple of 4 (whole padded matrices).
    fn all_reduce_device(&self, gpu: &Gpu, buf: &mut CudaViewMut<'_, f32>) -> Result<()>;

    /// [`DeviceComm::all_reduce_device`] that `gpu`'s stream does not wait for: it starts
    /// after what that stream holds now and runs beside what is queued there next, until
    /// [`DeviceComm::join_device`] (a gradient bucket summed during the backward). Until then
    /// the caller must not touch `buf`. By default the ordered all-reduce.
    fn all_reduce_device_start(&self, gpu: &Gpu, buf: &mut CudaViewMut<'_, f32>) -> Result<()> {
        self.all_reduce_device(gpu, buf)
    }

    /// [`DeviceComm::exchange_device`] that `gpu`'s stream does not wait for: it starts after
    /// what that stream holds now and runs beside what is queued there next, until
    /// [`DeviceComm::join_device`]. Until then the caller must not touch `into`'s `recvs`
    /// ranges, nor write the rows `sends` names. By default the ordered exchange.
    fn exchange_device_start(
        &self,
        gpu: &Gpu,
        sends: &[(usize, SendRows<'_>)],
        into: &mut CudaViewMut<'_, f32>,
        recvs: &[(usize, Range<usize>)],
    ) -> Result<()> {
        self.exchange_device(gpu, sends, into, recvs)
    }

    /// Work queued on `gpu`'s stream after this sees every exchange and all-reduce started
    /// before it.
    fn join_device(&self, _gpu: &Gpu) -> Result<()> {
        Ok(())
    }

    /// Whether [`DeviceComm::exchange_device_start`] really runs beside the caller's stream
    /// (its own stream, as NCCL's); else it completes in order, as the in-process ranks' copies.
    fn overlaps(&self) -> bool {
        false
    }

    /// Whether every operation is queued on the device without a host wait, so that a CUDA-graph
    /// capture of the caller's stream records it (NCCL's calls join the capture through the
    /// events that order NCCL's stream with the caller's); the in-process ranks wait on the host.
    fn capturable(&self) -> bool {
        false
    }

    /// The stream an overlapped exchange runs on (its timing events go there); the caller's
    /// stream where exchanges are ordered with it.
    fn exchange_stream(&self, gpu: &Gpu) -> std::sync::Arc<CudaStream> {
        gpu.stream().clone()
    }
}

pub(crate) fn check_peers<C: Communicator>(
    c: &C,
    sends: &[(usize, SendRows<'_>)],
    into: &CudaViewMut<'_, f32>,
    recvs: &[(usize, Range<usize>)],
    op: &str,
) -> Result<()> {
    for p in sends.iter().map(|s| s.0).chain(recvs.iter().map(|r| r.0)) {
        check_peer(c.rank(), c.world_size(), p, op)?;
    }
    if let Some((p, r)) = recvs.iter().find(|(_, r)| r.start > r.end || r.end > into.len()) {
        return Err(Error::Shape(format!("{op}: elements {r:?} from rank {p} of a buffer of {}", into.len())));
    }
    let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
    for (p, s) in sends {
        if let SendRows::Within(r) = s
            && (r.start > r.end || r.end > into.len() || recvs.iter().any(|(_, q)| overlaps(r, q)))
        {
            return Err(Error::Shape(format!(
                "{op}: elements {r:?} to rank {p} of a buffer of {} (each must lie in it, apart from the rows received)",
                into.len()
            )));
        }
    }
    Ok(())
}

impl DeviceComm for NcclCommunicator {
    fn exchange_device(
        &self,
        gpu: &Gpu,
        sends: &[(usize, SendRows<'_>)],
        into: &mut CudaViewMut<'_, f32>,
        recvs: &[(usize, Range<usize>)],
    ) -> Result<()> {
        const OP: &str = "ncclSend/ncclRecv (device)";
        self.exchange_device_start(gpu, sends, into, recvs)?;
        self.before_caller(gpu, OP)
    }

    fn exchange_device_start(
        &self,
        gpu: &Gpu,
        sends: &[(usize, SendRows<'_>)],
        into: &mut CudaViewMut<'_, f32>,
        recvs: &[(usize, Range<usize>)],
    ) -> Result<()> {
        const OP: &str = "ncclSend/ncclRecv (device)";
        check_peers(self, sends, into, recvs, OP)?;
        self.check_stream(gpu, OP)?;
        // The send rows were written on the GPU's stream (and the receive rows last read there).
        self.after_caller(gpu, OP)?;
        guarded("ncclGroupStart", group_start)?;
        // group_end runs even when a call inside the group failed, so NCCL is never left in a group.
        let mut inner = || -> Result<()> {
            for (p, rows) in sends.iter().filter(|(_, v)| !v.is_empty()) {
                match rows {
                    SendRows::View(v) => guarded(OP, || self.comm().send(v, *p as i32))?,
                    // The view is only needed while NCCL enqueues the send.
                    SendRows::Within(r) => guarded(OP, || self.comm().send(&into.slice(r.clone()), *p as i32))?,
                }
            }
            for (p, r) in recvs.iter().filter(|(_, r)| !r.is_empty()) {
                // The view is only needed while NCCL enqueues the receive.
                let mut v = into.slice_mut(r.clone());
                guarded(OP, || self.comm().recv(&mut v, *p as i32).map(|_| ()))?;
            }
            Ok(())
        };
        let posted = inner();
        let ended = guarded("ncclGroupEnd", group_end);
        posted?;
        ended.map(|_| ())
    }

    fn all_reduce_device(&self, gpu: &Gpu, buf: &mut CudaViewMut<'_, f32>) -> Result<()> {
        const OP: &str = "ncclAllReduce (device)";
        self.all_reduce_device_start(gpu, buf)?;
        self.before_caller(gpu, OP)
    }

    fn all_reduce_device_start(&self, gpu: &Gpu, buf: &mut CudaViewMut<'_, f32>) -> Result<()> {
        const OP: &str = "ncclAllReduce (device)";
        self.check_stream(gpu, OP)?;
        if buf.is_empty() {
            return Ok(());
        }
        // The buffer was written on the GPU's stream.
        self.after_caller(gpu, OP)?;
        guarded(OP, || self.comm().all_reduce_in_place(buf, &ReduceOp::Sum).map(|_| ()))
    }

    fn join_device(&self, gpu: &Gpu) -> Result<()> {
        self.before_caller(gpu, "joining the halo exchange")
    }

    fn overlaps(&self) -> bool {
        true
    }

    fn capturable(&self) -> bool {
        true
    }

    fn exchange_stream(&self, _gpu: &Gpu) -> std::sync::Arc<CudaStream> {
        self.nccl_stream().clone()
    }
}

/// One device address and length as it travels between in-process ranks.
fn address(ptr: u64, len: usize) -> Vec<u64> {
    vec![ptr, len as u64]
}

impl InProcess {
    fn sync(&self, gpu: &Gpu, op: &str) -> Result<()> {
        gpu.stream().synchronize().map_err(|e| Error::cuda(op, e))
    }

    /// Posts an empty acknowledgement to every peer in `to`, then waits for one from every peer
    /// in `from`.
    fn acknowledge(&self, to: impl Iterator<Item = usize>, from: impl Iterator<Item = usize>, op: &'static str) -> Result<()> {
        for q in to {
            self.post::<u64>(q, op, Vec::new())?;
        }
        for q in from {
            self.take::<u64>(q, op, 0)?;
        }
        Ok(())
    }
}

impl DeviceComm for InProcess {
    fn exchange_device(
        &self,
        gpu: &Gpu,
        sends: &[(usize, SendRows<'_>)],
        into: &mut CudaViewMut<'_, f32>,
        recvs: &[(usize, Range<usize>)],
    ) -> Result<()> {
        const OP: &str = "device exchange";
        const ACK: &str = "device exchange done";
        check_peers(self, sends, into, recvs, OP)?;
        if sends.is_empty() && recvs.is_empty() {
            // No peer expects anything (a part with no halo, P = 1): no wait either.
            return Ok(());
        }
        let stream = gpu.stream();
        // The send buffers were written on this stream: complete before anyone reads them.
        self.sync(gpu, OP)?;
        for (p, rows) in sends {
            let ptr = match rows {
                SendRows::View(v) => v.device_ptr(stream).0,
                SendRows::Within(r) => into.slice(r.clone()).device_ptr(stream).0,
            };
            self.post(*p, OP, address(ptr, rows.len()))?;
        }
        for (p, r) in recvs {
            let a = self.take::<u64>(*p, OP, 2)?;
            if a[1] as usize != r.len() {
                return Err(Error::comm(OP, format!("rank {} expects {} elements from rank {p}, got {}", self.rank(), r.len(), a[1])));
            }
            if r.is_empty() {
                continue;
            }
            let len = r.len();
            let mut v = into.slice_mut(r.clone());
            let (dst, _sync) = v.device_ptr_mut(stream);
            // SAFETY: the peer's buffer holds `len` f32 (sent with its address) in the same
            // primary context, and stays untouched until this rank acknowledges below, after its
            // stream has finished the copy; dst holds `len` f32.
            unsafe { cudarc::driver::result::memcpy_dtod_async(dst, a[0], len * 4, stream.cu_stream()) }.map_err(|e| Error::cuda(OP, e))?;
        }
        self.sync(gpu, OP)?;
        self.acknowledge(recvs.iter().map(|r| r.0), sends.iter().map(|s| s.0), ACK)
    }

    fn all_reduce_device(&self, gpu: &Gpu, buf: &mut CudaViewMut<'_, f32>) -> Result<()> {
        const OP: &str = "device all_reduce";
        const ACK: &str = "device all_reduce done";
        let n = buf.len();
        if !n.is_multiple_of(4) {
            return Err(Error::Shape(format!("{OP}: {n} elements are not whole float4s")));
        }
        let stream: &std::sync::Arc<CudaStream> = gpu.stream();
        let others = || (0..self.world_size()).filter(|&q| q != self.rank());
        self.sync(gpu, OP)?;
        let mine = buf.device_ptr_mut(stream).0;
        for q in others() {
            self.post(q, OP, address(mine, n))?;
        }
        let mut ptrs = Vec::with_capacity(self.world_size());
        for q in 0..self.world_size() {
            if q == self.rank() {
                ptrs.push(mine);
                continue;
            }
            let a = self.take::<u64>(q, OP, 2)?;
            if a[1] as usize != n {
                return Err(Error::comm(OP, format!("rank {} has {n} elements, rank {q} {}", self.rank(), a[1])));
            }
            ptrs.push(a[0]);
        }
        if n > 0 {
            // Summed in rank order on every rank: identical bits everywhere.
            let mut sum = stream.alloc_zeros::<f32>(n).map_err(|e| Error::cuda(OP, e))?;
            let at = sum.device_ptr_mut(stream).0;
            for (q, &p) in ptrs.iter().enumerate() {
                if q == 0 {
                    // SAFETY: rank 0's buffer holds n f32 until it has our acknowledgement.
                    unsafe { cudarc::driver::result::memcpy_dtod_async(at, p, n * 4, stream.cu_stream()) }
                        .map_err(|e| Error::cuda(OP, e))?;
                } else {
                    let n4 = (n / 4) as u64;
                    let args = AddAssignArgs { n4, y: PtrMut::new(at), x: Ptr::new(p) };
                    // SAFETY: both addresses hold n f32 (n4 float4s), 16-byte aligned allocations.
                    unsafe { add_assign_f32.launch(gpu, crate::ops::nn::elementwise_shape(gpu, n4), &args) }?;
                }
            }
            self.sync(gpu, OP)?;
            self.acknowledge(others(), others(), ACK)?;
            stream.memcpy_dtod(&sum, buf).map_err(|e| Error::cuda(OP, e))?;
        } else {
            self.acknowledge(others(), others(), ACK)?;
        }
        Ok(())
    }
}
