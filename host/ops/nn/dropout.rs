//! Dropout with a counter-based mask: CPU and the launchers of `kernels-gpu/src/nn/dropout.rs`.
//!
//! Element `i` of draw `step` is kept iff `dropout_keep(seed, step, i, dropout_threshold(p))`
//! (`kernels-gpu/src/rng.rs`, the one file both crates include), so the CPU and the GPU draw
//! the same mask, bit for bit, for the same (seed, step). Kept values are scaled by 1 / (1 - p);
//! `mask` holds one byte per element (1 kept, 0 dropped). `p` must be in [0, 1)
//! (`Error::Unsupported` otherwise); p = 0 keeps everything and y = x.
//!
//! **Matrices.** The `_matrix` versions index elements by their position in the *padded*
//! buffer, `i = r * ld + c` with `ld = padded_ld(cols)` (cols rounded up to 8), over the whole
//! padded buffer; their mask is `rows * ld` bytes in that padded layout, padding entries
//! included. The CPU matrix versions take unpadded values (stride `cols`) but the same padded
//! mask, so a CPU and a GPU mask of one matrix are identical byte for byte and can be used
//! interchangeably. (The flat versions use `i` = the flat index: a flat and a matrix dropout of
//! the same data draw different masks unless cols is a multiple of 8.)
//!
//! **Keys.** Which mask a dropout draws is one [`DropKey`]: `p`, the seed and where the elements
//! sit in the whole graph's mask (an `offset`, and on a part of a partitioned graph the original
//! ids of its rows or edges, so that any partition draws the one-device masks exactly).
//!
//! The GPU versions read `step` from device memory (`step[0]`) when the kernel runs, so a
//! replayed CUDA graph draws a fresh mask when the step counter is advanced
//! (`ops::backend::cuda::step_increment`); the CPU versions take it as a value.

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_same, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{DropoutArgs, DropoutBackwardArgs, dropout_backward_f32, dropout_f32, dropout_from_f16};
use crate::gpu::launch::{Kernel, Ptr, PtrMut};
use crate::gpu::memory::padded_ld;
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::rng::{dropout_keep_keyed, dropout_seed_key, dropout_threshold};
use crate::util::Real;
use half::f16;
use std::sync::Arc;

/// Which mask a dropout draws, passed by value: probability `p`, `seed`, and where the elements
/// sit in the whole graph's mask. Element (r, c) of a matrix (ld = `padded_ld(cols)`) is keyed
/// `offset + row(r) ld + c` and element e of a vector of edges `offset + row(e)`, where
/// row(i) = `ids[i]` with ids (a part of a partitioned graph: its local rows' original node ids,
/// or its local edges' original indices) and i without (one device: no map, no cost).
pub struct DropKey<'a, I: ?Sized = [u32]> {
    pub p: f32,
    pub seed: u64,
    pub offset: u64,
    pub ids: Option<&'a I>,
}

impl<I: ?Sized> Clone for DropKey<'_, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I: ?Sized> Copy for DropKey<'_, I> {}

impl<'a, I: ?Sized> DropKey<'a, I> {
    /// Keyed from 0, no ids (one device's mask).
    pub fn new(p: f32, seed: u64) -> Self {
        DropKey { p, seed, offset: 0, ids: None }
    }
    /// This key with its elements' keys starting at `offset`.
    pub fn at(self, offset: u64) -> Self {
        DropKey { offset, ..self }
    }
    /// This key for rows `row0..` of a matrix of `cols` columns in the padded layout (element
    /// (r, c) keyed `(row0 + r) * padded_ld(cols) + c`, 64 bits): a slice of a larger matrix's
    /// rows draws its rows of the whole mask (the GPU tests check samples of rows of a matrix
    /// of more than 2^32 elements so, and the CPU tests the 64-bit index with a `row0` past
    /// 2^32 / ld).
    pub fn at_row(self, row0: usize, cols: usize) -> Self {
        self.at(row0 as u64 * padded_ld(cols) as u64)
    }
    /// This key with rows (or edges) keyed by `ids`.
    pub fn with_ids(self, ids: Option<&'a I>) -> Self {
        DropKey { ids, ..self }
    }
    /// The same key with its ids seen as another type (a backend's buffer as a slice).
    pub fn map_ids<J: ?Sized>(self, f: impl FnOnce(&'a I) -> &'a J) -> DropKey<'a, J> {
        DropKey { p: self.p, seed: self.seed, offset: self.offset, ids: self.ids.map(f) }
    }
}

