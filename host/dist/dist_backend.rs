//! How a backend moves a part's rows between ranks in the distributed step: the halo hook the
//! model calls and the all-reduce of the weight gradients (fused after the backward, or in
//! buckets during it), on the host ([`HaloPath::Host`]:
//! the CPU backend's memory, or the GPU's rows staged through it, the reference) or on the device
//! ([`HaloPath::Device`]: the GPU's buffers handed to NCCL or copied device to device;
//! [`crate::dist::device_exchange`]). On the CPU both paths are the host one.

use std::ops::Range;
use std::rc::Rc;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice};

use crate::dist::comm::Communicator;
use crate::dist::device_comm::DeviceComm;
use crate::dist::device_exchange::{DeviceHaloExchange, at_least};
use crate::dist::exchange::{ExchangeCounters, HaloExchange};
use crate::dist::halo::Halo;
use crate::dist::host_rows::HostRows;
use crate::dist::part_graph::ExtendedLayout;
use crate::dist::split_host::SplitHost;
use crate::error::{Error, Result};
use crate::gpu::{DeviceMatrix, Gpu};
use crate::nn::halo_hook::{HaloHook, RowSplit};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::CpuBackend;
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// Where a GPU rank's exchanges run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HaloPath {
    /// Rows staged through host memory (the checking path).
    Host,
    /// Device buffers only.
    #[default]
    Device,
}

/// A halo hook that counts its time and volume (for `bench dist` and `--verbose`).
pub trait CountedHook<B: Backend>: HaloHook<B> {
    /// The counters since the last call, reset to zero.
    fn take_counters(&self) -> Result<ExchangeCounters>;
}

impl<B: HostRows, C: Communicator> CountedHook<B> for HaloExchange<B, C> {
    fn take_counters(&self) -> Result<ExchangeCounters> {
        Ok(HaloExchange::take_counters(self))
    }
}

impl<C: DeviceComm> CountedHook<CudaBackend> for DeviceHaloExchange<C> {
    fn take_counters(&self) -> Result<ExchangeCounters> {
        DeviceHaloExchange::take_counters(self)
    }
}

pub trait DistBackend<C: Communicator>: HostRows + Sized + 'static {
    /// Buffers the gradient all-reduce keeps across steps (and its timing).
    type Fused: Default;

    /// Whether a step whose rows travel by `path` through `comm` can be recorded
    /// ([`crate::ops::backend::Backend::record`]): every exchange and all-reduce queued on the
    /// device without a host wait (the device path over NCCL). The CPU records nothing.
    fn recordable(&self, comm: &C, path: HaloPath) -> bool;

    /// The hook of one part's model; `interior`: overlap the exchanges with the products, the
    /// part's first `interior` rows reading no halo row (where the backend can: the GPU's
    /// device path; elsewhere ignored).
    fn halo_hook(
        &self,
        halo: Halo,
        comm: Rc<C>,
        layout: ExtendedLayout,
        path: HaloPath,
        interior: Option<usize>,
    ) -> Result<Rc<dyn CountedHook<Self>>>;

    /// Every matrix of `mats` summed over the ranks, in one collective, identical on every rank;
    /// returns the bytes reduced.
    fn all_reduce_mats(&self, comm: &C, mats: &mut [&mut Self::Mat], fused: &mut Self::Fused, path: HaloPath) -> Result<u64>;

    /// Seconds spent in [`DistBackend::all_reduce_mats`] and the gradient buckets since the
    /// last call (waits for them).
    fn take_all_reduce_seconds(fused: &mut Self::Fused) -> Result<f64>;

    /// The gradient all-reduce in buckets, during the backward (PyTorch DDP's): a step calls
    /// [`DistBackend::buckets_begin`] with every gradient, [`DistBackend::bucket_pack`] with each
    /// gradient as it becomes final, [`DistBackend::bucket_start`] over what it packed since the
    /// last bucket, then [`DistBackend::buckets_finish`]. Each element is summed over the ranks
    /// as [`DistBackend::all_reduce_mats`] sums it (the in-process communicator: in rank order,
    /// the same bits). This empties the bucket buffer and sizes it for `mats` (no bucket of an
    /// earlier step is in flight).
    fn buckets_begin(&self, mats: &[&Self::Mat], fused: &mut Self::Fused, path: HaloPath) -> Result<()>;

    /// Appends `m`'s values (final) to the bucket buffer; returns where they lie in it.
    fn bucket_pack(&self, m: &Self::Mat, fused: &mut Self::Fused, path: HaloPath) -> Result<Range<usize>>;

    /// Starts summing `range` of the bucket buffer over the ranks (the device path with NCCL: on
    /// NCCL's stream, beside what the GPU's stream runs next; elsewhere done on return);
    /// returns the bytes reduced.
    fn bucket_start(&self, comm: &C, range: Range<usize>, fused: &mut Self::Fused, path: HaloPath) -> Result<u64>;

    /// Waits for every bucket started (work queued after this sees their sums) and writes each
    /// matrix's summed values back (`(m, range)`: `range` as [`DistBackend::bucket_pack`]
    /// returned it).
    fn buckets_finish(&self, comm: &C, mats: &mut [(&mut Self::Mat, Range<usize>)], fused: &mut Self::Fused, path: HaloPath) -> Result<()>;
}

