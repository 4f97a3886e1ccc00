//! Operations, one entry per op; each dispatches to a CPU implementation (rayon, also the
//! reference) or a CUDA kernel, chosen by [`Impl`].

pub mod handle;
pub mod nn;
pub mod sddmm;
pub mod spmm;

pub use handle::GraphHandle;

use crate::gpu::DeviceMatrix;

/// Which implementation runs an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, clap::ValueEnum)]
pub enum Impl {
    /// Chosen per graph by a cost model (GPU if present, CPU otherwise).
    Auto,
    /// Rayon on the host.
    Cpu,
    /// CUDA cores on CSR: a warp per row.
    Csr,
    /// CUDA cores, hybrid-parallel (HP-SpMM / HP-SDDMM): nnz-balanced warps over row-sorted COO.
    Hp,
    /// cuSPARSE (the in-process baseline).
    Cusparse,
    /// TC-GNN 16x1 tiles (SGT) on tensor cores.
    Tc16,
    /// FlashSparse 8x1 vectors (ME-BCRS, swap-and-transpose) on tensor cores.
    Tc8,
}

/// Arithmetic of an op: f32 on CUDA cores, or the tensor cores' tf32 / f16 (f32 accumulation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, clap::ValueEnum)]
pub enum Precision {
    F32,
    Tf32,
    F16,
}

impl Precision {
    /// Relative error a correct kernel stays under (DESIGN §5).
    pub fn tolerance(self) -> f64 {
        match self {
            Precision::F32 => 1e-5,
            Precision::Tf32 => 5e-3,
            Precision::F16 => 1e-2,
        }
    }
}

/// Dense features on the device in the storage type a precision reads: f32 for f32 and tf32
/// (tf32 rounds in registers), f16 for f16.
pub enum DeviceFeatures {
    F32(DeviceMatrix<f32>),
    F16(DeviceMatrix<half::f16>),
}

impl DeviceFeatures {
    pub fn upload(gpu: &std::sync::Arc<crate::gpu::Gpu>, m: &crate::tensor::Matrix, prec: Precision) -> crate::Result<Self> {
        Ok(match prec {
            Precision::F16 => DeviceFeatures::F16(DeviceMatrix::upload(gpu, m)?),
            Precision::F32 | Precision::Tf32 => DeviceFeatures::F32(DeviceMatrix::upload(gpu, m)?),
        })
    }
    pub fn rows(&self) -> usize {
        match self {
            DeviceFeatures::F32(m) => m.rows,
            DeviceFeatures::F16(m) => m.rows,
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            DeviceFeatures::F32(m) => m.cols,
            DeviceFeatures::F16(m) => m.cols,
        }
    }
}
