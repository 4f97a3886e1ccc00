//! CSR -> SGT on the GPU: steps 1 (windows of 16 rows; `loc` is `edge_to_col`) and 2 (with
//! block pointers), then `sgt_edges` / `sgt_edges_large` (kernels-gpu/src/format/sgt.rs) list
//! each window's edges block by block.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{SGT_WINDOW, Sgt};
use crate::gpu::abi::format::{SgtEdgesArgs, SgtEdgesLargeArgs, sgt_edges, sgt_edges_large};
use crate::gpu::csr::DeviceCsr;
use crate::gpu::launch::Shape;
use crate::gpu::translate::plan::plan_windows;
use crate::gpu::translate::scan::window_scan;
use crate::gpu::translate::window_cols::{LargeWindows, window_cols};
use crate::gpu::translate::{download_n, read_at};
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::shared::translate::{LARGE_THREADS, WINDOW_THREADS, window_smem_bytes};

/// The arrays of [`Sgt`] on the device.
pub struct DeviceSgt {
    pub block_w: usize,
    pub n_unique: usize,
    pub n_blocks: usize,
    pub win_ptr: DeviceVec<u32>,
    pub win_cols: DeviceVec<u32>,
    pub blk_ptr: DeviceVec<u32>,
    pub edge_to_col: DeviceVec<u32>,
    pub blk_edge_ptr: DeviceVec<u32>,
    pub blk_edge_pos: DeviceVec<u8>,
    pub blk_edge_val: DeviceVec<f32>,
    pub blk_edge_csr: DeviceVec<u32>,
}

/// Translate `csr` (arrays in `d` on `gpu`) into SGT with blocks `block_w` (8 or 16) wide,
/// leaving the result on the device. Equal, array by array, to [`Sgt::from_csr`]. Enqueued on
/// the GPU's stream; reads back two totals (a sync).
pub fn sgt_on_device(gpu: &Arc<Gpu>, csr: &Csr, d: &DeviceCsr, block_w: usize) -> Result<DeviceSgt> {
    if block_w != 8 && block_w != 16 {
        return Err(Error::Unsupported(format!("SGT block width {block_w}: use 8 (SpMM) or 16 (SDDMM)")));
    }
    let (n_rows, nnz) = (csr.n_rows(), csr.nnz());
    if nnz >= i32::MAX as usize {
        return Err(Error::Unsupported(format!("{nnz} nonzeros: the GPU translation indexes edges with 31 bits")));
    }
    let plan = plan_windows(csr.row_ptr(), SGT_WINDOW);
    let mut large = LargeWindows::new(gpu, &plan)?;
    let wc = window_cols(gpu, (csr, d), SGT_WINDOW, &plan, &mut large, false)?;
    let (win_ptr, blk_ptr) = window_scan(gpu, plan.n_windows, &wc.counts, Some(block_w as u32))?;
    let blk_ptr = blk_ptr.expect("asked for block pointers");
    let n_unique = read_at(gpu, &win_ptr, plan.n_windows)? as usize;
    let n_blocks = read_at(gpu, &blk_ptr, plan.n_windows)? as usize;
    let mut out = DeviceSgt {
        block_w,
        n_unique,
        n_blocks,
        win_ptr,
        win_cols: DeviceVec::zeros(gpu, n_unique)?,
        blk_ptr,
        edge_to_col: wc.loc,
        blk_edge_ptr: DeviceVec::zeros(gpu, n_blocks + 1)?,
        blk_edge_pos: DeviceVec::zeros(gpu, nnz)?,
        blk_edge_val: DeviceVec::zeros(gpu, nnz)?,
        blk_edge_csr: DeviceVec::zeros(gpu, nnz)?,
    };
    let edges = SgtEdgesArgs {
        n_rows: n_rows as u32,
        block_w: block_w as u32,
        nnz: nnz as u32,
        n_windows: plan.n_windows as u32,
        row_ptr: d.row_ptr.arg(gpu),
        values: d.values.arg(gpu),
        loc: out.edge_to_col.arg(gpu),
        ucol: wc.ucol.arg(gpu),
        win_ptr: out.win_ptr.arg(gpu),
        blk_ptr: out.blk_ptr.arg(gpu),
        win_cols: out.win_cols.arg_mut(gpu),
        blk_edge_ptr: out.blk_edge_ptr.arg_mut(gpu),
        blk_edge_pos: out.blk_edge_pos.arg_mut(gpu),
        blk_edge_val: out.blk_edge_val.arg_mut(gpu),
        blk_edge_csr: out.blk_edge_csr.arg_mut(gpu),
    };
    // SAFETY: one block per window of 16 rows; row_ptr (n_rows + 1),
    // values/edge_to_col/ucol and the three block-edge arrays (nnz) are indexed inside each
    // window's edge range; win_ptr/blk_ptr (n_windows + 1) as step 2 wrote them bound win_cols
    // (n_unique) and blk_edge_ptr (n_blocks + 1); shared memory covers the longest small window.
    let shape = Shape::linear(plan.n_windows as u32, WINDOW_THREADS, window_smem_bytes(plan.max_small_len));
    unsafe { sgt_edges.launch(gpu, shape, &edges)? };
    if large.count > 0 {
        let args = SgtEdgesLargeArgs { edges, large: large.arg(gpu) };
        // SAFETY: as above, plus the large windows' list and scratch of step 1 (same windows).
        let shape = Shape::linear(large.count as u32, LARGE_THREADS, window_smem_bytes(u32::MAX));
        unsafe { sgt_edges_large.launch(gpu, shape, &args)? };
    }
    Ok(out)
}

/// [`Sgt::from_csr`] on the GPU: upload the CSR, translate, download.
pub fn sgt_on_gpu(gpu: &Arc<Gpu>, csr: &Csr, block_w: usize) -> Result<Sgt> {
    let d = DeviceCsr::upload(gpu, csr)?;
    let s = sgt_on_device(gpu, csr, &d, block_w)?;
    let (nw, nnz) = (csr.n_rows().div_ceil(SGT_WINDOW), csr.nnz());
    Ok(Sgt {
        n_rows: csr.n_rows(),
        n_cols: csr.n_cols(),
        block_w,
        win_ptr: download_n(gpu, &s.win_ptr, nw + 1)?,
        win_cols: download_n(gpu, &s.win_cols, s.n_unique)?,
        blk_ptr: download_n(gpu, &s.blk_ptr, nw + 1)?,
        edge_to_col: download_n(gpu, &s.edge_to_col, nnz)?,
        blk_edge_ptr: download_n(gpu, &s.blk_edge_ptr, s.n_blocks + 1)?,
        blk_edge_pos: download_n(gpu, &s.blk_edge_pos, nnz)?,
        blk_edge_val: download_n(gpu, &s.blk_edge_val, nnz)?,
        blk_edge_csr: download_n(gpu, &s.blk_edge_csr, nnz)?,
    })
}
