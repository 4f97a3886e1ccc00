//! Global pooling over contiguous row segments: a batch of graphs stacks its graphs' node rows,
//! graph g owning rows `offsets[g]..offsets[g + 1]`, and its readout is one row per graph, the
//! sum, mean or max of its nodes' rows (PyG's `global_add_pool` / `global_mean_pool` /
//! `global_max_pool`). Backward: sum copies dout[g] to every row of g, mean divides it by g's
//! size, max routes it to the row that held the maximum (kept by the forward; the first row of
//! a tie). An empty segment pools to 0 and passes no gradient. CPU reference generic over
//! f32/f64 and the launchers of `kernels-gpu/src/nn/segment_pool.rs`.

use rayon::prelude::*;

use super::{check_gpu, check_matrix_64, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{
    SegmentPoolArgs, SegmentPoolBackwardArgs, segment_max_backward_f32, segment_max_f32, segment_mean_backward_f32, segment_mean_f32,
    segment_sum_backward_f32, segment_sum_f32,
};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// How a segment's rows become one row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    #[default]
    Sum,
    Mean,
    Max,
}

/// The argmax of an empty segment (no row): `kernels-gpu`'s `NO_ROW`.
pub const NO_ROW: u32 = u32::MAX;

/// `offsets` describes `rows` rows: at least one entry, starting at 0, non-decreasing, ending at
/// `rows`, fewer than 2^31 segments.
pub fn check_offsets(offsets: &[u32], rows: usize) -> Result<()> {
    let bad = |m: String| Err(Error::Shape(format!("segment offsets: {m}")));
    match (offsets.first(), offsets.last()) {
        (Some(0), Some(&last)) if last as usize == rows => {}
        (first, last) => return bad(format!("{} offsets from {first:?} to {last:?} for {rows} rows (want 0 .. {rows})", offsets.len())),
    }
    if let Some(g) = offsets.windows(2).position(|w| w[0] > w[1]) {
        return bad(format!("offset {} of segment {g} is past the next one, {}", offsets[g], offsets[g + 1]));
    }
    if offsets.len() > (u32::MAX / 2) as usize {
        return bad(format!("{} segments (at most 2^31)", offsets.len() - 1));
    }
    Ok(())
}

/// out[g][c] = pool over rows of segment g of x[r][c] (`x` rows x cols, `out` segments x cols,
/// both unpadded); `argmax` (segments x cols) receives the row of each maximum for `Max` (and
/// is not touched otherwise; it may then be empty).
pub fn segment_pool_cpu<T: Real>(kind: Pooling, x: &[T], cols: usize, offsets: &[u32], out: &mut [T], argmax: &mut [u32]) -> Result<()> {
    let rows = x.len().checked_div(cols).unwrap_or(offsets.last().copied().unwrap_or(0) as usize);
    check_offsets(offsets, rows)?;
    let graphs = offsets.len() - 1;
    if x.len() != rows * cols || out.len() != graphs * cols || (kind == Pooling::Max && argmax.len() != graphs * cols) {
        return Err(Error::Shape(format!(
            "segment_pool: x of {} values, out of {}, argmax of {} for {graphs} segments of {rows} rows x {cols}",
            x.len(),
            out.len(),
            argmax.len()
        )));
    }
    if cols == 0 {
        return Ok(());
    }
    let pool_one = |g: usize, o: &mut [T], a: &mut [u32]| {
        let (lo, hi) = (offsets[g] as usize, offsets[g + 1] as usize);
        match kind {
            Pooling::Sum | Pooling::Mean => {
                o.fill(T::zero());
                for r in lo..hi {
                    for (v, &y) in o.iter_mut().zip(&x[r * cols..(r + 1) * cols]) {
                        *v += y;
                    }
                }
                if kind == Pooling::Mean && hi > lo {
                    let inv = T::one() / T::from_f64((hi - lo) as f64);
                    o.iter_mut().for_each(|v| *v *= inv);
                }
            }
            Pooling::Max => {
                o.fill(T::zero());
                a.fill(NO_ROW);
                for r in lo..hi {
                    for c in 0..cols {
                        let y = x[r * cols + c];
                        if a[c] == NO_ROW || y > o[c] {
                            o[c] = y;
                            a[c] = r as u32;
                        }
                    }
                }
            }
        }
    };
    match kind {
        Pooling::Max => out.par_chunks_mut(cols).zip(argmax.par_chunks_mut(cols)).enumerate().for_each(|(g, (o, a))| pool_one(g, o, a)),
        _ => out.par_chunks_mut(cols).enumerate().for_each(|(g, o)| pool_one(g, o, &mut [])),
    }
    Ok(())
}

