//! SDDMM: O = (A B^T) .* S sampled at the nonzeros of S (A, B dense N x K). The row softmax of
//! its scores is the edge-softmax op's (`ops::nn::edge_softmax`).
//!
//! Outputs are one value per nonzero, in the order the consumer reads: CSR order, or the
//! ME-BCRS (k = 8) slot order that TC8 SpMM reads, written directly by the kernel.
//!
//! Every implementation multiplies by S's values as the graph handle holds them
//! (`O[e] = S[e] * dot(A[row(e)], B[col(e)])`). Attention scores (AGNN) sample the pattern
//! only: build the handle on a unit-valued CSR (`graph::ops::pattern`) and every
//! implementation computes `dot(A[row], B[col])`; SpMM then takes the scores as per-call
//! values (`spmm::spmm_device_values`) on the same handle. cuSPARSE SDDMM ignores S's values,
//! so it accepts unit-valued handles only.

pub mod cpu;
pub mod cusparse;
pub mod hp;
pub mod tc16;
pub mod tc8;

use crate::error::{Error, Result};
use crate::gpu::DeviceVec;
use crate::ops::{DeviceFeatures, FeaturesRef, GraphHandle, Impl, Precision};
use crate::tensor::Matrix;

/// Where output values go (defined in `ops`, shared with SpMM's per-call values).
pub use crate::ops::ValueOrder;

/// Host-to-host SDDMM in CSR order.
pub fn sddmm(g: &GraphHandle, a: &Matrix, b: &Matrix, imp: Impl, prec: Precision) -> Result<Vec<f32>> {
    check_shapes(g, a.rows, a.cols, b.rows, b.cols)?;
    let imp = match imp {
        Impl::Auto if !g.has_gpu() => Impl::Cpu,
        Impl::Auto if prec == Precision::F32 => Impl::Hp,
        other => other,
    };
    if imp == Impl::Cpu {
        return Ok(cpu::sddmm_cpu(g.csr(), a, b));
    }
    let gpu = g.gpu()?.clone();
    let (ad, bd) = (DeviceFeatures::upload(&gpu, a, prec)?, DeviceFeatures::upload(&gpu, b, prec)?);
    let mut out = DeviceVec::<f32>::zeros(&gpu, g.csr().nnz())?;
    sddmm_device(g, &ad, &bd, &mut out, imp, ValueOrder::Csr)?;
    let mut v = out.download(&gpu)?;
    v.truncate(g.csr().nnz());
    Ok(v)
}

/// Device SDDMM into `out` (at least as long as `order` needs): `out[e] = S[e] * dot(A[row(e)],
/// B[col(e)])` with S's handle values (all 1 on a pattern handle). In ME-BCRS order the slots
/// without an edge are written as 0 (Tc8: S's zero times the product; Hp: cleared first).
/// Precision follows the features' storage: f16 runs f16 tensor cores; f32 runs f32 (Hp, Cusparse) or tf32 (Tc8, Tc16).
/// `Impl::Auto`: f16 features run TC16 into CSR order (measured fastest on the H100 suite:
/// 23x / 12x cuSPARSE at K = 32 / 128 against TC8's 20x / 11x) and TC8 into ME-BCRS order;
/// f32 features run HP (exact f32). (TC8 into CSR order refuses a CSR with repeated entries:
/// they share one ME-BCRS slot.)
pub fn sddmm_device<'a, 'b>(
    g: &GraphHandle,
    a: impl Into<FeaturesRef<'a>>,
    b: impl Into<FeaturesRef<'b>>,
    out: &mut DeviceVec<f32>,
    imp: Impl,
    order: ValueOrder,
) -> Result<()> {
    let (a, b): (FeaturesRef, FeaturesRef) = (a.into(), b.into());
    check_shapes(g, a.rows(), a.cols(), b.rows(), b.cols())?;
    let imp = match (imp, a, order) {
        (Impl::Auto, FeaturesRef::F16(_), ValueOrder::Csr) => Impl::Tc16,
        (Impl::Auto, FeaturesRef::F16(_), ValueOrder::MeBcrs) => Impl::Tc8,
        (Impl::Auto, FeaturesRef::F32(_), _) => Impl::Hp,
        (other, _, _) => other,
    };
    match (imp, a, b) {
        (Impl::Hp, FeaturesRef::F32(a), FeaturesRef::F32(b)) => hp::sddmm_hp(g, a, b, out, order),
        (Impl::Tc8, a, b) => tc8::sddmm_tc8(g, a, b, out, order),
        (Impl::Tc16, a, b) => tc16::sddmm_tc16(g, a, b, out, order),
        (Impl::Cusparse, FeaturesRef::F32(a), FeaturesRef::F32(b)) if order == ValueOrder::Csr => cusparse::sddmm_cusparse(g, a, b, out),
        (imp, _, _) => Err(Error::Unsupported(format!(
            "SDDMM {imp:?} with {} features into {order:?} order is not available",
            match a {
                FeaturesRef::F32(_) => "f32",
                FeaturesRef::F16(_) => "f16",
            }
        ))),
    }
}

/// Whether every value of the handle's CSR is 1 (checked once per graph, not per call): our
/// kernels scale each entry by S's value, cuSPARSE's do not, and the layers' SDDMM
/// ([`crate::ops::nn::sddmm::SddmmOp`]) reads the pattern only; on a unit-valued graph all agree.
pub fn has_unit_values(g: &GraphHandle) -> Result<bool> {
    struct UnitValues(bool);
    Ok(g.cached(1, || Ok(UnitValues(g.csr().values().iter().all(|&v| v == 1.0))))?.0)
}

fn check_shapes(g: &GraphHandle, a_rows: usize, a_cols: usize, b_rows: usize, b_cols: usize) -> Result<()> {
    g.require_original_order("SDDMM")?;
    let (n, m) = (g.csr().n_rows(), g.csr().n_cols());
    if a_rows != n || b_rows != m || a_cols != b_cols {
        return Err(Error::Shape(format!("SDDMM: S is {n}x{m}, A {a_rows}x{a_cols}, B {b_rows}x{b_cols}")));
    }
    if a_cols == 0 {
        return Err(Error::Unsupported("feature width K = 0".into()));
    }
    Ok(())
}
