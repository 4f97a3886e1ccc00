//! The sparse product a layer runs, `Y = S X` or `Y = Sᵀ X`, with edge values passed per call
//! (GCN's fixed Â, attention weights that change every step). The CPU side is the one CPU SpMM
//! ([`crate::ops::spmm::cpu::spmm_rows`]); the GPU side picks our kernels by the backend's
//! precision and edge-value order (f16 copies cast on the device just before the product), and
//! for fixed values under `Impl::Auto` measures that choice against the CSR kernel once per
//! (side, width): on sparse scattered graphs TC8's 8x1 vectors hold ~1 non-zero each and the
//! CSR kernel moves a fraction of its bytes (bench/NOTES.md, issue 42).

use crate::error::{Error, Result};
use crate::gpu::timing::time_gpu;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::backend::{Backend, Side};
use crate::ops::spmm::cpu::spmm_rows;
use crate::ops::spmm::spmm_device_values;
use crate::ops::values::{cast_to_f16, gather_from_mebcrs};
use crate::ops::{EdgeValues, FeaturesRef, Impl, Precision, ValueOrder};
use crate::util::Real;
use half::f16;

pub trait SpmmOp: Backend {
    /// What values that stay fixed across many products keep beside them (see [`SpmmOp::fix`]).
    type Fixed;

    /// `y = S x` (or `Sᵀ x`) with `values` laid out for that side.
    fn spmm(&self, g: &Self::Graph, side: Side, values: &Self::Edges, x: &Self::Mat, y: &mut Self::Mat) -> Result<()>;

    /// Prepares `values` (laid out for `side` of `g`) for many products that leave them
    /// unchanged (GCN's Â): on an f16 GPU backend in ME-BCRS order their f16 copy, cast once
    /// instead of before every product; on a GPU backend choosing its kernels (`Impl::Auto`)
    /// with values in ME-BCRS order also a CSR-ordered copy for the CSR kernel; nothing
    /// elsewhere. The copies are snapshots: whoever rewrites `values` must drop them.
    fn fix(&self, g: &Self::Graph, side: Side, values: &Self::Edges) -> Result<Self::Fixed>;

    /// [`SpmmOp::spmm`] with `values` as [`SpmmOp::fix`] prepared them (`fixed` made from these
    /// very values, unchanged since).
    fn spmm_fixed(
        &self,
        g: &Self::Graph,
        side: Side,
        values: &Self::Edges,
        fixed: &Self::Fixed,
        x: &Self::Mat,
        y: &mut Self::Mat,
    ) -> Result<()>;
}

impl<T: Real> SpmmOp for CpuBackend<T> {
    type Fixed = ();

    fn fix(&self, _: &HostGraph<T>, _: Side, _: &Vec<T>) -> Result<()> {
        Ok(())
    }

    fn spmm_fixed(&self, g: &HostGraph<T>, side: Side, values: &Vec<T>, _: &(), x: &HostMat<T>, y: &mut HostMat<T>) -> Result<()> {
        self.spmm(g, side, values, x, y)
    }

    fn spmm(&self, g: &HostGraph<T>, side: Side, values: &Vec<T>, x: &HostMat<T>, y: &mut HostMat<T>) -> Result<()> {
        let s = self.side(g, side);
        if values.len() != s.nnz() || x.rows != s.n_cols() || y.rows != s.n_rows() || y.cols != x.cols {
            return Err(Error::Shape(format!(
                "spmm: S {}x{} with {} values for {} nonzeros, X {}x{}, Y {}x{}",
                s.n_rows(),
                s.n_cols(),
                values.len(),
                s.nnz(),
                x.rows,
                x.cols,
                y.rows,
                y.cols
            )));
        }
        spmm_rows(s.row_ptr(), s.col_idx(), values, &x.data, x.cols, &mut y.data);
        Ok(())
    }
}