/// dx (rows x cols) from dout (segments x cols): overwritten, see the module note.
pub fn segment_pool_backward_cpu<T: Real>(
    kind: Pooling,
    dout: &[T],
    cols: usize,
    offsets: &[u32],
    argmax: &[u32],
    dx: &mut [T],
) -> Result<()> {
    let rows = dx.len().checked_div(cols).unwrap_or(offsets.last().copied().unwrap_or(0) as usize);
    check_offsets(offsets, rows)?;
    let graphs = offsets.len() - 1;
    if dx.len() != rows * cols || dout.len() != graphs * cols || (kind == Pooling::Max && argmax.len() != graphs * cols) {
        return Err(Error::Shape(format!(
            "segment_pool_backward: dx of {} values, dout of {}, argmax of {} for {graphs} segments of {rows} rows x {cols}",
            dx.len(),
            dout.len(),
            argmax.len()
        )));
    }
    if cols == 0 {
        return Ok(());
    }
    let mut segs = crate::util::split::split_lengths(dx, offsets.windows(2).map(|w| (w[1] - w[0]) as usize * cols));
    segs.par_iter_mut().enumerate().for_each(|(g, seg)| {
        let d = &dout[g * cols..(g + 1) * cols];
        let lo = offsets[g] as usize;
        let len = offsets[g + 1] as usize - lo;
        for (i, row) in seg.chunks_mut(cols).enumerate() {
            match kind {
                Pooling::Sum => row.copy_from_slice(d),
                Pooling::Mean => {
                    let inv = T::one() / T::from_f64(len as f64);
                    row.iter_mut().zip(d).for_each(|(v, &y)| *v = y * inv);
                }
                Pooling::Max => {
                    let a = &argmax[g * cols..(g + 1) * cols];
                    for c in 0..cols {
                        row[c] = if a[c] as usize == lo + i { d[c] } else { T::zero() };
                    }
                }
            }
        }
    });
    Ok(())
}

/// The segments of a batch on the device: the offsets (and the host's copy, checked) and the
/// max pooling's argmax.
pub struct DeviceSegments {
    pub offsets_host: Vec<u32>,
    pub offsets: DeviceVec<u32>,
    /// segments x ld of the pooled width (max pooling only; empty otherwise).
    pub argmax: DeviceVec<u32>,
}

impl DeviceSegments {
    pub fn new(gpu: &Gpu, offsets: &[u32], rows: usize, cols: usize, kind: Pooling) -> Result<Self> {
        check_offsets(offsets, rows)?;
        let graphs = offsets.len() - 1;
        let argmax_len = if kind == Pooling::Max { graphs * crate::gpu::memory::padded_ld(cols) } else { 0 };
        Ok(DeviceSegments {
            offsets_host: offsets.to_vec(),
            offsets: DeviceVec::upload(gpu, offsets)?,
            argmax: DeviceVec::zeros(gpu, argmax_len.max(1))?,
        })
    }
    pub fn graphs(&self) -> usize {
        self.offsets_host.len() - 1
    }
    fn rows(&self) -> usize {
        *self.offsets_host.last().expect("checked") as usize
    }
}

fn check_device(kind: Pooling, seg: &DeviceSegments, x: &DeviceMatrix<f32>, out: &DeviceMatrix<f32>, what: &str) -> Result<()> {
    check_matrix_64(x, what)?;
    check_matrix_64(out, what)?;
    check_gpu(x.gpu(), out.gpu(), what)?;
    let graphs = seg.graphs();
    if x.rows != seg.rows() || out.rows != graphs || x.cols != out.cols || (kind == Pooling::Max && seg.argmax.len() < graphs * out.ld) {
        return Err(Error::Shape(format!(
            "{what}: {} x {} node rows and {} x {} graph rows for {graphs} segments of {} rows{}",
            x.rows,
            x.cols,
            out.rows,
            out.cols,
            seg.rows(),
            if kind == Pooling::Max && seg.argmax.len() < graphs * out.ld { " (argmax too small: made for another pooling)" } else { "" }
        )));
    }
    Ok(())
}

