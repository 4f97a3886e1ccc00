//! Input dropout fused with the first feature transform: `y = dropout(x) w` and its weight
//! gradient `dw = dropout(x)ᵀ dy`, the mask regenerated in both from the counter RNG (the draw
//! of [`super::dropout`]: element (r, c) is keyed `offset + r * padded_ld(cols) + c`), never
//! stored. CPU references (generic over f32 / f64) and the launchers of
//! `kernels-gpu/src/nn/dropout_gemm.rs`.
//!
//! Why: the unfused first layer writes a dropped copy of the node features (and a byte mask)
//! and reads it back in the product and again in the weight gradient; on a 500-wide input that
//! was a quarter of a GCN step. Fused, x is read once per product and nothing of its size is
//! written; the first layer needs no dX (the features are not trained), so these two products
//! are all it uses.
//!
//! The same kernels with p = 0 are the backend's narrow GEMMs ([`skinny_gemm`]: outputs of at
//! most 32 columns, where cuBLAS takes a 128-row tile per 8 columns).
//!
//! The GPU products run on tensor cores: tf32 for the tf32 and f16 precisions (as cuBLAS's
//! `X W` there), 3xTF32 for f32 (near f32 accuracy). The weight gradient reduces over all rows
//! in splits written to a scratch buffer and added in a fixed order: deterministic. First
//! products of 33-64 columns in f16 precision (GAT's 8 heads of 8) take the wide kernels
//! ([`dropout_gemm_wide`], [`dropout_gemm_dw_wide`]) on x's f16 copy: the forward in f16 on
//! the tensor cores, leaving the mask as bits for the weight gradient (tf32).

use rayon::prelude::*;

use super::dropout::{DropKey, check_p, dropout_matrix_cpu_at, input_dropout_matrix, scale_f32};
use super::{ROW_BLOCK, check_gpu, check_matrix_64};
use crate::error::{Error, Result};
use crate::gpu::abi::dropout_gemm::*;
use crate::gpu::cublas::GemmMath;
use crate::gpu::launch::{Kernel, Ptr, PtrMut, Shape};
use crate::gpu::memory::padded_ld;
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::ops::values::cast_matrix_to_f16;
use crate::ops::{FeaturesRef, Precision};
use crate::shared::rng::{dropout_keep_keyed, dropout_seed_key, dropout_threshold};
use crate::util::Real;
use half::f16;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Blocks per SM the weight gradient's splits aim for (each holds 18 KB of shared memory).
const DW_BLOCKS_PER_SM: usize = 8;
/// The most shared memory the streaming forward stages w's fragments in (two blocks an SM).
const STREAM_W_SMEM_MAX: usize = 96 * 1024;

/// Bytes of w's fragments the streaming forward stages for x `ldx` columns wide (f16 x when
/// `half`) and an output `ld` wide, or None where the streaming kernels do not apply (outputs
/// past 32 columns, or w too large to stage): those products run on the tiled kernels (f32 x
/// only).
fn stream_smem(ldx: usize, ld: usize, half: bool) -> Option<usize> {
    let step = DG_STREAM_K_STEP as usize * if half { 2 } else { 1 };
    let bytes = ldx.div_ceil(step) * step * column_tiles(ld).0 * 8 * 4;
    (ld <= 32 && bytes <= STREAM_W_SMEM_MAX).then_some(bytes)
}

/// The most shared memory the wide f16 forward stages w's fragments in (two blocks an SM).
const WIDE_W_SMEM_MAX: usize = 112 * 1024;

/// Bytes of w's f16 fragments the wide forward stages for x `ldx` columns wide and an output
/// `ld` wide, or None outside its shapes (outputs of 33-64 columns, x up to 896 columns).
fn wide_smem(ldx: usize, ld: usize) -> Option<usize> {
    let step = DG_WIDE_K_STEP as usize;
    // A fragment of 32 lanes x 8 bytes per (32-column chunk, k-step of 16, n8 tile).
    let bytes = ldx.div_ceil(step) * step / 32 * 2 * 8 * 32 * 8;
    (32 < ld && ld <= 64 && bytes <= WIDE_W_SMEM_MAX).then_some(bytes)
}

/// Whether [`dropout_gemm_wide`] takes `rows x cols` f16 features for an output `out_cols` wide.
pub fn wide_fits(cols: usize, out_cols: usize) -> bool {
    wide_smem(padded_ld(cols), padded_ld(out_cols)).is_some()
}

/// Words of the wide products' keep bits for `rows x cols` features: where
/// [`dropout_gemm_wide`] leaves the mask for [`dropout_gemm_dw_wide`] (a bit an element).
pub fn keep_bits_len(rows: usize, cols: usize) -> usize {
    rows * keep_words_per_row(padded_ld(cols) as u32) as usize
}

/// y = dropout(x) w for an output of 33-64 columns, read from x's f16 copy `x16`, on the tensor
/// cores in f16 (w rounded to f16: the same significand as tf32; f32 sums), the mask drawn as
/// [`dropout_gemm`]'s. Where `keep_bits` is given (at least [`keep_bits_len`] words) the mask
/// is also left there, a bit an element, for [`dropout_gemm_dw_wide`] to read instead of
/// drawing it again.
pub fn dropout_gemm_wide(
    x16: &DeviceMatrix<f16>,
    w: &DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    keep_bits: Option<&mut DeviceVec<u32>>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    if w.rows != x16.cols || y.rows != x16.rows || y.cols != w.cols {
        return Err(Error::Shape(format!(
            "dropout_gemm_wide: x {} x {}, w {} x {}, y {} x {}",
            x16.rows, x16.cols, w.rows, w.cols, y.rows, y.cols
        )));
    }
    check_matrix_64(x16, "dropout_gemm_wide x")?;
    for (m, name) in [(w, "dropout_gemm_wide w"), (&*y, "dropout_gemm_wide y")] {
        check_matrix_64(m, name)?;
    }
    let gpu = x16.gpu().clone();
    check_gpu(&gpu, w.gpu(), "dropout_gemm_wide")?;
    check_gpu(&gpu, y.gpu(), "dropout_gemm_wide")?;
    if let Some(b) = &keep_bits {
        check_keep_bits(b.len(), x16, "dropout_gemm_wide")?;
    }
    if step.is_empty() {
        return Err(Error::Shape("dropout_gemm_wide: empty step counter".into()));
    }
    check_u32("dropout_gemm_wide", &[(x16.rows, x16.ld), (w.rows, w.ld)])?;
    let smem = wide_smem(x16.ld, y.ld).ok_or_else(|| {
        Error::Unsupported(format!(
            "dropout_gemm_wide: {} -> {} columns (it takes outputs of 33-64 columns from at most 896)",
            x16.cols, y.cols
        ))
    })?;
    let kernel = if keep_bits.is_some() { dropout_gemm_wide_h16_bits } else { dropout_gemm_wide_h16 };
    let ids = key.ids_arg(&gpu, x16.rows, "dropout_gemm_wide")?;
    let args = DropoutGemmArgs {
        rows: x16.rows as u32,
        k: x16.cols as u32,
        ldx: x16.ld as u32,
        ldw: y.ld as u32,
        ldb: w.ld as u32,
        n: y.cols as u32,
        w_trans: 0,
        col_tiles: 1,
        threshold: dropout_threshold(p),
        x: x16.arg().cast(),
        w: w.arg(),
        y: y.arg_mut(),
        scale: scale_f32(p),
        seed_key: dropout_seed_key(key.seed),
        step: step.arg(&gpu),
        offset: key.offset,
        keep_bits: keep_bits.map_or(PtrMut::null(), |b| b.arg_mut(&gpu)),
        elu: 0,
        ids,
    };
    let warps = (DG_WIDE_THREADS / 32) as usize;
    let per_sm = kernel.max_active_blocks_per_sm(&gpu, DG_WIDE_THREADS, smem as u32)?.max(1) as usize;
    let blocks = x16.rows.div_ceil(16).div_ceil(warps).clamp(1, gpu.info().sm_count as usize * per_sm);
    // SAFETY: shapes checked above; the kernel reads x rows x ldx in f16 (ldx a multiple of 8:
    // whole 16-byte loads), w k x ldb, writes y rows x ldw (ldw ≤ 64) and, for the `_bits`
    // instance, words of rows < x's rows in `keep_bits` (its length checked).
    unsafe { kernel.launch(&gpu, Shape::linear(blocks as u32, DG_WIDE_THREADS, smem as u32), &args) }
}

