//! CpAsync: X slices and values copied into shared memory by `cp.async` (sm_80+), `STAGES - 1`
//! groups ahead of the MMAs; the producer's columns are loaded a group before its copies.
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
use crate::spmm::tc8::work::{Cursor, Items, WorkItem};
use crate::spmm::tc8::{GROUP_VECTORS, Operands};

/// Bytes of one vector's X slice in shared memory (8 chunks of 16 bytes).
const ROW_BYTES: u32 = 128;
/// X bytes of one stage (the values follow).
const X_STAGE_BYTES: u32 = GROUP_VECTORS * ROW_BYTES;

pub struct CpAsync<const STAGES: u32> {
    warp_smem: u32,
    stage_bytes: u32,
    /// Groups issued so far: the next one goes to stage `issued % STAGES`.
    issued: u32,
}

impl<const STAGES: u32> CpAsync<STAGES> {
    /// Issue the copies of group `gi` of `item` into `stage`: lane l copies chunk l % 8 of
    /// vectors 4j + l / 8 (a quarter-warp one whole row), then 16-byte pieces of the group's
    /// values. Vectors past the item and chunks past `ld` are zero-filled, so the MMAs never read
    /// stale memory.
    #[inline(always)]
    unsafe fn issue<P: Tc8Precision>(&self, ops: &Operands, item: &WorkItem, gi: u32, my_col: u32, stage: u32) {
        let tf32 = P::X_BYTES == 4;
        let vg = item.group_start(gi);
        let c = ops.lane % 8;
        // A 16-byte chunk is 16 / BYTES dims.
        let copy_dim = ops.slice + (16 / P::X_BYTES) * c;
        let copy_ok = copy_dim < ops.ld;
        let mut j = 0;
        while j < GROUP_VECTORS / 4 {
            let v = 4 * j + ops.lane / 8;
            let col = ptx::shfl_idx_u32(my_col, v);
            let ok = vg + v < item.v_end && copy_ok;
            let word = (col as usize * ops.x_ld as usize + copy_dim as usize) * P::X_BYTES as usize / 4;
            let src = if ok { unsafe { ops.x.add(word) } } else { ops.x };
            unsafe { ptx::cp_async_16(stage + v * ROW_BYTES + 16 * tc8_smem_chunk(v, c, tf32), src, if ok { 16 } else { 0 }) };
            j += 1;
        }
        let per_piece = 16 / P::VALUE_BYTES;
        let pieces = GROUP_VECTORS * KV / per_piece;
        let vals = stage + X_STAGE_BYTES;
        let mut p = ops.lane;
        while p < pieces {
            let elem = 8 * vg + p * per_piece;
            let ok = elem < 8 * item.v_end;
            let src = if ok { unsafe { ops.values.add(elem as usize * P::VALUE_BYTES as usize / 4) } } else { ops.values };
            unsafe { ptx::cp_async_16(vals + 16 * p, src, if ok { 16 } else { 0 }) };
            p += 32;
        }
        if P::SCALED {
            // The row scale of this lane's vector, after the values.
            let ok = vg + ops.lane < item.v_end;
            let src = if ok { unsafe { ops.x_scales.add(my_col as usize) } } else { ops.x_scales };
            let dst = vals + GROUP_VECTORS * KV * P::VALUE_BYTES + 4 * ops.lane;
            unsafe { ptx::cp_async_4(dst, src as *const u32, if ok { 4 } else { 0 }) };
        }
    }

    #[inline(always)]
    fn stage(&self, seq: u32) -> u32 {
        self.warp_smem + (seq % STAGES) * self.stage_bytes
    }
}

impl<P: Tc8Precision, const NT: usize, const STAGES: u32> GatherSource<P, NT> for CpAsync<STAGES> {
    const DEPTH: u32 = STAGES - 1;
    type Stage = u32;

    #[inline(always)]
    unsafe fn new(_ops: &Operands) -> Self {
        let stage_bytes = tc8_async_stage_bytes(P::VALUE_BYTES, P::SCALED);
        CpAsync { warp_smem: ptx::dyn_smem_base() + ptx::warp_id() * STAGES * stage_bytes, stage_bytes, issued: 0 }
    }

    #[inline(always)]
    unsafe fn issue_next(&mut self, ops: &Operands, items: &Items, producer: &mut Cursor) {
        if producer.valid(items) {
            unsafe { self.issue::<P>(ops, &producer.item, producer.gi, producer.cols, self.stage(self.issued)) };
            self.issued += 1;
            unsafe { producer.advance(items, ops) };
        }
        // One commit group per call, empty at the stream's end, so `acquire` counts right.
        ptx::cp_async_commit();
    }

    #[inline(always)]
    unsafe fn acquire(&mut self, _ops: &Operands, _item: &WorkItem, _gi: u32, seq: u32) -> u32 {
        // DEPTH groups were committed after this one.
        match STAGES {
            2 => ptx::cp_async_wait::<1>(),
            3 => ptx::cp_async_wait::<2>(),
            _ => ptx::cp_async_wait::<3>(),
        }
        ptx::sync_warp();
        self.stage(seq)
    }

    #[inline(always)]
    unsafe fn block(&self, ops: &Operands, _item: &WorkItem, stage: &u32, i: u32, kb: u32) -> ([u32; 8], [u32; 8], P::B) {
        let tf32 = P::X_BYTES == 4;
        let g = ops.lane / 4;
        let (j0, j1) = P::slots(ops.lane);
        let row = |v: u32| stage + v * ROW_BYTES + 16 * tc8_smem_chunk(v, g, tf32);
        let xa = unsafe { shared_chunk(row(KV * i + j0)) };
        let xb = unsafe { shared_chunk(row(KV * i + j1)) };
        let b = unsafe { P::load_b(Shared(stage + X_STAGE_BYTES), (8 * KV * i + g * kb) as usize, kb, ops.lane) };
        (xa, xb, b)
    }

    #[inline(always)]
    fn release(&mut self) {
        // Every lane has read the stage before any lane refills it.
        ptx::sync_warp();
    }

    #[inline(always)]
    unsafe fn stage_chunk(&self, stage: &u32, v: u32, c: u32) -> [u32; 4] {
        unsafe { ptx::ld_shared_v4_u32(stage + v * ROW_BYTES + 16 * tc8_smem_chunk(v, c, P::X_BYTES == 4)) }
    }

    #[inline(always)]
    unsafe fn stage_values(&self, stage: &u32) -> u32 {
        stage + X_STAGE_BYTES
    }

    #[inline(always)]
    unsafe fn stage_scales(&self, stage: &u32) -> u32 {
        stage + X_STAGE_BYTES + GROUP_VECTORS * KV * P::VALUE_BYTES
    }
}
