//! SpMM: Y = S X, S the graph (N x N sparse), X dense N x K features, Y dense N x K.

pub mod auto;
pub mod cpu;
pub mod csr;
pub mod cusparse;
pub mod hp;
pub mod tc16;
pub mod tc8;

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::ops::{DeviceFeatures, GraphHandle, Impl, Precision};
use crate::tensor::Matrix;

/// Host-to-host SpMM: uploads X, runs `imp`, downloads Y. Convenient, not for hot loops
/// (use [`spmm_device`] there).
pub fn spmm(g: &GraphHandle, x: &Matrix, imp: Impl, prec: Precision) -> Result<Matrix> {
    check_shapes(g, x.rows, x.cols)?;
    let imp = resolve(g, imp, prec);
    if imp == Impl::Cpu {
        return Ok(cpu::spmm_cpu(g.csr(), x));
    }
    let gpu = g.gpu()?.clone();
    let xd = DeviceFeatures::upload(&gpu, x, prec)?;
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, g.csr().n_rows(), x.cols)?;
    spmm_device(g, &xd, &mut y, imp)?;
    y.download()
}

/// Device SpMM into a preallocated Y. The precision follows X's storage and the implementation:
/// f16 features run f16 tensor cores; f32 features run f32 (Csr, Hp) or tf32 (Tc*).
/// `Impl::Auto` times the candidates once per (graph, storage type, K) and keeps the fastest;
/// with f32 features that includes the tf32 tensor-core kernels.
pub fn spmm_device(g: &GraphHandle, x: &DeviceFeatures, y: &mut DeviceMatrix<f32>, imp: Impl) -> Result<()> {
    check_shapes(g, x.rows(), x.cols())?;
    if y.rows != g.csr().n_rows() || y.cols != x.cols() {
        return Err(Error::Shape(format!("Y is {}x{}, expected {}x{}", y.rows, y.cols, g.csr().n_rows(), x.cols())));
    }
    let imp = match imp {
        Impl::Auto => auto::choose(g, x, y, run_kernel)?,
        other => other,
    };
    run_kernel(g, x, y, imp)
}

/// One concrete implementation on device buffers (shapes already checked).
fn run_kernel(g: &GraphHandle, x: &DeviceFeatures, y: &mut DeviceMatrix<f32>, imp: Impl) -> Result<()> {
    match (imp, x) {
        (Impl::Csr, DeviceFeatures::F32(x)) => csr::spmm_csr(g, x, y),
        (Impl::Hp, DeviceFeatures::F32(x)) => hp::spmm_hp(g, x, y),
        (Impl::Tc8, x) => tc8::spmm_tc8(g, x, y),
        (Impl::Tc16, x) => tc16::spmm_tc16(g, x, y),
        (Impl::Cusparse, x) => cusparse::spmm_cusparse(g, x, y),
        (Impl::Cpu, _) => Err(Error::Unsupported("Impl::Cpu on device buffers; use ops::spmm".into())),
        (imp, x) => Err(Error::Unsupported(format!(
            "SpMM {imp:?} with {} features is not available",
            match x {
                DeviceFeatures::F32(_) => "f32",
                DeviceFeatures::F16(_) => "f16",
            }
        ))),
    }
}

/// `Auto` in the host API: the CPU without a GPU; exact f32 asks for a CUDA-core kernel
/// (tensor cores would round to tf32); otherwise the device-side measured choice.
fn resolve(g: &GraphHandle, imp: Impl, prec: Precision) -> Impl {
    match imp {
        Impl::Auto if !g.has_gpu() => Impl::Cpu,
        Impl::Auto if prec == Precision::F32 => Impl::Hp,
        other => other,
    }
}

fn check_shapes(g: &GraphHandle, x_rows: usize, k: usize) -> Result<()> {
    if x_rows != g.csr().n_cols() {
        return Err(Error::Shape(format!("X has {x_rows} rows, the graph has {} columns", g.csr().n_cols())));
    }
    if k == 0 {
        return Err(Error::Unsupported("feature width K = 0".into()));
    }
    Ok(())
}
