//! The host exchange ([`HaloExchange`]) for a model whose products run in the row blocks of a
//! [`RowSplit`], as the GPU's overlapped step runs them: the exchanges stay in order (the CPU
//! has nothing to overlap), so the CPU runs the GPU step's blocked products and checks them
//! against the whole products (`DistOptions::overlap`).

use crate::dist::comm::Communicator;
use crate::dist::dist_backend::CountedHook;
use crate::dist::exchange::{ExchangeCounters, HaloExchange};
use crate::dist::host_rows::HostRows;
use crate::error::Result;
use crate::nn::halo_hook::{HaloHook, RowSplit};

pub struct SplitHost<B: HostRows, C: Communicator> {
    pub inner: HaloExchange<B, C>,
    pub split: RowSplit,
}

impl<B: HostRows, C: Communicator> HaloHook<B> for SplitHost<B, C> {
    fn fill(&self, b: &B, x: &mut B::Mat) -> Result<()> {
        self.inner.fill(b, x)
    }
    fn give_back(&self, b: &B, g: &mut B::Mat) -> Result<()> {
        self.inner.give_back(b, g)
    }
    fn split(&self) -> Option<RowSplit> {
        Some(self.split.clone())
    }
}

impl<B: HostRows, C: Communicator> CountedHook<B> for SplitHost<B, C> {
    fn take_counters(&self) -> Result<ExchangeCounters> {
        Ok(self.inner.take_counters())
    }
}
