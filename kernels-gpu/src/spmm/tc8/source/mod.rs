//! Gather sources: how the X rows of a group's 32 vectors (and the group's values) reach a
//! lane as MMA operands. One main loop (`tc8_spmm`) drives all of them:
//!
//! ```text
//! let mut s = S::new(ops);                 // shared memory, barriers
//! DEPTH times: s.issue_next(producer)      // groups in flight ahead of the MMAs
//! for each (item, group gi) of the warp's stream, seq = 0, 1, ...:
//!     s.issue_next(producer)               // keep DEPTH groups ahead (across items)
//!     let stage = s.acquire(item, gi, seq) // wait for this group (or load it now)
//!     for each block i of gi: P::mma(acc, s.block(item, &stage, i, kb))
//!     s.release()                          // the stage may be refilled
//! ```

mod bulk;
mod cp_async;
mod registers;

pub use bulk::Bulk;
pub use cp_async::CpAsync;
pub use registers::Registers;

use super::Operands;
use super::precision::Tc8Precision;
use super::work::{Cursor, Items, WorkItem};

/// One way of bringing X into the tensor cores; `NT` 16-dim tiles per warp.
pub trait GatherSource<P: Tc8Precision, const NT: usize>: Sized {
    /// Groups issued ahead of the one being multiplied (0: loaded when acquired).
    const DEPTH: u32;
    /// What `acquire` hands the MMAs: the group's operands, or where they sit in shared memory.
    type Stage;
    unsafe fn new(ops: &Operands) -> Self;
    /// Start bringing in the producer's group, if the stream has one left, and move it on.
    unsafe fn issue_next(&mut self, ops: &Operands, items: &Items, producer: &mut Cursor);
    /// Group `gi` of `item`, the `seq`-th group of the warp's stream, ready for the MMAs.
    unsafe fn acquire(&mut self, ops: &Operands, item: &WorkItem, gi: u32, seq: u32) -> Self::Stage;
    /// This lane's X words of its two slots and the B fragment, for block `i` (`kb` vectors).
    unsafe fn block(&self, ops: &Operands, item: &WorkItem, stage: &Self::Stage, i: u32, kb: u32) -> ([u32; 8], [u32; 8], P::B);
    fn release(&mut self);

    /// Whole-stage access for precisions that multiply a group at once (e4m3): the 16-byte X
    /// chunk `c` of group vector `v`, and the shared addresses of the group's values and X row
    /// scales. Only the shared-memory sources hold a whole group; the others trap.
    unsafe fn stage_chunk(&self, _stage: &Self::Stage, _v: u32, _c: u32) -> [u32; 4] {
        unsafe { core::arch::nvptx::trap() }
    }
    unsafe fn stage_values(&self, _stage: &Self::Stage) -> u32 {
        unsafe { core::arch::nvptx::trap() }
    }
    unsafe fn stage_scales(&self, _stage: &Self::Stage) -> u32 {
        unsafe { core::arch::nvptx::trap() }
    }
}

/// `n` consecutive 32-bit words of a row (n in 2, 4, 8; a constant after inlining), with the
/// widest aligned loads.
#[inline(always)]
pub(super) unsafe fn load_words(p: *const u32, n: usize) -> [u32; 8] {
    unsafe {
        if n == 2 {
            let v = crate::ptx::ld_nc_v2_u32(p);
            [v[0], v[1], 0, 0, 0, 0, 0, 0]
        } else if n == 4 {
            let v = crate::ptx::ld_nc_v4_u32(p);
            [v[0], v[1], v[2], v[3], 0, 0, 0, 0]
        } else {
            let v = crate::ptx::ld_nc_v4_u32(p);
            let u = crate::ptx::ld_nc_v4_u32(p.add(4));
            [v[0], v[1], v[2], v[3], u[0], u[1], u[2], u[3]]
        }
    }
}

/// A 16-byte chunk read from shared memory as the first four words of an operand row.
#[inline(always)]
pub(super) unsafe fn shared_chunk(addr: u32) -> [u32; 8] {
    let v = unsafe { crate::ptx::ld_shared_v4_u32(addr) };
    [v[0], v[1], v[2], v[3], 0, 0, 0, 0]
}
