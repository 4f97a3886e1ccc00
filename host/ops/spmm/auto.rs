//! `Impl::Auto` for SpMM: a short measured search on first use, cached in the graph handle.
//!
//! A cost model from format statistics gets most graphs right but not all (L2 residency, row
//! skew and K interact); timing each candidate a few times on the real inputs costs a few
//! milliseconds once per (graph, precision, K) and then picks the fastest every call.
//! cuSPARSE is a candidate too (same storage type: f16 features give cuSPARSE f16), so Auto is
//! never slower than the vendor library on the same inputs.

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::timing::time_gpu;
use crate::ops::spmm::value_order;
use crate::ops::{FeaturesRef, GraphHandle, Impl, ValueOrder};

/// The implementation Auto settled on for one (precision, padded K).
pub struct AutoChoice(pub Impl);

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
    if let [only] = cands[..] {
        return Ok(only); // nothing to measure
    }
    let order_tag: u64 = match order {
        None => 0,
        Some(ValueOrder::Csr) => 1,
        Some(ValueOrder::MeBcrs) => 2,
    };
    let key = match x {
        FeaturesRef::F16(m) => (1u64 << 32) | m.ld as u64,
        FeaturesRef::F32(m) => m.ld as u64,
    } | (order_tag << 33);
    let gpu = g.gpu()?.clone();
    let choice = g.cached(key, || {
        let mut best: Option<(f64, Impl)> = None;
        let mut errors = Vec::new();
        for &imp in &cands {
            // The first call also translates and uploads the format: keep it out of the timing.
            match run(g, x, y, imp).and_then(|_| time_gpu(&gpu, 1, 5, || run(g, x, y, imp))) {
                Ok(t) if best.is_none_or(|(ms, _)| t.median_ms < ms) => best = Some((t.median_ms, imp)),
                Ok(_) => {}
                Err(e) => errors.push(format!("{imp:?}: {e}")),
            }
        }
        best.map(|(_, imp)| AutoChoice(imp)).ok_or_else(|| {
            Error::Unsupported(if cands.is_empty() {
                format!("no SpMM implementation reads {} features with values in {order:?} order", x.type_name())
            } else {
                format!("no SpMM implementation ran: {}", errors.join("; "))
            })
        })
    })?;
    Ok(choice.0)
}
