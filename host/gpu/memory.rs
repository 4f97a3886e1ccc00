//! Typed device buffers: vectors and row-major matrices whose row stride is padded to a
//! multiple of 8 elements (the tensor-core kernels read K in steps of 8; padding is zero).
//! Allocation, copies, memsets and freeing (on drop) are all queued on the GPU's stream
//! ([`Gpu::stream`]), so they are ordered with the kernels and library calls that use the buffers.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::gpu::launch::{Ptr, PtrMut};
use crate::tensor::Matrix;

/// A device vector.
pub struct DeviceVec<T> {
    pub(crate) data: CudaSlice<T>,
}

impl<T: DeviceRepr + ValidAsZeroBits + Clone + Default + Unpin> DeviceVec<T> {
    pub fn upload(gpu: &Gpu, host: &[T]) -> Result<Self> {
        // cuMemAlloc refuses 0 bytes in some drivers: keep one element for empty inputs.
        let data = if host.is_empty() {
            gpu.stream.alloc_zeros::<T>(1)
        } else {
            gpu.stream.clone_htod(host)
        }
        .map_err(|e| Error::cuda(format!("upload of {} elements", host.len()), e))?;
        Ok(DeviceVec { data })
    }
    pub fn zeros(gpu: &Gpu, len: usize) -> Result<Self> {
        let data = gpu.stream.alloc_zeros::<T>(len.max(1)).map_err(|e| Error::cuda(format!("alloc of {len} elements"), e))?;
        Ok(DeviceVec { data })
    }
    pub fn download(&self, gpu: &Gpu) -> Result<Vec<T>> {
        gpu.stream.clone_dtoh(&self.data).map_err(|e| Error::cuda("download", e))
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.len() == 0
    }
    pub fn slice(&self) -> &CudaSlice<T> {
        &self.data
    }
    pub fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.data
    }
    /// Raw device address (for kernel arguments and libraries such as cuSPARSE).
    pub fn ptr(&self, gpu: &Gpu) -> u64 {
        self.data.device_ptr(&gpu.stream).0
    }
    pub fn ptr_mut(&mut self, gpu: &Gpu) -> u64 {
        self.data.device_ptr_mut(&gpu.stream).0
    }
    /// The address as a kernel argument ([`crate::gpu::abi`]).
    pub fn arg(&self, gpu: &Gpu) -> Ptr<T> {
        Ptr::new(self.ptr(gpu))
    }
    pub fn arg_mut(&mut self, gpu: &Gpu) -> PtrMut<T> {
        PtrMut::new(self.ptr_mut(gpu))
    }
}

/// Round `k` up to the padded row stride.
pub fn padded_ld(k: usize) -> usize {
    k.div_ceil(8) * 8
}

/// A dense row-major matrix on the device: `rows x cols`, row stride `ld = padded_ld(cols)`.
pub struct DeviceMatrix<T> {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub(crate) buf: DeviceVec<T>,
    pub(crate) gpu: Arc<Gpu>,
}

/// Element types a device matrix can hold, with the f32 conversions the host side needs.
pub trait Element: DeviceRepr + ValidAsZeroBits + Clone + Copy + Default + Unpin + Send + Sync + 'static {
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
    /// A value no kernel produces by accident, written before launches to catch unwritten outputs.
    fn poison() -> Self;
}
impl Element for f32 {
    fn from_f32(v: f32) -> Self { v }
    fn to_f32(self) -> f32 { self }
    fn poison() -> Self { f32::NAN }
}
impl Element for half::f16 {
    fn from_f32(v: f32) -> Self { half::f16::from_f32(v) }
    fn to_f32(self) -> f32 { half::f16::to_f32(self) }
    fn poison() -> Self { half::f16::NAN }
}

impl<T: Element> DeviceMatrix<T> {
    /// Upload (converting from f32) with zero padding columns.
    pub fn upload(gpu: &Arc<Gpu>, m: &Matrix) -> Result<Self> {
        let ld = padded_ld(m.cols);
        let mut host = vec![T::default(); m.rows * ld];
        for r in 0..m.rows {
            for c in 0..m.cols {
                host[r * ld + c] = T::from_f32(m.data[r * m.cols + c]);
            }
        }
        Ok(DeviceMatrix { rows: m.rows, cols: m.cols, ld, buf: DeviceVec::upload(gpu, &host)?, gpu: gpu.clone() })
    }

    pub fn zeros(gpu: &Arc<Gpu>, rows: usize, cols: usize) -> Result<Self> {
        let ld = padded_ld(cols);
        Ok(DeviceMatrix { rows, cols, ld, buf: DeviceVec::zeros(gpu, rows * ld)?, gpu: gpu.clone() })
    }

    /// Fill every element (padding included) with `T::poison()`.
    pub fn poison(&mut self) -> Result<()> {
        let host = vec![T::poison(); self.buf.len()];
        self.gpu.stream.memcpy_htod(&host, &mut self.buf.data).map_err(|e| Error::cuda("poison", e))
    }

    /// Set to zero (for kernels that accumulate with atomics).
    pub fn zero(&mut self) -> Result<()> {
        self.gpu.stream.memset_zeros(&mut self.buf.data).map_err(|e| Error::cuda("memset", e))
    }

    pub fn download(&self) -> Result<Matrix> {
        let host = self.buf.download(&self.gpu)?;
        let mut out = Matrix::zeros(self.rows, self.cols);
        for r in 0..self.rows {
            for c in 0..self.cols {
                out.data[r * self.cols + c] = host[r * self.ld + c].to_f32();
            }
        }
        Ok(out)
    }

    /// The whole padded buffer, `rows * ld` elements row-major (padding columns included), for
    /// checks that padding stays zero.
    pub fn download_padded(&self) -> Result<Vec<T>> {
        let mut host = self.buf.download(&self.gpu)?;
        host.truncate(self.rows * self.ld);
        Ok(host)
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    pub fn slice(&self) -> &CudaSlice<T> {
        &self.buf.data
    }
    pub fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.buf.data
    }
    pub fn ptr(&self) -> u64 {
        self.buf.ptr(&self.gpu)
    }
    pub fn ptr_mut(&mut self) -> u64 {
        let gpu = self.gpu.clone();
        self.buf.ptr_mut(&gpu)
    }
    /// The address as a kernel argument ([`crate::gpu::abi`]).
    pub fn arg(&self) -> Ptr<T> {
        Ptr::new(self.ptr())
    }
    pub fn arg_mut(&mut self) -> PtrMut<T> {
        PtrMut::new(self.ptr_mut())
    }
}