/// Fixed edge values as [`SpmmOp::fix`] prepared them on the GPU.
pub struct FixedValues {
    /// f16 copy of ME-BCRS-ordered values (f16 backend, `ValueOrder::MeBcrs`): what TC8 reads.
    half: Option<DeviceVec<f16>>,
    /// CSR-ordered copy of ME-BCRS-ordered values (`Impl::Auto`): what the CSR kernel reads.
    /// Values already in CSR order are read as they are.
    csr: Option<DeviceVec<f32>>,
}

/// One way to run a product on fixed values ([`CudaBackend::with_fixed_spmm`] forces one;
/// by default `Impl::Auto` measures them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixedPath {
    /// The backend's own kernel (`spmm_impl`) as [`SpmmOp::spmm`] runs it (on the f16 copy
    /// where there is one).
    Stored,
    /// The CSR kernel on CSR-ordered values and an f16 copy of X.
    CsrHalf,
    /// The CSR kernel on CSR-ordered values and X as it is (f32).
    CsrF32,
}

/// Below this many entries `Impl::Auto` keeps the backend's own kernel for fixed values without
/// measuring: a product there takes microseconds, and the measurement (21 products a side and
/// width) would cost more than it saves on a short run or on a sampled batch's model, which is
/// built per batch. The CSR kernel's advantage is on large sparse graphs (bench/NOTES.md).
pub const FIXED_MEASURE_MIN_NNZ: usize = 1 << 20;

/// [`FixedPath`] measured fastest for one side's handle at one width and precision.
struct FixedChoice(FixedPath);

impl SpmmOp for CudaBackend {
    type Fixed = FixedValues;

    fn spmm(&self, g: &GpuGraph, side: Side, values: &DeviceVec<f32>, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed(self.op_name(side, FixedPath::Stored), || self.spmm_stored(g, side, values, None, x, y))
    }

    fn fix(&self, g: &GpuGraph, side: Side, values: &DeviceVec<f32>) -> Result<FixedValues> {
        let half = if self.half_kernel_order() {
            let mut vh = DeviceVec::zeros(&self.gpu, values.len())?;
            cast_to_f16(&self.gpu, values, &mut vh)?;
            Some(vh)
        } else {
            None
        };
        let h = g.side(side)?;
        let csr = if self.csr_copy(h.csr().nnz()) {
            let mut v = DeviceVec::zeros(&self.gpu, h.csr().nnz().max(1))?;
            gather_from_mebcrs(&h, values, &mut v)?;
            Some(v)
        } else {
            None
        };
        Ok(FixedValues { half, csr })
    }

    fn spmm_fixed(
        &self,
        g: &GpuGraph,
        side: Side,
        values: &DeviceVec<f32>,
        fixed: &FixedValues,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        if let Some(vh) = &fixed.half
            && vh.len() != values.len()
        {
            return Err(Error::Shape(format!("spmm_fixed: {} fixed f16 values for {} values", vh.len(), values.len())));
        }
        let p = FixedProduct { g, side, values, fixed };
        let path = self.fixed_path(&p, x, y)?;
        self.timed(self.op_name(side, path), || self.run_fixed(&p, path, x, y))
    }
}

/// The sparse operand of a product on fixed values.
struct FixedProduct<'a> {
    g: &'a GpuGraph,
    side: Side,
    values: &'a DeviceVec<f32>,
    fixed: &'a FixedValues,
}

impl CudaBackend {
    /// f16 products on values in the kernel's (ME-BCRS) order: the values are cast to f16.
    fn half_kernel_order(&self) -> bool {
        self.precision == Precision::F16 && self.order == ValueOrder::MeBcrs
    }

    /// Whether products on fixed values measure the CSR kernel beside the backend's own.
    fn csr_candidate(&self) -> bool {
        self.spmm_auto && self.spmm_impl != Impl::Csr
    }

    /// Whether products on fixed values of a pattern of `nnz` entries are measured.
    fn measures(&self, nnz: usize) -> bool {
        self.csr_candidate() && nnz >= FIXED_MEASURE_MIN_NNZ
    }

