//! The one dispatch plan for a GPU backend's sparse products, chosen once from what was asked
//! for (precision, `Impl`, edge layout): the SpMM kernel reading per-call edge values (never
//! `Auto`), the order the values are kept in, the SDDMM kernel writing them, and whether
//! products on fixed values measure the CSR kernel beside the plan's own. What needs timing is
//! measured on first use at a width by one function ([`measured`]) and kept in the graph handle
//! under one key type ([`PlanKey`]), for the `Impl` free functions (`spmm::auto`) and the
//! backend's products on fixed values (`ops::nn::spmm`) alike, with their candidate lists.

use std::any::Any;
use std::fmt::Debug;

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::gpu::timing::time_gpu;
use crate::ops::spmm::value_order;
use crate::ops::{GraphHandle, Impl, Precision, ValueOrder};

/// Where a backend keeps edge values between ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
pub enum EdgeLayout {
    /// In the order the SpMM kernel reads (ME-BCRS slots for TC8): no conversion per product.
    /// Best when edge values stay fixed (GCN's Â).
    Kernel,
    /// Compact in CSR order for every edge op (SDDMM, softmax, transposes), scattered into the
    /// ME-BCRS slots just before each TC8 product. Best when values change every step (AGNN's
    /// attention): ME-BCRS holds 8 slots per vector, about 7x the edges on power-law graphs,
    /// and every edge op would touch all of them.
    Csr,
}

/// The kernels a backend's sparse products run, and the order of its edge values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpmmPlan {
    /// The SpMM kernel on per-call edge values (a concrete one: never `Auto` nor `Cpu`).
    pub spmm: Impl,
    /// The SDDMM kernel (writes values in `order`).
    pub sddmm: Impl,
    /// The order edge values are kept in between ops.
    pub order: ValueOrder,
    /// `Impl::Auto` was asked for: products on fixed values measure `spmm` against the CSR
    /// kernel once per (side, width) and keep the faster.
    pub measure_fixed: bool,
}

impl SpmmPlan {
    /// The plan for `imp` at `precision` with values in `layout`. `Auto`: HP-SpMM on CUDA cores
    /// in f32, TC8 on tensor cores in tf32 and f16.
    ///
    /// cuSPARSE is not an `Auto` choice here: its SpMM broke CUDA-graph capture of the training
    /// step on pubmed (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, H100, CUDA 13), and the step is
    /// ours to run. `--impl cusparse` still works, eagerly if capture fails.
    pub fn choose(precision: Precision, imp: Impl, layout: EdgeLayout) -> Result<Self> {
        let spmm = match (imp, precision) {
            (Impl::Auto, Precision::F32) => Impl::Hp,
            (Impl::Auto, _) => Impl::Tc8,
            (Impl::Cpu, _) => return Err(Error::Unsupported("--impl cpu with a GPU backend; use --device cpu".into())),
            (Impl::Tc8 | Impl::Tc16, Precision::F32) => {
                return Err(Error::Unsupported(format!("{imp:?} runs on tensor cores: use --precision tf32 or f16")));
            }
            (other, _) => other,
        };
        let order = value_order(spmm)
            .ok_or_else(|| Error::Unsupported(format!("{spmm:?} cannot read per-call edge values; use auto, csr, hp, cusparse or tc8")))?;
        let plan = SpmmPlan { spmm, sddmm: spmm, order, measure_fixed: imp == Impl::Auto };
        Ok(plan.with_layout(precision, layout))
    }

    /// This plan with values kept in `layout`: only TC8 has a choice, the CUDA-core kernels
    /// read CSR order either way. The SDDMM kernel follows the order.
    pub fn with_layout(mut self, precision: Precision, layout: EdgeLayout) -> Self {
        if self.spmm == Impl::Tc8 {
            self.order = match layout {
                EdgeLayout::Kernel => ValueOrder::MeBcrs,
                EdgeLayout::Csr => ValueOrder::Csr,
            };
        }
        self.sddmm = match (self.order, precision) {
            (ValueOrder::MeBcrs, _) => Impl::Tc8,
            (ValueOrder::Csr, Precision::F16) => Impl::Tc16,
            (ValueOrder::Csr, _) => Impl::Hp,
        };
        self
    }
}

/// What a measured choice was made for: the key it is kept under in the graph handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanKey {
    /// The features' storage (`F16` or `F32`) for `Impl::Auto`'s free functions; the backend's
    /// precision for products on fixed values.
    pub precision: Precision,
    /// The features' padded width (leading dimension).
    pub width: usize,
    /// The order of per-call edge values (`None`: the handle's own values).
    pub order: Option<ValueOrder>,
    /// The kernel asked for: `Auto` for the free functions, the plan's `spmm` for fixed values.
    pub kernel: Impl,
}

