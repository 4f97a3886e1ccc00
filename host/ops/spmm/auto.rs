//! `Impl::Auto` for SpMM: a short measured search on first use, cached in the graph handle.
//!
//! A cost model from format statistics gets most graphs right but not all (L2 residency, row
//! skew and K interact); timing each candidate a few times on the real inputs costs a few
//! milliseconds once per (graph, precision, K) and then picks the fastest every call.
//! cuSPARSE is a candidate too (same storage type: f16 features give cuSPARSE f16), so Auto is
//! never slower than the vendor library on the same inputs.

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::ops::spmm::plan::{PlanKey, measured};
use crate::ops::spmm::value_order;
use crate::ops::{FeaturesRef, GraphHandle, Impl, Precision, ValueOrder};

/// Candidates for a feature storage type, fastest-first by expectation (ties keep this order).
fn candidates(x: FeaturesRef<'_>) -> &'static [Impl] {
    match x {
        FeaturesRef::F16(_) => &[Impl::Tc8, Impl::Tc16, Impl::Csr, Impl::Cusparse],
        FeaturesRef::F32(_) => &[Impl::Tc8, Impl::Tc16, Impl::Hp, Impl::Csr, Impl::Cusparse],
    }
}

/// The cached choice, measuring the candidates with `run` on first use. `order`: the order of
/// per-call edge values (`None`: the handle's values), which keeps only the candidates reading
/// that order (`spmm::value_order`); each order has its own cached choice.
pub fn choose(
    g: &GraphHandle,
    x: FeaturesRef<'_>,
    y: &mut DeviceMatrix<f32>,
    order: Option<ValueOrder>,
    run: impl Fn(&GraphHandle, FeaturesRef<'_>, &mut DeviceMatrix<f32>, Impl) -> Result<()>,
) -> Result<Impl> {
    let cands: Vec<Impl> = candidates(x).iter().copied().filter(|&imp| order.is_none_or(|o| value_order(imp) == Some(o))).collect();
    match cands[..] {
        [] => {
            return Err(Error::Unsupported(format!(
                "no SpMM implementation reads {} features with values in {order:?} order",
                x.type_name()
            )));
        }
        [only] => return Ok(only), // nothing to measure
        _ => {}
    }
    let (precision, width) = match x {
        FeaturesRef::F16(m) => (Precision::F16, m.ld),
        FeaturesRef::F32(m) => (Precision::F32, m.ld),
    };
    let key = PlanKey { precision, width, order, kernel: Impl::Auto };
    measured(g.gpu()?, g, key, &cands, |imp| run(g, x, y, imp), |_| {})
}
