//! Rows of a resident matrix picked by id (a sampled batch's feature rows gathered from the
//! whole feature matrix on the device: the batch carries node ids, not rows). CPU reference and
//! the launcher of `kernels-gpu/src/nn/gather_rows.rs`.

use super::{check_gpu, check_matrix_64, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{GatherRowsArgs, gather_rows_f32};
use std::sync::Mutex;

use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

fn check(src: (usize, usize), dst: (usize, usize), ids: &[u32]) -> Result<()> {
    if src.1 != dst.1 || ids.len() > dst.0 {
        return Err(Error::Shape(format!("gather_rows: {} ids of a {} x {} matrix into {} x {}", ids.len(), src.0, src.1, dst.0, dst.1)));
    }
    if let Some(&bad) = ids.iter().find(|&&v| v as usize >= src.0) {
        return Err(Error::Shape(format!("gather_rows: row id {bad} of a matrix of {} rows", src.0)));
    }
    Ok(())
}

/// dst[r] = src[ids[r]] for r < ids.len(), the remaining rows of dst zero.
pub fn gather_rows_cpu<T: Real>(src: &HostMat<T>, ids: &[u32], dst: &mut HostMat<T>) -> Result<()> {
    check((src.rows, src.cols), (dst.rows, dst.cols), ids)?;
    let w = dst.cols;
    for (r, row) in dst.data.chunks_mut(w.max(1)).enumerate().take(dst.rows) {
        match ids.get(r) {
            Some(&v) => row.copy_from_slice(src.row(v as usize)),
            None => row.fill(T::zero()),
        }
    }
    Ok(())
}

/// A rebound batch's node ids on the GPU, for gathering its feature rows there: one buffer per
/// backend (kept in its op state), grown to the largest batch.
#[derive(Default)]
pub struct GatherIds(Mutex<Option<DeviceVec<u32>>>);

impl GatherIds {
    /// `dst` = the rows `ids` of `full`, the ids copied through the pinned arena into the buffer.
    fn gather(&self, gpu: &Gpu, full: &DeviceMatrix<f32>, ids: &[u32], dst: &mut DeviceMatrix<f32>) -> Result<()> {
        let mut buf = self.0.lock().expect("gather ids poisoned");
        if buf.as_ref().is_none_or(|b| b.len() < ids.len()) {
            *buf = Some(DeviceVec::zeros(gpu, ids.len().max(1))?);
        }
        let buf = buf.as_mut().expect("made above");
        gpu.copy_htod_pinned(buf.ptr(gpu), ids.len(), |h: &mut [u32]| h.copy_from_slice(ids))?;
        gather_rows(full, buf, ids, dst)
    }
}

/// [`gather_rows_cpu`] on the device; `ids` are already on it (`host_ids`, the same ids on the
/// host, are what the bounds are checked on: an id past src's rows would read out of bounds).
pub fn gather_rows(src: &DeviceMatrix<f32>, ids: &DeviceVec<u32>, host_ids: &[u32], dst: &mut DeviceMatrix<f32>) -> Result<()> {
    check((src.rows, src.cols), (dst.rows, dst.cols), host_ids)?;
    if ids.len() < host_ids.len() {
        return Err(Error::Shape(format!("gather_rows: {} device ids for {} host ids", ids.len(), host_ids.len())));
    }
    // Every id is below src's rows and there are at most dst.rows of them (checked above).
    launch(src, ids, host_ids.len(), dst)
}

/// The launch of both: the first `n_ids` of `ids` are below `src.rows` and `n_ids <= dst.rows`
/// (the callers' checks).
fn launch(src: &DeviceMatrix<f32>, ids: &DeviceVec<u32>, n_ids: usize, dst: &mut DeviceMatrix<f32>) -> Result<()> {
    check_matrix_64(src, "gather_rows src")?;
    check_matrix_64(dst, "gather_rows dst")?;
    check_gpu(src.gpu(), dst.gpu(), "gather_rows")?;
    let gpu = dst.gpu().clone();
    let items = (dst.rows * dst.ld) as u64;
    if items == 0 {
        return Ok(());
    }
    let args = GatherRowsArgs {
        rows: dst.rows as u32,
        n_ids: n_ids as u32,
        cols: dst.cols as u32,
        src_ld: src.ld as u32,
        dst_ld: dst.ld as u32,
        ids: ids.arg(&gpu),
        src: src.arg(),
        dst: dst.arg_mut(),
    };
    // SAFETY: the ids are in bounds (the callers' checks); both matrices are valid with u32
    // rows and strides; dst's padded rows are written.
    unsafe { gather_rows_f32.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

/// [`gather_rows`] with the ids only on the device: the first `n_ids` of `ids`, each below
/// `src.rows` by the caller's construction (a device sampler's node ids of the graph whose
/// features `src` holds; `ids_below` says how the caller knows).
pub fn gather_rows_device_ids(
    src: &DeviceMatrix<f32>,
    ids: &DeviceVec<u32>,
    n_ids: usize,
    ids_below: usize,
    dst: &mut DeviceMatrix<f32>,
) -> Result<()> {
    if src.cols != dst.cols || n_ids > dst.rows || n_ids > ids.len() || ids_below > src.rows {
        return Err(Error::Shape(format!(
            "gather_rows: {n_ids} device ids (of {}, each < {ids_below}) of a {} x {} matrix into {} x {}",
            ids.len(),
            src.rows,
            src.cols,
            dst.rows,
            dst.cols
        )));
    }
    launch(src, ids, n_ids, dst)
}

// -- the op on each backend --

pub trait GatherRowsOp: Backend {
    /// Rewrites `m` with rows `ids` of `full` (the whole graph's features, resident), the
    /// rows past the ids zero: a rebound batch's features without copying them from the host
    /// (`sample::bound`).
    fn bind_rows_gathered(&self, m: &mut Self::Mat, full: &Self::Mat, ids: &[u32]) -> Result<()>;
}

impl<T: Real> GatherRowsOp for CpuBackend<T> {
    fn bind_rows_gathered(&self, m: &mut HostMat<T>, full: &HostMat<T>, ids: &[u32]) -> Result<()> {
        gather_rows_cpu(full, ids, m)
    }
}

impl GatherRowsOp for CudaBackend {
    fn bind_rows_gathered(&self, m: &mut DeviceMatrix<f32>, full: &DeviceMatrix<f32>, ids: &[u32]) -> Result<()> {
        self.op_state.get::<GatherIds>().gather(&self.gpu, full, ids, m)
    }
}