/// The host path's buffers: the fused gradients and one matrix's rows.
pub struct HostFused<E> {
    fused: Vec<E>,
    rows: Vec<E>,
    seconds: f64,
}

impl<E> Default for HostFused<E> {
    fn default() -> Self {
        HostFused { fused: Vec::new(), rows: Vec::new(), seconds: 0.0 }
    }
}

fn all_reduce_on_host<B: HostRows, C: Communicator>(b: &B, comm: &C, mats: &mut [&mut B::Mat], f: &mut HostFused<B::Elem>) -> Result<u64> {
    let t0 = Instant::now();
    f.fused.clear();
    for m in mats.iter() {
        let rows = B::shape(m).0;
        b.read_rows(m, 0..rows, &mut f.rows)?;
        f.fused.extend_from_slice(&f.rows);
    }
    comm.all_reduce_sum(&mut f.fused)?;
    let mut at = 0;
    for m in mats.iter_mut() {
        let rows = B::shape(m).0;
        let len = b.read_rows(m, 0..rows, &mut f.rows)? * rows;
        b.write_rows(m, 0, &f.fused[at..at + len])?;
        at += len;
    }
    f.seconds += t0.elapsed().as_secs_f64();
    Ok((f.fused.len() * std::mem::size_of::<B::Elem>()) as u64)
}

/// The host path's buckets: the values of every gradient packed in one host buffer, each
/// bucket's range summed in place by the communicator, written back at the finish.
fn bucket_pack_on_host<B: HostRows>(b: &B, m: &B::Mat, f: &mut HostFused<B::Elem>) -> Result<Range<usize>> {
    let t0 = Instant::now();
    let rows = B::shape(m).0;
    b.read_rows(m, 0..rows, &mut f.rows)?;
    let at = f.fused.len();
    f.fused.extend_from_slice(&f.rows);
    f.seconds += t0.elapsed().as_secs_f64();
    Ok(at..f.fused.len())
}

fn bucket_start_on_host<E: Real, C: Communicator>(comm: &C, range: Range<usize>, f: &mut HostFused<E>) -> Result<u64> {
    let t0 = Instant::now();
    let len = f.fused.len();
    let buf = f.fused.get_mut(range.clone()).ok_or_else(|| bucket_outside(&range, len))?;
    comm.all_reduce_sum(buf)?;
    f.seconds += t0.elapsed().as_secs_f64();
    Ok((range.len() * std::mem::size_of::<E>()) as u64)
}

