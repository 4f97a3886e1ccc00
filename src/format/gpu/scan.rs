//! Launcher of `window_scan` (kernels-gpu/src/format/scan.rs): window pointers (and SGT block
//! pointers) from per-window counts.

use crate::error::Result;
use crate::gpu::launch::{Arg, Shape, launch};
use crate::gpu::shared::translate::SCAN_THREADS;
use crate::gpu::{DeviceVec, Gpu};

/// `win_ptr` (n_windows + 1) from `counts`, and `blk_ptr` with `Some(block_w)`.
pub fn window_scan(gpu: &Gpu, n_windows: usize, counts: &DeviceVec<u32>, block_w: Option<u32>) -> Result<(DeviceVec<u32>, Option<DeviceVec<u32>>)> {
    let mut win_ptr = DeviceVec::<u32>::zeros(gpu, n_windows + 1)?;
    let mut blk_ptr = match block_w {
        Some(_) => Some(DeviceVec::<u32>::zeros(gpu, n_windows + 1)?),
        None => None,
    };
    let blk = blk_ptr.as_mut().map_or(0, |b| b.ptr_mut(gpu));
    let args = [
        Arg::U32(n_windows as u32),
        Arg::Ptr(counts.ptr(gpu)),
        Arg::U32(block_w.unwrap_or(0)),
        Arg::Ptr(win_ptr.ptr_mut(gpu)),
        Arg::Ptr(blk),
    ];
    // SAFETY: matches `window_scan`; counts holds n_windows entries (or is the one-element
    // buffer of zero windows, unread), win_ptr and blk_ptr n_windows + 1 (blk 0 = null: unused);
    // one block of SCAN_THREADS as the kernel's run split assumes; 2 x 32 u32 of shared memory.
    unsafe { launch(gpu, "window_scan", Shape::linear(1, SCAN_THREADS, 2 * 128 + 16), &args)? };
    Ok((win_ptr, blk_ptr))
}
