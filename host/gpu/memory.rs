//! Typed device buffers: vectors and row-major matrices whose row stride is padded to a
//! multiple of 8 elements (the tensor-core kernels read K in steps of 8; padding is zero).
//! Allocation, copies, memsets and freeing (on drop) are all queued on the GPU's stream
//! ([`Gpu::stream`]), so they are ordered with the kernels and library calls that use the buffers.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::gpu::launch::{Ptr, PtrMut};
use crate::gpu::pinned::{STAGED_MIN_BYTES, chunk_elems};
use crate::gpu::{Gpu, ledger};
use crate::tensor::Matrix;

/// A device vector.
pub struct DeviceVec<T> {
    pub(crate) data: CudaSlice<T>,
    /// Where it was allocated, while the [`ledger`] records (given back on drop).
    site: Option<Counted>,
}

/// An allocation the [`ledger`] counts, handed back when its vector is dropped. Its own type
/// (not a `Drop` of [`DeviceVec`]) so that a vector over memory it does not own can be taken
/// apart without `unsafe` ([`DeviceMatrix::with_rows`]).
struct Counted {
    site: ledger::Site,
    bytes: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        ledger::released(self.site, self.bytes);
    }
}

impl<T> DeviceVec<T> {
    #[track_caller]
    fn new(data: CudaSlice<T>) -> Self {
        let bytes = data.len() * std::mem::size_of::<T>();
        let site = ledger::allocated(std::panic::Location::caller(), bytes).map(|site| Counted { site, bytes });
        DeviceVec { data, site }
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Clone + Default + Unpin> DeviceVec<T> {
    #[track_caller]
    pub fn upload(gpu: &Gpu, host: &[T]) -> Result<Self>
    where
        T: Send + Sync,
    {
        let bytes = std::mem::size_of_val(host);
        if bytes >= STAGED_MIN_BYTES {
            // SAFETY: every element is written by the staged copies before anything reads it.
            let mut data =
                unsafe { gpu.stream.alloc::<T>(host.len()) }.map_err(|e| Error::cuda(format!("alloc of {} elements", host.len()), e))?;
            gpu.clock().uploading(bytes, || {
                let (dst, _written) = data.device_ptr_mut(&gpu.stream);
                gpu.upload_staged(dst, host.len(), chunk_elems::<T>(), |first, slot| {
                    let src = &host[first..first + slot.len()];
                    slot.par_chunks_mut(1 << 16).zip(src.par_chunks(1 << 16)).for_each(|(d, s)| d.clone_from_slice(s));
                    Ok(())
                })
            })?;
            return Ok(DeviceVec::new(data));
        }
        // cuMemAlloc refuses 0 bytes in some drivers: keep one element for empty inputs.
        let data = if host.is_empty() {
            gpu.stream.alloc_zeros::<T>(1)
        } else {
            gpu.clock().uploading(std::mem::size_of_val(host), || gpu.stream.clone_htod(host))
        }
        .map_err(|e| Error::cuda(format!("upload of {} elements", host.len()), e))?;
        Ok(DeviceVec::new(data))
    }
    #[track_caller]
    pub fn zeros(gpu: &Gpu, len: usize) -> Result<Self> {
        gpu.refuse_in_capture(|| format!("allocating {len} elements of {}", std::any::type_name::<T>()))?;
        let data = gpu.stream.alloc_zeros::<T>(len.max(1)).map_err(|e| Error::cuda(format!("alloc of {len} elements"), e))?;
        Ok(DeviceVec::new(data))
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
    /// Runs `f` on elements `range` as a vector of their own, on the same memory (no copy), read
    /// only: the view's slice is never freed (this vector owns it).
    pub fn with_range_ref<R>(&self, gpu: &Gpu, range: std::ops::Range<usize>, f: impl FnOnce(&DeviceVec<T>) -> Result<R>) -> Result<R> {
        if range.start > range.end || range.end > self.data.len() {
            return Err(Error::Shape(format!("with_range_ref: elements {range:?} of a vector of {}", self.data.len())));
        }
        let at = self.ptr(gpu) + (range.start * std::mem::size_of::<T>()) as u64;
        // SAFETY: elements of this vector's allocation (checked above), which outlives the view
        // (borrowed for the call); the view's slice is leaked when the call ends, never freed.
        let data = unsafe { gpu.stream.upgrade_device_ptr::<T>(at, range.len()) };
        let view = BorrowedVec(Some(DeviceVec { data, site: None }));
        f(view.0.as_ref().expect("set above"))
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

/// Bytes of host staging [`DeviceMatrix::upload`] converts and pads at a time: large enough
/// for full copy bandwidth, small beside any matrix worth chunking.
pub const UPLOAD_STAGING_BYTES: usize = 64 << 20;

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

/// A matrix over memory another matrix owns ([`DeviceMatrix::with_rows`]): dropping it hands
/// the slice back to the driver's bookkeeping without freeing the memory (`CudaSlice::leak`).
struct Borrowed<T>(Option<DeviceMatrix<T>>);

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        if let Some(DeviceMatrix { buf: DeviceVec { data, site }, .. }) = self.0.take() {
            debug_assert!(site.is_none(), "a borrowed view is not counted by the ledger");
            data.leak();
        }
    }
}

/// A vector over memory another vector owns ([`DeviceVec::with_range_ref`]), handed back
/// without freeing it, as [`Borrowed`].
struct BorrowedVec<T>(Option<DeviceVec<T>>);

impl<T> Drop for BorrowedVec<T> {
    fn drop(&mut self) {
        if let Some(DeviceVec { data, .. }) = self.0.take() {
            data.leak();
        }
    }
}

/// Element types a device matrix can hold, with the f32 conversions the host side needs.
pub trait Element: DeviceRepr + ValidAsZeroBits + Clone + Copy + Default + Unpin + Send + Sync + 'static {
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
    /// A value no kernel produces by accident, written before launches to catch unwritten outputs.
    fn poison() -> Self;
}
impl Element for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn poison() -> Self {
        f32::NAN
    }
}
impl Element for half::f16 {
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    fn poison() -> Self {
        half::f16::NAN
    }
}

impl<T: Element> DeviceMatrix<T> {
    /// Upload (converting from f32) with zero padding columns, through a staging buffer of
    /// about [`UPLOAD_STAGING_BYTES`]: never a host copy of the whole padded matrix (10M x 500
    /// features are 20 GB; a whole padded copy doubled the host memory of a training run).
    #[track_caller]
    pub fn upload(gpu: &Arc<Gpu>, m: &Matrix) -> Result<Self> {
        let mut d = DeviceMatrix::zeros(gpu, m.rows, m.cols)?;
        let ld = d.ld;
        if ld == 0 {
            return Ok(d);
        }
        let convert = |dst: &mut [T], src: &[f32]| {
            dst.par_chunks_mut(ld).zip(src.par_chunks(m.cols)).for_each(|(dst, src)| {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = T::from_f32(s);
                }
            })
        };
        let bytes = m.rows * ld * std::mem::size_of::<T>();
        if bytes >= STAGED_MIN_BYTES && ld <= chunk_elems::<T>() {
            // Rows converted straight into the pinned slots, whole rows per chunk.
            let rows_per_chunk = chunk_elems::<T>() / ld;
            {
                let (dst, _written) = d.buf.data.device_ptr_mut(&gpu.stream);
                gpu.clock().uploading(bytes, || {
                    gpu.upload_staged(dst, m.rows * ld, rows_per_chunk * ld, |first, slot: &mut [T]| {
                        let (r0, n) = (first / ld, slot.len() / ld);
                        // Whole padded rows are copied: their padding columns must be zero.
                        slot.par_chunks_mut(ld).for_each(|row| row[m.cols..].fill(T::default()));
                        convert(slot, &m.data[r0 * m.cols..(r0 + n) * m.cols]);
                        Ok(())
                    })
                })?;
            }
            return Ok(d);
        }
        let chunk = (UPLOAD_STAGING_BYTES / (ld.max(1) * std::mem::size_of::<T>())).max(1);
        let mut host = vec![T::default(); chunk.min(m.rows) * ld];
        for r0 in (0..m.rows).step_by(chunk) {
            let n = chunk.min(m.rows - r0);
            convert(&mut host[..n * ld], &m.data[r0 * m.cols..(r0 + n) * m.cols]);
            d.upload_rows(r0, &host[..n * ld])?;
        }
        Ok(d)
    }

