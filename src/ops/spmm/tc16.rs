//! Launcher of `kernels-gpu/src/spmm/tc16.rs`: SGT (block width 8) uploaded once per graph, a
//! work list that splits long windows (shared with TC8), and the NT (8-dim tiles per warp) and
//! warps per block chosen from K.

use std::sync::Arc;

use crate::error::Result;
use crate::format::sgt::Sgt;
use crate::gpu::launch::{Arg, Shape, launch};
use crate::gpu::shared::config::{TC16_BLOCK_W, TC16_MAX_WARPS, TC16_SMEM_BYTES};
use crate::gpu::shared::partition::tc8_max_blocks;
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::spmm::tc8::work_list;
use crate::ops::{DeviceFeatures, GraphHandle};

/// The uploaded format (shared by both precisions and every K; values stay f32 in the format:
/// the kernel stages them in shared memory as f32 and rounds when it builds A fragments).
struct DeviceTc16 {
    win_ptr: DeviceVec<u32>,
    win_cols: DeviceVec<u32>,
    blk_ptr: DeviceVec<u32>,
    blk_edge_ptr: DeviceVec<u32>,
    blk_edge_pos: DeviceVec<u8>,
    blk_edge_val: DeviceVec<f32>,
    n_blocks: u32,
    blocks_per_window: Vec<u32>,
}

/// A work list on the device, one per launch geometry (warps per item times K slices).
struct DeviceTc16WorkList {
    item_win: DeviceVec<u32>,
    item_blocks: DeviceVec<u32>,
    split_windows: DeviceVec<u32>,
    n_items: u32,
    n_split: u32,
}

fn device_format(g: &GraphHandle, gpu: &Gpu) -> Result<Arc<DeviceTc16>> {
    g.cached(TC16_BLOCK_W as u64, || {
        let s = Sgt::from_csr(g.csr(), TC16_BLOCK_W as usize)?;
        Ok(DeviceTc16 {
            win_ptr: DeviceVec::upload(gpu, &s.win_ptr)?,
            win_cols: DeviceVec::upload(gpu, &s.win_cols)?,
            blk_ptr: DeviceVec::upload(gpu, &s.blk_ptr)?,
            blk_edge_ptr: DeviceVec::upload(gpu, &s.blk_edge_ptr)?,
            blk_edge_pos: DeviceVec::upload(gpu, &s.blk_edge_pos)?,
            blk_edge_val: DeviceVec::upload(gpu, &s.blk_edge_val)?,
            n_blocks: s.n_blocks() as u32,
            blocks_per_window: (0..s.n_windows()).map(|w| s.blocks_of(w) as u32).collect(),
        })
    })
}

fn device_work_list(g: &GraphHandle, gpu: &Gpu, f: &DeviceTc16, warps_per_item: u32) -> Result<Arc<DeviceTc16WorkList>> {
    g.cached(warps_per_item as u64, || {
        let max_blocks = tc8_max_blocks(f.n_blocks, f.blocks_per_window.len() as u32, warps_per_item, gpu.info().sm_count);
        let wl = work_list(f.blocks_per_window.iter().copied(), max_blocks);
        Ok(DeviceTc16WorkList {
            item_win: DeviceVec::upload(gpu, &wl.item_win)?,
            item_blocks: DeviceVec::upload(gpu, &wl.item_blocks)?,
            split_windows: DeviceVec::upload(gpu, &wl.split_windows)?,
            n_items: wl.item_win.len() as u32,
            n_split: wl.split_windows.len() as u32,
        })
    })
}

/// Launch geometry for padded width `ld`: (kernel, NT, warps per block, K slices per item).
/// Each warp covers 8 * NT dims; f16 prefers NT = 8 (one 16-byte gather per X row), tf32 NT = 4
/// (one float4); narrow K takes the smaller NT and fewer warps so no warp idles.
pub fn geometry(ld: u32, f16: bool) -> (&'static str, u32, u32, u32) {
    let (name, nt) = match (f16, ld) {
        (true, ld) if ld >= 64 => ("spmm_tc16_f16_nt8", 8),
        (true, _) => ("spmm_tc16_f16_nt4", 4),
        (false, ld) if ld >= 32 => ("spmm_tc16_tf32_nt4", 4),
        (false, _) => ("spmm_tc16_tf32_nt2", 2),
    };
    let warp_slices = ld.div_ceil(8 * nt);
    let warps = warp_slices.min(TC16_MAX_WARPS);
    (name, nt, warps, warp_slices.div_ceil(warps))
}

