//! SpMM: Y = S X, S the graph (N x N sparse), X dense N x K features, Y dense N x K.

pub mod auto;
pub mod cpu;
pub mod csr;
pub mod cusparse;
pub mod hp;
pub mod hybrid;
pub mod plan;
pub mod tc16;
pub mod tc8;

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::ops::{DeviceFeatures, EdgeValues, FeaturesRef, GraphHandle, Impl, Precision, ValueOrder, permute, values};
use crate::tensor::Matrix;

/// Host-to-host SpMM: uploads X, runs `imp`, downloads Y. Convenient, not for hot loops
/// (use [`spmm_device`] there).
pub fn spmm(g: &GraphHandle, x: &Matrix, imp: Impl, prec: Precision) -> Result<Matrix> {
    check_shapes(g, x.rows, x.cols)?;
    let imp = resolve(g, imp, prec);
    if imp == Impl::Cpu {
        return match g.reordering() {
            Some(r) => permute::host_permuted(r, x, |x| Ok(cpu::spmm_cpu(g.csr(), x))),
            None => Ok(cpu::spmm_cpu(g.csr(), x)),
        };
    }
    let gpu = g.gpu()?.clone();
    let xd = DeviceFeatures::upload(&gpu, x, prec)?;
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, g.csr().n_rows(), x.cols)?;
    spmm_device(g, &xd, &mut y, imp)?;
    y.download()
}

/// Device SpMM into a preallocated Y with the handle's edge values. The precision follows X's
/// storage and the implementation: f16 features run f16 tensor cores (Tc*) or f16 loads with
/// f32 arithmetic (Csr); f32 features run f32 (Csr, Hp) or tf32 (Tc*). `Impl::Auto` times the candidates once per (graph, storage type, K)
/// and keeps the fastest; with f32 features that includes the tf32 tensor-core kernels.
/// On a reordered handle (`GraphHandle::with_reorder`) X and Y are in the original node order:
/// X's rows are gathered into the reordered order, Y's gathered back (two extra launches).
pub fn spmm_device<'a>(g: &GraphHandle, x: impl Into<FeaturesRef<'a>>, y: &mut DeviceMatrix<f32>, imp: Impl) -> Result<()> {
    spmm_with(g, None, x.into(), y, imp)
}

/// [`spmm_device`] in the handle's own node order: on a reordered handle X and Y are already
/// permuted (X' = P X, Y' = P Y), so only the SpMM on P S Pᵀ runs (what a caller keeping its
/// features in the reordered order for a whole training run would do); on a plain handle it is
/// [`spmm_device`].
pub fn spmm_device_permuted<'a>(g: &GraphHandle, x: impl Into<FeaturesRef<'a>>, y: &mut DeviceMatrix<f32>, imp: Impl) -> Result<()> {
    let x = x.into();
    check_device_shapes(g, x, y)?;
    spmm_in_order(g, None, x, y, imp)
}

/// The order in which `imp` reads per-call edge values ([`spmm_device_values`]): CSR for Csr,
/// Hp, Cusparse (and Cpu, on the host), ME-BCRS for Tc8; `None` where per-call values are not
/// supported (Tc16, whose SGT tiles hold the handle's values, Hybrid, whose two parts do, and
/// Auto, which is not one implementation).
pub fn value_order(imp: Impl) -> Option<ValueOrder> {
    match imp {
        Impl::Csr | Impl::Hp | Impl::Cusparse | Impl::Cpu => Some(ValueOrder::Csr),
        Impl::Tc8 => Some(ValueOrder::MeBcrs),
        Impl::Tc16 | Impl::Hybrid | Impl::Auto => None,
    }
}

