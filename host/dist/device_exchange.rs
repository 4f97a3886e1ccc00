//! The halo exchange of the GPU step, on device buffers ([`HaloHook`] for [`CudaBackend`]):
//! nothing goes through the host. (The host-staged [`crate::dist::exchange::HaloExchange`] stays
//! the CPU path and the GPU's reference.)
//!
//! Forward (`fill`): one `gather_rows` launch packs the rows every peer needs (this part's send
//! lists, uploaded once as rows of the extended matrix) into one send buffer, peer after peer;
//! [`DeviceComm::exchange_device`] moves each peer's slice, and what arrives from each owner
//! lands directly in its halo rows of x (one contiguous block per owner, with x's stride: the
//! owners below this part fill the top rows, those above the bottom ones): no staging buffer,
//! no copy into place. Where every send list is a run of consecutive rows (two parts of a
//! symmetric graph: the rows the peer reads are the boundary rows, which the partition puts
//! last, in order), the rows are sent from x as they lie and nothing is gathered.
//!
//! Backward (`give_back`): each owner's block of halo-row gradients goes back as it lies in g;
//! what comes back from each peer is added into the rows it was sent (`scatter_add_rows`, one
//! launch per peer in increasing peer order: a row sent to several peers gets their sums in the
//! same order on every run, and no two threads of a launch add into one row); then the halo rows
//! are zeroed.
//!
//! Overlapped (a [`RowSplit`] given): `fill_start` gathers and starts the exchange, which runs on
//! the communicator's stream beside the interior rows' product; `fill_finish` makes the GPU's
//! stream wait for it. `give_back_start` sends the halo rows of g (formed first) while the owned
//! rows are formed; `give_back_finish` waits, then adds and zeroes as above.
//!
//! Rows travel with their padded stride, as on the host path. Every exchange is point-to-point:
//! the all-gather variant of [`crate::dist::ExchangeMethod`] is the host path's (it moves more
//! bytes and would only pay on NCCL rings for halos near an all-gather; not built on the
//! device yet). Time is measured with CUDA events on the stream, from the gather to the last
//! halo row in place (on the communicator's stream when overlapped: the exchange's own time,
//! partly hidden), so it counts waiting for a peer but not the compute queued before.

use std::cell::RefCell;
use std::rc::Rc;

use cudarc::driver::sys::CUevent_flags;
use std::ops::Range;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};

use crate::dist::device_comm::{DeviceComm, SendRows};
use crate::dist::exchange::ExchangeCounters;
use crate::dist::halo::Halo;
use crate::dist::part_graph::ExtendedLayout;
use crate::error::{Error, Result};
use crate::gpu::abi::perm::{GatherRowsArgs, ScatterAddRowsArgs, gather_rows, scatter_add_rows};
use crate::gpu::launch::{Ptr, PtrMut};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::nn::halo_hook::{HaloHook, RowSplit};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::partition::nn_row_group_shift;

/// A run of rows exchanged with one peer.
#[derive(Clone, Copy, Debug)]
struct Block {
    peer: usize,
    /// First row in the concatenated send lists (sends) or in halo order (receives).
    first: usize,
    rows: usize,
}

struct State {
    send: Option<CudaSlice<f32>>,
    /// What the peers return (backward), in send-list order.
    back: Option<CudaSlice<f32>>,
    /// The (start, end) events of the exchanges since the last `take_counters`: the first
    /// `used` of `events`, which are created once and reused (no event created per exchange).
    events: Vec<(CudaEvent, CudaEvent)>,
    used: usize,
    counters: ExchangeCounters,
}

pub struct DeviceHaloExchange<C: DeviceComm> {
    comm: Rc<C>,
    layout: ExtendedLayout,
    halo_rows: usize,
    sends: Vec<Block>,
    recvs: Vec<Block>,
    /// The send lists concatenated in peer order, as rows of the extended matrix.
    send_idx: DeviceVec<u32>,
    state: RefCell<State>,
    /// Where the exchanges overlap the products (`None`: serial, on the GPU's stream).
    split: Option<RowSplit>,
    /// Where every send list is a run of consecutive rows, the first row of each (rows of the
    /// extended matrix, in `sends` order): `fill` sends them from x in place.
    in_place: Option<Vec<usize>>,
}

