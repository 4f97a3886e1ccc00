//! Launcher of `kernels-gpu/src/spmm/tc16.rs`: SGT (block width 8) translated and uploaded once
//! per graph, a work list that splits long windows (shared with TC8), and the NT (8-dim tiles
//! per warp) and warps per block chosen from K.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::sgt::Sgt;
use crate::format::worklist::work_list;
use crate::gpu::abi::spmm::{self as kernels, Tc16SpmmArgs, ZeroWindowsArgs};
use crate::gpu::launch::{Kernel, Ptr, Shape};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::{FeaturesRef, GraphHandle};
use crate::shared::config::{TC16_BLOCK_W, TC16_MAX_WARPS, TC16_SMEM_BYTES};
use crate::shared::partition::tc8_max_blocks;

/// The window/block index arrays on the device.
struct DeviceTc16 {
    win_ptr: DeviceVec<u32>,
    win_cols: DeviceVec<u32>,
    blk_ptr: DeviceVec<u32>,
    n_blocks: u32,
    blocks_per_window: Vec<u32>,
}

/// The SGT edges on the device (values f32, rounded when A is built).
struct DeviceTc16Edges {
    blk_edge_ptr: DeviceVec<u32>,
    blk_edge_pos: DeviceVec<u8>,
    blk_edge_val: DeviceVec<f32>,
}

/// A work list on the device, one per launch geometry (warps per item times K slices).
struct DeviceTc16WorkList {
    item_win: DeviceVec<u32>,
    item_blocks: DeviceVec<u32>,
    split_windows: DeviceVec<u32>,
    n_items: u32,
    n_split: u32,
}

/// The SGT translation on the host, made once per graph.
fn host_sgt(g: &GraphHandle) -> Result<Arc<Sgt>> {
    g.sgt(TC16_BLOCK_W as usize)
}