impl PlanKey {
    /// The key packed into the handle's cache key (every field in its own bits).
    fn bits(&self) -> u64 {
        let prec: u64 = match self.precision {
            Precision::F32 => 0,
            Precision::Tf32 => 1,
            Precision::F16 => 2,
        };
        let order: u64 = match self.order {
            None => 0,
            Some(ValueOrder::Csr) => 1,
            Some(ValueOrder::MeBcrs) => 2,
        };
        (self.width as u64 & 0xffff_ffff) | (prec << 32) | (order << 34) | ((self.kernel as u64) << 36)
    }
}

/// A measured choice, kept in the graph handle under its [`PlanKey`].
struct Measured<C>(C);

/// The fastest of `cands` for `key` on `g`: timed with `run` on first use and kept in the handle
/// (an eager call: a recorded step replays what the eager one chose); ties keep `cands`' order.
/// Each candidate runs once untimed first (it translates and uploads what it needs). `chosen`
/// sees the winner once, when it is measured (to free what the others would have read).
pub fn measured<C: Copy + Debug + Send + Sync + Any>(
    gpu: &Gpu,
    g: &GraphHandle,
    key: PlanKey,
    cands: &[C],
    mut run: impl FnMut(C) -> Result<()>,
    chosen: impl FnOnce(C),
) -> Result<C> {
    let m = g.cached(key.bits(), || {
        let mut best: Option<(f64, C)> = None;
        let mut errors = Vec::new();
        for &c in cands {
            match run(c).and_then(|_| time_gpu(gpu, 1, 5, || run(c))) {
                Ok(t) if best.is_none_or(|(ms, _)| t.median_ms < ms) => best = Some((t.median_ms, c)),
                Ok(_) => {}
                Err(e) => errors.push(format!("{c:?}: {e}")),
            }
        }
        let (_, c) = best.ok_or_else(|| Error::Unsupported(format!("no SpMM candidate ran: {}", errors.join("; "))))?;
        chosen(c);
        Ok(Measured(c))
    })?;
    Ok(m.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (precision, `Impl`, layout): the kernels and order `CudaBackend::new` and
    /// `with_edge_layout` chose before the plan existed (written out, not derived).
    #[test]
    fn plan_keys_keep_every_field_apart() {
        let mut seen = std::collections::HashSet::new();
        for precision in [Precision::F32, Precision::Tf32, Precision::F16] {
            for width in [1, 64, 65, 1 << 20] {
                for order in [None, Some(ValueOrder::Csr), Some(ValueOrder::MeBcrs)] {
                    for kernel in [Impl::Auto, Impl::Csr, Impl::Hp, Impl::Cusparse, Impl::Tc8] {
                        assert!(seen.insert(PlanKey { precision, width, order, kernel }.bits()));
                    }
                }
            }
        }
    }

    #[test]
    fn choices_match_the_backend_before_the_plan() {
        use EdgeLayout::{Csr as LCsr, Kernel};
        use Impl::*;
        use Precision::*;
        use ValueOrder::{Csr as OCsr, MeBcrs};
        // (precision, asked, layout) -> (spmm, sddmm, order) or None for an error.
        let expect = |p: Precision, imp: Impl, l: EdgeLayout| -> Option<(Impl, Impl, ValueOrder)> {
            let cuda_core = |k| Some((k, if p == F16 { Tc16 } else { Hp }, OCsr));
            match (imp, p) {
                (Cpu, _) | (Tc16 | Hybrid, _) | (Tc8, F32) => None,
                (Auto, F32) => cuda_core(Hp),
                (Auto | Tc8, _) if l == Kernel => Some((Tc8, Tc8, MeBcrs)),
                (Auto | Tc8, _) => Some((Tc8, if p == F16 { Tc16 } else { Hp }, OCsr)),
                (k @ (Csr | Hp | Cusparse), _) => cuda_core(k),
            }
        };
        let mut checked = 0;
        for p in [F32, Tf32, F16] {
            for imp in [Auto, Cpu, Csr, Hp, Tc8, Tc16, Hybrid, Cusparse] {
                for l in [Kernel, LCsr] {
                    let got = SpmmPlan::choose(p, imp, l).ok();
                    assert_eq!(got.map(|g| (g.spmm, g.sddmm, g.order)), expect(p, imp, l), "{p:?} {imp:?} {l:?}");
                    if let Some(g) = got {
                        assert_eq!(g.measure_fixed, imp == Auto, "{p:?} {imp:?} {l:?}");
                        // A layout chosen after the backend was made (`with_edge_layout`) agrees.
                        let other = if l == Kernel { LCsr } else { Kernel };
                        assert_eq!(SpmmPlan::choose(p, imp, other).ok().map(|o| o.with_layout(p, l)), Some(g));
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 3 * 2 * 4 + 2 * 2, "Auto, Csr, Hp, Cusparse everywhere; Tc8 in tf32 and f16");
    }
}