    /// Whether [`SpmmOp::fix`] keeps a CSR-ordered copy of ME-BCRS-ordered values of a pattern
    /// of `nnz` entries: the CSR kernel may read them (measured or forced).
    fn csr_copy(&self, nnz: usize) -> bool {
        self.order == ValueOrder::MeBcrs
            && match self.fixed_spmm {
                None => self.measures(nnz),
                Some(FixedPath::Stored) => false,
                Some(FixedPath::CsrHalf | FixedPath::CsrF32) => true,
            }
    }

    /// The op's name in `--profile-ops`: the side and the kernel that ran.
    fn op_name(&self, side: Side, path: FixedPath) -> &'static str {
        let kernel = match path {
            FixedPath::CsrHalf => "csr f16",
            FixedPath::CsrF32 => "csr f32",
            FixedPath::Stored => match (self.spmm_impl, self.precision) {
                (Impl::Tc8, Precision::F16) => "tc8 f16",
                (Impl::Tc8, _) => "tc8 tf32",
                (Impl::Hp, _) => "hp",
                (Impl::Csr, Precision::F16) => "csr f16",
                (Impl::Csr, _) => "csr f32",
                (Impl::Cusparse, _) => "cusparse",
                _ => "other",
            },
        };
        match (side, kernel) {
            (Side::Forward, "tc8 f16") => "spmm tc8 f16",
            (Side::Forward, "tc8 tf32") => "spmm tc8 tf32",
            (Side::Forward, "hp") => "spmm hp",
            (Side::Forward, "csr f16") => "spmm csr f16",
            (Side::Forward, "csr f32") => "spmm csr f32",
            (Side::Forward, "cusparse") => "spmm cusparse",
            (Side::Forward, _) => "spmm",
            (Side::Transposed, "tc8 f16") => "spmm (transposed) tc8 f16",
            (Side::Transposed, "tc8 tf32") => "spmm (transposed) tc8 tf32",
            (Side::Transposed, "hp") => "spmm (transposed) hp",
            (Side::Transposed, "csr f16") => "spmm (transposed) csr f16",
            (Side::Transposed, "csr f32") => "spmm (transposed) csr f32",
            (Side::Transposed, "cusparse") => "spmm (transposed) cusparse",
            (Side::Transposed, _) => "spmm (transposed)",
        }
    }

    /// Which path products on `fixed` take at X's width: the forced one if any, the backend's
    /// own unless it chooses (`Impl::Auto`), else the fastest of the candidates, timed on first use (an eager step:
    /// a recorded step replays what the eager one chose) and kept in the side's handle.
    fn fixed_path(&self, p: &FixedProduct<'_>, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<FixedPath> {
        if let Some(path) = self.fixed_spmm {
            return Ok(path);
        }
        let h = p.g.side(p.side)?;
        if !self.measures(h.csr().nnz()) || (self.order == ValueOrder::MeBcrs && p.fixed.csr.is_none()) {
            return Ok(FixedPath::Stored);
        }
        let mut cands = vec![FixedPath::Stored, FixedPath::CsrF32];
        if self.precision == Precision::F16 {
            cands.insert(1, FixedPath::CsrHalf);
        }
        let prec_tag: u64 = match self.precision {
            Precision::F32 => 0,
            Precision::Tf32 => 1,
            Precision::F16 => 2,
        };
        let order_tag: u64 = match self.order {
            ValueOrder::Csr => 0,
            ValueOrder::MeBcrs => 1,
        };
        let key = x.ld as u64 | (prec_tag << 32) | (order_tag << 34) | ((self.spmm_impl as u64) << 36);
        let choice = h.cached(key, || {
            let mut best: Option<(f64, FixedPath)> = None;
            let mut errors = Vec::new();
            for &path in &cands {
                let mut run = || self.run_fixed(p, path, x, y);
                // The first run translates and uploads what the path needs: not timed.
                match run().and_then(|_| time_gpu(&self.gpu, 1, 5, run)) {
                    Ok(t) if best.is_none_or(|(ms, _)| t.median_ms < ms) => best = Some((t.median_ms, path)),
                    Ok(_) => {}
                    Err(e) => errors.push(format!("{path:?}: {e}")),
                }
            }
            best.map(|(_, p)| FixedChoice(p)).ok_or_else(|| Error::Unsupported(format!("no SpMM path ran: {}", errors.join("; "))))
        })?;
        Ok(choice.0)
    }

    /// One product on fixed values along `path`.
    fn run_fixed(&self, p: &FixedProduct<'_>, path: FixedPath, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        let csr_values = || -> Result<&DeviceVec<f32>> {
            match self.order {
                ValueOrder::Csr => Ok(p.values),
                ValueOrder::MeBcrs => {
                    p.fixed.csr.as_ref().ok_or_else(|| Error::Unsupported("spmm_fixed: no CSR-ordered copy of the values".into()))
                }
            }
        };
        match path {
            FixedPath::Stored => self.spmm_stored(p.g, p.side, p.values, p.fixed.half.as_ref(), x, y),
            FixedPath::CsrHalf => {
                let (h, v) = (p.g.side(p.side)?, csr_values()?);
                self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::Csr(v), FeaturesRef::F16(xh), y, Impl::Csr))
            }
            FixedPath::CsrF32 => {
                let h = p.g.side(p.side)?;
                spmm_device_values(&h, EdgeValues::Csr(csr_values()?), FeaturesRef::F32(x), y, Impl::Csr)
            }
        }
    }

    /// A product with the backend's own kernel; `half`: the values' f16 copy where one was
    /// made once ([`SpmmOp::fix`]), else (f16 on ME-BCRS order) cast into a scratch copy now.
    fn spmm_stored(
        &self,
        g: &GpuGraph,
        side: Side,
        values: &DeviceVec<f32>,
        half: Option<&DeviceVec<f16>>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        if !self.half_kernel_order() {
            return self.spmm_as_stored(g, side, values, x, y);
        }
        if let Some(vh) = half {
            return self.spmm_half_values(g, side, vh, x, y);
        }
        // Values that change every step: cast into a scratch copy per product.
        let taken = self.half.lock().expect("f16 scratch poisoned").vecs.remove(&values.len());
        let mut vh = match taken {
            Some(v) => v,
            None => DeviceVec::zeros(&self.gpu, values.len())?,
        };
        cast_to_f16(&self.gpu, values, &mut vh)?;
        let r = self.spmm_half_values(g, side, &vh, x, y);
        self.half.lock().expect("f16 scratch poisoned").vecs.insert(values.len(), vh);
        r
    }

    /// f16 SpMM with f16 values in ME-BCRS order (x cast to f16 on the way).
    fn spmm_half_values(
        &self,
        g: &GpuGraph,
        side: Side,
        vh: &DeviceVec<f16>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        let h = g.side(side)?;
        self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::MeBcrsF16(vh), FeaturesRef::F16(xh), y, self.spmm_impl))
    }

    /// Every product other than f16 on ME-BCRS values: values read as they are (scattered from
    /// CSR order into TC8's slots first under `EdgeLayout::Csr`).
    fn spmm_as_stored(
        &self,
        g: &GpuGraph,
        side: Side,
        values: &DeviceVec<f32>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        let h = g.side(side)?;
        if self.spmm_impl == Impl::Tc8 && self.order == ValueOrder::Csr {
            return self.spmm_tc8_from_csr(g, side, values, x, y);
        }
        match (self.precision, self.order) {
            (Precision::F16, ValueOrder::Csr) => {
                self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F16(xh), y, self.spmm_impl))
            }
            (_, ValueOrder::Csr) => spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F32(x), y, self.spmm_impl),
            (_, ValueOrder::MeBcrs) => spmm_device_values(&h, EdgeValues::MeBcrs(values), FeaturesRef::F32(x), y, self.spmm_impl),
        }
    }
}