fn buckets_finish_on_host<B: HostRows>(b: &B, mats: &mut [(&mut B::Mat, Range<usize>)], f: &mut HostFused<B::Elem>) -> Result<()> {
    let t0 = Instant::now();
    for (m, range) in mats.iter_mut() {
        let v = f.fused.get(range.clone()).ok_or_else(|| bucket_outside(range, f.fused.len()))?;
        b.write_rows(m, 0, v)?;
    }
    f.seconds += t0.elapsed().as_secs_f64();
    Ok(())
}

fn bucket_outside(range: &Range<usize>, len: usize) -> Error {
    Error::Shape(format!("gradient bucket: elements {range:?} of a bucket buffer of {len}"))
}

impl<T: Real, C: Communicator + 'static> DistBackend<C> for CpuBackend<T> {
    type Fused = HostFused<T>;
    fn recordable(&self, _comm: &C, _path: HaloPath) -> bool {
        false
    }
    fn halo_hook(
        &self,
        halo: Halo,
        comm: Rc<C>,
        layout: ExtendedLayout,
        _path: HaloPath,
        interior: Option<usize>,
    ) -> Result<Rc<dyn CountedHook<Self>>> {
        let inner = HaloExchange::<Self, C>::new(halo, comm, layout)?;
        Ok(match interior {
            // The GPU step's blocked products, the exchanges in order.
            Some(interior) => Rc::new(SplitHost { inner, split: RowSplit { interior, owned: layout.owned_rows(), rows: layout.rows() } }),
            None => Rc::new(inner),
        })
    }
    fn all_reduce_mats(&self, comm: &C, mats: &mut [&mut Self::Mat], fused: &mut Self::Fused, _path: HaloPath) -> Result<u64> {
        all_reduce_on_host(self, comm, mats, fused)
    }
    fn take_all_reduce_seconds(fused: &mut Self::Fused) -> Result<f64> {
        Ok(std::mem::take(&mut fused.seconds))
    }
    fn buckets_begin(&self, mats: &[&Self::Mat], fused: &mut Self::Fused, _path: HaloPath) -> Result<()> {
        fused.fused.clear();
        fused.fused.reserve(mats.iter().map(|m| m.data.len()).sum());
        Ok(())
    }
    fn bucket_pack(&self, m: &Self::Mat, fused: &mut Self::Fused, _path: HaloPath) -> Result<Range<usize>> {
        bucket_pack_on_host(self, m, fused)
    }
    fn bucket_start(&self, comm: &C, range: Range<usize>, fused: &mut Self::Fused, _path: HaloPath) -> Result<u64> {
        bucket_start_on_host(comm, range, fused)
    }
    fn buckets_finish(
        &self,
        _comm: &C,
        mats: &mut [(&mut Self::Mat, Range<usize>)],
        fused: &mut Self::Fused,
        _path: HaloPath,
    ) -> Result<()> {
        buckets_finish_on_host(self, mats, fused)
    }
}

/// The GPU's buffers: the host path's, the device's fused buffer and the events around each
/// device all-reduce.
#[derive(Default)]
pub struct CudaFused {
    host: HostFused<f32>,
    device: Option<CudaSlice<f32>>,
    events: Vec<(CudaEvent, CudaEvent)>,
    /// The device buckets: elements of `device` packed so far this step, and each started
    /// bucket's (start, end) events (the first `used` of a pool created once: no event created
    /// per step).
    packed: usize,
    bucket_events: Vec<(CudaEvent, CudaEvent)>,
    used: usize,
}

/// The device path's buckets. Every gradient is copied (whole padded buffer, as the fused
/// all-reduce) into its place in one device buffer on the GPU's stream as soon as it is final;
/// a bucket's range is summed on the communicator's stream (NCCL: its own, after an event on
/// the GPU's stream, not waited for), so the GPU's stream goes on with the earlier layers'
/// backward; the finish makes the GPU's stream wait for every bucket, then copies the sums back.
fn bucket_pack_on_device(gpu: &Gpu, m: &DeviceMatrix<f32>, f: &mut CudaFused) -> Result<Range<usize>> {
    let n = m.rows * m.ld;
    let at = f.packed;
    let buf = f.device.as_mut().filter(|d| d.len() >= at + n).ok_or_else(|| bucket_outside(&(at..at + n), f.packed))?;
    if n > 0 {
        gpu.stream().memcpy_dtod(&m.slice().slice(0..n), &mut buf.slice_mut(at..at + n)).map_err(|e| Error::cuda("gradient bucket", e))?;
    }
    f.packed += n;
    Ok(at..at + n)
}