/// Keep bits of `len` words hold x16's mask.
fn check_keep_bits(len: usize, x16: &DeviceMatrix<f16>, what: &str) -> Result<()> {
    let need = keep_bits_len(x16.rows, x16.cols);
    if len < need {
        return Err(Error::Shape(format!("{what}: keep bits of {len} words for {} x {} features (want {need})", x16.rows, x16.cols)));
    }
    Ok(())
}

/// The wide weight gradient's plan for `rows` rows of x `k` columns wide: (splits, rows per
/// split, groups of 128 columns of x: a block each), the splits filling one wave of the blocks
/// the occupancy calculator fits on an SM.
fn wide_dw_plan(gpu: &Gpu, rows: usize, k: usize) -> Result<(usize, usize, usize)> {
    let groups = padded_ld(k).div_ceil(128).max(1);
    let resident = dropout_gemm_dw_wide_h16.max_active_blocks_per_sm(gpu, DG_WIDE_DW_THREADS, DG_WIDE_DW_SMEM)?.max(1) as usize;
    let step = DG_DW_STEP_ROWS as usize;
    let want = (gpu.info().sm_count as usize * resident).div_ceil(groups).clamp(1, rows.div_ceil(step).max(1));
    let rows_per_split = rows.div_ceil(want).div_ceil(step).max(1) * step;
    Ok((rows.div_ceil(rows_per_split).max(1), rows_per_split, groups))
}

/// Floats of scratch [`dropout_gemm_dw_wide`] needs for `rows x k` features and a weight
/// gradient `n` wide, on `gpu`.
pub fn dropout_gemm_dw_wide_scratch_len(gpu: &Gpu, rows: usize, k: usize, n: usize) -> Result<usize> {
    Ok(wide_dw_plan(gpu, rows, k)?.0 * k * padded_ld(n))
}

/// dw = dropout(x)ᵀ dy for dy of 33-64 columns, read from x's f16 copy `x16` (the mask of
/// [`dropout_gemm_wide`], same step), on the tensor cores in tf32 (f16 x exact there; dy
/// rounded as cuBLAS's tf32 rounds it): the wide forward's weight gradient without a dropped
/// copy. `scratch` holds at least [`dropout_gemm_dw_wide_scratch_len`] floats (per-split
/// partial sums, added in a fixed order: deterministic). The mask is read from `keep_bits`
/// where given (the forward's of the same step), else drawn again.
pub fn dropout_gemm_dw_wide(
    x16: &DeviceMatrix<f16>,
    dy: &DeviceMatrix<f32>,
    dw: &mut DeviceMatrix<f32>,
    scratch: &mut DeviceVec<f32>,
    keep_bits: Option<&DeviceVec<u32>>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    if let Some(b) = keep_bits {
        check_keep_bits(b.len(), x16, "dropout_gemm_dw_wide")?;
    }
    check_matrix_64(x16, "dropout_gemm_dw_wide x")?;
    for (m, name) in [(dy, "dropout_gemm_dw_wide dy"), (&*dw, "dropout_gemm_dw_wide dw")] {
        check_matrix_64(m, name)?;
    }
    if dy.rows != x16.rows || dw.rows != x16.cols || dw.cols != dy.cols {
        return Err(Error::Shape(format!(
            "dropout_gemm_dw_wide: x {} x {}, dy {} x {}, dw {} x {}",
            x16.rows, x16.cols, dy.rows, dy.cols, dw.rows, dw.cols
        )));
    }
    let gpu = x16.gpu().clone();
    check_gpu(&gpu, dy.gpu(), "dropout_gemm_dw_wide")?;
    check_gpu(&gpu, dw.gpu(), "dropout_gemm_dw_wide")?;
    check_u32("dropout_gemm_dw_wide", &[(x16.rows, x16.ld), (dw.rows, dw.ld)])?;
    if step.is_empty() {
        return Err(Error::Shape("dropout_gemm_dw_wide: empty step counter".into()));
    }
    if wide_smem(x16.ld, dw.ld).is_none() {
        return Err(Error::Unsupported(format!(
            "dropout_gemm_dw_wide: {} -> {} columns (it takes 33-64 columns from at most 896)",
            x16.cols, dw.cols
        )));
    }
    let (k, ldw) = (x16.cols, dw.ld);
    let (splits, rows_per_split, groups) = wide_dw_plan(&gpu, x16.rows, k)?;
    let need = splits * k * ldw;
    if scratch.len() < need || k * ldw > u32::MAX as usize {
        return Err(Error::Shape(format!(
            "dropout_gemm_dw_wide: scratch of {} floats for {splits} splits of {k} x {ldw} (want {need})",
            scratch.len()
        )));
    }
    let ids = key.ids_arg(&gpu, x16.rows, "dropout_gemm_dw_wide")?;
    let args = DropoutGemmDwArgs {
        rows: x16.rows as u32,
        k: k as u32,
        ldx: x16.ld as u32,
        ldw: ldw as u32,
        k_tiles: groups as u32,
        col_tiles: 1,
        rows_per_split: rows_per_split as u32,
        threshold: dropout_threshold(p),
        x: x16.arg().cast(),
        dy: dy.arg(),
        partial: scratch.arg_mut(&gpu),
        scale: scale_f32(p),
        seed_key: dropout_seed_key(key.seed),
        step: step.arg(&gpu),
        offset: key.offset,
        keep_bits: keep_bits.map_or(Ptr::null(), |b| b.arg(&gpu)),
        elu: 0,
        ids,
    };
    // SAFETY: shapes checked above; block b (split b / groups) writes rows < k (its 128 columns
    // of x), columns < ldw of partial[split], inside the `need` floats checked; it copies
    // 16-byte chunks of x (rows x ldx f16, ldx a multiple of 8) and dy (rows x ldw, ldw a
    // multiple of 8) and of the keep bits (their length checked) only inside them.
    unsafe { dropout_gemm_dw_wide_h16.launch(&gpu, Shape::linear((splits * groups) as u32, DG_WIDE_DW_THREADS, DG_WIDE_DW_SMEM), &args)? };
    split_sum(&gpu, scratch, dw, splits, k * ldw)
}

/// x stored once more in f16 (`half_features`, `half_input`).
fn half_copy(x: &DeviceMatrix<f32>) -> Result<DeviceMatrix<f16>> {
    let mut h = DeviceMatrix::zeros(x.gpu(), x.rows, x.cols)?;
    cast_matrix_to_f16(x, &mut h)?;
    Ok(h)
}

/// Whether the fused products take `rows x cols` node features stored in f16 for an output
/// `out_cols` wide (the streaming kernels, up to 32 output columns; the tiled ones read f32).
pub fn takes_f16_features(cols: usize, out_cols: usize) -> bool {
    stream_smem(padded_ld(cols), padded_ld(out_cols), true).is_some()
}

/// x as the kernels take it: its elements (f32, or f16 read through the same pointer), shape,
/// stride and GPU.
struct XOperand {
    ptr: crate::gpu::launch::Ptr<f32>,
    rows: usize,
    cols: usize,
    ld: usize,
    half: bool,
    gpu: Arc<Gpu>,
}

/// x checked like any operand.
fn x_operand(x: FeaturesRef<'_>, what: &str) -> Result<XOperand> {
    Ok(match x {
        FeaturesRef::F32(m) => {
            check_matrix_64(m, what)?;
            XOperand { ptr: m.arg(), rows: m.rows, cols: m.cols, ld: m.ld, half: false, gpu: m.gpu().clone() }
        }
        FeaturesRef::F16(m) => {
            check_matrix_64(m, what)?;
            XOperand { ptr: m.arg().cast(), rows: m.rows, cols: m.cols, ld: m.ld, half: true, gpu: m.gpu().clone() }
        }
    })
}

