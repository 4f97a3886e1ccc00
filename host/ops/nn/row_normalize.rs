//! Row L2 normalisation (AGNN's cosine; PyTorch's `F.normalize(h, dim=1)`) and its backward:
//! CPU and the launchers of `kernels-gpu/src/nn/row_normalize.rs`.

use rayon::prelude::*;

use half::f16;

use super::{check_gpu, check_same, row_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{RowNormalizeArgs, RowNormalizeBackwardArgs, row_normalize_backward_f32, row_normalize_f32};
use crate::gpu::launch::PtrMut;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::partition::nn_row_group_shift;
use crate::util::Real;

/// Norms below this are clamped (as F.normalize's eps).
pub const NORM_EPS: f64 = 1e-12;

/// inv_norm[r] = 1 / max(||h_r||_2, 1e-12); n_r = h_r * inv_norm[r].
pub fn row_normalize_cpu<T: Real>(h: &[T], rows: usize, cols: usize, n: &mut [T], inv_norm: &mut [T]) {
    assert_eq!(h.len(), rows * cols, "row_normalize_cpu: h is not {rows} x {cols}");
    assert_eq!(n.len(), rows * cols, "row_normalize_cpu: n is not {rows} x {cols}");
    assert_eq!(inv_norm.len(), rows, "row_normalize_cpu: inv_norm has {} values for {rows} rows", inv_norm.len());
    let eps = T::from_f64(NORM_EPS);
    if cols == 0 {
        inv_norm.fill(T::one() / eps);
        return;
    }
    n.par_chunks_mut(cols).zip(inv_norm.par_iter_mut()).zip(h.par_chunks(cols)).with_min_len(64).for_each(|((nr, inv), hr)| {
        let ss: T = hr.iter().map(|&v| v * v).sum();
        *inv = T::one() / ss.sqrt().max(eps);
        for (o, &v) in nr.iter_mut().zip(hr) {
            *o = v * *inv;
        }
    });
}

/// dh_r += (dn_r - n_r (n_r . dn_r)) * inv_norm[r] (accumulates into `dh`).
pub fn row_normalize_backward_cpu<T: Real>(n: &[T], inv_norm: &[T], dn: &[T], rows: usize, cols: usize, dh: &mut [T]) {
    for (name, len) in [("n", n.len()), ("dn", dn.len()), ("dh", dh.len())] {
        assert_eq!(len, rows * cols, "row_normalize_backward_cpu: {name} is not {rows} x {cols}");
    }
    assert_eq!(inv_norm.len(), rows, "row_normalize_backward_cpu: inv_norm has {} values for {rows} rows", inv_norm.len());
    if cols == 0 {
        return;
    }
    dh.par_chunks_mut(cols).zip(n.par_chunks(cols).zip(dn.par_chunks(cols))).zip(inv_norm.par_iter()).with_min_len(64).for_each(
        |((dhr, (nr, dnr)), &inv)| {
            let dot: T = nr.iter().zip(dnr).map(|(&a, &b)| a * b).sum();
            for ((d, &a), &b) in dhr.iter_mut().zip(nr).zip(dnr) {
                *d += (b - a * dot) * inv;
            }
        },
    );
}

/// Row normalisation on the device: `n` (same shape as `h`, padding written 0) and
/// `inv_norm` (at least rows values). A group of lanes per row (a warp for rows of 128+ floats).
pub fn row_normalize(h: &DeviceMatrix<f32>, n: &mut DeviceMatrix<f32>, inv_norm: &mut DeviceVec<f32>) -> Result<()> {
    row_normalize_with_half(h, n, None, inv_norm)
}

/// [`row_normalize`], also writing n in f16 into `n16` (shaped as `n`) when given.
pub fn row_normalize_with_half(
    h: &DeviceMatrix<f32>,
    n: &mut DeviceMatrix<f32>,
    n16: Option<&mut DeviceMatrix<f16>>,
    inv_norm: &mut DeviceVec<f32>,
) -> Result<()> {
    check_same(h, n, "row_normalize")?;
    if let Some(c) = &n16 {
        if (c.rows, c.cols, c.ld) != (n.rows, n.cols, n.ld) {
            return Err(Error::Shape(format!(
                "row_normalize: f16 copy {} x {} (stride {}) of n {} x {} (stride {})",
                c.rows, c.cols, c.ld, n.rows, n.cols, n.ld
            )));
        }
        check_gpu(n.gpu(), c.gpu(), "row_normalize")?;
    }
    if inv_norm.len() < h.rows {
        return Err(Error::Shape(format!("row_normalize: inv_norm has {} values for {} rows", inv_norm.len(), h.rows)));
    }
    let gpu = h.gpu().clone();
    let shift = nn_row_group_shift((h.ld / 4) as u32);
    let args = RowNormalizeArgs {
        rows: h.rows as u32,
        ld4: (h.ld / 4) as u32,
        shift,
        h: h.arg(),
        n: n.arg_mut(),
        n16: n16.map_or(PtrMut::null(), |c| c.arg_mut().cast()),
        inv_norm: inv_norm.arg_mut(&gpu),
    };
    // SAFETY: h and n hold rows x ld floats (n16, if any, rows x ld halves), inv_norm >= rows.
    unsafe { row_normalize_f32.launch(&gpu, row_shape(&gpu, h.rows as u64, 32 >> shift, 0), &args) }
}

/// dh += (dn - n (n . dn)) * inv_norm per row, on the device (n, dn, dh of one shape).
pub fn row_normalize_backward(
    n: &DeviceMatrix<f32>,
    inv_norm: &DeviceVec<f32>,
    dn: &DeviceMatrix<f32>,
    dh: &mut DeviceMatrix<f32>,
) -> Result<()> {
    check_same(n, dn, "row_normalize_backward")?;
    check_same(n, dh, "row_normalize_backward")?;
    if inv_norm.len() < n.rows {
        return Err(Error::Shape(format!("row_normalize_backward: inv_norm has {} values for {} rows", inv_norm.len(), n.rows)));
    }
    let gpu = n.gpu().clone();
    let shift = nn_row_group_shift((n.ld / 4) as u32);
    let args = RowNormalizeBackwardArgs {
        rows: n.rows as u32,
        ld4: (n.ld / 4) as u32,
        shift,
        n: n.arg(),
        inv_norm: inv_norm.arg(&gpu),
        dn: dn.arg(),
        dh: dh.arg_mut(),
    };
    // SAFETY: n, dn, dh hold rows x ld floats, inv_norm >= rows.
    unsafe { row_normalize_backward_f32.launch(&gpu, row_shape(&gpu, n.rows as u64, 32 >> shift, 0), &args) }
}

// -- the op on each backend --

pub trait RowNormalizeOp: Backend {
    /// `n = h / max(||h||, eps)` per row, keeping `1 / max(||h||, eps)` (`rows x 1`).
    fn row_normalize(&self, h: &Self::Mat, n: &mut Self::Mat, inv_norm: &mut Self::Mat) -> Result<()>;
    /// `dh += (dn - n (n . dn)) * inv_norm` per row.
    fn row_normalize_backward(&self, n: &Self::Mat, inv_norm: &Self::Mat, dn: &Self::Mat, dh: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> RowNormalizeOp for CpuBackend<T> {
    fn row_normalize(&self, h: &HostMat<T>, n: &mut HostMat<T>, inv_norm: &mut HostMat<T>) -> Result<()> {
        same_shape("row_normalize", n, h)?;
        row_normalize_cpu(&h.data, h.rows, h.cols, &mut n.data, &mut inv_norm.data);
        Ok(())
    }
    fn row_normalize_backward(&self, n: &HostMat<T>, inv_norm: &HostMat<T>, dn: &HostMat<T>, dh: &mut HostMat<T>) -> Result<()> {
        same_shape("row_normalize_backward", dh, dn)?;
        row_normalize_backward_cpu(&n.data, &inv_norm.data, &dn.data, n.rows, n.cols, &mut dh.data);
        Ok(())
    }
}

impl RowNormalizeOp for CudaBackend {
    fn row_normalize(&self, h: &DeviceMatrix<f32>, n: &mut DeviceMatrix<f32>, inv_norm: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("row normalize", || row_normalize(h, n, &mut inv_norm.buf))
    }
    fn row_normalize_backward(
        &self,
        n: &DeviceMatrix<f32>,
        inv_norm: &DeviceMatrix<f32>,
        dn: &DeviceMatrix<f32>,
        dh: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("row normalize backward", || row_normalize_backward(n, &inv_norm.buf, dn, dh))
    }
}