fn bucket_start_on_device<C: DeviceComm>(gpu: &Gpu, comm: &C, range: Range<usize>, f: &mut CudaFused) -> Result<u64> {
    if range.is_empty() {
        return Ok(0);
    }
    let len = f.device.as_ref().map_or(0, |d| d.len());
    let buf = f.device.as_mut().filter(|_| range.end <= len).ok_or_else(|| bucket_outside(&range, len))?;
    if f.used == f.bucket_events.len() {
        let ev = || gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| Error::cuda("cuEventCreate", e));
        f.bucket_events.push((ev()?, ev()?));
    }
    // Timed from the moment the bucket's gradients are packed to its sum in place: the wait for
    // the slower rank included, partly hidden behind the backward queued after it. Not while
    // the step is being recorded (a replay's events would time nothing the host can read).
    let timed = !gpu.is_capturing();
    let (start, end) = &f.bucket_events[f.used];
    if timed {
        start.record(gpu.stream()).map_err(|e| Error::cuda("cuEventRecord", e))?;
    }
    comm.all_reduce_device_start(gpu, &mut buf.slice_mut(range.clone()))?;
    if timed {
        end.record(&comm.exchange_stream(gpu)).map_err(|e| Error::cuda("cuEventRecord", e))?;
        f.used += 1;
    }
    Ok((range.len() * 4) as u64)
}

fn buckets_finish_on_device<C: DeviceComm>(
    gpu: &Gpu,
    comm: &C,
    mats: &mut [(&mut DeviceMatrix<f32>, Range<usize>)],
    f: &mut CudaFused,
) -> Result<()> {
    comm.join_device(gpu)?;
    let Some(buf) = f.device.as_ref() else { return Ok(()) };
    for (m, range) in mats.iter_mut() {
        let n = m.rows * m.ld;
        if range.len() != n || range.end > buf.len() {
            return Err(bucket_outside(range, buf.len()));
        }
        if n > 0 {
            gpu.stream()
                .memcpy_dtod(&buf.slice(range.clone()), &mut m.slice_mut().slice_mut(0..n))
                .map_err(|e| Error::cuda("gradient bucket", e))?;
        }
    }
    Ok(())
}

fn all_reduce_on_device<C: DeviceComm>(comm: &C, mats: &mut [&mut DeviceMatrix<f32>], f: &mut CudaFused) -> Result<u64> {
    const OP: &str = "gradient all-reduce";
    let Some(gpu) = mats.first().map(|m| m.gpu().clone()) else { return Ok(0) };
    let stream = gpu.stream().clone();
    // Timed, except while the step is being recorded (see bucket_start_on_device).
    let timed = !gpu.is_capturing();
    let ev = || gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| Error::cuda("cuEventCreate", e));
    let events = if timed { Some((ev()?, ev()?)) } else { None };
    if let Some((start, _)) = &events {
        start.record(&stream).map_err(|e| Error::cuda("cuEventRecord", e))?;
    }
    // Whole padded buffers (rows x ld, ld a multiple of 8): the padding is zero and sums to zero.
    let total: usize = mats.iter().map(|m| m.rows * m.ld).sum();
    let fused = at_least(&mut f.device, &gpu, total)?;
    let mut at = 0;
    for m in mats.iter() {
        let n = m.rows * m.ld;
        if n > 0 {
            stream.memcpy_dtod(&m.slice().slice(0..n), &mut fused.slice_mut(at..at + n)).map_err(|e| Error::cuda(OP, e))?;
        }
        at += n;
    }
    comm.all_reduce_device(&gpu, &mut fused.slice_mut(0..total))?;
    at = 0;
    for m in mats.iter_mut() {
        let n = m.rows * m.ld;
        if n > 0 {
            stream.memcpy_dtod(&fused.slice(at..at + n), &mut m.slice_mut().slice_mut(0..n)).map_err(|e| Error::cuda(OP, e))?;
        }
        at += n;
    }
    if let Some((start, end)) = events {
        end.record(&stream).map_err(|e| Error::cuda("cuEventRecord", e))?;
        f.events.push((start, end));
    }
    Ok((total * 4) as u64)
}