/// Row `r` of `x` (rows x k, unpadded) dropped out as `dropout_matrix_cpu_at` drops it.
fn dropped_row<T: Real>(x: &[T], k: usize, r: usize, (key, step): (DropKey<'_>, u32), keep_frac: T, out: &mut [T]) {
    let (seed_key, thr) = (dropout_seed_key(key.seed), dropout_threshold(key.p));
    let ld = padded_ld(k) as u64;
    for (c, o) in out.iter_mut().enumerate() {
        let keep = dropout_keep_keyed(seed_key, step, key.offset + key.row(r) * ld + c as u64, thr);
        *o = if keep { x[r * k + c] / keep_frac } else { T::zero() };
    }
}

/// y = dropout(x) w on the host: `x` rows x k, `w` k x n, `y` rows x n (unpadded); the mask of
/// `key` and `step`. The same values, in the same order, as `dropout_matrix_cpu_at` followed
/// by the host GEMM (bit for bit).
pub fn dropout_gemm_cpu<T: Real>(
    x: &[T],
    (rows, k): (usize, usize),
    w: &[T],
    n: usize,
    y: &mut [T],
    key: DropKey<'_>,
    step: u32,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    if x.len() != rows * k || w.len() != k * n || y.len() != rows * n {
        return Err(Error::Shape(format!(
            "dropout_gemm_cpu: x {} (want {rows} x {k}), w {} (want {k} x {n}), y {}",
            x.len(),
            w.len(),
            y.len()
        )));
    }
    if n == 0 {
        return Ok(());
    }
    key.check_ids(rows, "dropout_gemm_cpu")?;
    let key = (key, step);
    let keep_frac = T::one() - T::from_f64(p as f64);
    y.par_chunks_mut(n).enumerate().for_each_init(
        || vec![T::zero(); k],
        |d, (r, out)| {
            dropped_row(x, k, r, key, keep_frac, d);
            out.iter_mut().for_each(|v| *v = T::zero());
            for (kx, &av) in d.iter().enumerate() {
                if av != T::zero() {
                    for (o, &bv) in out.iter_mut().zip(&w[kx * n..(kx + 1) * n]) {
                        *o += av * bv;
                    }
                }
            }
        },
    );
    Ok(())
}

/// dw = dropout(x)ᵀ dy on the host (`dy` rows x n, `dw` k x n), the mask of
/// [`dropout_gemm_cpu`]. Partial sums over fixed runs of rows, added in order: deterministic.
pub fn dropout_gemm_dw_cpu<T: Real>(
    x: &[T],
    (rows, k): (usize, usize),
    dy: &[T],
    n: usize,
    dw: &mut [T],
    key: DropKey<'_>,
    step: u32,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    if x.len() != rows * k || dy.len() != rows * n || dw.len() != k * n {
        return Err(Error::Shape(format!(
            "dropout_gemm_dw_cpu: x {} (want {rows} x {k}), dy {} (want {rows} x {n}), dw {}",
            x.len(),
            dy.len(),
            dw.len()
        )));
    }
    key.check_ids(rows, "dropout_gemm_dw_cpu")?;
    let key = (key, step);
    let keep_frac = T::one() - T::from_f64(p as f64);
    let partials: Vec<Vec<T>> = (0..rows.div_ceil(ROW_BLOCK))
        .into_par_iter()
        .map(|b| {
            let mut acc = vec![T::zero(); k * n];
            let mut d = vec![T::zero(); k];
            for r in b * ROW_BLOCK..((b + 1) * ROW_BLOCK).min(rows) {
                dropped_row(x, k, r, key, keep_frac, &mut d);
                let g = &dy[r * n..(r + 1) * n];
                for (c, &dv) in d.iter().enumerate() {
                    if dv != T::zero() {
                        for (o, &gv) in acc[c * n..(c + 1) * n].iter_mut().zip(g) {
                            *o += dv * gv;
                        }
                    }
                }
            }
            acc
        })
        .collect();
    dw.iter_mut().for_each(|v| *v = T::zero());
    for part in partials {
        dw.iter_mut().zip(part).for_each(|(o, v)| *o += v);
    }
    Ok(())
}

/// n8 tiles per block for an output `ld` columns wide, and the column tiles that cover it.
fn column_tiles(ld: usize) -> (usize, usize) {
    let nt = match ld {
        0..=16 => 2,
        17..=32 => 4,
        _ => 8,
    };
    (nt, ld.div_ceil(8 * nt).max(1))
}

/// The kernel instance for `nt` n8 tiles in tf32 or 3xTF32.
fn instance<A>(nt: usize, split: bool, tf32: [Kernel<A>; 3], f32: [Kernel<A>; 3]) -> Kernel<A> {
    let i = match nt {
        2 => 0,
        4 => 1,
        _ => 2,
    };
    if split { f32[i] } else { tf32[i] }
}

/// The streaming instance for `nt` ∈ {2, 4} n8 tiles: f16 x (`half`: tf32, NT = 2 only, as
/// `stream_smem` allows), else tf32 or 3xTF32 (`split`).
fn stream_instance<A>(nt: usize, split: bool, half: bool, h16: [Kernel<A>; 2], tf32: [Kernel<A>; 2], f32: [Kernel<A>; 2]) -> Kernel<A> {
    let i = usize::from(nt > 2);
    match (half, split) {
        (true, _) => h16[i],
        (false, true) => f32[i],
        (false, false) => tf32[i],
    }
}

/// Sizes the kernels index in u32: rows, columns and `rows * ld` elements of every operand.
fn check_u32(what: &str, dims: &[(usize, usize)]) -> Result<()> {
    for &(r, c) in dims {
        if r >= u32::MAX as usize / 2 || c >= u32::MAX as usize / 2 {
            return Err(Error::Unsupported(format!("{what}: {r} x {c} has 2^31 or more rows or columns")));
        }
    }
    Ok(())
}

/// f16 x runs on the streaming kernels in tf32 only.
fn check_half(half: bool, stream: bool, math: GemmMath, what: &str, out_cols: usize) -> Result<()> {
    if half && (!stream || math == GemmMath::F32) {
        return Err(Error::Unsupported(format!(
            "{what}: f16 node features need tf32 math and an output of at most 32 columns (got {out_cols}, {math:?}); keep them in f32"
        )));
    }
    Ok(())
}

/// y = dropout(x) w on the device (`math` F32: 3xTF32; Tf32: tf32), the mask drawn with
/// `step[0]` when the kernel runs, keyed by `key`. Writes y's padding as zero.
pub fn dropout_gemm<'a>(
    x: impl Into<FeaturesRef<'a>>,
    w: &DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
    math: GemmMath,
) -> Result<()> {
    checked_forward("dropout_gemm", x.into(), w, y, (key, false), step, math)
}

/// y = dropout(ELU(x)) w on the device: the layer below's ELU applied as x is loaded (x holds
/// its input, f32 or f16; f16 in tf32 math only), then the draw of [`dropout_gemm`]. The
/// streaming kernels only: outputs of at most 32 columns ([`elu_input_fits`]).
pub fn elu_dropout_gemm<'a>(
    x: impl Into<FeaturesRef<'a>>,
    w: &DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
    math: GemmMath,
) -> Result<()> {
    checked_forward("elu_dropout_gemm", x.into(), w, y, (key, true), step, math)
}

