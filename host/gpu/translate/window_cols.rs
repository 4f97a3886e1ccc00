//! Launcher of `window_cols` / `window_cols_large` (kernels-gpu/src/format/window_cols.rs):
//! every window's sorted unique columns and each edge's position among them.

use crate::error::Result;
use crate::gpu::abi::format::{self as kernels, LargeWindowList, WindowColsArgs, WindowColsLargeArgs};
use crate::gpu::csr::DeviceCsr;
use crate::gpu::launch::{PtrMut, Shape};
use crate::gpu::translate::plan::WindowPlan;
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::shared::translate::{LARGE_THREADS, WINDOW_THREADS, window_smem_bytes};

/// The large windows' list and sort scratch, kept for a second sort over the same windows.
pub struct LargeWindows {
    pub count: usize,
    pub list: DeviceVec<u32>,
    pub scratch_off: DeviceVec<u32>,
    pub scratch: DeviceVec<u64>,
}

impl LargeWindows {
    pub fn new(gpu: &Gpu, plan: &WindowPlan) -> Result<Self> {
        Ok(LargeWindows {
            count: plan.large.len(),
            list: DeviceVec::upload(gpu, &plan.large)?,
            scratch_off: DeviceVec::upload(gpu, &plan.scratch_off)?,
            scratch: DeviceVec::zeros(gpu, plan.scratch_len)?,
        })
    }

    /// The list and scratch as the `*_large` kernels take them.
    pub fn arg(&mut self, gpu: &Gpu) -> LargeWindowList {
        LargeWindowList { large: self.list.arg(gpu), scratch_off: self.scratch_off.arg(gpu), scratch: self.scratch.arg_mut(gpu) }
    }
}

/// Step 1's outputs (see the kernel file): `loc` and `ucol` per CSR edge, `counts` per window,
/// `dup` chains when asked for.
pub struct WindowCols {
    pub loc: DeviceVec<u32>,
    pub ucol: DeviceVec<u32>,
    pub counts: DeviceVec<u32>,
    pub dup: Option<DeviceVec<u32>>,
}

/// Run step 1 over windows of `win` rows of `csr` (its arrays `d` on the device) as planned by
/// `plan`.
pub fn window_cols(
    gpu: &Gpu,
    (csr, d): (&Csr, &DeviceCsr),
    win: usize,
    plan: &WindowPlan,
    large: &mut LargeWindows,
    with_dup: bool,
) -> Result<WindowCols> {
    let (n_rows, nnz, row_ptr, col_idx) = (csr.n_rows(), csr.nnz(), &d.row_ptr, &d.col_idx);
    let mut out = WindowCols {
        loc: DeviceVec::zeros(gpu, nnz)?,
        ucol: DeviceVec::zeros(gpu, nnz)?,
        counts: DeviceVec::zeros(gpu, plan.n_windows)?,
        dup: if with_dup { Some(DeviceVec::zeros(gpu, nnz)?) } else { None },
    };
    let dup = match out.dup.as_mut() {
        Some(d) => d.arg_mut(gpu),
        None => PtrMut::null(),
    };
    let cols = WindowColsArgs {
        n_rows: n_rows as u32,
        win: win as u32,
        row_ptr: row_ptr.arg(gpu),
        col_idx: col_idx.arg(gpu),
        loc: out.loc.arg_mut(gpu),
        ucol: out.ucol.arg_mut(gpu),
        counts: out.counts.arg_mut(gpu),
        dup,
    };
    // SAFETY: row_ptr holds n_rows + 1 entries and col_idx nnz, every
    // window writes loc/dup/ucol inside its own CSR edge range (< nnz) and counts[w] for
    // w < n_windows; the shared memory covers the keys of the longest window sorted there
    // (longer ones return at once); win <= 16 rows as the row-pointer staging assumes.
    let smem = window_smem_bytes(plan.max_small_len);
    unsafe { kernels::window_cols.launch(gpu, Shape::linear(plan.n_windows as u32, WINDOW_THREADS, smem), &cols)? };
    if large.count > 0 {
        let args = WindowColsLargeArgs { cols, large: large.arg(gpu) };
        // SAFETY: as above, plus: `list` holds `count` large windows and `scratch_off` their
        // first keys in `scratch`, which holds sort_len(len) keys for each (the plan's sums).
        let shape = Shape::linear(large.count as u32, LARGE_THREADS, window_smem_bytes(u32::MAX));
        unsafe { kernels::window_cols_large.launch(gpu, shape, &args)? };
    }
    Ok(out)
}