impl<C: DeviceComm + 'static> DistBackend<C> for CudaBackend {
    type Fused = CudaFused;
    fn recordable(&self, comm: &C, path: HaloPath) -> bool {
        path == HaloPath::Device && comm.capturable()
    }
    fn halo_hook(
        &self,
        halo: Halo,
        comm: Rc<C>,
        layout: ExtendedLayout,
        path: HaloPath,
        interior: Option<usize>,
    ) -> Result<Rc<dyn CountedHook<Self>>> {
        Ok(match path {
            HaloPath::Host => Rc::new(HaloExchange::<Self, C>::new(halo, comm, layout)?),
            HaloPath::Device => Rc::new(DeviceHaloExchange::new(self.gpu(), &halo, comm, layout, interior)?),
        })
    }
    fn all_reduce_mats(&self, comm: &C, mats: &mut [&mut Self::Mat], fused: &mut Self::Fused, path: HaloPath) -> Result<u64> {
        match path {
            HaloPath::Host => all_reduce_on_host(self, comm, mats, &mut fused.host),
            HaloPath::Device => all_reduce_on_device(comm, mats, fused),
        }
    }
    fn take_all_reduce_seconds(fused: &mut Self::Fused) -> Result<f64> {
        let mut s = std::mem::take(&mut fused.host.seconds);
        let used = std::mem::take(&mut fused.used);
        let pairs = fused.events.iter().chain(&fused.bucket_events[..used]);
        for (start, end) in pairs {
            end.synchronize().map_err(|e| Error::cuda("all-reduce timing", e))?;
            s += f64::from(start.elapsed_ms(end).map_err(|e| Error::cuda("all-reduce timing", e))?) / 1e3;
        }
        fused.events.clear();
        Ok(s)
    }
    fn buckets_begin(&self, mats: &[&Self::Mat], fused: &mut Self::Fused, path: HaloPath) -> Result<()> {
        match path {
            HaloPath::Host => {
                fused.host.fused.clear();
                Ok(())
            }
            HaloPath::Device => {
                // Grown before any bucket of this step is in flight (the last step's finish
                // joined them), never while one is.
                let total: usize = mats.iter().map(|m| m.rows * m.ld).sum();
                at_least(&mut fused.device, self.gpu(), total)?;
                fused.packed = 0;
                Ok(())
            }
        }
    }
    fn bucket_pack(&self, m: &Self::Mat, fused: &mut Self::Fused, path: HaloPath) -> Result<Range<usize>> {
        match path {
            HaloPath::Host => bucket_pack_on_host(self, m, &mut fused.host),
            HaloPath::Device => bucket_pack_on_device(self.gpu(), m, fused),
        }
    }
    fn bucket_start(&self, comm: &C, range: Range<usize>, fused: &mut Self::Fused, path: HaloPath) -> Result<u64> {
        match path {
            HaloPath::Host => bucket_start_on_host(comm, range, &mut fused.host),
            HaloPath::Device => bucket_start_on_device(self.gpu(), comm, range, fused),
        }
    }
    fn buckets_finish(&self, comm: &C, mats: &mut [(&mut Self::Mat, Range<usize>)], fused: &mut Self::Fused, path: HaloPath) -> Result<()> {
        match path {
            HaloPath::Host => buckets_finish_on_host(self, mats, &mut fused.host),
            HaloPath::Device => buckets_finish_on_device(self.gpu(), comm, mats, fused),
        }
    }
}
