//! CpAsync: X slices and values copied into shared memory by `cp.async` (sm_80+), `STAGES - 1`
//! groups ahead, the next group's columns loaded one iteration early.
//!
//! Why: `Registers` holds a group's gathered X in registers until its MMAs, so each warp has at
//! most one group (4 KB) in flight; copies into shared memory hold no registers.
//!
//! Per warp and stage: 32 vectors x 128 bytes of X (one K slice of 16*NT dims: f16 NT = 4,
//! tf32 NT = 2) in XOR-swizzled rows (`layout::tc8_smem_chunk`), then the group's values.

use super::{GatherSource, shared_chunk};
use crate::config::{TC8_BLOCK_VECTORS as KV, tc8_async_stage_bytes};
use crate::layout::tc8_smem_chunk;
use crate::ptx;
use crate::spmm::tc8::precision::{Shared, Tc8Precision};
use crate::spmm::tc8::{GROUP_VECTORS, Item};

/// Bytes of one vector's X slice in shared memory (8 chunks of 16 bytes).
const ROW_BYTES: u32 = 128;
/// X bytes of one stage (the values follow).
const X_STAGE_BYTES: u32 = GROUP_VECTORS * ROW_BYTES;

pub struct CpAsync<const STAGES: u32> {
    warp_smem: u32,
    stage_bytes: u32,
    n_groups: u32,
    /// Columns of the next group to issue, one per lane.
    cols_next: u32,
}

impl<const STAGES: u32> CpAsync<STAGES> {
    /// Issue the copies of group `gi`: lane l copies chunk l % 8 of vectors 4j + l / 8 (a
    /// quarter-warp one whole row), then 16-byte pieces of the group's values. Vectors past the
    /// item and chunks past `ld` are zero-filled, so the MMAs never read stale memory.
    #[inline(always)]
    unsafe fn issue<P: Tc8Precision>(&self, item: &Item, gi: u32, my_col: u32) {
        let tf32 = P::BYTES == 4;
        let stage = self.warp_smem + (gi % STAGES) * self.stage_bytes;
        let vg = item.group_start(gi);
        let c = item.lane % 8;
        // A 16-byte chunk is 16 / BYTES dims.
        let copy_dim = item.slice + (16 / P::BYTES) * c;
        let copy_ok = copy_dim < item.ld;
        let mut j = 0;
        while j < GROUP_VECTORS / 4 {
            let v = 4 * j + item.lane / 8;
            let col = ptx::shfl_idx_u32(my_col, v);
            let ok = vg + v < item.v_end && copy_ok;
            let word = (col as usize * item.ld as usize + copy_dim as usize) * P::BYTES as usize / 4;
            let src = if ok { unsafe { item.x.add(word) } } else { item.x };
            unsafe { ptx::cp_async_16(stage + v * ROW_BYTES + 16 * tc8_smem_chunk(v, c, tf32), src, if ok { 16 } else { 0 }) };
            j += 1;
        }
        let per_piece = 16 / P::BYTES;
        let pieces = GROUP_VECTORS * KV / per_piece;
        let vals = stage + X_STAGE_BYTES;
        let mut p = item.lane;
        while p < pieces {
            let elem = 8 * vg + p * per_piece;
            let ok = elem < 8 * item.v_end;
            let src = if ok { unsafe { item.values.add(elem as usize * P::BYTES as usize / 4) } } else { item.values };
            unsafe { ptx::cp_async_16(vals + 16 * p, src, if ok { 16 } else { 0 }) };
            p += 32;
        }
    }
}

impl<P: Tc8Precision, const NT: usize, const STAGES: u32> GatherSource<P, NT> for CpAsync<STAGES> {
    type Stage = u32;

    #[inline(always)]
    unsafe fn begin(item: &Item) -> Self {
        let stage_bytes = tc8_async_stage_bytes(P::BYTES);
        let mut s = CpAsync { warp_smem: ptx::dyn_smem_base() + ptx::warp_id() * STAGES * stage_bytes, stage_bytes, n_groups: item.n_groups(), cols_next: 0 };
        let mut gi = 0;
        while gi < STAGES - 1 {
            if gi < s.n_groups {
                let cols = unsafe { item.lane_col(gi) };
                unsafe { s.issue::<P>(item, gi, cols) };
            }
            ptx::cp_async_commit();
            gi += 1;
        }
        if STAGES - 1 < s.n_groups {
            s.cols_next = unsafe { item.lane_col(STAGES - 1) };
        }
        s
    }

    #[inline(always)]
    unsafe fn acquire(&mut self, item: &Item, gi: u32) -> u32 {
        let ahead = gi + STAGES - 1;
        if ahead < self.n_groups {
            unsafe { self.issue::<P>(item, ahead, self.cols_next) };
        }
        ptx::cp_async_commit();
        if ahead + 1 < self.n_groups {
            self.cols_next = unsafe { item.lane_col(ahead + 1) };
        }
        // Group gi is the oldest of the STAGES in flight.
        match STAGES {
            2 => ptx::cp_async_wait::<1>(),
            3 => ptx::cp_async_wait::<2>(),
            _ => ptx::cp_async_wait::<3>(),
        }
        ptx::sync_warp();
        self.warp_smem + (gi % STAGES) * self.stage_bytes
    }

    #[inline(always)]
    unsafe fn block(&self, item: &Item, stage: &u32, i: u32, kb: u32) -> ([u32; 8], [u32; 8], P::B) {
        let tf32 = P::BYTES == 4;
        let g = item.lane / 4;
        let (j0, j1) = P::slots(item.lane);
        let row = |v: u32| stage + v * ROW_BYTES + 16 * tc8_smem_chunk(v, g, tf32);
        let xa = unsafe { shared_chunk(row(KV * i + j0)) };
        let xb = unsafe { shared_chunk(row(KV * i + j1)) };
        let b = unsafe { P::load_b(Shared(stage + X_STAGE_BYTES), (8 * KV * i + g * kb) as usize, kb, item.lane) };
        (xa, xb, b)
    }

    #[inline(always)]
    fn release(&mut self) {
        // Every lane has read the stage before any lane refills it.
        ptx::sync_warp();
    }
}