    #[track_caller]
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

    /// Write rows `row0 .. row0 + n` from `padded` (n whole padded rows, `n * ld` elements): a
    /// matrix filled a block of rows at a time, with no host copy of the whole matrix.
    pub fn upload_rows(&mut self, row0: usize, padded: &[T]) -> Result<()> {
        let range = self.row_range(row0, padded.len() / self.ld.max(1), padded.len(), "upload_rows")?;
        let mut view = self.buf.data.slice_mut(range);
        let gpu = &self.gpu;
        gpu.clock()
            .uploading(std::mem::size_of_val(padded), || gpu.stream.memcpy_htod(padded, &mut view))
            .map_err(|e| Error::cuda("upload_rows", e))
    }

    /// Rows `row0 .. row0 + n` straight into `dst` (`n * ld` elements: whole padded rows).
    pub fn download_rows_into(&self, row0: usize, n: usize, dst: &mut [T]) -> Result<()> {
        let range = self.row_range(row0, n, dst.len(), "download_rows_into")?;
        if range.is_empty() {
            return Ok(());
        }
        self.gpu.stream.memcpy_dtoh(&self.buf.data.slice(range), dst).map_err(|e| Error::cuda("download_rows_into", e))?;
        self.gpu.stream.synchronize().map_err(|e| Error::cuda("download_rows_into", e))
    }

