//! Launcher of `kernels-gpu/src/spmm/tc8.rs`: ME-BCRS (k = 8) uploaded once per graph, a work
//! list that splits long windows, and the NT (16-dim tiles per warp) chosen from K.

use crate::error::{Error, Result};
use crate::gpu::abi::spmm::{self as kernels, Tc8SpmmArgs, ZeroWindowsArgs};
use crate::gpu::launch::{Ptr, Shape};
use crate::gpu::shared::config::{TC8_ASYNC_STAGES, TC8_BLOCK_VECTORS, TC8_WARPS, tc8_async_stage_bytes};
use crate::gpu::shared::partition::tc8_max_blocks;
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::values::check_len;
use crate::ops::{FeaturesRef, EdgeValues, GraphHandle, ValueOrder};

/// Work items: (window, first block, end block); windows cut into several items.
#[derive(Debug, PartialEq, Eq)]
pub struct WorkList {
    pub item_win: Vec<u32>,
    /// (first block, end block) per item, interleaved.
    pub item_blocks: Vec<u32>,
    /// Windows covered by more than one item: their rows are cleared, items add atomically.
    pub split_windows: Vec<u32>,
}

/// Cut every window into runs of at most `max_blocks` blocks; an empty window is one empty item
/// (it still writes its zero rows).
pub fn work_list(blocks_per_window: impl Iterator<Item = u32>, max_blocks: u32) -> WorkList {
    let mut wl = WorkList { item_win: Vec::new(), item_blocks: Vec::new(), split_windows: Vec::new() };
    for (w, nb) in blocks_per_window.enumerate() {
        if nb > max_blocks {
            wl.split_windows.push(w as u32);
        }
        let mut b = 0;
        loop {
            let e = (b + max_blocks).min(nb);
            wl.item_win.push(w as u32);
            wl.item_blocks.extend([b, e]);
            b = e;
            if b >= nb {
                break;
            }
        }
    }
    wl
}

/// What the work lists need of the format (shared by both precisions and every K).
struct Tc8Shape {
    n_blocks: u32,
    /// Blocks of every window.
    blocks_per_window: Vec<u32>,
}

/// A work list on the device, one per number of K slices (the split depends on it).
struct DeviceWorkList {
    item_win: DeviceVec<u32>,
    item_blocks: DeviceVec<u32>,
    split_windows: DeviceVec<u32>,
    n_items: u32,
    n_split: u32,
}

fn shape(g: &GraphHandle) -> Result<std::sync::Arc<Tc8Shape>> {
    g.cached(TC8_BLOCK_VECTORS as u64, || {
        let m = g.mebcrs(TC8_BLOCK_VECTORS as usize)?;
        Ok(Tc8Shape {
            n_blocks: m.n_blocks() as u32,
            blocks_per_window: (0..m.n_windows()).map(|w| m.blocks_of(w) as u32).collect(),
        })
    })
}

fn device_work_list(g: &GraphHandle, gpu: &Gpu, f: &Tc8Shape, k_slices: u32) -> Result<std::sync::Arc<DeviceWorkList>> {
    g.cached(k_slices as u64, || {
        let max_blocks = tc8_max_blocks(f.n_blocks, f.blocks_per_window.len() as u32, k_slices, gpu.info().sm_count);
        let wl = work_list(f.blocks_per_window.iter().copied(), max_blocks);
        Ok(DeviceWorkList {
            item_win: DeviceVec::upload(gpu, &wl.item_win)?,
            item_blocks: DeviceVec::upload(gpu, &wl.item_blocks)?,
            split_windows: DeviceVec::upload(gpu, &wl.split_windows)?,
            n_items: wl.item_win.len() as u32,
            n_split: wl.split_windows.len() as u32,
        })
    })
}

/// 16-dim MMA tiles per warp of the register-pipeline kernel. f16: 2 for narrow features (one
/// warp covers K <= 32), else 4 (wider gathers; measured faster on H100 at K = 128). tf32:
/// always 2 (four tiles need 124 registers, and the lost occupancy cost 2x at K = 128).
/// `TCGNN_TC8_NT=2|4` overrides.
fn tiles_per_warp(ld: u32, f16: bool) -> u32 {
    match std::env::var("TCGNN_TC8_NT").ok().as_deref() {
        Some("2") => 2,
        Some("4") => 4,
        _ if ld <= 32 || !f16 => 2,
        _ => 4,
    }
}