/// A buffer of at least `n` f32 (grown, never shrunk: the widths of a model's layers differ).
pub(crate) fn at_least<'a>(buf: &'a mut Option<CudaSlice<f32>>, gpu: &Gpu, n: usize) -> Result<&'a mut CudaSlice<f32>> {
    if buf.as_ref().is_none_or(|b| b.len() < n) {
        gpu.refuse_in_capture(|| format!("growing an exchange buffer to {n} f32"))?;
        *buf = Some(gpu.stream().alloc_zeros::<f32>(n.max(1)).map_err(|e| Error::cuda("halo buffer", e))?);
    }
    Ok(buf.as_mut().expect("just allocated"))
}

/// float4s per row, and the lane-group shift of the row kernels.
fn row_geometry(x: &DeviceMatrix<f32>) -> (u32, u32) {
    let ld4 = (x.ld / 4) as u32;
    (ld4, nn_row_group_shift(ld4))
}

impl<C: DeviceComm> DeviceHaloExchange<C> {
    /// For a part whose extended matrices have `layout`'s rows (halo below, owned, halo above);
    /// `interior`: overlap the exchanges with the products, the first `interior` rows reading
    /// no halo row (see [`RowSplit`]), or `None` (serial).
    pub fn new(gpu: &Gpu, halo: &Halo, comm: Rc<C>, layout: ExtendedLayout, interior: Option<usize>) -> Result<Self> {
        if let Some(r) = interior.filter(|&r| r > layout.rows()) {
            return Err(Error::Shape(format!("{r} interior rows of a part of {} rows", layout.rows())));
        }
        let split = interior.map(|interior| RowSplit { interior, owned: layout.owned_rows(), rows: layout.rows() });
        if halo.halo_rows() != layout.below + layout.above {
            return Err(Error::Shape(format!("{} halo rows for a layout of {} + {}", halo.halo_rows(), layout.below, layout.above)));
        }
        let (mut sends, mut idx) = (Vec::new(), Vec::new());
        for (q, list) in halo.send_lists().iter().enumerate().filter(|(q, l)| *q != halo.part() && !l.is_empty()) {
            sends.push(Block { peer: q, first: idx.len(), rows: list.len() });
            idx.extend(list.iter().map(|&r| r + layout.below as u32));
        }
        let ptr = halo.recv_ptr();
        let recvs: Vec<Block> = (0..ptr.len() - 1)
            .filter(|&q| ptr[q + 1] > ptr[q])
            .map(|q| Block { peer: q, first: ptr[q], rows: ptr[q + 1] - ptr[q] })
            .collect();
        // An owner's rows lie all below or all above the owned ones (parts own contiguous ranges).
        if let Some(b) = recvs.iter().find(|b| b.first < layout.below && b.first + b.rows > layout.below) {
            return Err(Error::Shape(format!("part {}: the halo rows from part {} straddle its owned rows", halo.part(), b.peer)));
        }
        let runs = sends.iter().all(|b| idx[b.first..b.first + b.rows].windows(2).all(|w| w[1] == w[0] + 1));
        let in_place = runs.then(|| sends.iter().map(|b| idx[b.first] as usize).collect());
        let state = State { send: None, back: None, events: Vec::new(), used: 0, counters: ExchangeCounters::default() };
        Ok(DeviceHaloExchange {
            comm,
            layout,
            halo_rows: halo.halo_rows(),
            sends,
            recvs,
            send_idx: DeviceVec::upload(gpu, &idx)?,
            state: RefCell::new(state),
            split,
            in_place,
        })
    }

