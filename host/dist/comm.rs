//! What ranks of a distributed step say to each other, over host slices (the CPU path):
//! grouped point-to-point for halo exchanges, collectives for the rest.
//!
//! Every rank calls the same operations in the same order (as with NCCL); an implementation
//! reports a peer that is gone, a size that does not match, or a timeout as an error, never a hang
//! or a panic. Results of the reductions are identical on every rank (summed in rank order), so
//! parameters that every rank updates from them stay bit-identical across ranks.
//!
//! The methods are generic over the element type (f32 in training, f64 in the exactness tests),
//! so the trait is used through generics (`C: Communicator`), like the nn `Backend`.

use crate::error::Result;
use crate::util::Real;

pub trait Communicator {
    /// This rank, 0..world_size.
    fn rank(&self) -> usize;
    fn world_size(&self) -> usize;

    /// Grouped point-to-point: every `(peer, data)` in `sends` goes to `peer`, every
    /// `(peer, buffer)` in `recvs` is filled from `peer`; returns once all are complete. Several
    /// messages between one pair match in the order they are listed (NCCL's rule). A receive
    /// whose length differs from the matching send is an error.
    fn exchange<T: Real>(&self, sends: &[(usize, &[T])], recvs: &mut [(usize, &mut [T])]) -> Result<()>;

    /// Element-wise sum over the ranks, in place (one fused buffer: all weight gradients).
    fn all_reduce_sum<T: Real>(&self, buf: &mut [T]) -> Result<()>;

    /// `recv` (world_size x send.len()) = every rank's `send`, in rank order.
    fn all_gather<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()>;

    /// The reverse of [`Communicator::all_gather`]: `send` is world_size blocks of recv.len();
    /// this rank receives the sum over ranks of block `rank`.
    fn reduce_scatter_sum<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()>;
}

/// Checks shared by the implementations: a peer id in range and collective buffer sizes.
pub(crate) fn check_peer(rank: usize, world: usize, peer: usize, what: &str) -> Result<()> {
    if peer >= world {
        return Err(crate::Error::comm(what, format!("rank {rank}: peer {peer} is outside the world of {world}")));
    }
    Ok(())
}

pub(crate) fn check_blocks(world: usize, block: usize, whole: usize, what: &str) -> Result<()> {
    if block.checked_mul(world) != Some(whole) {
        return Err(crate::Error::comm(what, format!("buffer of {whole} elements is not {world} blocks of {block}")));
    }
    Ok(())
}