/// [`dropout_gemm`] (ELU on load with `elu`) after checking p and the shapes of y = x w.
fn checked_forward(
    what: &str,
    x: FeaturesRef<'_>,
    w: &DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    (key, elu): (DropKey<'_, DeviceVec<u32>>, bool),
    step: &DeviceVec<u32>,
    math: GemmMath,
) -> Result<()> {
    check_p(key.p)?;
    if w.rows != x.cols() || y.rows != x.rows() || y.cols != w.cols {
        return Err(Error::Shape(format!("{what}: x {} x {}, w {} x {}, y {} x {}", x.rows(), x.cols(), w.rows, w.cols, y.rows, y.cols)));
    }
    forward(x, (w, false), y, (key, elu), step, math)
}

/// Whether [`elu_dropout_gemm`] / [`elu_dropout_gemm_dw`] take x of `cols` columns into
/// `out_cols` (the streaming kernels).
pub fn elu_input_fits(cols: usize, out_cols: usize) -> bool {
    stream_smem(padded_ld(cols), padded_ld(out_cols), false).is_some()
}

/// Refuses ELU on load outside the streaming kernels.
fn check_elu(elu: bool, stream: bool, what: &str, out_cols: usize) -> Result<()> {
    if elu && !stream {
        return Err(Error::Unsupported(format!(
            "{what}: ELU on load for {out_cols} output columns (the streaming kernels take it: at most 32 columns)"
        )));
    }
    Ok(())
}

/// y = dropout(x) op(w), op(w) = wᵀ when `w_trans` (shapes checked by the callers; the
/// transposed form and f16 x only on the streaming kernels).
fn forward(
    x: FeaturesRef<'_>,
    (w, w_trans): (&DeviceMatrix<f32>, bool),
    y: &mut DeviceMatrix<f32>,
    (key, elu): (DropKey<'_, DeviceVec<u32>>, bool),
    step: &DeviceVec<u32>,
    math: GemmMath,
) -> Result<()> {
    let p = key.p;
    let XOperand { ptr: x_ptr, rows: x_rows, cols: x_cols, ld: x_ld, half, gpu } = x_operand(x, "dropout_gemm x")?;
    for (m, name) in [(w, "dropout_gemm w"), (&*y, "dropout_gemm y")] {
        check_matrix_64(m, name)?;
    }
    check_gpu(&gpu, w.gpu(), "dropout_gemm")?;
    check_gpu(&gpu, y.gpu(), "dropout_gemm")?;
    if step.is_empty() {
        return Err(Error::Shape("dropout_gemm: empty step counter".into()));
    }
    check_u32("dropout_gemm", &[(x_rows, x_ld), (w.rows, w.ld)])?;
    let (nt, col_tiles) = column_tiles(y.ld);
    let stream = stream_smem(x_ld, y.ld, half);
    check_half(half, stream.is_some(), math, "dropout_gemm", y.cols)?;
    check_elu(elu, stream.is_some(), "dropout_gemm", y.cols)?;
    let ids = key.ids_arg(&gpu, x_rows, "dropout_gemm")?;
    let args = DropoutGemmArgs {
        rows: x_rows as u32,
        k: x_cols as u32,
        ldx: x_ld as u32,
        ldw: y.ld as u32,
        ldb: w.ld as u32,
        n: y.cols as u32,
        w_trans: w_trans as u32,
        col_tiles: col_tiles as u32,
        threshold: dropout_threshold(p),
        x: x_ptr,
        w: w.arg(),
        y: y.arg_mut(),
        scale: scale_f32(p),
        seed_key: dropout_seed_key(key.seed),
        step: step.arg(&gpu),
        offset: key.offset,
        keep_bits: PtrMut::null(),
        elu: elu as u32,
        ids,
    };
    let split = math == GemmMath::F32;
    if let Some(smem) = stream {
        let kernel = stream_instance(
            nt,
            split,
            half,
            [dropout_gemm_stream_tf32_h16_nt2, dropout_gemm_stream_tf32_h16_nt4],
            [dropout_gemm_stream_tf32_nt2, dropout_gemm_stream_tf32_nt4],
            [dropout_gemm_stream_f32_nt2, dropout_gemm_stream_f32_nt4],
        );
        let warps = (DG_STREAM_THREADS / 32) as usize;
        let per_sm = kernel.max_active_blocks_per_sm(&gpu, DG_STREAM_THREADS, smem as u32)?.max(1) as usize;
        let blocks = x_rows.div_ceil(16).div_ceil(warps).clamp(1, gpu.info().sm_count as usize * per_sm);
        // SAFETY: shapes checked above; the kernel reads x rows x ldx (ldx a multiple of 8, so
        // whole 16-byte loads of f32 or f16, as the instance reads), w k x ldw, and writes y
        // rows x ldw (ldw ≤ 32 = 8 NT).
        return unsafe { kernel.launch(&gpu, Shape::linear(blocks as u32, DG_STREAM_THREADS, smem as u32), &args) };
    }
    if w_trans {
        return Err(Error::Unsupported(format!("dropout_gemm: a transposed w for an output {} wide", y.ld)));
    }
    let row_tiles = x_rows.div_ceil(DG_BLOCK_ROWS as usize);
    let blocks = row_tiles * col_tiles;
    if blocks > i32::MAX as usize {
        return Err(Error::Unsupported(format!("dropout_gemm: {blocks} blocks")));
    }
    let kernel = instance(
        nt,
        split,
        [dropout_gemm_tf32_nt2, dropout_gemm_tf32_nt4, dropout_gemm_tf32_nt8],
        [dropout_gemm_f32_nt2, dropout_gemm_f32_nt4, dropout_gemm_f32_nt8],
    );
    let smem = 4 * (DG_BLOCK_ROWS * 36 + 32 * (8 * nt as u32 + 8));
    // SAFETY: shapes checked above; the kernel reads x rows x ldx, w k x ldw and writes y rows x
    // ldw, guarding every row and column against the sizes it is given.
    unsafe { kernel.launch(&gpu, Shape::linear(blocks as u32, DG_THREADS, smem), &args) }
}

/// How the weight gradient splits its rows: (splits, rows per split, k tiles, column tiles,
/// n8 tiles per block). On the streaming kernels (`stream_smem` is Some: the forward's test,
/// so both products of a layer take the same path) "k tiles" are groups of `dw_stream_warps`
/// panels of x (32 columns, 64 for f16 x: a warp each) and there is one column tile.
/// On the streaming kernels the splits fill one wave of `kernel`'s blocks (as many as the
/// driver's occupancy calculator fits on an SM at its registers: a fixed count left a third of
/// a wave over at some register counts).
fn dw_plan(gpu: &Gpu, rows: usize, k: usize, ldw: usize, half: bool, split: bool) -> Result<(usize, usize, usize, usize, usize)> {
    let sm_count = gpu.info().sm_count as usize;
    let (nt, col_tiles) = column_tiles(ldw);
    let stream = stream_smem(padded_ld(k), ldw, half).is_some();
    let (k_tiles, col_tiles, per_sm) = if stream {
        // Narrow x (fewer than 4 panels) gets smaller blocks, more of them resident.
        let warps = dw_stream_warps(k, half);
        let kernel = dw_stream_instance(nt, split, half);
        let resident = kernel.max_active_blocks_per_sm(gpu, 32 * warps as u32, 0)?.max(1) as usize;
        (padded_ld(k).div_ceil(panel_cols(half)).div_ceil(warps).max(1), 1, resident)
    } else {
        (k.div_ceil(DG_BLOCK_K as usize).max(1), col_tiles, DW_BLOCKS_PER_SM)
    };
    let step = DG_DW_STEP_ROWS as usize;
    let max_splits = rows.div_ceil(step).max(1);
    let want = (sm_count * per_sm).div_ceil(k_tiles * col_tiles).clamp(1, max_splits);
    let rows_per_split = rows.div_ceil(want).div_ceil(step).max(1) * step;
    Ok((rows.div_ceil(rows_per_split).max(1), rows_per_split, k_tiles, col_tiles, nt))
}

/// The streaming weight gradient's instance for `nt` n8 tiles, f32 products (`split`), f16 x.
fn dw_stream_instance(nt: usize, split: bool, half: bool) -> Kernel<DropoutGemmDwArgs> {
    stream_instance(
        nt,
        split,
        half,
        [dropout_gemm_dw_stream_tf32_h16_nt2, dropout_gemm_dw_stream_tf32_h16_nt4],
        [dropout_gemm_dw_stream_tf32_nt2, dropout_gemm_dw_stream_tf32_nt4],
        [dropout_gemm_dw_stream_f32_nt2, dropout_gemm_dw_stream_f32_nt4],
    )
}

/// Columns of x a streaming weight-gradient warp owns: 32 f32 or 64 f16 (16 bytes a lane).
fn panel_cols(half: bool) -> usize {
    if half { 64 } else { 32 }
}

/// Warps per block of the streaming weight gradient for x `k` columns wide: one per panel, at
/// most 4.
fn dw_stream_warps(k: usize, half: bool) -> usize {
    padded_ld(k).div_ceil(panel_cols(half)).clamp(1, (DG_STREAM_DW_THREADS / 32) as usize)
}

/// Floats of scratch [`dropout_gemm_dw`] needs for x with `rows` rows and `k` columns (f16
/// when `half`) and a weight gradient `n` wide, on `gpu`.
pub fn dropout_gemm_dw_scratch_len(gpu: &Gpu, rows: usize, k: usize, n: usize, half: bool) -> Result<usize> {
    let ldw = padded_ld(n);
    // Enough for either product math (their instances may fit different block counts).
    let splits = dw_plan(gpu, rows, k, ldw, half, false)?.0.max(dw_plan(gpu, rows, k, ldw, half, true)?.0);
    Ok(splits * k * ldw)
}

/// dw = dropout(x)ᵀ dy on the device, the mask of [`dropout_gemm`]; `scratch` holds at least
/// [`dropout_gemm_dw_scratch_len`] floats (per-split partial sums, added in a fixed order).
pub fn dropout_gemm_dw<'a>(
    x: impl Into<FeaturesRef<'a>>,
    dy: &DeviceMatrix<f32>,
    dw: &mut DeviceMatrix<f32>,
    scratch: &mut DeviceVec<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
    math: GemmMath,
) -> Result<()> {
    weight_grad(x.into(), dy, dw, scratch, (key, false), step, math)
}

/// dw = dropout(ELU(x))ᵀ dy on the device, the mask of [`elu_dropout_gemm`] (the streaming
/// kernels only: [`elu_input_fits`]; x f32 or f16); `scratch` as [`dropout_gemm_dw`]'s.
pub fn elu_dropout_gemm_dw<'a>(
    x: impl Into<FeaturesRef<'a>>,
    dy: &DeviceMatrix<f32>,
    dw: &mut DeviceMatrix<f32>,
    scratch: &mut DeviceVec<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
    math: GemmMath,
) -> Result<()> {
    weight_grad(x.into(), dy, dw, scratch, (key, true), step, math)
}

