//! The one dispatch plan for a GPU backend's sparse products, chosen once from what was asked
//! for (precision, `Impl`, edge layout): the SpMM kernel reading per-call edge values (never
//! `Auto`), the order the values are kept in, the SDDMM kernel writing them, and whether
//! products on fixed values measure the CSR kernel beside the plan's own (measured per width on
//! first use: `spmm::auto` for the `Impl` free functions, `ops::nn::spmm` for fixed values).

use crate::error::{Error, Result};
use crate::ops::spmm::value_order;
use crate::ops::{Impl, Precision, ValueOrder};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (precision, `Impl`, layout): the kernels and order `CudaBackend::new` and
    /// `with_edge_layout` chose before the plan existed (written out, not derived).
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
