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
use crate::ops::{DeviceFeatures, GraphHandle, Impl};

/// The implementation Auto settled on for one (precision, padded K).
pub struct AutoChoice(pub Impl);

/// Candidates for a feature storage type, fastest-first by expectation (ties keep this order).
fn candidates(x: &DeviceFeatures) -> &'static [Impl] {
    match x {
        DeviceFeatures::F16(_) => &[Impl::Tc8, Impl::Tc16, Impl::Cusparse],
        DeviceFeatures::F32(_) => &[Impl::Tc8, Impl::Tc16, Impl::Hp, Impl::Csr, Impl::Cusparse],
    }
}

/// The cached choice, measuring the candidates with `run` on first use.
pub fn choose(
    g: &GraphHandle,
    x: &DeviceFeatures,
    y: &mut DeviceMatrix<f32>,
    run: impl Fn(&GraphHandle, &DeviceFeatures, &mut DeviceMatrix<f32>, Impl) -> Result<()>,
) -> Result<Impl> {
    let key = match x {
        DeviceFeatures::F16(m) => (1u64 << 32) | m.ld as u64,
        DeviceFeatures::F32(m) => m.ld as u64,
    };
    let gpu = g.gpu()?.clone();
    let choice = g.cached(key, || {
        let mut best: Option<(f64, Impl)> = None;
        let mut errors = Vec::new();
        for &imp in candidates(x) {
            // The first call also translates and uploads the format: keep it out of the timing.
            match run(g, x, y, imp).and_then(|_| time_gpu(&gpu, 1, 5, || run(g, x, y, imp))) {
                Ok(t) if best.is_none_or(|(ms, _)| t.median_ms < ms) => best = Some((t.median_ms, imp)),
                Ok(_) => {}
                Err(e) => errors.push(format!("{imp:?}: {e}")),
            }
        }
        best.map(|(_, imp)| AutoChoice(imp))
            .ok_or_else(|| Error::Unsupported(format!("no SpMM implementation ran: {}", errors.join("; "))))
    })?;
    Ok(choice.0)
}
