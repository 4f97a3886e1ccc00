//! A backend's matrices as host rows, for the exchanges of the partitioned step (halo rows,
//! weight gradients): the CPU backend's are host memory already; the GPU's are staged through
//! the host (the GPU's reference path, `HaloPath::Host`; its device path is
//! [`crate::dist::device_exchange`]). Both copy into and
//! out of caller-kept buffers, so a step allocates nothing once the buffers have grown.

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::ops::nn::Ops;
use crate::util::Real;

pub trait HostRows: Ops {
    /// The element the host sees (the CPU backend's T; f32 on the GPU).
    type Elem: Real;
    /// `out` := rows `rows` of `m`, row-major with the returned stride (>= cols: the GPU's
    /// padded rows travel as they are).
    fn read_rows(&self, m: &Self::Mat, rows: std::ops::Range<usize>, out: &mut Vec<Self::Elem>) -> Result<usize>;
    /// Rows `first..` of `m` := `data` (whole rows with [`HostRows::read_rows`]'s stride).
    fn write_rows(&self, m: &mut Self::Mat, first: usize, data: &[Self::Elem]) -> Result<()>;
}

fn check_rows(what: &str, rows: &std::ops::Range<usize>, have: usize) -> Result<()> {
    if rows.start > rows.end || rows.end > have {
        return Err(Error::Shape(format!("{what}: rows {rows:?} of a matrix of {have} rows")));
    }
    Ok(())
}

impl<T: Real> HostRows for CpuBackend<T> {
    type Elem = T;
    fn read_rows(&self, m: &HostMat<T>, rows: std::ops::Range<usize>, out: &mut Vec<T>) -> Result<usize> {
        check_rows("read_rows", &rows, m.rows)?;
        out.clear();
        out.extend_from_slice(&m.data[rows.start * m.cols..rows.end * m.cols]);
        Ok(m.cols)
    }
    fn write_rows(&self, m: &mut HostMat<T>, first: usize, data: &[T]) -> Result<()> {
        let end = first * m.cols + data.len();
        if m.cols == 0 || !data.len().is_multiple_of(m.cols) || end > m.data.len() {
            return Err(Error::Shape(format!("write_rows: {} elements at row {first} of {} x {}", data.len(), m.rows, m.cols)));
        }
        m.data[first * m.cols..end].copy_from_slice(data);
        Ok(())
    }
}

impl HostRows for CudaBackend {
    type Elem = f32;
    fn read_rows(&self, m: &DeviceMatrix<f32>, rows: std::ops::Range<usize>, out: &mut Vec<f32>) -> Result<usize> {
        check_rows("read_rows", &rows, m.rows)?;
        out.resize((rows.end - rows.start) * m.ld, 0.0);
        if out.is_empty() {
            return Ok(m.ld);
        }
        let src = m.slice().slice(rows.start * m.ld..rows.end * m.ld);
        m.gpu().stream.memcpy_dtoh(&src, out.as_mut_slice()).map_err(|e| Error::cuda("halo rows to the host", e))?;
        // The copy above is ordered on the stream; the host reads `out` only after it is done.
        m.gpu().stream.synchronize().map_err(|e| Error::cuda("halo rows to the host", e))?;
        Ok(m.ld)
    }
    fn write_rows(&self, m: &mut DeviceMatrix<f32>, first: usize, data: &[f32]) -> Result<()> {
        let (ld, rows) = (m.ld, m.rows);
        if ld == 0 || !data.len().is_multiple_of(ld) || first * ld + data.len() > rows * ld {
            return Err(Error::Shape(format!("write_rows: {} elements at row {first} of {rows} rows of stride {ld}", data.len())));
        }
        if data.is_empty() {
            return Ok(());
        }
        let gpu = m.gpu().clone();
        let mut dst = m.slice_mut().slice_mut(first * ld..first * ld + data.len());
        gpu.stream.memcpy_htod(data, &mut dst).map_err(|e| Error::cuda("halo rows to the device", e))?;
        // memcpy_htod from pageable memory returns once `data` is staged: safe to reuse it.
        gpu.stream.synchronize().map_err(|e| Error::cuda("halo rows to the device", e))
    }
}
