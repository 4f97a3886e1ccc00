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
use half::f16;

pub trait SpmmOp: Backend {
    /// What values that stay fixed across many products keep beside them (see [`SpmmOp::fix`]).
    type Fixed;

    /// `y = S x` (or `Sᵀ x`) with `values` laid out for that side.
    fn spmm(&self, g: &Self::Graph, side: Side, values: &Self::Edges, x: &Self::Mat, y: &mut Self::Mat) -> Result<()>;

    /// Prepares `values` for many products that leave them unchanged (GCN's Â): on an f16 GPU
    /// backend their f16 copy, cast once instead of before every product; nothing elsewhere.
    /// The copy is a snapshot: whoever rewrites `values` must drop it.
    fn fix(&self, values: &Self::Edges) -> Result<Self::Fixed>;

    /// [`SpmmOp::spmm`] with `values` as [`SpmmOp::fix`] prepared them (`fixed` made from these
    /// very values, unchanged since).
    fn spmm_fixed(
        &self,
        g: &Self::Graph,
        side: Side,
        values: &Self::Edges,
        fixed: &Self::Fixed,
        x: &Self::Mat,
        y: &mut Self::Mat,
    ) -> Result<()>;
}

impl<T: Real> SpmmOp for CpuBackend<T> {
    type Fixed = ();

    fn fix(&self, _: &Vec<T>) -> Result<()> {
        Ok(())
    }

    fn spmm_fixed(&self, g: &HostGraph<T>, side: Side, values: &Vec<T>, _: &(), x: &HostMat<T>, y: &mut HostMat<T>) -> Result<()> {
        self.spmm(g, side, values, x, y)
    }

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
    /// The f16 copy of ME-BCRS-ordered values in f16 (TC8 reads it); `None` where the product
    /// reads the f32 values themselves or scatters them from CSR order first.
    type Fixed = Option<DeviceVec<f16>>;

    fn spmm(&self, g: &GpuGraph, side: Side, values: &DeviceVec<f32>, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed(spmm_name(side), || {
            if self.half_kernel_order() {
                // Values that change every step: cast into a scratch copy per product.
                let taken = self.half.lock().expect("f16 scratch poisoned").vecs.remove(&values.len());
                let mut vh = match taken {
                    Some(v) => v,
                    None => DeviceVec::zeros(&self.gpu, values.len())?,
                };
                cast_to_f16(&self.gpu, values, &mut vh)?;
                let r = self.spmm_half_values(g, side, &vh, x, y);
                self.half.lock().expect("f16 scratch poisoned").vecs.insert(values.len(), vh);
                return r;
            }
            self.spmm_as_stored(g, side, values, x, y)
        })
    }

    fn fix(&self, values: &DeviceVec<f32>) -> Result<Option<DeviceVec<f16>>> {
        if !self.half_kernel_order() {
            return Ok(None);
        }
        let mut vh = DeviceVec::zeros(&self.gpu, values.len())?;
        cast_to_f16(&self.gpu, values, &mut vh)?;
        Ok(Some(vh))
    }

    fn spmm_fixed(
        &self,
        g: &GpuGraph,
        side: Side,
        values: &DeviceVec<f32>,
        fixed: &Option<DeviceVec<f16>>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        match fixed {
            Some(vh) if self.half_kernel_order() => {
                if vh.len() != values.len() {
                    return Err(Error::Shape(format!("spmm_fixed: {} fixed f16 values for {} values", vh.len(), values.len())));
                }
                self.timed(spmm_name(side), || self.spmm_half_values(g, side, vh, x, y))
            }
            _ => self.spmm(g, side, values, x, y),
        }
    }
}

fn spmm_name(side: Side) -> &'static str {
    match side {
        Side::Forward => "spmm",
        Side::Transposed => "spmm (transposed)",
    }
}

impl CudaBackend {
    /// f16 products on values in the kernel's (ME-BCRS) order: the values are cast to f16.
    fn half_kernel_order(&self) -> bool {
        self.precision == Precision::F16 && self.order == ValueOrder::MeBcrs
    }

    /// f16 SpMM with f16 values in ME-BCRS order (x cast to f16 on the way).
    fn spmm_half_values(
        &self,
        g: &GpuGraph,
        side: Side,
        vh: &DeviceVec<f16>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        let h = g.side(side)?;
        self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::MeBcrsF16(vh), FeaturesRef::F16(xh), y, self.spmm_impl))
    }

    /// Every product other than f16 on ME-BCRS values: values read as they are (scattered from
    /// CSR order into TC8's slots first under `EdgeLayout::Csr`).
    fn spmm_as_stored(
        &self,
        g: &GpuGraph,
        side: Side,
        values: &DeviceVec<f32>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        let h = g.side(side)?;
        if self.spmm_impl == Impl::Tc8 && self.order == ValueOrder::Csr {
            return self.spmm_tc8_from_csr(g, side, values, x, y);
        }
        match (self.precision, self.order) {
            (Precision::F16, ValueOrder::Csr) => {
                self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F16(xh), y, self.spmm_impl))
            }
            (_, ValueOrder::Csr) => spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F32(x), y, self.spmm_impl),
            (_, ValueOrder::MeBcrs) => spmm_device_values(&h, EdgeValues::MeBcrs(values), FeaturesRef::F32(x), y, self.spmm_impl),
        }
    }
}