    /// Whether `fill` sends the rows from x as they lie (every send list a run of consecutive
    /// rows) rather than gathering them first.
    pub fn sends_in_place(&self) -> bool {
        self.in_place.is_some()
    }

    /// The counters since the last call, reset (waits for the exchanges' end events).
    pub fn take_counters(&self) -> Result<ExchangeCounters> {
        let s = &mut *self.state.borrow_mut();
        for (start, end) in &s.events[..s.used] {
            end.synchronize().map_err(|e| Error::cuda("halo exchange timing", e))?;
            s.counters.seconds += f64::from(start.elapsed_ms(end).map_err(|e| Error::cuda("halo exchange timing", e))?) / 1e3;
        }
        s.used = 0;
        Ok(std::mem::take(&mut s.counters))
    }

    /// Extended-matrix row of halo row `h`.
    fn halo_row(&self, h: usize) -> usize {
        if h < self.layout.below { h } else { h + self.layout.owned }
    }

    fn check(&self, x: &DeviceMatrix<f32>, what: &str) -> Result<()> {
        if x.rows != self.layout.rows() || !x.ld.is_multiple_of(4) {
            return Err(Error::Shape(format!(
                "{what}: a matrix of {} rows (stride {}) for a part of {} rows",
                x.rows,
                x.ld,
                self.layout.rows()
            )));
        }
        Ok(())
    }

    /// Runs `f` between two events and counts `elems` f32 moved: the start on the GPU's stream,
    /// the end on `end_on` (the GPU's stream, or the communicator's where `f` left the exchange
    /// running beside the GPU's stream). The events are the pool's next pair (created the first
    /// time a step reaches this many exchanges).
    /// While the step is being recorded, `f` runs untimed and uncounted: what a replay moves is
    /// counted by its caller ([`crate::dist::DistTrainer`]), and its events would time nothing.
    fn timed(&self, gpu: &Gpu, end_on: &CudaStream, elems: usize, f: impl FnOnce(&mut State) -> Result<()>) -> Result<()> {
        self.timed_as(gpu, end_on, elems, false, f)
    }

    /// [`DeviceHaloExchange::timed`], counted as a give-back when `gives_back`.
    fn timed_as(
        &self,
        gpu: &Gpu,
        end_on: &CudaStream,
        elems: usize,
        gives_back: bool,
        f: impl FnOnce(&mut State) -> Result<()>,
    ) -> Result<()> {
        let s = &mut *self.state.borrow_mut();
        if gpu.is_capturing() {
            return f(s);
        }
        if s.used == s.events.len() {
            let ev = || gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| Error::cuda("cuEventCreate", e));
            s.events.push((ev()?, ev()?));
        }
        let at = s.used;
        s.events[at].0.record(gpu.stream()).map_err(|e| Error::cuda("cuEventRecord", e))?;
        f(s)?;
        s.events[at].1.record(end_on).map_err(|e| Error::cuda("cuEventRecord", e))?;
        s.used += 1;
        s.counters.bytes += (elems * 4) as u64;
        s.counters.calls += 1;
        s.counters.gave_back += gives_back as u64;
        Ok(())
    }
}

