//! A rank with no peers behind it, for measuring one part's compute alone on one device
//! (`bench dist --alone`): rank `rank` of a world of `world_size` whose exchanges move nothing.
//!
//! A receive leaves its buffer as it was (the halo rows keep what they held: zeros, then the
//! rank's own stale values), an all-reduce leaves the rank's own sum. The losses and weights of
//! such a step are therefore not the distributed run's; what it keeps is the rank's work, kernel
//! for kernel (the sends' rows are still gathered, the overlapped products still split), without
//! the time a rank spends waiting for its peers or for the link. Never use it to train.

use std::ops::Range;

use cudarc::driver::CudaViewMut;

use crate::dist::comm::{Communicator, check_blocks, check_peer};
use crate::dist::device_comm::{DeviceComm, SendRows, check_peers};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::util::Real;

pub struct Detached {
    rank: usize,
    world_size: usize,
}

impl Detached {
    pub fn new(rank: usize, world_size: usize) -> Result<Self> {
        if rank >= world_size {
            return Err(Error::Unsupported(format!("rank {rank} of a world of {world_size}")));
        }
        Ok(Detached { rank, world_size })
    }

    fn check<'a>(&self, mut peers: impl Iterator<Item = &'a usize>, op: &str) -> Result<()> {
        peers.try_for_each(|&p| check_peer(self.rank, self.world_size, p, op))
    }
}

impl Communicator for Detached {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world_size
    }

    fn exchange<T: Real>(&self, sends: &[(usize, &[T])], recvs: &mut [(usize, &mut [T])]) -> Result<()> {
        self.check(sends.iter().map(|s| &s.0).chain(recvs.iter().map(|r| &r.0)), "detached exchange")
    }

    fn all_reduce_sum<T: Real>(&self, _buf: &mut [T]) -> Result<()> {
        Ok(())
    }

    fn all_gather<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        check_blocks(self.world_size, send.len(), recv.len(), "detached all_gather")?;
        let at = self.rank * send.len();
        recv[at..at + send.len()].copy_from_slice(send);
        Ok(())
    }

    fn reduce_scatter_sum<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        check_blocks(self.world_size, recv.len(), send.len(), "detached reduce_scatter")?;
        let at = self.rank * recv.len();
        recv.copy_from_slice(&send[at..at + recv.len()]);
        Ok(())
    }
}

impl DeviceComm for Detached {
    fn exchange_device(
        &self,
        _gpu: &Gpu,
        sends: &[(usize, SendRows<'_>)],
        into: &mut CudaViewMut<'_, f32>,
        recvs: &[(usize, Range<usize>)],
    ) -> Result<()> {
        check_peers(self, sends, into, recvs, "detached device exchange")
    }

    fn all_reduce_device(&self, _gpu: &Gpu, buf: &mut CudaViewMut<'_, f32>) -> Result<()> {
        match buf.len() % 4 {
            0 => Ok(()),
            _ => Err(Error::Shape(format!("detached all_reduce: {} elements are not whole float4s", buf.len()))),
        }
    }

    /// Nothing is queued, nothing waits: a part's step alone records as one GPU's does.
    fn capturable(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_keep_the_ranks_own_data() {
        let c = Detached::new(1, 3).unwrap();
        let mut sum = [1.0f32, 2.0];
        c.all_reduce_sum(&mut sum).unwrap();
        assert_eq!(sum, [1.0, 2.0]);
        let mut all = [0.0f32; 6];
        c.all_gather(&[5.0, 6.0], &mut all).unwrap();
        assert_eq!(all, [0.0, 0.0, 5.0, 6.0, 0.0, 0.0]);
        let mut mine = [0.0f32; 2];
        c.reduce_scatter_sum(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &mut mine).unwrap();
        assert_eq!(mine, [3.0, 4.0]);
        let mut halo = [7.0f32; 2];
        c.exchange(&[(0, &[1.0f32][..])], &mut [(2, &mut halo[..])]).unwrap();
        assert_eq!(halo, [7.0, 7.0]);
    }

    #[test]
    fn bad_ranks_and_peers_are_errors() {
        assert!(Detached::new(2, 2).is_err());
        let c = Detached::new(0, 2).unwrap();
        assert!(c.exchange::<f32>(&[(2, &[1.0][..])], &mut []).is_err());
        assert!(c.all_gather(&[1.0f32], &mut [0.0; 3]).is_err());
    }
}