/// Device SpMM Y = S X with this call's edge values on the handle's pattern (for training: the
/// same graph with GCN weights, attention values, gradients). Supported: Csr, Hp and Cusparse
/// with [`EdgeValues::Csr`] (f32 features; Csr also f16 features, reading the f32 values;
/// Cusparse also f16 features, casting the values to f16 on the device into a buffer kept in
/// the handle), Tc8 with [`EdgeValues::MeBcrs`] (f32
/// features, tf32) or [`EdgeValues::MeBcrsF16`] (f16 features). `Impl::Auto` picks the fastest
/// implementation whose [`value_order`] is the values' order (measured once per graph, storage
/// type, K and order). Values must hold exactly `g.value_len(order)` entries (`Error::Shape`);
/// ME-BCRS slots without an edge must hold 0 (SDDMM into ME-BCRS order and
/// `ops::values::transpose_values` write them so). Only enqueues work on the Gpu's stream;
/// after the first call per (graph, X, Y) nothing is allocated.
pub fn spmm_device_values<'a>(
    g: &GraphHandle,
    values: EdgeValues,
    x: impl Into<FeaturesRef<'a>>,
    y: &mut DeviceMatrix<f32>,
    imp: Impl,
) -> Result<()> {
    let x = x.into();
    let order = values.order();
    values::check_len("SpMM: the edge values", values.len(), g.value_len(order)?, order)?;
    match (values, x) {
        (EdgeValues::Csr(_), _) | (EdgeValues::MeBcrs(_), FeaturesRef::F32(_)) | (EdgeValues::MeBcrsF16(_), FeaturesRef::F16(_)) => {}
        (v, x) => {
            return Err(Error::Unsupported(format!(
                "SpMM with {} features and {v:?}: ME-BCRS values must have the features' storage type",
                x.type_name()
            )));
        }
    }
    spmm_with(g, Some(values), x, y, imp)
}

/// The one device path: `values = None` reads the handle's values.
fn spmm_with(g: &GraphHandle, values: Option<EdgeValues>, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, imp: Impl) -> Result<()> {
    check_device_shapes(g, x, y)?;
    if let Some(r) = g.reordering() {
        if values.is_some() {
            g.require_original_order("SpMM with per-call edge values")?;
        }
        return permute::spmm_permuted(g, r, x, y, |x, y| spmm_in_order(g, None, x, y, imp));
    }
    spmm_in_order(g, values, x, y, imp)
}

fn check_device_shapes(g: &GraphHandle, x: FeaturesRef<'_>, y: &DeviceMatrix<f32>) -> Result<()> {
    check_shapes(g, x.rows(), x.cols())?;
    if y.rows != g.csr().n_rows() || y.cols != x.cols() {
        return Err(Error::Shape(format!("Y is {}x{}, expected {}x{}", y.rows, y.cols, g.csr().n_rows(), x.cols())));
    }
    Ok(())
}

/// SpMM on the handle's matrix as stored (X and Y in its node order).
fn spmm_in_order(g: &GraphHandle, values: Option<EdgeValues>, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, imp: Impl) -> Result<()> {
    let imp = match imp {
        Impl::Auto => auto::choose(g, x, y, values.map(|v| v.order()), |g, x, y, imp| run_kernel(g, values, x, y, imp))?,
        other => other,
    };
    run_kernel(g, values, x, y, imp)
}

/// One concrete implementation on device buffers (shapes already checked).
fn run_kernel(g: &GraphHandle, values: Option<EdgeValues>, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, imp: Impl) -> Result<()> {
    if let Some(v) = values
        && imp != Impl::Cpu
        && value_order(imp) != Some(v.order())
    {
        return Err(Error::Unsupported(match value_order(imp) {
            Some(o) => format!("SpMM {imp:?} reads edge values in {o:?} order, got {v:?}"),
            None => format!(
                "SpMM {imp:?} does not take per-call edge values (got {v:?}); use Tc8 (ME-BCRS order) or Csr / Hp / Cusparse (CSR order)"
            ),
        }));
    }
    let csr_values = match values {
        Some(EdgeValues::Csr(v)) => Some(v),
        _ => None,
    };
    match (imp, x) {
        (Impl::Csr, x) => csr::spmm_csr_values(g, csr_values, x, y),
        (Impl::Hp, FeaturesRef::F32(x)) => hp::spmm_hp_values(g, csr_values, x, y),
        (Impl::Tc8, x) => tc8::spmm_tc8_values(g, values, x, y, tc8::Tc8Source::Auto),
        (Impl::Tc16, x) => tc16::spmm_tc16(g, x, y),
        (Impl::Hybrid, x) => hybrid::spmm_hybrid(g, x, y, None).map(|_| ()),
        (Impl::Cusparse, x) => cusparse::spmm_cusparse_values(g, csr_values, x, y),
        (Impl::Cpu, _) => Err(Error::Unsupported("Impl::Cpu on device buffers; use ops::spmm".into())),
        (imp, x) => Err(Error::Unsupported(format!("SpMM {imp:?} with {} features is not available", x.type_name()))),
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