/// out = pool(x) on the device (out's padded rows written whole).
pub fn segment_pool(kind: Pooling, x: &DeviceMatrix<f32>, seg: &mut DeviceSegments, out: &mut DeviceMatrix<f32>) -> Result<()> {
    check_device(kind, seg, x, out, "segment_pool")?;
    let gpu = x.gpu().clone();
    let items = (out.rows * out.ld) as u64;
    if items == 0 {
        return Ok(());
    }
    let args = SegmentPoolArgs {
        graphs: seg.graphs() as u32,
        cols: x.cols as u32,
        ld: x.ld as u32,
        offsets: seg.offsets.arg(&gpu),
        x: x.arg(),
        out: out.arg_mut(),
        argmax: seg.argmax.arg_mut(&gpu),
    };
    let kernel = match kind {
        Pooling::Sum => segment_sum_f32,
        Pooling::Mean => segment_mean_f32,
        Pooling::Max => segment_max_f32,
    };
    // SAFETY: the offsets are checked (0 .. x.rows, non-decreasing), x and out share the stride
    // and hold their rows; argmax holds graphs x ld for max (the only kind that writes it).
    unsafe { kernel.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

/// dx = the pooling's backward of dout on the device (dx's padded rows written whole).
pub fn segment_pool_backward(kind: Pooling, seg: &DeviceSegments, dout: &DeviceMatrix<f32>, dx: &mut DeviceMatrix<f32>) -> Result<()> {
    check_device(kind, seg, dx, dout, "segment_pool_backward")?;
    let gpu = dx.gpu().clone();
    let items = (dx.rows * dx.ld) as u64;
    if items == 0 {
        return Ok(());
    }
    let args = SegmentPoolBackwardArgs {
        rows: dx.rows as u32,
        graphs: seg.graphs() as u32,
        cols: dx.cols as u32,
        ld: dx.ld as u32,
        offsets: seg.offsets.arg(&gpu),
        dout: dout.arg(),
        argmax: seg.argmax.arg(&gpu),
        dx: dx.arg_mut(),
    };
    let kernel = match kind {
        Pooling::Sum => segment_sum_backward_f32,
        Pooling::Mean => segment_mean_backward_f32,
        Pooling::Max => segment_max_backward_f32,
    };
    // SAFETY: as the forward; every row of dx lies in a segment (offsets end at dx.rows).
    unsafe { kernel.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

// -- the op on each backend --

/// `new` may replace `old`: as many offsets, valid over the same rows.
fn same_segments(old: &[u32], new: &[u32]) -> Result<()> {
    if old.len() != new.len() {
        return Err(Error::Shape(format!("bind_segments: {} offsets into segments made with {}", new.len(), old.len())));
    }
    check_offsets(new, *old.last().expect("checked when made") as usize)
}

/// The segments of a batch on the CPU backend: the offsets and the max pooling's argmax.
pub struct HostSegments {
    pub offsets: Vec<u32>,
    pub argmax: Vec<u32>,
}

pub trait SegmentPoolOp: Backend {
    /// A batch's segments (checked) for pooling `rows x cols` node rows with `kind`.
    type Segments;
    fn segments(&self, offsets: &[u32], rows: usize, cols: usize, kind: Pooling) -> Result<Self::Segments>;
    /// Rewrites the offsets of `seg` (as many, over the same rows: a batch padded to the
    /// capacity it was made for), queued; checked as [`SegmentPoolOp::segments`] checks them.
    fn bind_segments(&self, seg: &mut Self::Segments, offsets: &[u32]) -> Result<()>;
    /// `out = pool(x)`, one row per segment.
    fn segment_pool(&self, kind: Pooling, x: &Self::Mat, seg: &mut Self::Segments, out: &mut Self::Mat) -> Result<()>;
    /// `dx` from `dout` after a `segment_pool` forward on the same segments.
    fn segment_pool_backward(&self, kind: Pooling, seg: &Self::Segments, dout: &Self::Mat, dx: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> SegmentPoolOp for CpuBackend<T> {
    type Segments = HostSegments;
    fn segments(&self, offsets: &[u32], rows: usize, cols: usize, kind: Pooling) -> Result<HostSegments> {
        check_offsets(offsets, rows)?;
        let argmax = if kind == Pooling::Max { vec![NO_ROW; (offsets.len() - 1) * cols] } else { Vec::new() };
        Ok(HostSegments { offsets: offsets.to_vec(), argmax })
    }
    fn bind_segments(&self, seg: &mut HostSegments, offsets: &[u32]) -> Result<()> {
        same_segments(&seg.offsets, offsets)?;
        seg.offsets.copy_from_slice(offsets);
        Ok(())
    }
    fn segment_pool(&self, kind: Pooling, x: &HostMat<T>, seg: &mut HostSegments, out: &mut HostMat<T>) -> Result<()> {
        if x.cols != out.cols || out.rows + 1 != seg.offsets.len() || x.rows != *seg.offsets.last().unwrap_or(&0) as usize {
            return Err(Error::Shape(format!(
                "segment_pool: {}x{} into {}x{} over {} offsets",
                x.rows,
                x.cols,
                out.rows,
                out.cols,
                seg.offsets.len()
            )));
        }
        segment_pool_cpu(kind, &x.data, x.cols, &seg.offsets, &mut out.data, &mut seg.argmax)
    }
    fn segment_pool_backward(&self, kind: Pooling, seg: &HostSegments, dout: &HostMat<T>, dx: &mut HostMat<T>) -> Result<()> {
        if dx.cols != dout.cols || dout.rows + 1 != seg.offsets.len() || dx.rows != *seg.offsets.last().unwrap_or(&0) as usize {
            return Err(Error::Shape(format!(
                "segment_pool_backward: {}x{} from {}x{} over {} offsets",
                dx.rows,
                dx.cols,
                dout.rows,
                dout.cols,
                seg.offsets.len()
            )));
        }
        segment_pool_backward_cpu(kind, &dout.data, dx.cols, &seg.offsets, &seg.argmax, &mut dx.data)
    }
}

impl SegmentPoolOp for CudaBackend {
    type Segments = DeviceSegments;
    fn segments(&self, offsets: &[u32], rows: usize, cols: usize, kind: Pooling) -> Result<DeviceSegments> {
        DeviceSegments::new(&self.gpu, offsets, rows, cols, kind)
    }
    fn bind_segments(&self, seg: &mut DeviceSegments, offsets: &[u32]) -> Result<()> {
        same_segments(&seg.offsets_host, offsets)?;
        // Through pinned memory, queued behind the work that read the previous offsets.
        self.gpu.copy_htod_pinned(seg.offsets.ptr(&self.gpu), offsets.len(), |h: &mut [u32]| h.copy_from_slice(offsets))?;
        seg.offsets_host.copy_from_slice(offsets);
        Ok(())
    }
    fn segment_pool(&self, kind: Pooling, x: &DeviceMatrix<f32>, seg: &mut DeviceSegments, out: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("segment pool", || segment_pool(kind, x, seg, out))
    }
    fn segment_pool_backward(
        &self,
        kind: Pooling,
        seg: &DeviceSegments,
        dout: &DeviceMatrix<f32>,
        dx: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("segment pool backward", || segment_pool_backward(kind, seg, dout, dx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_and_routes_gradients() {
        // Segments {0, 1}, {} and {2}; two columns.
        let x = [1.0f64, 5.0, 3.0, 2.0, -4.0, 7.0];
        let offsets = [0u32, 2, 2, 3];
        let mut out = [9.0f64; 6];
        let mut am = [0u32; 6];
        segment_pool_cpu(Pooling::Max, &x, 2, &offsets, &mut out, &mut am).unwrap();
        assert_eq!(out, [3.0, 5.0, 0.0, 0.0, -4.0, 7.0]);
        assert_eq!(am, [1, 0, NO_ROW, NO_ROW, 2, 2]);
        segment_pool_cpu(Pooling::Mean, &x, 2, &offsets, &mut out, &mut []).unwrap();
        assert_eq!(out, [2.0, 3.5, 0.0, 0.0, -4.0, 7.0]);
        let dout = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut dx = [9.0f64; 6];
        segment_pool_backward_cpu(Pooling::Max, &dout, 2, &offsets, &am, &mut dx).unwrap();
        assert_eq!(dx, [0.0, 2.0, 1.0, 0.0, 5.0, 6.0]);
        segment_pool_backward_cpu(Pooling::Mean, &dout, 2, &offsets, &[], &mut dx).unwrap();
        assert_eq!(dx, [0.5, 1.0, 0.5, 1.0, 5.0, 6.0]);
        assert!(segment_pool_cpu(Pooling::Sum, &x, 2, &[0, 3, 2, 3], &mut out, &mut []).is_err());
        assert!(segment_pool_cpu(Pooling::Sum, &x, 2, &[0, 2], &mut out, &mut []).is_err());
    }
}