/// Which TC8 kernel brings X into the tensor cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tc8Pipeline {
    /// The measured default: `Shared`, except f16 with K <= 32 (`Registers`: the shared
    /// pipeline's f16 K slice is 64 dims wide). `TCGNN_TC8_PIPELINE=registers|shared` overrides.
    Default,
    /// Gathers into registers one group of 4 blocks at a time (`spmm/tc8.rs`).
    Registers,
    /// `cp.async` gathers into shared memory, a group ahead (`spmm/tc8_async.rs`). H100 suite
    /// (34 graphs) against `Registers`: f16 1.16 -> 1.17x and tf32 0.75 -> 0.76x cuSPARSE at
    /// K = 128, tf32 1.09 -> 1.15x at K = 32.
    Shared,
}

fn pipeline(choice: Tc8Pipeline, ld: u32, f16: bool) -> Pipeline {
    let choice = match (choice, std::env::var("TCGNN_TC8_PIPELINE").ok().as_deref()) {
        (Tc8Pipeline::Default, Some("registers")) => Tc8Pipeline::Registers,
        (Tc8Pipeline::Default, Some("shared")) => Tc8Pipeline::Shared,
        (Tc8Pipeline::Default, _) if f16 && ld <= 32 => Tc8Pipeline::Registers,
        (Tc8Pipeline::Default, _) => Tc8Pipeline::Shared,
        (c, _) => c,
    };
    match choice {
        Tc8Pipeline::Registers => Pipeline::Registers(tiles_per_warp(ld, f16)),
        _ => Pipeline::Shared,
    }
}

/// Y = S X on tensor cores: tf32 for f32 features, f16 for f16 features.
pub fn spmm_tc8(g: &GraphHandle, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_tc8_with(g, x, y, Tc8Pipeline::Default)
}

/// [`spmm_tc8`] with a chosen pipeline (the tests run both). Shapes are the caller's to check,
/// as `ops::spmm::spmm_device` does.
pub fn spmm_tc8_with(g: &GraphHandle, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, choice: Tc8Pipeline) -> Result<()> {
    spmm_tc8_values(g, None, x, y, choice)
}

/// [`spmm_tc8_with`] with per-call values in ME-BCRS order (`None`: the handle's): f32
/// ([`EdgeValues::MeBcrs`]) with f32 features, f16 ([`EdgeValues::MeBcrsF16`]) with f16 ones.
pub fn spmm_tc8_values(
    g: &GraphHandle,
    values: Option<EdgeValues>,
    x: FeaturesRef<'_>,
    y: &mut DeviceMatrix<f32>,
    choice: Tc8Pipeline,
) -> Result<()> {
    spmm_tc8_windows(g, values, x, y, pipeline(choice, y.ld as u32, matches!(x, FeaturesRef::F16(_))))
}

/// How a warp brings X in: into registers one group at a time (NT tiles per warp), or by
/// `cp.async` into `TC8_ASYNC_STAGES` shared-memory stages (`spmm/tc8_async.rs`).
#[derive(Clone, Copy, Debug)]
enum Pipeline {
    Registers(u32),
    Shared,
}