fn device_format(g: &GraphHandle, gpu: &Gpu) -> Result<Arc<DeviceTc16>> {
    g.cached(TC16_BLOCK_W as u64, || {
        let s = host_sgt(g)?;
        Ok(DeviceTc16 {
            win_ptr: DeviceVec::upload(gpu, &s.win_ptr)?,
            win_cols: DeviceVec::upload(gpu, &s.win_cols)?,
            blk_ptr: DeviceVec::upload(gpu, &s.blk_ptr)?,
            n_blocks: s.n_blocks() as u32,
            blocks_per_window: (0..s.n_windows()).map(|w| s.blocks_of(w).len() as u32).collect(),
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

/// 8-dim MMA tiles per warp (NT): `nt` if given, else 2 for tf32 and 4 for f16. Wider NT means
/// wider gathers (tf32 4: float4; f16 8: 16 bytes) but more registers (82-96 against 60-62), and
/// TC8 measured the lost occupancy at 2x on H100 at K = 128.
pub fn tiles_per_warp(f16: bool, nt: Option<u32>) -> Result<u32> {
    let built = |n: u32| if f16 { n == 4 || n == 8 } else { n == 2 || n == 4 };
    match nt {
        Some(n) if built(n) => Ok(n),
        Some(n) => Err(Error::Unsupported(format!(
            "TC16 with NT = {n} tiles per warp ({}); built: {}",
            if f16 { "f16" } else { "tf32" },
            if f16 { "4, 8" } else { "2, 4" }
        ))),
        None => Ok(if f16 { 4 } else { 2 }),
    }
}

/// The kernel instance for (precision, NT), NT as [`tiles_per_warp`] allows.
fn kernel(f16: bool, nt: u32) -> Kernel<Tc16SpmmArgs> {
    match (f16, nt) {
        (true, 8) => kernels::spmm_tc16s_f16_nt8,
        (true, _) => kernels::spmm_tc16s_f16_nt4,
        (false, 4) => kernels::spmm_tc16s_tf32_nt4,
        (false, _) => kernels::spmm_tc16s_tf32_nt2,
    }
}

/// Staged kernel geometry for padded width `ld` and NT: (warps per block, K slices per item).
/// Each warp covers 8 * NT dims; narrow K takes fewer warps so no warp idles.
pub fn staged_geometry(ld: u32, nt: u32) -> (u32, u32) {
    let warp_slices = ld.div_ceil(8 * nt);
    let warps = warp_slices.min(TC16_MAX_WARPS);
    (warps, warp_slices.div_ceil(warps))
}

/// Y = S X on tensor cores with TC-GNN's 16 x 8 blocks: tf32 for f32 features, f16 for f16.
pub fn spmm_tc16(g: &GraphHandle, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_tc16_with(g, x, y, None)
}

/// [`spmm_tc16`] with, optionally, NT (8-dim tiles per warp; see [`tiles_per_warp`]).
pub fn spmm_tc16_with(g: &GraphHandle, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, nt: Option<u32>) -> Result<()> {
    let gpu = g.gpu()?;
    let f = device_format(g, gpu)?;
    let ld = y.ld as u32;
    let n_rows = g.csr().n_rows() as u32;
    let f16 = matches!(x, FeaturesRef::F16(_));
    let nt = tiles_per_warp(f16, nt)?;
    let kernel = kernel(f16, nt);
    // X in the kernel's precision, read as 32-bit words.
    let x_words: Ptr<u32> = match x {
        FeaturesRef::F32(m) => m.arg().cast(),
        FeaturesRef::F16(m) => m.arg().cast(),
    };
    let (warps, k_slices) = staged_geometry(ld, nt);
    let wl = device_work_list(g, gpu, &f, warps * k_slices)?;
    let e = g.cached(TC16_BLOCK_W as u64, || {
        let s = host_sgt(g)?;
        Ok(DeviceTc16Edges {
            blk_edge_ptr: DeviceVec::upload(gpu, &s.blk_edge_ptr)?,
            blk_edge_pos: DeviceVec::upload(gpu, &s.blk_edge_pos)?,
            blk_edge_val: DeviceVec::upload(gpu, &s.blk_edge_val)?,
        })
    })?;
    zero_split_windows(gpu, &wl, n_rows, ld, y)?;
    let shape = Shape { grid: (wl.n_items, k_slices, 1), block: (32 * warps, 1, 1), smem_bytes: TC16_SMEM_BYTES };
    let args = Tc16SpmmArgs {
        n_rows,
        ld,
        win_ptr: f.win_ptr.arg(gpu),
        win_cols: f.win_cols.arg(gpu),
        blk_ptr: f.blk_ptr.arg(gpu),
        blk_edge_ptr: e.blk_edge_ptr.arg(gpu),
        blk_edge_pos: e.blk_edge_pos.arg(gpu),
        blk_edge_val: e.blk_edge_val.arg(gpu),
        item_win: wl.item_win.arg(gpu),
        item_blocks: wl.item_blocks.arg(gpu),
        x: x_words,
        y: y.arg_mut(),
    };
    // SAFETY: the SGT arrays and the work list were built from this graph (every item's blocks lie inside its window, every column < n_cols);
    // X has n_cols rows (checked by ops::spmm) and X, Y share the padded stride ld (a multiple
    // of 8, so the vector loads and stores stay aligned); the dynamic shared memory is the
    // kernel's GROUP staged tiles (TC16_SMEM_BYTES), with one thread block per grid.x item.
    unsafe { kernel.launch(gpu, shape, &args) }
}

/// Clear the rows of windows whose items add atomically.
fn zero_split_windows(gpu: &Gpu, wl: &DeviceTc16WorkList, n_rows: u32, ld: u32, y: &mut DeviceMatrix<f32>) -> Result<()> {
    if wl.n_split > 0 {
        let args = ZeroWindowsArgs { windows: wl.split_windows.arg(gpu), n_rows, row_words: ld, y: y.arg_mut().cast() };
        // SAFETY: every listed window has rows below n_rows and Y holds n_rows * ld floats.
        unsafe { kernels::tc16_zero_windows.launch(gpu, Shape::linear(wl.n_split, 256, 0), &args)? };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_geometry_covers_k_without_idle_warps() {
        for nt in [2, 4, 8] {
            for ld in (8..=520).step_by(8) {
                let (warps, slices) = staged_geometry(ld, nt);
                let covered = warps * slices * 8 * nt;
                assert!(covered >= ld, "ld {ld}: {covered} dims covered");
                // Idle warps only in the last grid.y slice.
                assert!(covered - ld < warps * 8 * nt, "ld {ld}: {warps} warps x {slices} slices of {nt} tiles");
                assert!((1..=TC16_MAX_WARPS).contains(&warps));
            }
        }
        assert_eq!(staged_geometry(8, 2), (1, 1));
        assert_eq!(staged_geometry(128, 4), (4, 1));
        assert_eq!(staged_geometry(264, 8), (4, 2));
    }

    #[test]
    fn nt_choice_only_names_built_kernels() {
        assert_eq!(tiles_per_warp(true, Some(8)).unwrap(), 8);
        assert!(tiles_per_warp(true, Some(2)).is_err());
        assert!(tiles_per_warp(false, Some(8)).is_err());
        for f16 in [false, true] {
            let nt = tiles_per_warp(f16, None).unwrap();
            assert!(kernel(f16, nt).name().ends_with(&format!("nt{nt}")));
        }
    }
}