    /// Rows `row0 .. row0 + n`, padded (`n * ld` elements).
    pub fn download_rows(&self, row0: usize, n: usize) -> Result<Vec<T>> {
        let range = self.row_range(row0, n, n * self.ld, "download_rows")?;
        let mut host = vec![T::default(); range.len()];
        self.gpu.stream.memcpy_dtoh(&self.buf.data.slice(range), &mut host[..]).map_err(|e| Error::cuda("download_rows", e))?;
        self.gpu.stream.synchronize().map_err(|e| Error::cuda("download_rows", e))?;
        Ok(host)
    }

    /// The element range of rows `row0 .. row0 + n`, checked against the matrix (`len`: the
    /// host side's length, which must be whole padded rows).
    fn row_range(&self, row0: usize, n: usize, len: usize, what: &str) -> Result<std::ops::Range<usize>> {
        if len != n * self.ld || row0.checked_add(n).is_none_or(|end| end > self.rows) {
            return Err(Error::Shape(format!(
                "{what}: rows {row0} + {n} ({len} elements) of a {} x {} matrix (ld {})",
                self.rows, self.cols, self.ld
            )));
        }
        Ok(row0 * self.ld..(row0 + n) * self.ld)
    }

    /// Runs `f` on rows `rows` as a matrix of their own, on the same memory (no copy): the
    /// view's buffer is never freed (this matrix owns it), and the borrow keeps this matrix
    /// untouched meanwhile.
    pub fn with_rows<R>(&mut self, rows: std::ops::Range<usize>, f: impl FnOnce(&mut DeviceMatrix<T>) -> Result<R>) -> Result<R> {
        let range = self.row_range(rows.start, rows.len(), rows.len() * self.ld, "with_rows")?;
        let at = self.ptr_mut() + (range.start * std::mem::size_of::<T>()) as u64;
        // SAFETY: rows of this matrix's allocation (checked above), borrowed mutably for the call.
        let mut view = unsafe { self.view_at(at, rows.len()) };
        f(view.0.as_mut().expect("set above"))
    }

    /// [`DeviceMatrix::with_rows`] for reading only (the borrow keeps this matrix unwritten
    /// meanwhile).
    pub fn with_rows_ref<R>(&self, rows: std::ops::Range<usize>, f: impl FnOnce(&DeviceMatrix<T>) -> Result<R>) -> Result<R> {
        let range = self.row_range(rows.start, rows.len(), rows.len() * self.ld, "with_rows_ref")?;
        let at = self.ptr() + (range.start * std::mem::size_of::<T>()) as u64;
        // SAFETY: rows of this matrix's allocation (checked above), borrowed for the call.
        let view = unsafe { self.view_at(at, rows.len()) };
        f(view.0.as_ref().expect("set above"))
    }

    /// A matrix of `rows` rows of this one's shape over the memory at `at`.
    ///
    /// # Safety
    /// `at` must be inside this matrix's allocation with `rows * ld` elements after it, and the
    /// view must not outlive this matrix (it is: the caller holds the borrow for the call). The
    /// view's slice is never freed: `Borrowed` leaks it when dropped, by return or by a panic.
    unsafe fn view_at(&self, at: u64, rows: usize) -> Borrowed<T> {
        // SAFETY: as the caller promises.
        let data = unsafe { self.gpu.stream.upgrade_device_ptr::<T>(at, rows * self.ld) };
        Borrowed(Some(DeviceMatrix {
            rows,
            cols: self.cols,
            ld: self.ld,
            // Not the ledger's: this matrix's allocation is already counted.
            buf: DeviceVec { data, site: None },
            gpu: self.gpu.clone(),
        }))
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
