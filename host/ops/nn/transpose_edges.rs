//! `S`'s edge values laid out for `Sᵀ` (attention weights and their gradients for the backward's
//! products with the transpose). The CPU keeps the map from each edge of Sᵀ to its edge of S;
//! the GPU gathers through the handle's transpose map in the backend's value order.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::gpu::DeviceVec;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostGraph};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::values::transpose_values;
use crate::util::Real;

pub trait TransposeEdgesOp: Backend {
    /// `S`'s edge values laid out for `Sᵀ`.
    fn transpose_edges(&self, g: &Self::Graph, src: &Self::Edges, dst: &mut Self::Edges) -> Result<()>;
}

impl<T: Real> TransposeEdgesOp for CpuBackend<T> {
    fn transpose_edges(&self, g: &HostGraph<T>, src: &Vec<T>, dst: &mut Vec<T>) -> Result<()> {
        if src.len() != g.s.nnz() || dst.len() != g.t.nnz() {
            return Err(Error::Shape(format!("transpose_edges: {} -> {} values for {} edges", src.len(), dst.len(), g.s.nnz())));
        }
        dst.par_iter_mut().zip(&g.t_of).for_each(|(d, &e)| *d = src[e as usize]);
        Ok(())
    }
}

impl TransposeEdgesOp for CudaBackend {
    fn transpose_edges(&self, g: &GpuGraph, src: &DeviceVec<f32>, dst: &mut DeviceVec<f32>) -> Result<()> {
        self.timed("transpose edges", || transpose_values(&g.handle, self.plan.order, src, dst))
    }
}
