//! Bulk (sm_90): each lane gathers its vector's 128-byte X slice with one `cp.async.bulk` copy
//! (the TMA unit moves it; no registers, no per-16-byte instructions), lane 0 copies the group's
//! values, and all of it completes as transactions on the stage's `mbarrier`. `STAGES - 1`
//! groups are in flight while the warp multiplies the oldest.
//!
//! A bulk copy writes a contiguous row, so instead of the XOR swizzle of `CpAsync` the rows are
//! padded (`config::tc8_bulk_row_stride`) to keep the fragment reads free of bank conflicts.
//! Vectors past the item's end are zeroed with ordinary stores (their B values are zero, but
//! stale X could hold NaN).

use super::{GatherSource, shared_chunk};
use crate::config::{TC8_BLOCK_VECTORS as KV, tc8_bulk_row_stride, tc8_bulk_stage_bytes, tc8_bulk_warp_bytes};
use crate::ptx;
use crate::spmm::tc8::precision::{Shared, Tc8Precision};
use crate::spmm::tc8::work::{Cursor, Items, WorkItem};
use crate::spmm::tc8::{GROUP_VECTORS, Operands};

/// Bytes of X per vector and K slice: 8 chunks of 16 bytes (f16 64 dims, tf32 32 dims).
const SLICE_BYTES: u32 = 128;

pub struct Bulk<const STAGES: u32> {
    /// The warp's mbarriers (8 bytes each), then its stages.
    bars: u32,
    stages: u32,
    stage_bytes: u32,
    row_stride: u32,
    /// Groups issued so far: the next one goes to stage `issued % STAGES`.
    issued: u32,
}

impl<const STAGES: u32> Bulk<STAGES> {
    #[inline(always)]
    fn stage(&self, seq: u32) -> u32 {
        self.stages + (seq % STAGES) * self.stage_bytes
    }

    #[inline(always)]
    fn bar(&self, seq: u32) -> u32 {
        self.bars + 8 * (seq % STAGES)
    }

    #[inline(always)]
    unsafe fn issue<P: Tc8Precision>(&self, ops: &Operands, item: &WorkItem, gi: u32, my_col: u32, seq: u32) {
        let stage = self.stage(seq);
        let bar = self.bar(seq);
        let vg = item.group_start(gi);
        let n_valid = item.group_vectors(gi);
        let left = (ops.ld - ops.slice) * P::X_BYTES;
        let row_bytes = if left < SLICE_BYTES { left } else { SLICE_BYTES };
        let value_bytes = KV * n_valid * P::VALUE_BYTES;
        if ops.lane == 0 {
            unsafe { ptx::mbarrier_arrive_expect_tx(bar, n_valid * row_bytes + value_bytes) };
        }
        let row = stage + ops.lane * self.row_stride;
        if ops.lane < n_valid {
            let word = (my_col as usize * ops.x_ld as usize + ops.slice as usize) * P::X_BYTES as usize / 4;
            unsafe { ptx::cp_async_bulk_g2s(row, ops.x.add(word), row_bytes, bar) };
        } else {
            let mut c = 0;
            while c < SLICE_BYTES {
                unsafe { ptx::st_shared_v4_u32(row + c, [0; 4]) };
                c += 16;
            }
        }
        if ops.lane == 0 {
            let src = unsafe { ops.values.add((KV * vg * P::VALUE_BYTES / 4) as usize) };
            unsafe { ptx::cp_async_bulk_g2s(stage + GROUP_VECTORS * self.row_stride, src, value_bytes, bar) };
        }
    }
}

impl<P: Tc8Precision, const NT: usize, const STAGES: u32> GatherSource<P, NT> for Bulk<STAGES> {
    const DEPTH: u32 = STAGES - 1;
    type Stage = u32;

    #[inline(always)]
    unsafe fn new(ops: &Operands) -> Self {
        let warp_smem = ptx::dyn_smem_base() + ptx::warp_id() * tc8_bulk_warp_bytes(P::VALUE_BYTES, STAGES);
        let s = Bulk {
            bars: warp_smem,
            stages: warp_smem + 16 * STAGES.div_ceil(2),
            stage_bytes: tc8_bulk_stage_bytes(P::VALUE_BYTES),
            row_stride: tc8_bulk_row_stride(P::VALUE_BYTES),
            issued: 0,
        };
        if ops.lane == 0 {
            let mut st = 0;
            while st < STAGES {
                unsafe { ptx::mbarrier_init(s.bars + 8 * st, 1) };
                st += 1;
            }
        }
        ptx::fence_mbarrier_init();
        ptx::sync_warp();
        s
    }

    #[inline(always)]
    unsafe fn issue_next(&mut self, ops: &Operands, items: &Items, producer: &mut Cursor) {
        if producer.valid(items) {
            unsafe { self.issue::<P>(ops, &producer.item, producer.gi, producer.cols, self.issued) };
            self.issued += 1;
            unsafe { producer.advance(items, ops) };
        }
    }

    #[inline(always)]
    unsafe fn acquire(&mut self, _ops: &Operands, _item: &WorkItem, _gi: u32, seq: u32) -> u32 {
        // The k-th use of a stage completes its barrier's phase k.
        unsafe { ptx::mbarrier_wait_parity(self.bar(seq), (seq / STAGES) & 1) };
        // Lanes that zeroed rows with ordinary stores are done before anyone reads them.
        ptx::sync_warp();
        self.stage(seq)
    }

    #[inline(always)]
    unsafe fn block(&self, ops: &Operands, _item: &WorkItem, stage: &u32, i: u32, kb: u32) -> ([u32; 8], [u32; 8], P::B) {
        let g = ops.lane / 4;
        let (j0, j1) = P::slots(ops.lane);
        let row = |v: u32| stage + v * self.row_stride + 16 * g;
        let xa = unsafe { shared_chunk(row(KV * i + j0)) };
        let xb = unsafe { shared_chunk(row(KV * i + j1)) };
        let b = unsafe { P::load_b(Shared(stage + GROUP_VECTORS * self.row_stride), (8 * KV * i + g * kb) as usize, kb, ops.lane) };
        (xa, xb, b)
    }

    #[inline(always)]
    fn release(&mut self) {
        // Every lane has read the stage before a bulk copy (async proxy) refills it.
        ptx::sync_warp();
        ptx::fence_proxy_async_shared();
    }
}