/// Y = S X on tensor cores with TC-GNN's 16 x 8 blocks: tf32 for f32 features, f16 for f16.
pub fn spmm_tc16(g: &GraphHandle, x: &DeviceFeatures, y: &mut DeviceMatrix<f32>) -> Result<()> {
    let gpu = g.gpu()?;
    let f = device_format(g, gpu)?;
    let ld = y.ld as u32;
    let n_rows = g.csr().n_rows() as u32;
    let f16 = matches!(x, DeviceFeatures::F16(_));
    let (kernel, _nt, warps, k_slices) = geometry(ld, f16);
    let wl = device_work_list(g, gpu, &f, warps * k_slices)?;
    let x_ptr = match x {
        DeviceFeatures::F32(m) => m.ptr(),
        DeviceFeatures::F16(m) => m.ptr(),
    };
    if wl.n_split > 0 {
        let args = [Arg::Ptr(wl.split_windows.ptr(gpu)), Arg::U32(n_rows), Arg::U32(ld), Arg::Ptr(y.ptr_mut())];
        // SAFETY: matches `tc16_zero_windows`; every listed window has rows below n_rows and Y
        // holds n_rows * ld floats.
        unsafe { launch(gpu, "tc16_zero_windows", Shape::linear(wl.n_split, 256, 0), &args)? };
    }
    let shape = Shape { grid: (wl.n_items, k_slices, 1), block: (32 * warps, 1, 1), smem_bytes: TC16_SMEM_BYTES };
    let args = [
        Arg::U32(n_rows),
        Arg::U32(ld),
        Arg::Ptr(f.win_ptr.ptr(gpu)),
        Arg::Ptr(f.win_cols.ptr(gpu)),
        Arg::Ptr(f.blk_ptr.ptr(gpu)),
        Arg::Ptr(f.blk_edge_ptr.ptr(gpu)),
        Arg::Ptr(f.blk_edge_pos.ptr(gpu)),
        Arg::Ptr(f.blk_edge_val.ptr(gpu)),
        Arg::Ptr(wl.item_win.ptr(gpu)),
        Arg::Ptr(wl.item_blocks.ptr(gpu)),
        Arg::Ptr(x_ptr),
        Arg::Ptr(y.ptr_mut()),
    ];
    // SAFETY: matches the spmm_tc16_* signature; the SGT arrays and the work list were built
    // from this graph (every item's blocks lie inside its window, every column < n_cols); X has
    // n_cols rows (checked by ops::spmm) and X, Y share the padded stride ld (a multiple of 8,
    // so the vector loads and stores stay aligned); the dynamic shared memory is the kernel's
    // GROUP staged tiles (TC16_SMEM_BYTES), with one thread block per grid.x item.
    unsafe { launch(gpu, kernel, shape, &args) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_covers_k_without_idle_warps() {
        for f16 in [false, true] {
            for ld in (8..=520).step_by(8) {
                let (_, nt, warps, slices) = geometry(ld, f16);
                let covered = warps * slices * 8 * nt;
                assert!(covered >= ld, "ld {ld}: {covered} dims covered");
                // At most one partly used slice group: idle warps only in the last grid.y slice.
                assert!(covered - ld < warps * 8 * nt, "ld {ld} f16 {f16}: {warps} warps x {slices} slices of {nt} tiles");
                assert!((1..=TC16_MAX_WARPS).contains(&warps));
            }
        }
        assert_eq!(geometry(8, false), ("spmm_tc16_tf32_nt2", 2, 1, 1));
        assert_eq!(geometry(128, false), ("spmm_tc16_tf32_nt4", 4, 4, 1));
        assert_eq!(geometry(128, true), ("spmm_tc16_f16_nt8", 8, 2, 1));
        assert_eq!(geometry(264, true), ("spmm_tc16_f16_nt8", 8, 4, 2));
    }
}