impl<C: DeviceComm> DeviceHaloExchange<C> {
    /// Gathers the rows every peer needs into the send buffer and starts (`overlap`) or runs
    /// the exchange that puts each owner's rows into x's halo rows.
    fn fill_on(&self, x: &mut DeviceMatrix<f32>, overlap: bool) -> Result<()> {
        self.check(x, "halo fill")?;
        let gpu = x.gpu().clone();
        let ld = x.ld;
        let total: usize = self.sends.iter().map(|b| b.rows).sum();
        let end_on = if overlap { self.comm.exchange_stream(&gpu) } else { gpu.stream().clone() };
        if let Some(starts) = &self.in_place {
            return self.timed(&gpu, &end_on, self.halo_rows * ld, |_| {
                // Each peer's rows straight from x (owned rows, disjoint from the halo rows
                // received).
                let sends: Vec<(usize, SendRows<'_>)> = self
                    .sends
                    .iter()
                    .zip(starts)
                    .map(|(b, &start)| (b.peer, SendRows::Within(start * ld..(start + b.rows) * ld)))
                    .collect();
                self.exchange_into_halo(&gpu, x, &sends, overlap)
            });
        }
        self.timed(&gpu, &end_on, self.halo_rows * ld, |s| {
            let send = at_least(&mut s.send, &gpu, total * ld)?;
            if total > 0 {
                let (ld4, shift) = row_geometry(x);
                let args = GatherRowsArgs {
                    n_rows: total as u32,
                    ld4,
                    shift,
                    idx: self.send_idx.arg(&gpu),
                    src: Ptr::new(x.ptr()),
                    dst: PtrMut::new(send.device_ptr_mut_raw(&gpu)),
                };
                let shape = crate::ops::nn::row_shape(&gpu, total as u64, 32 >> shift, 0);
                // SAFETY: send_idx holds `total` rows of x (owned rows, checked when the halo was
                // built); send holds total x ld f32; x and send share the stride ld (16-byte rows).
                unsafe { gather_rows.launch(&gpu, shape, &args) }?;
            }
            let sends: Vec<(usize, SendRows<'_>)> =
                self.sends.iter().map(|b| (b.peer, SendRows::View(send.slice(b.first * ld..(b.first + b.rows) * ld)))).collect();
            self.exchange_into_halo(&gpu, x, &sends, overlap)
        })
    }

    /// Sends `sends` and receives each owner's rows straight into their place in x (disjoint
    /// row blocks); started (`overlap`) or run in order.
    fn exchange_into_halo(&self, gpu: &Gpu, x: &mut DeviceMatrix<f32>, sends: &[(usize, SendRows<'_>)], overlap: bool) -> Result<()> {
        let ld = x.ld;
        let recvs: Vec<(usize, Range<usize>)> = self
            .recvs
            .iter()
            .map(|b| {
                let at = self.halo_row(b.first) * ld;
                (b.peer, at..at + b.rows * ld)
            })
            .collect();
        let mut into = x.slice_mut().slice_mut(0..self.layout.rows() * ld);
        if overlap {
            self.comm.exchange_device_start(gpu, sends, &mut into, &recvs)
        } else {
            self.comm.exchange_device(gpu, sends, &mut into, &recvs)
        }
    }

    /// Sends g's halo rows to their owners, receiving what the peers return into `back`; started
    /// (`overlap`) or run in order.
    fn send_back(&self, g: &mut DeviceMatrix<f32>, overlap: bool) -> Result<()> {
        self.check(g, "halo give_back")?;
        let gpu = g.gpu().clone();
        let ld = g.ld;
        let end_on = if overlap { self.comm.exchange_stream(&gpu) } else { gpu.stream().clone() };
        self.timed_as(&gpu, &end_on, self.halo_rows * ld, true, |s| {
            let total: usize = self.sends.iter().map(|b| b.rows).sum();
            let back = at_least(&mut s.back, &gpu, total * ld)?;
            let whole = g.slice();
            let sends: Vec<(usize, SendRows<'_>)> = self
                .recvs
                .iter()
                .map(|b| {
                    let at = self.halo_row(b.first) * ld;
                    (b.peer, SendRows::View(whole.slice(at..at + b.rows * ld)))
                })
                .collect();
            // What each peer returns, in send-list order (its rows' block of `back`).
            let recvs: Vec<(usize, Range<usize>)> = self.sends.iter().map(|b| (b.peer, b.first * ld..(b.first + b.rows) * ld)).collect();
            let mut into = back.slice_mut(0..total * ld);
            if overlap {
                self.comm.exchange_device_start(&gpu, &sends, &mut into, &recvs)
            } else {
                self.comm.exchange_device(&gpu, &sends, &mut into, &recvs)
            }
        })
    }

    /// What the peers returned (in `back`) added into the rows they were sent, then g's halo
    /// rows zeroed; on the GPU's stream, after the exchange that filled `back`.
    fn add_back(&self, g: &mut DeviceMatrix<f32>) -> Result<()> {
        let gpu = g.gpu().clone();
        let ld = g.ld;
        let ExtendedLayout { below, owned, above } = self.layout;
        let s = &mut *self.state.borrow_mut();
        let total: usize = self.sends.iter().map(|b| b.rows).sum();
        let back = at_least(&mut s.back, &gpu, total * ld)?;
        let (ld4, shift) = row_geometry(g);
        // Increasing peer order (`sends` is sorted by peer): a fixed order of sums.
        let back_at = back.device_ptr_raw(&gpu);
        for b in &self.sends {
            let args = ScatterAddRowsArgs {
                n_rows: b.rows as u32,
                ld4,
                shift,
                idx: Ptr::new(self.send_idx.ptr(&gpu) + (b.first * 4) as u64),
                src: Ptr::new(back_at + (b.first * ld * 4) as u64),
                dst: PtrMut::new(g.ptr_mut()),
            };
            let shape = crate::ops::nn::row_shape(&gpu, b.rows as u64, 32 >> shift, 0);
            // SAFETY: the peer's list holds b.rows distinct owned rows of g (one writer per
            // row); back holds its b.rows x ld f32 from row b.first, g's stride is ld
            // (16-byte rows).
            unsafe { scatter_add_rows.launch(&gpu, shape, &args) }?;
        }
        // The rows now belong to their owners' sums: zero here, so nothing counts them twice.
        let stream = gpu.stream().clone();
        let whole = g.slice_mut();
        for range in [0..below * ld, (below + owned) * ld..(below + owned + above) * ld] {
            if !range.is_empty() {
                stream.memset_zeros(&mut whole.slice_mut(range)).map_err(|e| Error::cuda("zeroing the halo rows", e))?;
            }
        }
        Ok(())
    }
}

impl<C: DeviceComm> HaloHook<CudaBackend> for DeviceHaloExchange<C> {
    fn fill(&self, _b: &CudaBackend, x: &mut DeviceMatrix<f32>) -> Result<()> {
        self.fill_on(x, false)
    }

    fn give_back(&self, _b: &CudaBackend, g: &mut DeviceMatrix<f32>) -> Result<()> {
        self.send_back(g, false)?;
        self.add_back(g)
    }

    fn split(&self) -> Option<RowSplit> {
        self.split.clone()
    }

    fn fill_start(&self, _b: &CudaBackend, x: &mut DeviceMatrix<f32>) -> Result<()> {
        self.fill_on(x, self.split.is_some())
    }

    fn fill_finish(&self, _b: &CudaBackend, x: &mut DeviceMatrix<f32>) -> Result<()> {
        self.comm.join_device(x.gpu())
    }

    fn give_back_start(&self, _b: &CudaBackend, g: &mut DeviceMatrix<f32>) -> Result<()> {
        self.send_back(g, self.split.is_some())
    }

    fn give_back_finish(&self, _b: &CudaBackend, g: &mut DeviceMatrix<f32>) -> Result<()> {
        self.comm.join_device(g.gpu())?;
        self.add_back(g)
    }
}

/// Raw addresses of the exchange's own buffers, on the rank's stream.
trait RawPtr {
    fn device_ptr_raw(&self, gpu: &Gpu) -> u64;
    fn device_ptr_mut_raw(&mut self, gpu: &Gpu) -> u64;
}

impl RawPtr for CudaSlice<f32> {
    fn device_ptr_raw(&self, gpu: &Gpu) -> u64 {
        cudarc::driver::DevicePtr::device_ptr(self, gpu.stream()).0
    }
    fn device_ptr_mut_raw(&mut self, gpu: &Gpu) -> u64 {
        cudarc::driver::DevicePtrMut::device_ptr_mut(self, gpu.stream()).0
    }
}
