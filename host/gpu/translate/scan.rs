//! Launcher of `window_scan` (kernels-gpu/src/format/scan.rs): window pointers (and SGT block
//! pointers) from per-window counts.

use crate::error::Result;
use crate::gpu::abi::format::{self as kernels, WindowScanArgs};
use crate::gpu::launch::{PtrMut, Shape};
use crate::gpu::{DeviceVec, Gpu};
use crate::shared::translate::SCAN_THREADS;

/// `win_ptr` (n_windows + 1) from `counts`, and `blk_ptr` with `Some(block_w)`.
pub fn window_scan(
    gpu: &Gpu,
    n_windows: usize,
    counts: &DeviceVec<u32>,
    block_w: Option<u32>,
) -> Result<(DeviceVec<u32>, Option<DeviceVec<u32>>)> {
    let mut win_ptr = DeviceVec::<u32>::zeros(gpu, n_windows + 1)?;
    let mut blk_ptr = match block_w {
        Some(_) => Some(DeviceVec::<u32>::zeros(gpu, n_windows + 1)?),
        None => None,
    };
    let args = WindowScanArgs {
        n: n_windows as u32,
        counts: counts.arg(gpu),
        block_w: block_w.unwrap_or(0),
        win_ptr: win_ptr.arg_mut(gpu),
        blk_ptr: blk_ptr.as_mut().map_or(PtrMut::null(), |b| b.arg_mut(gpu)),
    };
    // SAFETY: counts holds n_windows entries (or is the one-element buffer of zero windows,
    // unread), win_ptr and blk_ptr n_windows + 1 (blk_ptr null: unused); one block of
    // SCAN_THREADS as the kernel's run split assumes; 2 x 32 u32 of shared memory.
    unsafe { kernels::window_scan.launch(gpu, Shape::linear(1, SCAN_THREADS, 2 * 128 + 16), &args)? };
    Ok((win_ptr, blk_ptr))
}