/// Y = S X with a warp per window (long windows cut into items).
fn spmm_tc8_windows(g: &GraphHandle, values: Option<EdgeValues>, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, pipeline: Pipeline) -> Result<()> {
    let gpu = g.gpu()?;
    let f = shape(g)?;
    let m = g.device_mebcrs()?;
    // The values the kernel reads: ME-BCRS slots in the features' storage type.
    let handle_f16;
    let values_ptr = match (values, x) {
        (None, FeaturesRef::F32(_)) => m.values.ptr(gpu),
        (None, FeaturesRef::F16(_)) => {
            handle_f16 = g.device_mebcrs_f16()?;
            handle_f16.0.ptr(gpu)
        }
        (Some(v @ EdgeValues::MeBcrs(_)), FeaturesRef::F32(_)) | (Some(v @ EdgeValues::MeBcrsF16(_)), FeaturesRef::F16(_)) => {
            check_len("TC8 SpMM: the edge values", v.len(), g.value_len(ValueOrder::MeBcrs)?, ValueOrder::MeBcrs)?;
            v.ptr(gpu)
        }
        (Some(v), x) => {
            return Err(Error::Unsupported(format!(
                "SpMM Tc8 with {} features reads {} values in ME-BCRS order, got {v:?}",
                x.type_name(),
                x.type_name()
            )));
        }
    };
    let ld = y.ld as u32;
    let n_rows = g.csr().n_rows() as u32;
    let f16 = matches!(x, FeaturesRef::F16(_));
    // The pipelined kernels move 16-byte chunks: 8 f16 dims (NT = 4) or 4 f32 dims (NT = 2).
    let nt = match pipeline {
        Pipeline::Registers(nt) => nt,
        Pipeline::Shared => if f16 { 4 } else { 2 },
    };
    let k_slices = ld.div_ceil(16 * nt);
    let wl = device_work_list(g, gpu, &f, k_slices)?;
    let kernel = match (pipeline, f16) {
        (Pipeline::Registers(2), false) => kernels::spmm_tc8_tf32_nt2,
        (Pipeline::Registers(_), false) => kernels::spmm_tc8_tf32_nt4,
        (Pipeline::Registers(2), true) => kernels::spmm_tc8_f16_nt2,
        (Pipeline::Registers(_), true) => kernels::spmm_tc8_f16_nt4,
        (Pipeline::Shared, false) => kernels::spmm_tc8a_tf32,
        (Pipeline::Shared, true) => kernels::spmm_tc8a_f16,
    };
    let smem_bytes = match pipeline {
        Pipeline::Registers(_) => 0,
        Pipeline::Shared => TC8_WARPS * TC8_ASYNC_STAGES * tc8_async_stage_bytes(if f16 { 2 } else { 4 }),
    };
    let x_ptr = match x {
        FeaturesRef::F32(xm) => xm.ptr(),
        FeaturesRef::F16(xm) => xm.ptr(),
    };
    if wl.n_split > 0 {
        let args = ZeroWindowsArgs { windows: wl.split_windows.arg(gpu), n_rows, ld, y: y.arg_mut() };
        // SAFETY: every listed window has rows below n_rows and Y holds n_rows * ld floats.
        unsafe { kernels::tc8_zero_windows.launch(gpu, Shape::linear(wl.n_split, 256, 0), &args)? };
    }
    let shape = Shape {
        grid: (wl.n_items.div_ceil(TC8_WARPS), k_slices, 1),
        block: (32 * TC8_WARPS, 1, 1),
        smem_bytes,
    };
    let args = Tc8SpmmArgs {
        n_items: wl.n_items,
        n_rows,
        ld,
        win_ptr: m.win_ptr.arg(gpu),
        vec_col: m.vec_col.arg(gpu),
        values: Ptr::new(values_ptr),
        item_win: wl.item_win.arg(gpu),
        item_blocks: wl.item_blocks.arg(gpu),
        x: Ptr::new(x_ptr),
        y: y.arg_mut(),
    };
    // SAFETY: the ME-BCRS arrays and work list were built from
    // this graph and the values hold its 8 * n_vectors slots in the features' storage type (a
    // whole allocation: 16-byte aligned for cp.async); X and Y share the padded stride ld (a
    // multiple of 8, so the vector loads and stores stay aligned) and X has n_cols rows
    // (checked by ops::spmm).
    unsafe { kernel.launch(gpu, shape, &args) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_windows_are_split_and_empty_windows_kept() {
        let wl = work_list([0u32, 3, 10, 4].into_iter(), 4);
        assert_eq!(wl.item_win, vec![0, 1, 2, 2, 2, 3]);
        assert_eq!(wl.item_blocks, vec![0, 0, 0, 3, 0, 4, 4, 8, 8, 10, 0, 4]);
        assert_eq!(wl.split_windows, vec![2]);
    }

    #[test]
    fn split_size_keeps_ordinary_windows_whole_and_fills_the_device() {
        // Few, dense windows (ogbl-ddi-like): cut so that 132 SMs get >= 16 warps each.
        let mb = tc8_max_blocks(167_000, 534, 2, 132);
        assert!(167_000u32.div_ceil(mb) * 2 >= 132 * 16);
        // Many long windows already fill the device: kept whole (tolokers-like, 75 per window).
        assert!(tc8_max_blocks(110_000, 1470, 2, 132) > 75);
        // Skewed graphs: heavy windows cut near 4x the mean, never below 32.
        assert_eq!(tc8_max_blocks(130_000, 32_768, 2, 132), 32);
    }
}