impl<'a> DropKey<'a, Vec<u32>> {
    /// The CPU backend's key as the CPU references take it.
    pub fn host(self) -> DropKey<'a, [u32]> {
        self.map_ids(|v| v.as_slice())
    }
}

impl DropKey<'_, [u32]> {
    /// The whole graph's row (or edge) that local row `i` draws as.
    #[inline]
    pub fn row(&self, i: usize) -> u64 {
        self.ids.map_or(i as u64, |ids| ids[i] as u64)
    }
    /// `ids` has an entry for each of `n` rows (or edges): the check before any draw.
    pub fn check_ids(&self, n: usize, what: &str) -> Result<()> {
        match self.ids {
            Some(ids) if ids.len() < n => Err(Error::Shape(format!("{what}: {} original ids for {n} rows or edges", ids.len()))),
            _ => Ok(()),
        }
    }
}

impl DropKey<'_, DeviceVec<u32>> {
    /// The ids as a kernel argument (null: none), after the same check as the host's.
    pub fn ids_arg(&self, gpu: &Gpu, n: usize, what: &str) -> Result<Ptr<u32>> {
        match self.ids {
            None => Ok(Ptr::null()),
            Some(ids) if ids.len() < n => Err(Error::Shape(format!("{what}: {} original ids for {n} rows or edges", ids.len()))),
            Some(ids) => Ok(ids.arg(gpu)),
        }
    }
}

/// `p` in [0, 1) (`Error::Unsupported` otherwise): the check of every dropout op.
pub(crate) fn check_p(p: f32) -> Result<()> {
    if !(0.0..1.0).contains(&p) {
        return Err(Error::Unsupported(format!("dropout probability {p} is outside [0, 1)")));
    }
    Ok(())
}

/// 1 / (1 - p) in f32, as the kernels multiply by it.
pub(crate) fn scale_f32(p: f32) -> f32 {
    (1.0 / (1.0 - p as f64)) as f32
}

