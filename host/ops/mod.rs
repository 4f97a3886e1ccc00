//! Operations, one entry per op; each dispatches to a CPU implementation (rayon, also the
//! reference) or a CUDA kernel, chosen by [`Impl`].

pub mod backend;
pub mod handle;
pub mod launch_shape;
pub mod nn;
pub mod permute;
pub mod sddmm;
pub mod spmm;
pub mod values;

pub use handle::GraphHandle;

use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};

/// Which implementation runs an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, clap::ValueEnum)]
pub enum Impl {
    /// Chosen per graph by a cost model (GPU if present, CPU otherwise).
    Auto,
    /// Rayon on the host.
    Cpu,
    /// CUDA cores on CSR: a group of lanes a row sized to the feature width (f32 or f16
    /// features, f32 arithmetic).
    Csr,
    /// CUDA cores, hybrid-parallel (HP-SpMM / HP-SDDMM): nnz-balanced warps over row-sorted COO.
    Hp,
    /// cuSPARSE (the in-process baseline).
    Cusparse,
    /// TC-GNN 16x1 tiles (SGT) on tensor cores.
    Tc16,
    /// FlashSparse 8x1 vectors (ME-BCRS, swap-and-transpose) on tensor cores.
    Tc8,
    /// FTC-GNN split on ME-BCRS: 8x1 vectors with >= t nonzeros on tensor cores (TC8), the rest
    /// on CUDA cores, t from a cost model (`spmm::hybrid`). SpMM only.
    Hybrid,
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

/// Features as the device ops read them: a borrowed matrix in the storage type the precision
/// reads (so callers holding their own `DeviceMatrix`, such as the training layers, pass it
/// without moving it into a [`DeviceFeatures`]).
#[derive(Clone, Copy)]
pub enum FeaturesRef<'a> {
    F32(&'a DeviceMatrix<f32>),
    F16(&'a DeviceMatrix<half::f16>),
}

impl<'a> From<&'a DeviceMatrix<f32>> for FeaturesRef<'a> {
    fn from(x: &'a DeviceMatrix<f32>) -> Self {
        FeaturesRef::F32(x)
    }
}

impl<'a> From<&'a DeviceMatrix<half::f16>> for FeaturesRef<'a> {
    fn from(x: &'a DeviceMatrix<half::f16>) -> Self {
        FeaturesRef::F16(x)
    }
}

impl<'a> From<&'a DeviceFeatures> for FeaturesRef<'a> {
    fn from(x: &'a DeviceFeatures) -> Self {
        match x {
            DeviceFeatures::F32(m) => FeaturesRef::F32(m),
            DeviceFeatures::F16(m) => FeaturesRef::F16(m),
        }
    }
}

impl FeaturesRef<'_> {
    pub fn rows(&self) -> usize {
        match self {
            FeaturesRef::F32(m) => m.rows,
            FeaturesRef::F16(m) => m.rows,
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            FeaturesRef::F32(m) => m.cols,
            FeaturesRef::F16(m) => m.cols,
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            FeaturesRef::F32(_) => "f32",
            FeaturesRef::F16(_) => "f16",
        }
    }
}

/// Where a product writes Y: f32, or f16 for a next layer that reads f16 (TC8 only).
pub enum OutputMut<'a> {
    F32(&'a mut DeviceMatrix<f32>),
    F16(&'a mut DeviceMatrix<half::f16>),
}

impl<'a> From<&'a mut DeviceMatrix<f32>> for OutputMut<'a> {
    fn from(y: &'a mut DeviceMatrix<f32>) -> Self {
        OutputMut::F32(y)
    }
}

impl<'a> From<&'a mut DeviceMatrix<half::f16>> for OutputMut<'a> {
    fn from(y: &'a mut DeviceMatrix<half::f16>) -> Self {
        OutputMut::F16(y)
    }
}

impl OutputMut<'_> {
    pub fn rows(&self) -> usize {
        match self {
            OutputMut::F32(m) => m.rows,
            OutputMut::F16(m) => m.rows,
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            OutputMut::F32(m) => m.cols,
            OutputMut::F16(m) => m.cols,
        }
    }
    pub fn ld(&self) -> usize {
        match self {
            OutputMut::F32(m) => m.ld,
            OutputMut::F16(m) => m.ld,
        }
    }
}

impl DeviceFeatures {
    pub fn view(&self) -> FeaturesRef<'_> {
        self.into()
    }
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
    /// Storage type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            DeviceFeatures::F32(_) => "f32",
            DeviceFeatures::F16(_) => "f16",
        }
    }
}

/// The order of a graph's edge values on the device: what SDDMM writes, what SpMM with
/// per-call values reads ([`spmm::value_order`] says which implementation reads which).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueOrder {
    /// One value per CSR nonzero, in CSR order (`nnz` values).
    Csr,
    /// The ME-BCRS (k = 8) value layout TC8 SpMM reads (`8 * n_vectors` values,
    /// [`GraphHandle::value_len`]); slots that hold no edge (block padding) must hold 0.
    MeBcrs,
}

/// Edge values for one call, in the order an implementation reads them: the same pattern as the
/// graph handle, different values (GCN weights, attention scores, gradients). Buffers hold
/// exactly [`GraphHandle::value_len`] values of their order.
#[derive(Clone, Copy)]
pub enum EdgeValues<'a> {
    /// f32, CSR order: Csr, Hp, Cusparse.
    Csr(&'a DeviceVec<f32>),
    /// f32, ME-BCRS order: Tc8 with f32 features (tf32).
    MeBcrs(&'a DeviceVec<f32>),
    /// f16, ME-BCRS order: Tc8 with f16 features.
    MeBcrsF16(&'a DeviceVec<half::f16>),
}

impl EdgeValues<'_> {
    pub fn order(&self) -> ValueOrder {
        match self {
            EdgeValues::Csr(_) => ValueOrder::Csr,
            EdgeValues::MeBcrs(_) | EdgeValues::MeBcrsF16(_) => ValueOrder::MeBcrs,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            EdgeValues::Csr(v) | EdgeValues::MeBcrs(v) => v.len(),
            EdgeValues::MeBcrsF16(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Storage type of the values, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            EdgeValues::Csr(_) | EdgeValues::MeBcrs(_) => "f32",
            EdgeValues::MeBcrsF16(_) => "f16",
        }
    }
    /// Device address of the values.
    pub(crate) fn ptr(&self, gpu: &Gpu) -> u64 {
        match self {
            EdgeValues::Csr(v) | EdgeValues::MeBcrs(v) => v.ptr(gpu),
            EdgeValues::MeBcrsF16(v) => v.ptr(gpu),
        }
    }
}

impl std::fmt::Debug for EdgeValues<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} order, {} {} values", self.order(), self.len(), self.type_name())
    }
}
