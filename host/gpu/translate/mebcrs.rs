//! CSR -> ME-BCRS on the GPU: steps 1 (windows of 8 rows, duplicate chains) and 2, then
//! `mebcrs_scatter` (kernels-gpu/src/format/mebcrs.rs).

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::format::{MEBCRS_WINDOW, MeBcrs};
use crate::gpu::abi::format::{MebcrsScatterArgs, mebcrs_scatter};
use crate::gpu::csr::DeviceCsr;
use crate::gpu::launch::Shape;
use crate::gpu::translate::plan::plan_windows;
use crate::gpu::translate::scan::window_scan;
use crate::gpu::translate::window_cols::{LargeWindows, window_cols};
use crate::gpu::translate::{download_n, read_at};
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::shared::translate::{WINDOW_THREADS, window_smem_bytes};

/// The arrays of [`MeBcrs`] on the device.
pub struct DeviceMeBcrsParts {
    pub k: usize,
    pub n_vectors: usize,
    pub win_ptr: DeviceVec<u32>,
    pub vec_col: DeviceVec<u32>,
    /// The matrix's own values in the slots ([`DeviceMeBcrsParts::with_values`]); `None` once
    /// released ([`DeviceMeBcrsParts::release_values`]).
    values: Mutex<Option<DeviceVec<f32>>>,
    pub csr_to_slot: DeviceVec<u32>,
}

/// Translate `csr` (whose arrays `d` already holds on `gpu`) into ME-BCRS with `k` (4, 8 or 16)
/// vectors per block, leaving the result on the device. Equal, array by array, to
/// [`MeBcrs::from_csr`]. Enqueued on the GPU's stream; reads back one total (a sync).
pub fn mebcrs_on_device(gpu: &Arc<Gpu>, csr: &Csr, d: &DeviceCsr, k: usize) -> Result<DeviceMeBcrsParts> {
    if ![4, 8, 16].contains(&k) {
        return Err(Error::Unsupported(format!("ME-BCRS with k = {k} vectors per block: use 4, 8 or 16")));
    }
    let (n_rows, nnz) = (csr.n_rows(), csr.nnz());
    if 8 * (nnz as u64) >= u32::MAX as u64 {
        return Err(Error::Unsupported(format!("{nnz} nonzeros: up to 8 slots each overflow 32-bit slot ids")));
    }
    let plan = plan_windows(csr.row_ptr(), MEBCRS_WINDOW);
    let mut large = LargeWindows::new(gpu, &plan)?;
    let wc = window_cols(gpu, (csr, d), MEBCRS_WINDOW, &plan, &mut large, true)?;
    let (win_ptr, _) = window_scan(gpu, plan.n_windows, &wc.counts, None)?;
    let n_vectors = read_at(gpu, &win_ptr, plan.n_windows)? as usize;
    let mut values = DeviceVec::zeros(gpu, 8 * n_vectors)?;
    let mut out = DeviceMeBcrsParts {
        k,
        n_vectors,
        win_ptr,
        vec_col: DeviceVec::zeros(gpu, n_vectors)?,
        values: Mutex::new(None),
        csr_to_slot: DeviceVec::zeros(gpu, nnz)?,
    };
    let dup = wc.dup.as_ref().expect("asked for duplicate chains");
    let args = MebcrsScatterArgs {
        n_rows: n_rows as u32,
        k: k as u32,
        row_ptr: d.row_ptr.arg(gpu),
        values: d.values.arg(gpu),
        loc: wc.loc.arg(gpu),
        ucol: wc.ucol.arg(gpu),
        dup: dup.arg(gpu),
        win_ptr: out.win_ptr.arg(gpu),
        vec_col: out.vec_col.arg_mut(gpu),
        values_out: values.arg_mut(gpu),
        csr_to_slot: out.csr_to_slot.arg_mut(gpu),
    };
    // SAFETY: one block per window of 8 rows; row_ptr (n_rows + 1),
    // values/loc/ucol/dup/csr_to_slot (nnz) and win_ptr (n_windows + 1) as step 1 and 2 wrote
    // them: every window's vectors lie in win_ptr[w]..win_ptr[w+1] <= n_vectors (vec_col) and its
    // slots below 8 * n_vectors (values, zeroed above); dup chains stay inside the window.
    let shape = Shape::linear(plan.n_windows as u32, WINDOW_THREADS, window_smem_bytes(0));
    unsafe { mebcrs_scatter.launch(gpu, shape, &args)? };
    out.values = Mutex::new(Some(values));
    Ok(out)
}

impl DeviceMeBcrsParts {
    /// Runs `f` on the matrix's own values (`8 * n_vectors` slots); `Error::Unsupported` once
    /// they were released.
    pub fn with_values<R>(&self, f: impl FnOnce(&DeviceVec<f32>) -> Result<R>) -> Result<R> {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let v = values.as_ref().ok_or_else(|| {
            Error::Unsupported(
                "the graph's own ME-BCRS values were released (its products take their values per call): pass the values".into(),
            )
        })?;
        f(v)
    }

    /// Frees the matrix's own values (4 bytes a slot), for a matrix whose every product passes
    /// its values per call (a model's fixed adjacency holding its own copies): the kernels read
    /// only the pattern arrays then.
    pub fn release_values(&self) {
        *self.values.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The host [`MeBcrs`] of these arrays (`csr` is the matrix they were translated from).
    pub fn download(&self, gpu: &Gpu, csr: &Csr) -> Result<MeBcrs> {
        Ok(MeBcrs {
            n_rows: csr.n_rows(),
            n_cols: csr.n_cols(),
            k: self.k,
            win_ptr: download_n(gpu, &self.win_ptr, csr.n_rows().div_ceil(MEBCRS_WINDOW) + 1)?,
            vec_col: download_n(gpu, &self.vec_col, self.n_vectors)?,
            values: self.with_values(|v| download_n(gpu, v, 8 * self.n_vectors))?,
            csr_to_slot: download_n(gpu, &self.csr_to_slot, csr.nnz())?,
        })
    }

    /// Uploads a host translation (the CPU path's result) into the same device form.
    pub fn upload(gpu: &Gpu, m: &MeBcrs) -> Result<Self> {
        Ok(DeviceMeBcrsParts {
            k: m.k,
            n_vectors: m.vec_col.len(),
            win_ptr: DeviceVec::upload(gpu, &m.win_ptr)?,
            vec_col: DeviceVec::upload(gpu, &m.vec_col)?,
            values: Mutex::new(Some(DeviceVec::upload(gpu, &m.values)?)),
            csr_to_slot: DeviceVec::upload(gpu, &m.csr_to_slot)?,
        })
    }
}

/// [`MeBcrs::from_csr`] with k = 8 on the GPU: upload the CSR, translate, download.
pub fn mebcrs_on_gpu(gpu: &Arc<Gpu>, csr: &Csr) -> Result<MeBcrs> {
    let d = DeviceCsr::upload(gpu, csr)?;
    mebcrs_on_device(gpu, csr, &d, 8)?.download(gpu, csr)
}