/// Whether element (r, c) of a `cols`-wide matrix is kept by draw `step`, keyed
/// `offset + row(r) padded_ld(cols) + c` as the matrix kernels key it: the CPU references' mask.
pub(crate) fn matrix_keep(cols: usize, key: DropKey<'_>, step: u32) -> impl Fn(usize, usize) -> bool + Sync + '_ {
    let (seed_key, thr, ld) = (dropout_seed_key(key.seed), dropout_threshold(key.p), padded_ld(cols) as u64);
    move |r, c| dropout_keep_keyed(seed_key, step, key.offset + key.row(r) * ld + c as u64, thr)
}

/// y = keep ? x / (1 - p) : 0 and mask = keep, for flat index i.
pub fn dropout_cpu<T: Real>(x: &[T], y: &mut [T], mask: &mut [u8], p: f32, seed: u64, step: u32) -> Result<()> {
    dropout_cpu_at(x, y, mask, DropKey::new(p, seed), step)
}

/// [`dropout_cpu`] with element i keyed as `key.offset + row(i)` (a vector of edges: a part's
/// edges draw the whole graph's mask).
pub fn dropout_cpu_at<T: Real>(x: &[T], y: &mut [T], mask: &mut [u8], key: DropKey<'_>, step: u32) -> Result<()> {
    check_p(key.p)?;
    if y.len() != x.len() || mask.len() != x.len() {
        return Err(Error::Shape(format!("dropout_cpu: x {}, y {}, mask {} elements", x.len(), y.len(), mask.len())));
    }
    key.check_ids(x.len(), "dropout_cpu")?;
    let (seed_key, thr) = (dropout_seed_key(key.seed), dropout_threshold(key.p));
    let keep_frac = T::one() - T::from_f64(key.p as f64);
    y.par_iter_mut().zip(mask.par_iter_mut()).enumerate().with_min_len(MIN_PAR_LEN).for_each(|(i, (yv, m))| {
        let keep = dropout_keep_keyed(seed_key, step, key.offset + key.row(i), thr);
        *m = keep as u8;
        *yv = if keep { x[i] / keep_frac } else { T::zero() };
    });
    Ok(())
}

/// Dropout of an unpadded rows x cols matrix with element (r, c) keyed as `key.offset + row(r) *
/// ld + c` (64 bits; ld = `padded_ld(cols)`): a part draws exactly its rows of the whole mask.
/// `mask` is `rows * ld` bytes in the padded layout (padding entries written too): the same
/// bytes `dropout_matrix_at` writes on the GPU.
pub fn dropout_matrix_cpu_at<T: Real>(
    x: &[T],
    rows: usize,
    cols: usize,
    y: &mut [T],
    mask: &mut [u8],
    key: DropKey<'_>,
    step: u32,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    let ld = padded_ld(cols);
    if x.len() != rows * cols || y.len() != rows * cols || mask.len() != rows * ld {
        return Err(Error::Shape(format!(
            "dropout_matrix_cpu_at: {rows} x {cols} (ld {ld}) with x {}, y {}, mask {} elements",
            x.len(),
            y.len(),
            mask.len()
        )));
    }
    if rows == 0 || cols == 0 {
        return Ok(()); // ld = 0 when cols = 0: no mask either
    }
    key.check_ids(rows, "dropout_matrix_cpu_at")?;
    let keep_at = matrix_keep(cols, key, step);
    let keep_frac = T::one() - T::from_f64(p as f64);
    y.par_chunks_mut(cols).zip(mask.par_chunks_mut(ld)).enumerate().with_min_len(64).for_each(|(r, (yr, mr))| {
        for (c, m) in mr.iter_mut().enumerate() {
            let keep = keep_at(r, c);
            *m = keep as u8;
            if c < cols {
                yr[c] = if keep { x[r * cols + c] / keep_frac } else { T::zero() };
            }
        }
    });
    Ok(())
}

/// dx = mask ? dy / (1 - p) : 0 (flat).
pub fn dropout_backward_cpu<T: Real>(dy: &[T], mask: &[u8], p: f32, dx: &mut [T]) -> Result<()> {
    check_p(p)?;
    if dx.len() != dy.len() || mask.len() != dy.len() {
        return Err(Error::Shape(format!("dropout_backward_cpu: dy {}, mask {}, dx {} elements", dy.len(), mask.len(), dx.len())));
    }
    let keep_frac = T::one() - T::from_f64(p as f64);
    dx.par_iter_mut().zip(dy.par_iter().zip(mask.par_iter())).with_min_len(MIN_PAR_LEN).for_each(|(d, (&g, &m))| {
        *d = if m != 0 { g / keep_frac } else { T::zero() };
    });
    Ok(())
}

/// dx = mask ? dy / (1 - p) : 0 for unpadded rows x cols `dy`, `dx` and the padded mask of
/// `dropout_matrix_cpu_at` / `dropout_matrix_at`.
pub fn dropout_backward_matrix_cpu<T: Real>(dy: &[T], mask: &[u8], rows: usize, cols: usize, p: f32, dx: &mut [T]) -> Result<()> {
    check_p(p)?;
    let ld = padded_ld(cols);
    if dy.len() != rows * cols || dx.len() != rows * cols || mask.len() != rows * ld {
        return Err(Error::Shape(format!(
            "dropout_backward_matrix_cpu: {rows} x {cols} (ld {ld}) with dy {}, mask {}, dx {} elements",
            dy.len(),
            mask.len(),
            dx.len()
        )));
    }
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let keep_frac = T::one() - T::from_f64(p as f64);
    dx.par_chunks_mut(cols).zip(dy.par_chunks(cols).zip(mask.par_chunks(ld))).with_min_len(64).for_each(|(d, (g, m))| {
        for c in 0..cols {
            d[c] = if m[c] != 0 { g[c] / keep_frac } else { T::zero() };
        }
    });
    Ok(())
}

/// Dropout of the first `n` elements of flat device buffers: y = keep ? x / (1 - p) : 0, mask =
/// keep, element i keyed as `key.offset + row(i)` (a vector of edges); `step[0]` is read when
/// the kernel runs.
pub fn dropout_at(
    gpu: &Gpu,
    x: &DeviceVec<f32>,
    y: &mut DeviceVec<f32>,
    mask: &mut DeviceVec<u8>,
    n: usize,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    check_p(key.p)?;
    if x.len() < n || y.len() < n || mask.len() < n || step.is_empty() {
        return Err(Error::Shape(format!(
            "dropout of {n} elements: x {}, y {}, mask {}, step {} elements",
            x.len(),
            y.len(),
            mask.len(),
            step.len()
        )));
    }
    let ids = (key.ids_arg(gpu, n, "dropout")?, 1);
    let (xp, yp, mp, sp) = (x.arg(gpu), y.arg_mut(gpu), mask.arg_mut(gpu), step.arg(gpu));
    // SAFETY: x, y, mask hold at least n elements, step at least one, ids (if any) n.
    unsafe { launch_dropout(gpu, dropout_f32, n, (xp, yp, mp), key, ids, sp) }
}

/// Dropout of a device matrix over its whole padded buffer with index `r * ld + c` (padding:
/// x = 0 gives y = 0); `mask` at least `rows * ld` bytes.
pub fn dropout_matrix(
    x: &DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    mask: &mut DeviceVec<u8>,
    p: f32,
    seed: u64,
    step: &DeviceVec<u32>,
) -> Result<()> {
    dropout_matrix_at(x, y, mask, DropKey::new(p, seed), step)
}

/// [`dropout_matrix`] with element (r, c) keyed as `key.offset + row(r) * ld + c`.
pub fn dropout_matrix_at(
    x: &DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    mask: &mut DeviceVec<u8>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    check_p(key.p)?;
    check_same(x, y, "dropout_matrix")?;
    let n = x.rows * x.ld;
    if mask.len() < n || step.is_empty() {
        return Err(Error::Shape(format!(
            "dropout_matrix of {} x {} (ld {}): mask {} bytes, step {} elements",
            x.rows,
            x.cols,
            x.ld,
            mask.len(),
            step.len()
        )));
    }
    let gpu = x.gpu().clone();
    let ids = (key.ids_arg(&gpu, x.rows, "dropout_matrix")?, x.ld as u32);
    let (xp, yp, mp, sp) = (x.arg(), y.arg_mut(), mask.arg_mut(&gpu), step.arg(&gpu));
    // SAFETY: x and y hold rows * ld = n floats, mask at least n bytes, step at least one u32,
    // ids (if any) one per row.
    unsafe { launch_dropout(&gpu, dropout_f32, n, (xp, yp, mp), key, ids, sp) }
}

/// The input dropout of a first layer whose products read the dropped copy: `y =
/// dropout(x)` keyed as [`dropout_matrix_at`] (the same y), but no mask stored (the node
/// features need no gradient, so nothing would read it), and x read from `half`, its f16 copy,
/// where given (half the bytes; y then holds x rounded to f16, dropped and scaled).
pub fn input_dropout_matrix(
    x: &DeviceMatrix<f32>,
    half: Option<&DeviceMatrix<f16>>,
    y: &mut DeviceMatrix<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    check_p(key.p)?;
    check_same(x, y, "input_dropout")?;
    if step.is_empty() {
        return Err(Error::Shape("input_dropout: no step counter".into()));
    }
    let gpu = x.gpu().clone();
    let n = x.rows * x.ld;
    let ids = (key.ids_arg(&gpu, x.rows, "input_dropout")?, x.ld as u32);
    let Some(h) = half else {
        // SAFETY: x and y hold rows * ld = n floats, step at least one u32, ids (if any) one
        // per row; a null mask is not written.
        return unsafe { launch_dropout(&gpu, dropout_f32, n, (x.arg(), y.arg_mut(), PtrMut::null()), key, ids, step.arg(&gpu)) };
    };
    if (h.rows, h.cols, h.ld) != (x.rows, x.cols, x.ld) || !Arc::ptr_eq(h.gpu(), &gpu) {
        return Err(Error::Shape(format!(
            "input_dropout: x's f16 copy is {} x {} (stride {}), x {} x {} (stride {})",
            h.rows, h.cols, h.ld, x.rows, x.cols, x.ld
        )));
    }
    // SAFETY: the copy holds rows * ld = n halves (n a multiple of 8: ld is padded to 8), read
    // through `x` by the f16 kernel; y n floats, step one u32; no mask.
    unsafe { launch_dropout(&gpu, dropout_from_f16, n, (h.arg().cast(), y.arg_mut(), PtrMut::null()), key, ids, step.arg(&gpu)) }
}

/// [`input_dropout_matrix`] of node features held only in f16 (`x16`, of y's shape): the
/// draw and the values of the f16 path there.
pub fn input_dropout_half(
    x16: &DeviceMatrix<f16>,
    y: &mut DeviceMatrix<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    check_p(key.p)?;
    if (x16.rows, x16.cols, x16.ld) != (y.rows, y.cols, y.ld) || !Arc::ptr_eq(x16.gpu(), y.gpu()) {
        return Err(Error::Shape(format!(
            "input_dropout: f16 x {} x {} (stride {}), y {} x {} (stride {})",
            x16.rows, x16.cols, x16.ld, y.rows, y.cols, y.ld
        )));
    }
    if step.is_empty() {
        return Err(Error::Shape("input_dropout: no step counter".into()));
    }
    let gpu = x16.gpu().clone();
    let n = x16.rows * x16.ld;
    let ids = (key.ids_arg(&gpu, x16.rows, "input_dropout")?, x16.ld as u32);
    // SAFETY: x16 holds rows * ld = n halves (n a multiple of 8: ld is padded to 8), y n
    // floats (same shape and stride, checked), step one u32; no mask.
    unsafe { launch_dropout(&gpu, dropout_from_f16, n, (x16.arg().cast(), y.arg_mut(), PtrMut::null()), key, ids, step.arg(&gpu)) }
}

/// `kernel` (`dropout_f32`, or `dropout_from_f16` with x's f16 copy behind `x`) over `n`
/// elements, four a thread: (x, y, mask), the key, and its ids with the row width they key
/// (`DropoutArgs::ids`, `ld`).
///
/// # Safety
/// `x` addresses `n` elements of the kernel's input type, `y` `n` floats, `mask` `n` bytes (or
/// is null: no mask written; `dropout_from_f16` writes none), `ids` one u32 per row of `ld`
/// elements (or is null) and `step` one u32, all on `gpu`.
unsafe fn launch_dropout<I: ?Sized>(
    gpu: &Gpu,
    kernel: Kernel<DropoutArgs>,
    n: usize,
    (x, y, mask): (Ptr<f32>, PtrMut<f32>, PtrMut<u8>),
    key: DropKey<'_, I>,
    (ids, ld): (Ptr<u32>, u32),
    step: Ptr<u32>,
) -> Result<()> {
    let p = key.p;
    let args = DropoutArgs {
        n: n as u64,
        x,
        y,
        mask,
        threshold: dropout_threshold(p),
        scale: scale_f32(p),
        seed_key: dropout_seed_key(key.seed),
        step,
        offset: key.offset,
        ids,
        ld: ld.max(1),
    };
    // SAFETY: sizes as the caller guarantees. The kernel covers the n / 4 groups grid-stride
    // (`dropout_f32` the n % 4 tail with the first threads; grid >= 1 if n > 0).
    unsafe { kernel.launch(gpu, elementwise_shape(gpu, (n as u64).div_ceil(4)), &args) }
}

/// dx = mask ? dy / (1 - p) : 0 over the first `n` elements of flat device buffers.
pub fn dropout_backward(gpu: &Gpu, dy: &DeviceVec<f32>, mask: &DeviceVec<u8>, n: usize, p: f32, dx: &mut DeviceVec<f32>) -> Result<()> {
    check_p(p)?;
    if dy.len() < n || mask.len() < n || dx.len() < n {
        return Err(Error::Shape(format!(
            "dropout_backward of {n} elements: dy {}, mask {}, dx {} elements",
            dy.len(),
            mask.len(),
            dx.len()
        )));
    }
    let (dyp, mp, dxp) = (dy.arg(gpu), mask.arg(gpu), dx.arg_mut(gpu));
    // SAFETY: dy, dx hold at least n floats, mask n bytes.
    unsafe { launch_dropout_backward(gpu, n, dyp, mp, p, dxp) }
}

/// dx = mask ? dy / (1 - p) : 0 over whole padded device matrices (the padded mask of
/// `dropout_matrix`).
pub fn dropout_backward_matrix(dy: &DeviceMatrix<f32>, mask: &DeviceVec<u8>, p: f32, dx: &mut DeviceMatrix<f32>) -> Result<()> {
    check_p(p)?;
    check_same(dy, dx, "dropout_backward_matrix")?;
    let n = dy.rows * dy.ld;
    if mask.len() < n {
        return Err(Error::Shape(format!(
            "dropout_backward_matrix of {} x {} (ld {}): mask {} bytes",
            dy.rows,
            dy.cols,
            dy.ld,
            mask.len()
        )));
    }
    let gpu = dy.gpu().clone();
    let (dyp, mp, dxp) = (dy.arg(), mask.arg(&gpu), dx.arg_mut());
    // SAFETY: dy and dx hold rows * ld = n floats, mask at least n bytes.
    unsafe { launch_dropout_backward(&gpu, n, dyp, mp, p, dxp) }
}

/// # Safety
/// `dy`, `dx` address `n` floats and `mask` `n` bytes on `gpu`.
unsafe fn launch_dropout_backward(gpu: &Gpu, n: usize, dy: Ptr<f32>, mask: Ptr<u8>, p: f32, dx: PtrMut<f32>) -> Result<()> {
    let args = DropoutBackwardArgs { n: n as u64, dy, mask, scale: scale_f32(p), dx };
    // SAFETY: sizes as the caller guarantees.
    unsafe { dropout_backward_f32.launch(gpu, elementwise_shape(gpu, (n as u64).div_ceil(4)), &args) }
}

// -- the op on each backend --

pub trait DropoutOp: Backend {
    /// Inverted dropout with probability `p`; the mask is drawn from (`seed`, step counter).
    fn dropout(&self, x: &Self::Mat, y: &mut Self::Mat, mask: &mut Self::Mask, p: f32, seed: u64) -> Result<()> {
        self.dropout_at(x, y, mask, DropKey::new(p, seed))
    }
    /// [`DropoutOp::dropout`] keyed at element `offset + row(r) * ld + c` (ld =
    /// `padded_ld(cols)`, [`DropKey`]): a part of a partitioned graph draws its rows of the whole
    /// graph's mask.
    fn dropout_at(&self, x: &Self::Mat, y: &mut Self::Mat, mask: &mut Self::Mask, key: DropKey<'_, Self::Ids>) -> Result<()>;
    fn dropout_backward(&self, dy: &Self::Mat, mask: &Self::Mask, p: f32, dx: &mut Self::Mat) -> Result<()>;
    /// Dropout over edge values (the nonzeros of sparse input features, attention weights).
    fn dropout_edges(&self, x: &Self::Edges, y: &mut Self::Edges, mask: &mut Self::Mask, p: f32, seed: u64) -> Result<()> {
        self.dropout_edges_at(x, y, mask, DropKey::new(p, seed))
    }
    /// [`DropoutOp::dropout_edges`] with edge e keyed as `offset + row(e)` (its original index
    /// on a part of a partitioned graph).
    fn dropout_edges_at(&self, x: &Self::Edges, y: &mut Self::Edges, mask: &mut Self::Mask, key: DropKey<'_, Self::Ids>) -> Result<()>;
    /// The backward of [`DropoutOp::dropout_edges`].
    fn dropout_edges_backward(&self, dy: &Self::Edges, mask: &Self::Mask, p: f32, dx: &mut Self::Edges) -> Result<()>;
}

impl<T: Real> DropoutOp for CpuBackend<T> {
    fn dropout_at(&self, x: &HostMat<T>, y: &mut HostMat<T>, mask: &mut Vec<u8>, key: DropKey<'_, Vec<u32>>) -> Result<()> {
        same_shape("dropout", y, x)?;
        dropout_matrix_cpu_at(&x.data, x.rows, x.cols, &mut y.data, mask, key.host(), self.step())
    }
    fn dropout_backward(&self, dy: &HostMat<T>, mask: &Vec<u8>, p: f32, dx: &mut HostMat<T>) -> Result<()> {
        same_shape("dropout_backward", dx, dy)?;
        dropout_backward_matrix_cpu(&dy.data, mask, dy.rows, dy.cols, p, &mut dx.data)
    }
    fn dropout_edges_at(&self, x: &Vec<T>, y: &mut Vec<T>, mask: &mut Vec<u8>, key: DropKey<'_, Vec<u32>>) -> Result<()> {
        dropout_cpu_at(x, y, mask, key.host(), self.step())
    }
    fn dropout_edges_backward(&self, dy: &Vec<T>, mask: &Vec<u8>, p: f32, dx: &mut Vec<T>) -> Result<()> {
        dropout_backward_cpu(dy, mask, p, dx)
    }
}

impl DropoutOp for CudaBackend {
    fn dropout_at(
        &self,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
        mask: &mut DeviceVec<u8>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        self.timed("dropout", || dropout_matrix_at(x, y, mask, key, &self.step_ptr()))
    }
    fn dropout_backward(&self, dy: &DeviceMatrix<f32>, mask: &DeviceVec<u8>, p: f32, dx: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("dropout backward", || dropout_backward_matrix(dy, mask, p, dx))
    }
    fn dropout_edges_at(
        &self,
        x: &DeviceVec<f32>,
        y: &mut DeviceVec<f32>,
        mask: &mut DeviceVec<u8>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        self.timed("dropout edges", || dropout_at(&self.gpu, x, y, mask, x.len(), key, &self.step_ptr()))
    }
    fn dropout_edges_backward(&self, dy: &DeviceVec<f32>, mask: &DeviceVec<u8>, p: f32, dx: &mut DeviceVec<f32>) -> Result<()> {
        self.timed("dropout edges backward", || dropout_backward(&self.gpu, dy, mask, dy.len(), p, dx))
    }
}