/// [`dropout_gemm_dw`], x entering as ELU(x) with `elu`.
fn weight_grad(
    x: FeaturesRef<'_>,
    dy: &DeviceMatrix<f32>,
    dw: &mut DeviceMatrix<f32>,
    scratch: &mut DeviceVec<f32>,
    (key, elu): (DropKey<'_, DeviceVec<u32>>, bool),
    step: &DeviceVec<u32>,
    math: GemmMath,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    let XOperand { ptr: x_ptr, rows: x_rows, cols: x_cols, ld: x_ld, half, gpu } = x_operand(x, "dropout_gemm_dw x")?;
    for (m, name) in [(dy, "dropout_gemm_dw dy"), (&*dw, "dropout_gemm_dw dw")] {
        check_matrix_64(m, name)?;
    }
    if dy.rows != x_rows || dw.rows != x_cols || dw.cols != dy.cols {
        return Err(Error::Shape(format!(
            "dropout_gemm_dw: x {x_rows} x {x_cols}, dy {} x {}, dw {} x {}",
            dy.rows, dy.cols, dw.rows, dw.cols
        )));
    }
    check_gpu(&gpu, dy.gpu(), "dropout_gemm_dw")?;
    check_gpu(&gpu, dw.gpu(), "dropout_gemm_dw")?;
    check_u32("dropout_gemm_dw", &[(x_rows, x_ld), (dw.rows, dw.ld)])?;
    if step.is_empty() {
        return Err(Error::Shape("dropout_gemm_dw: empty step counter".into()));
    }
    let (k, ldw) = (x_cols, dw.ld);
    let stream = stream_smem(x_ld, ldw, half).is_some();
    check_half(half, stream, math, "dropout_gemm_dw", dw.cols)?;
    check_elu(elu, stream, "dropout_gemm_dw", dw.cols)?;
    let split = math == GemmMath::F32;
    let (splits, rows_per_split, k_tiles, col_tiles, nt) = dw_plan(&gpu, x_rows, k, ldw, half, split)?;
    let need = splits * k * ldw;
    if scratch.len() < need || k * ldw > u32::MAX as usize {
        return Err(Error::Shape(format!(
            "dropout_gemm_dw: scratch of {} floats for {splits} splits of {k} x {ldw} (want {need})",
            scratch.len()
        )));
    }
    let blocks = splits * k_tiles * col_tiles;
    if blocks > i32::MAX as usize {
        return Err(Error::Unsupported(format!("dropout_gemm_dw: {blocks} blocks")));
    }
    let ids = key.ids_arg(&gpu, x_rows, "dropout_gemm_dw")?;
    let args = DropoutGemmDwArgs {
        rows: x_rows as u32,
        k: k as u32,
        ldx: x_ld as u32,
        ldw: ldw as u32,
        k_tiles: k_tiles as u32,
        col_tiles: col_tiles as u32,
        rows_per_split: rows_per_split as u32,
        threshold: dropout_threshold(p),
        x: x_ptr,
        dy: dy.arg(),
        partial: scratch.arg_mut(&gpu),
        scale: scale_f32(p),
        seed_key: dropout_seed_key(key.seed),
        step: step.arg(&gpu),
        offset: key.offset,
        keep_bits: Ptr::null(),
        elu: elu as u32,
        ids,
    };
    if stream {
        let kernel = dw_stream_instance(nt, split, half);
        // SAFETY: as below; a warp writes rows < k (its panel's columns of x), columns < ldw,
        // and reads x as the instance's element type (f16 x only on the `_h16` instances).
        unsafe { kernel.launch(&gpu, Shape::linear(blocks as u32, 32 * dw_stream_warps(k, half) as u32, 0), &args)? };
    } else {
        let kernel = instance(
            nt,
            split,
            [dropout_gemm_dw_tf32_nt2, dropout_gemm_dw_tf32_nt4, dropout_gemm_dw_tf32_nt8],
            [dropout_gemm_dw_f32_nt2, dropout_gemm_dw_f32_nt4, dropout_gemm_dw_f32_nt8],
        );
        let smem = 4 * (DG_DW_STEP_ROWS * (DG_BLOCK_K + 8) + DG_DW_STEP_ROWS * (8 * nt as u32 + 8));
        // SAFETY: shapes checked above; block b writes rows < k, columns < ldw of partial[split],
        // split < splits, inside the `need` floats of scratch.
        unsafe { kernel.launch(&gpu, Shape::linear(blocks as u32, DG_THREADS, smem), &args)? };
    }
    split_sum(&gpu, scratch, dw, splits, k * ldw)
}

/// dw's `n` floats (its k rows of ldw) = the sum of the `splits` partials in `scratch`, in
/// split order (`n` and `splits * n` checked by the callers against u32 and scratch's length).
fn split_sum(gpu: &Arc<Gpu>, scratch: &DeviceVec<f32>, dw: &mut DeviceMatrix<f32>, splits: usize, n: usize) -> Result<()> {
    let sum = SplitSumArgs { n: n as u32, splits: splits as u32, partial: scratch.arg(gpu), out: dw.arg_mut() };
    // A block per 32 outputs, its warps over the splits: as many warps as the splits fill (up
    // to 32), blocks up to what the GPU holds at once.
    let warps = splits.div_ceil(4).clamp(1, 32) as u32;
    let blocks = n.div_ceil(32).clamp(1, gpu.info().sm_count as usize * (64 / warps as usize).max(1)) as u32;
    // SAFETY: scratch holds splits * n floats, dw n (k rows of ldw); 4 bytes of shared memory
    // a thread.
    unsafe { split_sum_f32.launch(gpu, Shape::linear(blocks, 32 * warps, 128 * warps), &sum) }
}

/// Whether [`skinny_gemm`] runs `c = op(a) op(b)` (beta 0) on the streaming kernels: outputs
/// of at most 32 columns, `op(a)`'s reduction within what the forward stages (`stream_smem`),
/// and no transposed b in the weight-gradient form. cuBLAS takes a 128-row tile per 8 output
/// columns for these tall, narrow products (SBM 1M: ~155 µs each for 64 MB of input).
pub fn skinny_gemm_fits(a: &DeviceMatrix<f32>, ta: bool, tb: bool, c: &DeviceMatrix<f32>) -> bool {
    !(ta && tb) && stream_smem(a.ld, c.ld, false).is_some()
}

/// c = op(a) op(b) for the shapes of [`skinny_gemm_fits`]: the dropout products with p = 0
/// (no mask drawn). `step` is any live counter (not read for p = 0, but passed); `scratch`
/// as [`dropout_gemm_dw`]'s when `ta`.
pub fn skinny_gemm(
    (a, ta): (&DeviceMatrix<f32>, bool),
    (b, tb): (&DeviceMatrix<f32>, bool),
    c: &mut DeviceMatrix<f32>,
    step: &DeviceVec<u32>,
    scratch: &mut DeviceVec<f32>,
    math: GemmMath,
) -> Result<()> {
    let (m, ka) = if ta { (a.cols, a.rows) } else { (a.rows, a.cols) };
    let (kb, n) = if tb { (b.cols, b.rows) } else { (b.rows, b.cols) };
    if ka != kb || c.rows != m || c.cols != n {
        return Err(Error::Shape(format!("skinny_gemm: op(A) {m}x{ka}, op(B) {kb}x{n}, C {}x{}", c.rows, c.cols)));
    }
    if !skinny_gemm_fits(a, ta, tb, c) {
        return Err(Error::Unsupported(format!("skinny_gemm: C {} x {} from a {} wide reduction", c.rows, c.cols, ka)));
    }
    if ta {
        dropout_gemm_dw(a, b, c, scratch, DropKey::new(0.0, 0), step, math)
    } else {
        forward(FeaturesRef::F32(a), (b, tb), c, (DropKey::new(0.0, 0), false), step, math)
    }
}

// -- the op on each backend --

pub trait DropoutGemmOp: Backend {
    /// Node features stored in the f16 precision's storage type, for these products only.
    type Half;
    /// Whether the first layer should multiply `rows x cols` node features through this op
    /// (dropout never stored) rather than drop them out into a copy first. The GPU does unless
    /// told otherwise; the CPU keeps the unfused path as the reference (and can run this op).
    fn fuses_input_dropout(&self, rows: usize, cols: usize) -> bool;
    /// Whether, where offered, the fused input dropout beats dropout + GEMM for a first
    /// product `out_cols` wide on `cols` features: on the H100 up to 32 output columns (the
    /// streaming kernels), and 33-64 in f16 precision (the wide kernels on x's f16 copy); from
    /// 64 columns on in tf32 / f32 the tiled kernels and a 64-column streaming variant lost
    /// (bench/NOTES.md, 2026-11-27 night). Either way it saves the dropped copy.
    fn fused_input_dropout_pays(&self, cols: usize, out_cols: usize) -> bool;
    /// `x` stored once in f16 for products of at most `out_cols` columns, where this backend
    /// reads its node features in f16 (the GPU in f16 precision, when the streaming kernels
    /// apply); `None` elsewhere. A snapshot: whoever rewrites `x` must drop it.
    fn half_features(&self, x: &Self::Mat, out_cols: usize) -> Result<Option<Self::Half>>;
    /// x stored once in f16 for [`DropoutGemmOp::input_dropout`] where this backend reads it so
    /// (the GPU in f16 precision, where the copy takes at most a quarter of the free memory);
    /// `None` elsewhere. A snapshot, as [`DropoutGemmOp::half_features`].
    fn half_input(&self, x: &Self::Mat) -> Result<Option<Self::Half>>;
    /// The input dropout of a first layer that does not fuse it (its products read the dropped
    /// copy): `y = dropout(x)` with the mask [`DropoutOp::dropout_at`](super::dropout::DropoutOp::dropout_at)
    /// draws, not stored (the features need no gradient: nothing would read it); x read from
    /// `half`, its f16 copy, where given.
    fn input_dropout(&self, x: &Self::Mat, half: Option<&Self::Half>, y: &mut Self::Mat, key: DropKey<'_, Self::Ids>) -> Result<()>;
    /// `y = dropout(x) w`, x's mask drawn as [`DropoutOp::dropout_at`](super::dropout::DropoutOp::dropout_at)
    /// draws it from `key` and the step counter; x read from `half` (its f16 copy)
    /// where given and the shapes allow.
    fn dropout_gemm(
        &self,
        x: &Self::Mat,
        half: Option<&Self::Half>,
        w: &Self::Mat,
        y: &mut Self::Mat,
        key: DropKey<'_, Self::Ids>,
    ) -> Result<()>;
    /// `dw = dropout(x)ᵀ dy` with the mask of [`DropoutGemmOp::dropout_gemm`] (same step).
    fn dropout_gemm_dw(
        &self,
        x: &Self::Mat,
        half: Option<&Self::Half>,
        dy: &Self::Mat,
        dw: &mut Self::Mat,
        key: DropKey<'_, Self::Ids>,
    ) -> Result<()>;
    /// Rows and columns of node features stored in f16.
    fn half_shape(h: &Self::Half) -> (usize, usize);
    /// Whether every first-layer product `out_cols` wide on `cols` node features, in training
    /// and evaluation, runs on their f16 copy alone ([`DropoutGemmOp::half_dropout_gemm`] and
    /// its weight gradient; the unfused input dropout reads it as it is), so that the f32
    /// features need not be kept beside it: the GPU in f16 precision where the streaming or
    /// the wide kernels take the shape; never the CPU (no f16 copies).
    fn half_suffices(&self, cols: usize, out_cols: usize) -> bool;
    /// [`DropoutGemmOp::dropout_gemm`] of features held only in f16 (p = 0 in evaluation).
    fn half_dropout_gemm(&self, x16: &Self::Half, w: &Self::Mat, y: &mut Self::Mat, key: DropKey<'_, Self::Ids>) -> Result<()>;
    /// [`DropoutGemmOp::dropout_gemm_dw`] of features held only in f16, with the mask of
    /// [`DropoutGemmOp::half_dropout_gemm`] (same step).
    fn half_dropout_gemm_dw(&self, x16: &Self::Half, dy: &Self::Mat, dw: &mut Self::Mat, key: DropKey<'_, Self::Ids>) -> Result<()>;
    /// [`DropoutGemmOp::input_dropout`] of features held only in f16.
    fn half_input_dropout(&self, x16: &Self::Half, y: &mut Self::Mat, key: DropKey<'_, Self::Ids>) -> Result<()>;
    /// Whether [`DropoutGemmOp::elu_dropout_gemm`] takes x of `cols` columns into `out_cols`
    /// (everything on the CPU; the streaming kernels on the GPU: at most 32 columns).
    fn takes_elu_input(&self, cols: usize, out_cols: usize) -> bool;
    /// A `rows x cols` f16 buffer for an activation that only ELU-on-load products of at most
    /// `out_cols` columns ([`DropoutGemmOp::elu_dropout_gemm`] and its weight gradient) and the
    /// ELU's backward read, where this backend reads such activations in f16 (the GPU in f16
    /// precision with tf32 products); `None` elsewhere (the CPU).
    fn half_activation(&self, rows: usize, cols: usize, out_cols: usize) -> Result<Option<Self::Half>>;
    /// `y = dropout(ELU(x)) w`: the layer below's ELU applied as x is read (x holds its input),
    /// then the draw of [`DropoutGemmOp::dropout_gemm`]; no ELU or dropped copy written. `half`:
    /// x's values in f16 ([`DropoutGemmOp::half_activation`]), read instead of x.
    fn elu_dropout_gemm(
        &self,
        x: &Self::Mat,
        half: Option<&Self::Half>,
        w: &Self::Mat,
        y: &mut Self::Mat,
        key: DropKey<'_, Self::Ids>,
    ) -> Result<()>;
    /// `dw = dropout(ELU(x))ᵀ dy` with the mask of [`DropoutGemmOp::elu_dropout_gemm`].
    fn elu_dropout_gemm_dw(
        &self,
        x: &Self::Mat,
        half: Option<&Self::Half>,
        dy: &Self::Mat,
        dw: &mut Self::Mat,
        key: DropKey<'_, Self::Ids>,
    ) -> Result<()>;
}

impl<T: Real> DropoutGemmOp for CpuBackend<T> {
    type Half = ();
    fn fuses_input_dropout(&self, _rows: usize, _cols: usize) -> bool {
        false
    }
    fn fused_input_dropout_pays(&self, _cols: usize, out_cols: usize) -> bool {
        out_cols <= 32
    }
    fn half_features(&self, _: &HostMat<T>, _: usize) -> Result<Option<()>> {
        Ok(None)
    }
    fn half_input(&self, _: &HostMat<T>) -> Result<Option<()>> {
        Ok(None)
    }
    fn input_dropout(&self, x: &HostMat<T>, _: Option<&()>, y: &mut HostMat<T>, key: DropKey<'_, Vec<u32>>) -> Result<()> {
        same_shape("input_dropout", y, x)?;
        // The CPU draws through the masked dropout (a scratch mask: the same y).
        let mut mask = vec![0u8; x.rows * padded_ld(x.cols)];
        dropout_matrix_cpu_at(&x.data, x.rows, x.cols, &mut y.data, &mut mask, key.host(), self.step())
    }
    fn dropout_gemm(&self, x: &HostMat<T>, _: Option<&()>, w: &HostMat<T>, y: &mut HostMat<T>, key: DropKey<'_, Vec<u32>>) -> Result<()> {
        if w.rows != x.cols || y.rows != x.rows || y.cols != w.cols {
            return Err(Error::Shape(format!("dropout_gemm: x {}x{}, w {}x{}, y {}x{}", x.rows, x.cols, w.rows, w.cols, y.rows, y.cols)));
        }
        dropout_gemm_cpu(&x.data, (x.rows, x.cols), &w.data, w.cols, &mut y.data, key.host(), self.step())
    }
    fn dropout_gemm_dw(
        &self,
        x: &HostMat<T>,
        _: Option<&()>,
        dy: &HostMat<T>,
        dw: &mut HostMat<T>,
        key: DropKey<'_, Vec<u32>>,
    ) -> Result<()> {
        if dy.rows != x.rows || dw.rows != x.cols || dw.cols != dy.cols {
            return Err(Error::Shape(format!(
                "dropout_gemm_dw: x {}x{}, dy {}x{}, dw {}x{}",
                x.rows, x.cols, dy.rows, dy.cols, dw.rows, dw.cols
            )));
        }
        dropout_gemm_dw_cpu(&x.data, (x.rows, x.cols), &dy.data, dy.cols, &mut dw.data, key.host(), self.step())
    }
    fn half_shape(_: &()) -> (usize, usize) {
        (0, 0)
    }
    fn half_suffices(&self, _: usize, _: usize) -> bool {
        false
    }
    fn half_dropout_gemm(&self, _: &(), _: &HostMat<T>, _: &mut HostMat<T>, _: DropKey<'_, Vec<u32>>) -> Result<()> {
        Err(no_half_features())
    }
    fn half_dropout_gemm_dw(&self, _: &(), _: &HostMat<T>, _: &mut HostMat<T>, _: DropKey<'_, Vec<u32>>) -> Result<()> {
        Err(no_half_features())
    }
    fn half_input_dropout(&self, _: &(), _: &mut HostMat<T>, _: DropKey<'_, Vec<u32>>) -> Result<()> {
        Err(no_half_features())
    }
    fn takes_elu_input(&self, _cols: usize, _out_cols: usize) -> bool {
        true
    }
    fn half_activation(&self, _: usize, _: usize, _: usize) -> Result<Option<()>> {
        Ok(None)
    }
    fn elu_dropout_gemm(
        &self,
        x: &HostMat<T>,
        _: Option<&()>,
        w: &HostMat<T>,
        y: &mut HostMat<T>,
        key: DropKey<'_, Vec<u32>>,
    ) -> Result<()> {
        // The reference: ELU into a copy, then the product of its dropout.
        self.dropout_gemm(&elu_copy(x), None, w, y, key)
    }
    fn elu_dropout_gemm_dw(
        &self,
        x: &HostMat<T>,
        _: Option<&()>,
        dy: &HostMat<T>,
        dw: &mut HostMat<T>,
        key: DropKey<'_, Vec<u32>>,
    ) -> Result<()> {
        self.dropout_gemm_dw(&elu_copy(x), None, dy, dw, key)
    }
}

/// The CPU holds no f16 copies ([`DropoutGemmOp::half_suffices`] is false there).
fn no_half_features() -> Error {
    Error::Unsupported("node features held only in f16 on the CPU backend (it keeps no f16 copies)".into())
}

/// ELU(x) as a new matrix (the CPU's reference of ELU on load).
fn elu_copy<T: Real>(x: &HostMat<T>) -> HostMat<T> {
    HostMat { rows: x.rows, cols: x.cols, data: x.data.iter().map(|&v| super::elu::elu1(v)).collect() }
}

/// An ELU-on-load product's x: its f16 values where given (of x's shape), else x.
fn activation<'a>(x: &'a DeviceMatrix<f32>, half: Option<&'a DeviceMatrix<f16>>) -> Result<FeaturesRef<'a>> {
    match half {
        Some(h) if (h.rows, h.cols) != (x.rows, x.cols) => {
            Err(Error::Shape(format!("elu_dropout_gemm: x {} x {}, its f16 values {} x {}", x.rows, x.cols, h.rows, h.cols)))
        }
        Some(h) => Ok(FeaturesRef::F16(h)),
        None => Ok(FeaturesRef::F32(x)),
    }
}

/// What the dropout products (and the narrow products of `skinny_gemm`) keep between calls on
/// the GPU; one per backend.
#[derive(Default)]
pub struct DropoutGemmScratch {
    /// The fused weight gradient's per-split partial sums, allocated on first use.
    split: Mutex<Option<DeviceVec<f32>>>,
    /// The wide input-dropout products' mask bits, by the address of the f16 features they
    /// drop out ([`dropout_gemm_wide`]); never evicted (a recorded step keeps writing its own).
    keep_bits: Mutex<HashMap<u64, DeviceVec<u32>>>,
}

impl DropoutGemmScratch {
    /// Runs `f` on the split scratch, grown to at least `need` floats (and one) first. Sized by
    /// the first (eager) step and kept: a recorded step keeps its address.
    pub(crate) fn with_split<R>(&self, gpu: &Arc<Gpu>, need: usize, f: impl FnOnce(&mut DeviceVec<f32>) -> Result<R>) -> Result<R> {
        let mut scratch = self.split.lock().expect("dropout gemm scratch poisoned");
        if scratch.as_ref().is_none_or(|s| s.len() < need.max(1)) {
            *scratch = Some(DeviceVec::zeros(gpu, need.max(1))?);
        }
        f(scratch.as_mut().expect("allocated above"))
    }

    /// Runs `f` on the keep bits of the wide products on `x16` (allocated on first use).
    fn with_keep_bits<R>(&self, gpu: &Arc<Gpu>, x16: &DeviceMatrix<f16>, f: impl FnOnce(&mut DeviceVec<u32>) -> Result<R>) -> Result<R> {
        let mut all = self.keep_bits.lock().expect("keep bits poisoned");
        let need = keep_bits_len(x16.rows, x16.cols);
        let key = x16.ptr();
        if all.get(&key).is_none_or(|b| b.len() < need) {
            all.insert(key, DeviceVec::zeros(gpu, need.max(1))?);
        }
        f(all.get_mut(&key).expect("inserted above"))
    }
}

impl CudaBackend {
    /// This backend's scratch of the fused products (one per backend: its ops run on one stream).
    pub(crate) fn dropout_gemm_scratch(&self) -> Arc<DropoutGemmScratch> {
        self.op_state.get()
    }

    /// x's f16 copy where the wide kernels take this product (`out_cols` of 33-64; the copy
    /// exists only in f16 precision).
    fn wide_x<'a>(&self, x: &DeviceMatrix<f32>, half: Option<&'a DeviceMatrix<f16>>, out_cols: usize) -> Option<&'a DeviceMatrix<f16>> {
        half.filter(|h| self.math == GemmMath::Tf32 && (h.rows, h.cols) == (x.rows, x.cols) && wide_fits(x.cols, out_cols))
    }

    /// x as the products read it: the f16 copy where given and the output fits the streaming
    /// kernels in tf32, x itself otherwise.
    fn product_x<'a>(&self, x: &'a DeviceMatrix<f32>, half: Option<&'a DeviceMatrix<f16>>, out_cols: usize) -> FeaturesRef<'a> {
        match half {
            Some(h) if self.math == GemmMath::Tf32 && takes_f16_features(x.cols, out_cols) && (h.rows, h.cols) == (x.rows, x.cols) => {
                FeaturesRef::F16(h)
            }
            _ => FeaturesRef::F32(x),
        }
    }
}

impl CudaBackend {
    /// Features held only in f16 are read by these products only where they take the shape.
    fn half_only(&self, x16: &DeviceMatrix<f16>, out_cols: usize) -> Result<()> {
        if !self.half_suffices(x16.cols, out_cols) {
            return Err(Error::Unsupported(format!(
                "a product of {} node features held only in f16 into {out_cols} columns (the f16 kernels take at most 64 columns, in f16 precision)",
                x16.cols
            )));
        }
        Ok(())
    }
}

impl DropoutGemmOp for CudaBackend {
    type Half = DeviceMatrix<f16>;
    fn fuses_input_dropout(&self, rows: usize, cols: usize) -> bool {
        self.fuse_input_dropout && rows < u32::MAX as usize / 2 && padded_ld(cols) < u32::MAX as usize / 2
    }
    fn fused_input_dropout_pays(&self, cols: usize, out_cols: usize) -> bool {
        out_cols <= 32 || (self.precision == Precision::F16 && self.math == GemmMath::Tf32 && wide_fits(cols, out_cols))
    }
    fn half_features(&self, x: &DeviceMatrix<f32>, out_cols: usize) -> Result<Option<DeviceMatrix<f16>>> {
        if self.precision != Precision::F16
            || self.math != GemmMath::Tf32
            || !(takes_f16_features(x.cols, out_cols) || wide_fits(x.cols, out_cols))
        {
            return Ok(None);
        }
        half_copy(x).map(Some)
    }
    fn half_input(&self, x: &DeviceMatrix<f32>) -> Result<Option<DeviceMatrix<f16>>> {
        // A speed-up, not a need: only where the copy takes at most a quarter of what is free
        // (the rest also holds the products' scratch and, under capture, the CUDA graph).
        if self.precision != Precision::F16 || 2 * x.rows * x.ld > self.gpu.free_memory()? / 4 {
            return Ok(None);
        }
        half_copy(x).map(Some)
    }
    fn input_dropout(
        &self,
        x: &DeviceMatrix<f32>,
        half: Option<&DeviceMatrix<f16>>,
        y: &mut DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        self.timed("input dropout", || input_dropout_matrix(x, half, y, key, &self.step_ptr()))
    }
    fn dropout_gemm(
        &self,
        x: &DeviceMatrix<f32>,
        half: Option<&DeviceMatrix<f16>>,
        w: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        if let Some(h) = self.wide_x(x, half, y.cols) {
            let run =
                |bits: &mut DeviceVec<u32>| self.timed("dropout gemm", || dropout_gemm_wide(h, w, y, Some(bits), key, &self.step_ptr()));
            return self.dropout_gemm_scratch().with_keep_bits(&self.gpu, h, run);
        }
        let x = self.product_x(x, half, y.cols);
        self.timed("dropout gemm", || dropout_gemm(x, w, y, key, &self.step_ptr(), self.math))
    }
    fn dropout_gemm_dw(
        &self,
        x: &DeviceMatrix<f32>,
        half: Option<&DeviceMatrix<f16>>,
        dy: &DeviceMatrix<f32>,
        dw: &mut DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        if let Some(h) = self.wide_x(x, half, dy.cols) {
            let need = dropout_gemm_dw_wide_scratch_len(&self.gpu, h.rows, h.cols, dy.cols)?;
            // The forward of this step left the mask's bits (it always runs first: the operand
            // is forward-then-backward within a step).
            let scratch = self.dropout_gemm_scratch();
            return scratch.with_keep_bits(&self.gpu, h, |bits| {
                scratch.with_split(&self.gpu, need, |s| {
                    self.timed("dropout gemm dw", || dropout_gemm_dw_wide(h, dy, dw, s, Some(bits), key, &self.step_ptr()))
                })
            });
        }
        let x = self.product_x(x, half, dy.cols);
        let need = dropout_gemm_dw_scratch_len(&self.gpu, x.rows(), x.cols(), dy.cols, matches!(x, FeaturesRef::F16(_)))?;
        self.dropout_gemm_scratch().with_split(&self.gpu, need, |s| {
            self.timed("dropout gemm dw", || dropout_gemm_dw(x, dy, dw, s, key, &self.step_ptr(), self.math))
        })
    }
    fn half_shape(h: &DeviceMatrix<f16>) -> (usize, usize) {
        (h.rows, h.cols)
    }
    fn half_suffices(&self, cols: usize, out_cols: usize) -> bool {
        self.precision == Precision::F16 && self.math == GemmMath::Tf32 && (takes_f16_features(cols, out_cols) || wide_fits(cols, out_cols))
    }
    fn half_dropout_gemm(
        &self,
        x16: &DeviceMatrix<f16>,
        w: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        self.half_only(x16, y.cols)?;
        if self.math == GemmMath::Tf32 && wide_fits(x16.cols, y.cols) {
            // Without dropout (evaluation) no weight gradient follows and nothing is drawn: the
            // step's mask bits are left alone.
            if key.p == 0.0 {
                return self.timed("dropout gemm", || dropout_gemm_wide(x16, w, y, None, key, &self.step_ptr()));
            }
            let run =
                |bits: &mut DeviceVec<u32>| self.timed("dropout gemm", || dropout_gemm_wide(x16, w, y, Some(bits), key, &self.step_ptr()));
            return self.dropout_gemm_scratch().with_keep_bits(&self.gpu, x16, run);
        }
        self.timed("dropout gemm", || dropout_gemm(FeaturesRef::F16(x16), w, y, key, &self.step_ptr(), self.math))
    }
    fn half_dropout_gemm_dw(
        &self,
        x16: &DeviceMatrix<f16>,
        dy: &DeviceMatrix<f32>,
        dw: &mut DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        self.half_only(x16, dy.cols)?;
        if self.math == GemmMath::Tf32 && wide_fits(x16.cols, dy.cols) {
            let need = dropout_gemm_dw_wide_scratch_len(&self.gpu, x16.rows, x16.cols, dy.cols)?;
            let scratch = self.dropout_gemm_scratch();
            if key.p == 0.0 {
                // Nothing dropped: no mask bits were left (nor are any needed).
                return scratch.with_split(&self.gpu, need, |s| {
                    self.timed("dropout gemm dw", || dropout_gemm_dw_wide(x16, dy, dw, s, None, key, &self.step_ptr()))
                });
            }
            // The forward of this step left the mask's bits (it always runs first).
            return scratch.with_keep_bits(&self.gpu, x16, |bits| {
                scratch.with_split(&self.gpu, need, |s| {
                    self.timed("dropout gemm dw", || dropout_gemm_dw_wide(x16, dy, dw, s, Some(bits), key, &self.step_ptr()))
                })
            });
        }
        let need = dropout_gemm_dw_scratch_len(&self.gpu, x16.rows, x16.cols, dy.cols, true)?;
        self.dropout_gemm_scratch().with_split(&self.gpu, need, |s| {
            self.timed("dropout gemm dw", || dropout_gemm_dw(FeaturesRef::F16(x16), dy, dw, s, key, &self.step_ptr(), self.math))
        })
    }
    fn half_input_dropout(&self, x16: &DeviceMatrix<f16>, y: &mut DeviceMatrix<f32>, key: DropKey<'_, DeviceVec<u32>>) -> Result<()> {
        self.timed("input dropout", || crate::ops::nn::dropout::input_dropout_half(x16, y, key, &self.step_ptr()))
    }
    fn takes_elu_input(&self, cols: usize, out_cols: usize) -> bool {
        elu_input_fits(cols, out_cols)
    }
    fn half_activation(&self, rows: usize, cols: usize, out_cols: usize) -> Result<Option<DeviceMatrix<f16>>> {
        if self.precision != Precision::F16 || self.math != GemmMath::Tf32 || !takes_f16_features(cols, out_cols) {
            return Ok(None);
        }
        DeviceMatrix::zeros(&self.gpu, rows, cols).map(Some)
    }
    fn elu_dropout_gemm(
        &self,
        x: &DeviceMatrix<f32>,
        half: Option<&DeviceMatrix<f16>>,
        w: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        let x = activation(x, half)?;
        self.timed("dropout gemm", || elu_dropout_gemm(x, w, y, key, &self.step_ptr(), self.math))
    }
    fn elu_dropout_gemm_dw(
        &self,
        x: &DeviceMatrix<f32>,
        half: Option<&DeviceMatrix<f16>>,
        dy: &DeviceMatrix<f32>,
        dw: &mut DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        let x = activation(x, half)?;
        let need = dropout_gemm_dw_scratch_len(&self.gpu, x.rows(), x.cols(), dy.cols, matches!(x, FeaturesRef::F16(_)))?;
        self.dropout_gemm_scratch().with_split(&self.gpu, need, |s| {
            self.timed("dropout gemm dw", || elu_dropout_gemm_dw(x, dy, dw, s, key, &self.step_ptr(), self.math))
        })
    }
}
