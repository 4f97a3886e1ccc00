//! How a backend moves a part's rows between ranks in the distributed step: the halo hook the
//! model calls and the fused all-reduce of the weight gradients, on the host ([`HaloPath::Host`]:
//! the CPU backend's memory, or the GPU's rows staged through it, the reference) or on the device
//! ([`HaloPath::Device`]: the GPU's buffers handed to NCCL or copied device to device;
//! [`crate::dist::device_exchange`]). On the CPU both paths are the host one.

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
use crate::gpu::DeviceMatrix;
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

    /// Seconds spent in [`DistBackend::all_reduce_mats`] since the last call (waits for it).
    fn take_all_reduce_seconds(fused: &mut Self::Fused) -> Result<f64>;
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

impl<T: Real, C: Communicator + 'static> DistBackend<C> for CpuBackend<T> {
    type Fused = HostFused<T>;
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
}

/// The GPU's buffers: the host path's, the device's fused buffer and the events around each
/// device all-reduce.
#[derive(Default)]
pub struct CudaFused {
    host: HostFused<f32>,
    device: Option<CudaSlice<f32>>,
    events: Vec<(CudaEvent, CudaEvent)>,
}

fn all_reduce_on_device<C: DeviceComm>(comm: &C, mats: &mut [&mut DeviceMatrix<f32>], f: &mut CudaFused) -> Result<u64> {
    const OP: &str = "gradient all-reduce";
    let Some(gpu) = mats.first().map(|m| m.gpu().clone()) else { return Ok(0) };
    let stream = gpu.stream().clone();
    let ev = || gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| Error::cuda("cuEventCreate", e));
    let (start, end) = (ev()?, ev()?);
    start.record(&stream).map_err(|e| Error::cuda("cuEventRecord", e))?;
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
    end.record(&stream).map_err(|e| Error::cuda("cuEventRecord", e))?;
    f.events.push((start, end));
    Ok((total * 4) as u64)
}

impl<C: DeviceComm + 'static> DistBackend<C> for CudaBackend {
    type Fused = CudaFused;
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
        for (start, end) in fused.events.drain(..) {
            end.synchronize().map_err(|e| Error::cuda("all-reduce timing", e))?;
            s += f64::from(start.elapsed_ms(&end).map_err(|e| Error::cuda("all-reduce timing", e))?) / 1e3;
        }
        Ok(s)
    }
}
