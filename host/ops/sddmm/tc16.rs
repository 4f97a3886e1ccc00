//! Launcher of `kernels-gpu/src/sddmm/tc16.rs`: SGT with 16-column blocks, a warp per block.

use crate::error::{Error, Result};
use crate::gpu::DeviceVec;
use crate::gpu::abi::sddmm::{Tc16SddmmArgs, sddmm_tc16_f16, sddmm_tc16_tf32};
use crate::gpu::launch::{Ptr, Shape};
use crate::ops::sddmm::ValueOrder;
use crate::ops::{FeaturesRef, GraphHandle};
use crate::shared::config::TC16_SDDMM_WARPS;

struct DeviceSgt16 {
    blk_win: DeviceVec<u32>,
    win_ptr: DeviceVec<u32>,
    blk_ptr: DeviceVec<u32>,
    win_cols: DeviceVec<u32>,
    blk_edge_ptr: DeviceVec<u32>,
    blk_edge_pos: DeviceVec<u8>,
    blk_edge_val: DeviceVec<f32>,
    blk_edge_csr: DeviceVec<u32>,
    n_blocks: u32,
}

pub fn sddmm_tc16(g: &GraphHandle, a: FeaturesRef<'_>, b: FeaturesRef<'_>, out: &mut DeviceVec<f32>, order: ValueOrder) -> Result<()> {
    if order != ValueOrder::Csr {
        return Err(Error::Unsupported("TC16 SDDMM writes CSR order only (ME-BCRS order: use Tc8)".into()));
    }
    if out.len() < g.csr().nnz() {
        return Err(Error::Shape(format!("SDDMM output holds {} values, the graph has {} nonzeros", out.len(), g.csr().nnz())));
    }
    let gpu = g.gpu()?;
    let f = g.cached(16, || {
        let s = g.sgt(16)?;
        let blk_win: Vec<u32> = (0..s.n_windows()).flat_map(|w| std::iter::repeat_n(w as u32, s.blocks_of(w).len())).collect();
        Ok(DeviceSgt16 {
            blk_win: DeviceVec::upload(gpu, &blk_win)?,
            win_ptr: DeviceVec::upload(gpu, &s.win_ptr)?,
            blk_ptr: DeviceVec::upload(gpu, &s.blk_ptr)?,
            win_cols: DeviceVec::upload(gpu, &s.win_cols)?,
            blk_edge_ptr: DeviceVec::upload(gpu, &s.blk_edge_ptr)?,
            blk_edge_pos: DeviceVec::upload(gpu, &s.blk_edge_pos)?,
            blk_edge_val: DeviceVec::upload(gpu, &s.blk_edge_val)?,
            blk_edge_csr: DeviceVec::upload(gpu, &s.blk_edge_csr)?,
            n_blocks: s.n_blocks() as u32,
        })
    })?;
    // A and B in the kernel's precision, read as 32-bit words.
    let (kernel, a_words, b_words, ld): (_, Ptr<u32>, Ptr<u32>, _) = match (a, b) {
        (FeaturesRef::F16(a), FeaturesRef::F16(b)) => (sddmm_tc16_f16, a.arg().cast(), b.arg().cast(), a.ld),
        (FeaturesRef::F32(a), FeaturesRef::F32(b)) => (sddmm_tc16_tf32, a.arg().cast(), b.arg().cast(), a.ld),
        _ => return Err(Error::Unsupported("SDDMM: A and B must have the same storage type".into())),
    };
    let args = Tc16SddmmArgs {
        n_blocks: f.n_blocks,
        n_rows: g.csr().n_rows() as u32,
        ld: ld as u32,
        blk_win: f.blk_win.arg(gpu),
        win_ptr: f.win_ptr.arg(gpu),
        blk_ptr: f.blk_ptr.arg(gpu),
        win_cols: f.win_cols.arg(gpu),
        blk_edge_ptr: f.blk_edge_ptr.arg(gpu),
        blk_edge_pos: f.blk_edge_pos.arg(gpu),
        blk_edge_val: f.blk_edge_val.arg(gpu),
        blk_edge_csr: f.blk_edge_csr.arg(gpu),
        a: a_words,
        b: b_words,
        out: out.arg_mut(gpu),
    };
    let smem = 4 * 16 * 16 * TC16_SDDMM_WARPS;
    // SAFETY: the SGT arrays (block width 16) come from this graph, every
    // blk_edge_csr < nnz <= out.len(), A and B share the padded stride ld (a multiple of 8), and
    // the dynamic shared memory holds one 16 x 16 f32 tile per warp.
    unsafe { kernel.launch(gpu, Shape::linear(f.n_blocks.div_ceil(TC16_SDDMM_WARPS), 32 * TC16_SDDMM_WARPS, smem), &args) }
}
