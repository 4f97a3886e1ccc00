//! Registers: each lane loads its X words of the group's 4 blocks straight into registers, all
//! of them before the first MMA (4 blocks of loads in flight per warp), then multiplies.
//! Lowest latency per group; what it holds in flight is bounded by registers (NT = 4 f16 or
//! NT = 2 tf32: 72-78 registers).

use super::{GatherSource, load_words};
use crate::config::TC8_BLOCK_VECTORS as KV;
use crate::ptx;
use crate::spmm::tc8::precision::{Global, Tc8Precision};
use crate::spmm::tc8::work::{Cursor, Items, WorkItem};
use crate::spmm::tc8::{GROUP, Operands};

pub struct Registers;

impl<P: Tc8Precision, const NT: usize> GatherSource<P, NT> for Registers {
    const DEPTH: u32 = 0;
    type Stage = [([u32; 8], [u32; 8], P::B); GROUP as usize];

    #[inline(always)]
    unsafe fn new(_ops: &Operands) -> Self {
        Registers
    }

    #[inline(always)]
    unsafe fn issue_next(&mut self, _ops: &Operands, _items: &Items, _producer: &mut Cursor) {}

    #[inline(always)]
    unsafe fn acquire(&mut self, ops: &Operands, item: &WorkItem, gi: u32, _seq: u32) -> Self::Stage {
        // Words per lane and row: 2*NT dims.
        let words = NT * P::X_BYTES as usize / 2;
        let my_col = unsafe { item.lane_col(ops, gi) };
        let (j0, j1) = P::slots(ops.lane);
        let g = ops.lane / 4;
        let dim_ok = ops.dim < ops.ld;
        let vg = item.group_start(gi);
        let zero = [0u32; 8];
        let mut stage = [(zero, zero, P::B::default()); GROUP as usize];
        crate::unroll4!(i => {
            let kb = item.block_vectors(gi, i as u32);
            let c0 = ptx::shfl_idx_u32(my_col, KV * i as u32 + j0);
            let c1 = ptx::shfl_idx_u32(my_col, KV * i as u32 + j1);
            let at = |c: u32| unsafe { ops.x.add((c as usize * ops.x_ld as usize + ops.dim as usize) * P::X_BYTES as usize / 4) };
            let xa = if j0 < kb && dim_ok { unsafe { load_words(at(c0), words) } } else { zero };
            let xb = if j1 < kb && dim_ok { unsafe { load_words(at(c1), words) } } else { zero };
            let v0 = vg + KV * i as u32;
            let b = if kb > 0 { unsafe { P::load_b(Global(ops.values), (8 * v0 + g * kb) as usize, kb, ops.lane) } } else { P::B::default() };
            stage[i] = (xa, xb, b);
        });
        stage
    }

    #[inline(always)]
    unsafe fn block(&self, _ops: &Operands, _item: &WorkItem, stage: &Self::Stage, i: u32, _kb: u32) -> ([u32; 8], [u32; 8], P::B) {
        stage[i as usize]
    }

    #[inline(always)]
    fn release(&mut self) {}
}
