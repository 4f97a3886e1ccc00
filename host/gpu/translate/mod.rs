//! CSR -> ME-BCRS and CSR -> SGT on the GPU, producing exactly the arrays of the CPU
//! translations ([`crate::format::MeBcrs::from_csr`], [`crate::format::Sgt::from_csr`]).
//!
//! Steps (kernels in `kernels-gpu/src/format/`, one launcher file each here):
//! 1. [`window_cols`]: per row window, sort the (column, offset) keys of its edges and number
//!    its unique columns (blocks of one window each; windows above `SORT_SMEM_KEYS` edges sort
//!    in global scratch, listed by [`plan::plan_windows`]);
//! 2. [`scan`]: window (and SGT block) pointers from the per-window counts;
//! 3. [`mebcrs`] / [`sgt`]: place columns, values and per-edge slots.
//!
//! The host reads back one or two totals between steps 2 and 3 to size the outputs.

pub mod mebcrs;
pub mod plan;
pub mod scan;
pub mod sgt;
pub mod timing;
pub mod window_cols;

pub use mebcrs::{DeviceMeBcrsParts, mebcrs_on_device, mebcrs_on_gpu};
pub use sgt::{DeviceSgt, sgt_on_device, sgt_on_gpu};
pub use timing::gpu_translate_ms;

use crate::error::{Error, Result};
use crate::gpu::{DeviceVec, Gpu};

/// Element `i` of a device vector (one small copy; synchronises the stream).
pub(crate) fn read_at(gpu: &Gpu, v: &DeviceVec<u32>, i: usize) -> Result<u32> {
    let host = gpu.stream.clone_dtoh(&v.slice().slice(i..i + 1)).map_err(|e| Error::cuda("reading a translation total", e))?;
    Ok(host[0])
}

/// The first `len` elements of a device vector (an empty one is stored as one element).
pub(crate) fn download_n<T>(gpu: &Gpu, v: &DeviceVec<T>, len: usize) -> Result<Vec<T>>
where
    T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Clone + Default + Unpin,
{
    let mut host = v.download(gpu)?;
    host.truncate(len);
    Ok(host)
}
