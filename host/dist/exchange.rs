//! [`HaloHook`] over a [`Halo`] and a [`Communicator`]: what a model built on one part calls at
//! its fill / give-back points. The matrix's owned rows go to the host ([`HostRows`]), the halo
//! rows come back from their owners (and the reverse for gradients); the time spent and the
//! bytes received are counted for `bench dist`.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use crate::dist::comm::Communicator;
use crate::dist::halo::Halo;
use crate::dist::host_rows::HostRows;
use crate::dist::part_graph::ExtendedLayout;
use crate::error::{Error, Result};
use crate::nn::halo_hook::HaloHook;
use crate::util::Real;

/// Exchange time and volume since the last [`HaloExchange::take_counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ExchangeCounters {
    /// Wall seconds inside fill / give_back (host staging included).
    pub seconds: f64,
    /// Bytes of halo rows this part received (forward) plus sent back (backward).
    pub bytes: u64,
    pub calls: u64,
    /// Of the calls, the backward's give-backs (a backward that pulls fills instead).
    pub gave_back: u64,
}

impl std::ops::AddAssign for ExchangeCounters {
    fn add_assign(&mut self, o: Self) {
        self.seconds += o.seconds;
        self.bytes += o.bytes;
        self.calls += o.calls;
        self.gave_back += o.gave_back;
    }
}

struct Buffers<T> {
    local: Vec<T>,
    /// The halo rows in halo order: those below the owned rows, then those above.
    halo: Vec<T>,
    above: Vec<T>,
    counters: ExchangeCounters,
}

pub struct HaloExchange<B: HostRows, C: Communicator> {
    halo: Halo,
    comm: Rc<C>,
    layout: ExtendedLayout,
    bufs: RefCell<Buffers<B::Elem>>,
}

impl<B: HostRows, C: Communicator> HaloExchange<B, C> {
    /// For a part whose extended matrices have `layout`'s rows (halo below, owned, halo above).
    pub fn new(halo: Halo, comm: Rc<C>, layout: ExtendedLayout) -> Result<Self> {
        if halo.halo_rows() != layout.below + layout.above {
            return Err(Error::Shape(format!("{} halo rows for a layout of {} + {}", halo.halo_rows(), layout.below, layout.above)));
        }
        let bufs = Buffers { local: Vec::new(), halo: Vec::new(), above: Vec::new(), counters: ExchangeCounters::default() };
        Ok(HaloExchange { halo, comm, layout, bufs: RefCell::new(bufs) })
    }

    /// The counters so far, reset to zero.
    pub fn take_counters(&self) -> ExchangeCounters {
        std::mem::take(&mut self.bufs.borrow_mut().counters)
    }

    fn count(c: &mut ExchangeCounters, t0: Instant, elems: usize) {
        c.seconds += t0.elapsed().as_secs_f64();
        c.bytes += (elems * std::mem::size_of::<B::Elem>()) as u64;
        c.calls += 1;
    }
}

impl<B: HostRows, C: Communicator> HaloHook<B> for HaloExchange<B, C> {
    fn fill(&self, b: &B, x: &mut B::Mat) -> Result<()> {
        let t0 = Instant::now();
        let ExtendedLayout { below, owned, .. } = self.layout;
        let bufs = &mut *self.bufs.borrow_mut();
        let k = b.read_rows(x, self.layout.owned_rows(), &mut bufs.local)?;
        bufs.halo.resize(self.halo.halo_rows() * k, <B::Elem as Real>::zero());
        self.halo.gather(&*self.comm, &bufs.local, k, &mut bufs.halo)?;
        let (lo, hi) = bufs.halo.split_at(below * k);
        b.write_rows(x, 0, lo)?;
        b.write_rows(x, below + owned, hi)?;
        Self::count(&mut bufs.counters, t0, bufs.halo.len());
        Ok(())
    }

    fn give_back(&self, b: &B, g: &mut B::Mat) -> Result<()> {
        let t0 = Instant::now();
        let ExtendedLayout { below, owned, above } = self.layout;
        let bufs = &mut *self.bufs.borrow_mut();
        let k = b.read_rows(g, self.layout.owned_rows(), &mut bufs.local)?;
        b.read_rows(g, 0..below, &mut bufs.halo)?;
        b.read_rows(g, below + owned..below + owned + above, &mut bufs.above)?;
        bufs.halo.extend_from_slice(&bufs.above);
        self.halo.scatter_add(&*self.comm, &bufs.halo, k, &mut bufs.local)?;
        b.write_rows(g, below, &bufs.local)?;
        // The rows now belong to their owners' sums: zero here, so nothing counts them twice.
        bufs.halo.fill(<B::Elem as Real>::zero());
        let (lo, hi) = bufs.halo.split_at(below * k);
        b.write_rows(g, 0, lo)?;
        b.write_rows(g, below + owned, hi)?;
        Self::count(&mut bufs.counters, t0, bufs.halo.len());
        bufs.counters.gave_back += 1;
        Ok(())
    }
}
