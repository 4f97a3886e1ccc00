//! The sampled product a layer runs, `out_e = a_row(e) · b_col(e)` on the edges of `S` (the
//! pattern only: attention scores, their gradients). The CPU side is the one CPU SDDMM
//! ([`crate::ops::sddmm::cpu::sddmm_rows`]); the GPU side our SDDMM kernels in the backend's
//! precision and edge-value order. The kernels scale each entry by S's value, so both sides
//! refuse a pattern whose values are not all 1 rather than disagree on it.

use crate::error::{Error, Result};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::sddmm::cpu::sddmm_rows;
use crate::ops::sddmm::{has_unit_values, sddmm_device};
use crate::ops::{FeaturesRef, Precision};
use crate::util::Real;

pub trait SddmmOp: Backend {
    /// `out_e = a_row(e) . b_col(e)` on the edges of `S` (the pattern only: `S`'s values must
    /// all be 1, else an error).
    fn sddmm(&self, g: &Self::Graph, a: &Self::Mat, b: &Self::Mat, out: &mut Self::Edges) -> Result<()>;
}

fn not_a_pattern() -> Error {
    Error::Unsupported("sddmm: the pattern's values are not all 1 (the layers' SDDMM samples the pattern only)".into())
}

impl<T: Real> SddmmOp for CpuBackend<T> {
    fn sddmm(&self, g: &HostGraph<T>, a: &HostMat<T>, b: &HostMat<T>, out: &mut Vec<T>) -> Result<()> {
        let s = &g.s;
        if a.rows != s.n_rows() || b.rows != s.n_cols() || a.cols != b.cols || out.len() != s.nnz() {
            return Err(Error::Shape(format!(
                "sddmm: S {}x{}, A {}x{}, B {}x{}, out {}",
                s.n_rows(),
                s.n_cols(),
                a.rows,
                a.cols,
                b.rows,
                b.cols,
                out.len()
            )));
        }
        if s.values().iter().any(|&v| v != 1.0) {
            return Err(not_a_pattern());
        }
        sddmm_rows(s.row_ptr(), s.col_idx(), None, &a.data, &b.data, a.cols, out);
        Ok(())
    }
}

impl SddmmOp for CudaBackend {
    fn sddmm(&self, g: &GpuGraph, a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, out: &mut DeviceVec<f32>) -> Result<()> {
        self.timed("sddmm", || {
            let h = &g.handle;
            if !has_unit_values(h)? {
                return Err(not_a_pattern());
            }
            if self.precision != Precision::F16 {
                return sddmm_device(h, FeaturesRef::F32(a), FeaturesRef::F32(b), out, self.plan.sddmm, self.plan.order);
            }
            self.with_half(a, 1, |ah| {
                if std::ptr::eq(a, b) {
                    return sddmm_device(h, FeaturesRef::F16(ah), FeaturesRef::F16(ah), out, self.plan.sddmm, self.plan.order);
                }
                self.with_half(b, 2, |bh| {
                    sddmm_device(h, FeaturesRef::F16(ah), FeaturesRef::F16(bh), out, self.plan.sddmm, self.plan.order)
                })
            })
        })
    }
}
