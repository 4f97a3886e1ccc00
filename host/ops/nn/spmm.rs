//! The sparse product a layer runs, `Y = S X` or `Y = Sᵀ X`, with edge values passed per call
//! (GCN's fixed Â, attention weights that change every step). The CPU side is the one CPU SpMM
//! ([`crate::ops::spmm::cpu::spmm_rows`]); the GPU side picks our kernels by the backend's
//! precision and edge-value order (f16 copies cast on the device just before the product).

use crate::error::{Error, Result};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::backend::{Backend, Side};
use crate::ops::spmm::cpu::spmm_rows;
use crate::ops::spmm::spmm_device_values;
use crate::ops::values::cast_to_f16;
use crate::ops::{EdgeValues, FeaturesRef, Impl, Precision, ValueOrder};
use crate::util::Real;

pub trait SpmmOp: Backend {
    /// `y = S x` (or `Sᵀ x`) with `values` laid out for that side.
    fn spmm(&self, g: &Self::Graph, side: Side, values: &Self::Edges, x: &Self::Mat, y: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> SpmmOp for CpuBackend<T> {
    fn spmm(&self, g: &HostGraph<T>, side: Side, values: &Vec<T>, x: &HostMat<T>, y: &mut HostMat<T>) -> Result<()> {
        let s = self.side(g, side);
        if values.len() != s.nnz() || x.rows != s.n_cols() || y.rows != s.n_rows() || y.cols != x.cols {
            return Err(Error::Shape(format!(
                "spmm: S {}x{} with {} values for {} nonzeros, X {}x{}, Y {}x{}",
                s.n_rows(),
                s.n_cols(),
                values.len(),
                s.nnz(),
                x.rows,
                x.cols,
                y.rows,
                y.cols
            )));
        }
        spmm_rows(s.row_ptr(), s.col_idx(), values, &x.data, x.cols, &mut y.data);
        Ok(())
    }
}

impl SpmmOp for CudaBackend {
    fn spmm(&self, g: &GpuGraph, side: Side, values: &DeviceVec<f32>, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        let name = match side {
            Side::Forward => "spmm",
            Side::Transposed => "spmm (transposed)",
        };
        self.timed(name, || {
            let h = g.side(side)?;
            if self.spmm_impl == Impl::Tc8 && self.order == ValueOrder::Csr {
                return self.spmm_tc8_from_csr(g, side, values, x, y);
            }
            match (self.precision, self.order) {
                (Precision::F16, ValueOrder::MeBcrs) => {
                    let taken = self.half.lock().expect("f16 scratch poisoned").vecs.remove(&values.len());
                    let mut vh = match taken {
                        Some(v) => v,
                        None => DeviceVec::zeros(&self.gpu, values.len())?,
                    };
                    cast_to_f16(&self.gpu, values, &mut vh)?;
                    let r = self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::MeBcrsF16(&vh), FeaturesRef::F16(xh), y, self.spmm_impl));
                    self.half.lock().expect("f16 scratch poisoned").vecs.insert(values.len(), vh);
                    r
                }
                (Precision::F16, ValueOrder::Csr) => {
                    self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F16(xh), y, self.spmm_impl))
                }
                (_, ValueOrder::Csr) => spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F32(x), y, self.spmm_impl),
                (_, ValueOrder::MeBcrs) => spmm_device_values(&h, EdgeValues::MeBcrs(values), FeaturesRef::F32(x), y, self.spmm_impl),
            }
        })
    }
}
