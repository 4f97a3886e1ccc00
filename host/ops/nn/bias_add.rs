//! Bias add y[r][c] += b[c], and the same followed by a ReLU in one pass (`bias_relu`, where a
//! hidden layer's bias meets its activation; `sum_bias_relu`, with a scaled matrix added
//! first: GIN's neighbours' sum plus (1 + eps) itself): CPU and the launchers of
//! `kernels-gpu/src/nn/bias_add.rs`.

use rayon::prelude::*;

use super::{check_gpu, check_matrix_64, check_same, elementwise_shape, n4};
use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{BiasAddArgs, SumBiasReluArgs, bias_add_f32, bias_relu_f32, sum_bias_relu_f32};
use crate::gpu::launch::Ptr;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// y[r][c] += b[c] for `y` rows x cols (unpadded) and `b` of `cols` values.
pub fn bias_add_cpu<T: Real>(y: &mut [T], rows: usize, cols: usize, b: &[T]) {
    assert_eq!(y.len(), rows * cols, "bias_add_cpu: y is not {rows} x {cols}");
    assert_eq!(b.len(), cols, "bias_add_cpu: b has {} values for {cols} columns", b.len());
    if cols == 0 {
        return;
    }
    y.par_chunks_mut(cols).with_min_len(64).for_each(|row| {
        for (v, &bb) in row.iter_mut().zip(b) {
            *v += bb;
        }
    });
}

/// y[r][c] += b[c] on the device; `b` is 1 x cols. Runs over the padded buffer (b's padding is
/// zero, so y's stays zero).
pub fn bias_add(y: &mut DeviceMatrix<f32>, b: &DeviceMatrix<f32>) -> Result<()> {
    bias_launch(y, b, false)
}

/// y = max(y + b, 0) on the device (one pass; the same values as `bias_add` then `relu`).
pub fn bias_relu(y: &mut DeviceMatrix<f32>, b: &DeviceMatrix<f32>) -> Result<()> {
    bias_launch(y, b, true)
}

fn bias_launch(y: &mut DeviceMatrix<f32>, b: &DeviceMatrix<f32>, relu: bool) -> Result<()> {
    check_matrix_64(y, "bias_add y")?;
    check_matrix_64(b, "bias_add b")?;
    if b.rows != 1 || b.cols != y.cols {
        return Err(Error::Shape(format!("bias_add: y is {} x {}, b is {} x {} (want 1 x {})", y.rows, y.cols, b.rows, b.cols, y.cols)));
    }
    check_gpu(y.gpu(), b.gpu(), "bias_add")?;
    let gpu = y.gpu().clone();
    let n4 = n4(y);
    let args = BiasAddArgs { n4, ld4: (y.ld / 4) as u32, y: y.arg_mut(), b: b.arg() };
    // SAFETY: y holds n4 float4s of rows of ld floats, b one row of ld.
    let kernel = if relu { bias_relu_f32 } else { bias_add_f32 };
    unsafe { kernel.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// y = max(y + (1 + eps) x + b, 0) on the device in one pass (`eps` a 1 x 1 matrix read when the
/// kernel runs, or none: 0); the same values as `scaled_add` (or `add_assign`) then `bias_relu`.
pub fn sum_bias_relu(
    y: &mut DeviceMatrix<f32>,
    x: &DeviceMatrix<f32>,
    eps: Option<&DeviceMatrix<f32>>,
    b: &DeviceMatrix<f32>,
) -> Result<()> {
    let what = "sum_bias_relu";
    check_same(y, x, what)?;
    check_matrix_64(b, what)?;
    if b.rows != 1 || b.cols != y.cols {
        return Err(Error::Shape(format!("{what}: y is {} x {}, b is {} x {} (want 1 x {})", y.rows, y.cols, b.rows, b.cols, y.cols)));
    }
    check_gpu(y.gpu(), b.gpu(), what)?;
    if let Some(e) = eps {
        check_gpu(y.gpu(), e.gpu(), what)?;
        if (e.rows, e.cols) != (1, 1) {
            return Err(Error::Shape(format!("{what}: eps is {} x {} (want 1 x 1)", e.rows, e.cols)));
        }
    }
    let gpu = y.gpu().clone();
    let n4 = n4(y);
    let args = SumBiasReluArgs {
        n4,
        ld4: (y.ld / 4) as u32,
        y: y.arg_mut(),
        x: x.arg(),
        alpha: eps.map_or(Ptr::null(), |e| e.arg()),
        shift: 1.0,
        b: b.arg(),
    };
    // SAFETY: y and x hold n4 float4s of rows of ld floats, b one row of ld, eps (if any) a float.
    unsafe { sum_bias_relu_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

pub trait BiasAddOp: Backend {
    /// `y[r] += b` for every row (`b` is `1 x cols`).
    fn bias_add(&self, y: &mut Self::Mat, b: &Self::Mat) -> Result<()>;
    /// `y[r] = max(y[r] + b, 0)`: a hidden layer's bias and ReLU (one pass on the GPU; the
    /// default runs the two ops, as the CPU reference does).
    fn bias_relu(&self, y: &mut Self::Mat, b: &Self::Mat) -> Result<()>
    where
        Self: super::relu::ReluOp,
    {
        self.bias_add(y, b)?;
        self.relu(y)
    }
    /// `y = max(y + (1 + eps) x + b, 0)` (`eps` a `1 x 1` matrix, or none: 0) — GIN's sum of
    /// the neighbours and the node itself, then its bias and ReLU: one pass on the GPU; the
    /// default runs `scaled_add` (or `add_assign`) then `bias_relu`, as the CPU reference does.
    fn sum_bias_relu(&self, y: &mut Self::Mat, x: &Self::Mat, eps: Option<&Self::Mat>, b: &Self::Mat) -> Result<()>
    where
        Self: super::relu::ReluOp + super::scaled_add::ScaledAddOp + super::add_assign::AddAssignOp,
    {
        match eps {
            Some(e) => self.scaled_add(y, x, e, 1.0)?,
            None => self.add_assign(y, x)?,
        }
        self.bias_relu(y, b)
    }
}

impl<T: Real> BiasAddOp for CpuBackend<T> {
    fn bias_add(&self, y: &mut HostMat<T>, b: &HostMat<T>) -> Result<()> {
        if b.rows != 1 || b.cols != y.cols {
            return Err(Error::Shape(format!("bias_add: bias {}x{} for {} columns", b.rows, b.cols, y.cols)));
        }
        bias_add_cpu(&mut y.data, y.rows, y.cols, &b.data);
        Ok(())
    }
}

impl BiasAddOp for CudaBackend {
    fn bias_add(&self, y: &mut DeviceMatrix<f32>, b: &DeviceMatrix<f32>) -> Result<()> {
        self.timed("bias add", || bias_add(y, b))
    }
    fn bias_relu(&self, y: &mut DeviceMatrix<f32>, b: &DeviceMatrix<f32>) -> Result<()> {
        self.timed("bias relu", || bias_relu(y, b))
    }
    fn sum_bias_relu(
        &self,
        y: &mut DeviceMatrix<f32>,
        x: &DeviceMatrix<f32>,
        eps: Option<&DeviceMatrix<f32>>,
        b: &DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("sum bias relu", || sum_bias_relu(y, x, eps, b))
    }
}
