//! Reordered graph handles ([`GraphHandle::with_reorder`]): the handle keeps S' = P S Pᵀ (every
//! format is translated from it) and P. SpMM brings X into the reordered node order
//! (X' = P X), runs on S' and brings Y back (Y = Pᵀ Y'), so callers see the original order.
//! On the device both moves are `gather_rows` launches (`kernels-gpu/src/perm.rs`) through
//! scratch matrices the handle allocates once per (storage type, width) and keeps.

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::gpu::abi::perm::{GatherRowsArgs, gather_rows as gather_rows_kernel};
use crate::gpu::launch::{Ptr, PtrMut};
use crate::gpu::memory::Element;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::graph::Permutation;
use crate::graph::reorder::Reorder;
use crate::ops::{FeaturesRef, GraphHandle};
use crate::shared::partition::nn_row_group_shift;
use crate::tensor::Matrix;

/// The permutation of a reordered handle: node `i` of the handle's graph is node
/// `perm.new_to_old()[i]` of the graph it was made from.
#[derive(Clone, Debug)]
pub struct Reordering {
    /// How P was computed (`None`: given by the caller, [`GraphHandle::with_permutation`]).
    pub method: Option<Reorder>,
    pub perm: Permutation,
    /// Host time to compute P (0 when given), ms.
    pub order_ms: f64,
    /// Host time to build S' = P S Pᵀ, ms.
    pub apply_ms: f64,
}

impl Reordering {
    /// What the reordering cost once, on the host: computing P and building S'.
    pub fn one_time_ms(&self) -> f64 {
        self.order_ms + self.apply_ms
    }
}

/// P's index arrays on the device: `new_to_old` gathers X in, `old_to_new` gathers Y out.
struct DevicePermutation {
    new_to_old: DeviceVec<u32>,
    old_to_new: DeviceVec<u32>,
}

/// A scratch matrix kept by the handle for one role and width (the type is part of the key).
struct Scratch<T>(Mutex<DeviceMatrix<T>>);

const ROLE_X: u64 = 0;
const ROLE_Y: u64 = 1;

fn scratch<T: Element>(g: &GraphHandle, role: u64, rows: usize, cols: usize) -> Result<Arc<Scratch<T>>> {
    let gpu = g.gpu()?.clone();
    g.cached(role | ((cols as u64) << 1), || Ok(Scratch(Mutex::new(DeviceMatrix::<T>::zeros(&gpu, rows, cols)?))))
}

fn device_permutation(g: &GraphHandle, r: &Reordering) -> Result<Arc<DevicePermutation>> {
    let gpu = g.gpu()?.clone();
    g.cached(0, || {
        Ok(DevicePermutation {
            new_to_old: DeviceVec::upload(&gpu, r.perm.new_to_old())?,
            old_to_new: DeviceVec::upload(&gpu, r.perm.old_to_new())?,
        })
    })
}

/// dst row r = src row idx[r] on the device (f32 or f16 rows, any width; padding moves too).
/// `idx` must hold `dst.rows` values below `src.rows`; src and dst have the same width.
pub fn gather_rows<T: Element>(idx: &DeviceVec<u32>, src: &DeviceMatrix<T>, dst: &mut DeviceMatrix<T>) -> Result<()> {
    if idx.len() != dst.rows || src.cols != dst.cols || src.ld != dst.ld {
        return Err(Error::Shape(format!(
            "gather_rows: {} indices, src {}x{} (ld {}), dst {}x{} (ld {})",
            idx.len(),
            src.rows,
            src.cols,
            src.ld,
            dst.rows,
            dst.cols,
            dst.ld
        )));
    }
    let row_bytes = dst.ld * std::mem::size_of::<T>();
    if !row_bytes.is_multiple_of(16) {
        return Err(Error::Unsupported(format!("gather_rows: rows of {row_bytes} bytes are not 16-byte chunks")));
    }
    let gpu = dst.gpu().clone();
    let ld4 = (row_bytes / 16) as u32;
    let shift = nn_row_group_shift(ld4);
    let args = GatherRowsArgs {
        n_rows: dst.rows as u32,
        ld4,
        shift,
        idx: idx.arg(&gpu),
        src: Ptr::new(src.ptr()),
        dst: PtrMut::new(dst.ptr_mut()),
    };
    let shape = crate::ops::launch_shape::row_shape(&gpu, dst.rows as u64, 32 >> shift, 0);
    // SAFETY: idx holds dst.rows entries; the caller's indices are rows of src (a permutation
    // of 0..n here: `Permutation` checks bijectivity); src and dst hold rows x ld elements of
    // the same size, ld * size a multiple of 16 (checked), allocations 16-byte aligned.
    unsafe { gather_rows_kernel.launch(&gpu, shape, &args) }
}

/// Run `run` (an SpMM on the handle's reordered graph) on P X and write Pᵀ of its output to `y`.
pub(crate) fn spmm_permuted(
    g: &GraphHandle,
    r: &Reordering,
    x: FeaturesRef<'_>,
    y: &mut DeviceMatrix<f32>,
    run: impl FnOnce(FeaturesRef<'_>, &mut DeviceMatrix<f32>) -> Result<()>,
) -> Result<()> {
    let p = device_permutation(g, r)?;
    let ys = scratch::<f32>(g, ROLE_Y, y.rows, y.cols)?;
    let mut ys = ys.0.lock().expect("scratch poisoned");
    match x {
        FeaturesRef::F32(x) => {
            let xs = scratch::<f32>(g, ROLE_X, x.rows, x.cols)?;
            let mut xs = xs.0.lock().expect("scratch poisoned");
            gather_rows(&p.new_to_old, x, &mut xs)?;
            run(FeaturesRef::F32(&xs), &mut ys)?;
        }
        FeaturesRef::F16(x) => {
            let xs = scratch::<half::f16>(g, ROLE_X, x.rows, x.cols)?;
            let mut xs = xs.0.lock().expect("scratch poisoned");
            gather_rows(&p.new_to_old, x, &mut xs)?;
            run(FeaturesRef::F16(&xs), &mut ys)?;
        }
    }
    gather_rows(&p.old_to_new, &ys, y)
}

/// The host side of [`spmm_permuted`]: `run` on P X, Pᵀ of its result.
pub(crate) fn host_permuted(r: &Reordering, x: &Matrix, run: impl FnOnce(&Matrix) -> Result<Matrix>) -> Result<Matrix> {
    let xp = Matrix::from_vec(x.rows, x.cols, r.perm.apply_to_rows(&x.data, x.cols)?)?;
    let y = run(&xp)?;
    Matrix::from_vec(y.rows, y.cols, r.perm.undo_on_rows(&y.data, y.cols)?)
}
