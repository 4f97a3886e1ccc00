//! The sparse product a layer runs, `Y = S X` or `Y = Sᵀ X`, with edge values passed per call
//! (GCN's fixed Â, attention weights that change every step). The CPU side is the one CPU SpMM
//! ([`crate::ops::spmm::cpu::spmm_rows`]); the GPU side picks our kernels by the backend's
//! precision and edge-value order (f16 copies cast on the device just before the product), and
//! for fixed values under `Impl::Auto` measures that choice against the CSR kernel once per
//! (side, width): on sparse scattered graphs TC8's 8x1 vectors hold ~1 non-zero each and the
//! CSR kernel moves a fraction of its bytes (bench/NOTES.md, issue 42).

use crate::error::{Error, Result};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::cpu::{CpuBackend, HostGraph, HostMat};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::ops::backend::{Backend, Side};
use crate::ops::spmm::cpu::spmm_rows;
use crate::ops::spmm::plan::{PlanKey, measured};
use crate::ops::spmm::spmm_device_values;
use crate::ops::values::{cast_to_f16, gather_from_mebcrs, scatter_to_mebcrs};
use crate::ops::{EdgeValues, FeaturesRef, Impl, Precision, ValueOrder};
use crate::util::Real;
use half::f16;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

pub trait SpmmOp: Backend {
    /// Values that stay fixed across many products, with what the backend keeps beside them
    /// (see [`SpmmOp::fix`]); they own the values.
    type Fixed;

    /// `y = S x` (or `Sᵀ x`) with `values` laid out for that side.
    fn spmm(&self, g: &Self::Graph, side: Side, values: &Self::Edges, x: &Self::Mat, y: &mut Self::Mat) -> Result<()>;

    /// Takes `values` (laid out for `side` of `g`) for many products that leave them unchanged
    /// (GCN's Â): on an f16 GPU backend in ME-BCRS order their f16 copy, cast once instead of
    /// before every product; on a GPU backend choosing its kernels (`Impl::Auto`) with values in
    /// ME-BCRS order also a CSR-ordered copy for the CSR kernel; nothing elsewhere. Only what
    /// the products read is kept on the device: the f32 ME-BCRS values of an f16 backend are
    /// not (its kernel reads the f16 copy), nor, once every measured width took the CSR kernel,
    /// the copy the backend's own kernel reads (made again from the CSR-ordered copy where a
    /// later width measures it; bench/NOTES.md, issue 42 item 4).
    fn fix(&self, g: &Self::Graph, side: Side, values: Self::Edges) -> Result<Self::Fixed>;

    /// [`SpmmOp::spmm`] with the values [`SpmmOp::fix`] took.
    fn spmm_fixed(&self, g: &Self::Graph, side: Side, fixed: &Self::Fixed, x: &Self::Mat, y: &mut Self::Mat) -> Result<()>;

    /// The values [`SpmmOp::fix`] took, given back to be rewritten (made again on the device
    /// where they were not kept: bit for bit the ones taken).
    fn unfix(g: &Self::Graph, side: Side, fixed: Self::Fixed) -> Result<Self::Edges>;

    /// [`SpmmOp::unfix`] of the forward side's values of a graph that is its own transpose
    /// array for array ([`crate::graph::ops::is_symmetric`]), whose one fixed set stood for both
    /// sides: [forward, transposed] layouts, the second a copy of the first (the transposed
    /// side's arrays are the forward side's, so are its value slots).
    fn unfix_symmetric(g: &Self::Graph, fixed: Self::Fixed) -> Result<[Self::Edges; 2]>;
}

impl<T: Real> SpmmOp for CpuBackend<T> {
    type Fixed = Vec<T>;

    fn fix(&self, _: &HostGraph<T>, _: Side, values: Vec<T>) -> Result<Vec<T>> {
        Ok(values)
    }

    fn spmm_fixed(&self, g: &HostGraph<T>, side: Side, values: &Vec<T>, x: &HostMat<T>, y: &mut HostMat<T>) -> Result<()> {
        self.spmm(g, side, values, x, y)
    }

    fn unfix(_: &HostGraph<T>, _: Side, values: Vec<T>) -> Result<Vec<T>> {
        Ok(values)
    }

    fn unfix_symmetric(_: &HostGraph<T>, values: Vec<T>) -> Result<[Vec<T>; 2]> {
        Ok([values.clone(), values])
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

/// Fixed edge values as [`SpmmOp::fix`] took them on the GPU: only what the products read.
pub struct FixedValues {
    /// What the backend's own kernel reads ([`FixedPath::Stored`]): the values as given (f32,
    /// in the backend's order) or, f16 on ME-BCRS order, their f16 copy. `None` while released:
    /// on ME-BCRS order with a CSR-ordered copy, once the measured widths all took the CSR
    /// kernel (or a CSR path is forced); made again from `csr` when a measurement runs the
    /// backend's kernel (eager: a recorded step only replays measured choices).
    stored: Mutex<Option<Stored>>,
    /// The f32 values as given, beside an f16 `stored` where no CSR-ordered copy can give them
    /// back ([`SpmmOp::unfix`]): patterns too small to be measured.
    kept: Option<DeviceVec<f32>>,
    /// CSR-ordered copy of ME-BCRS-ordered values (`Impl::Auto` measuring, or a CSR path forced):
    /// what the CSR kernel reads. Values already in CSR order are `stored`, read as they are.
    csr: Option<DeviceVec<f32>>,
    /// How many values the backend's order holds ([`GraphHandle::value_len`](crate::ops::GraphHandle::value_len)).
    len: usize,
    /// A measured width took the backend's own kernel: `stored` is never released again.
    stored_chosen: AtomicBool,
}

impl FixedValues {
    /// Bytes these values hold on the device now (the accounts of issue 42's item 4, tests).
    pub fn device_bytes(&self) -> usize {
        let stored = match &*self.stored.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(Stored::F32(v)) => 4 * v.len(),
            Some(Stored::F16(v)) => 2 * v.len(),
            None => 0,
        };
        stored + 4 * (self.kept.as_ref().map_or(0, |v| v.len()) + self.csr.as_ref().map_or(0, |v| v.len()))
    }

    /// Frees what the backend's own kernel reads, where the CSR-ordered copy can make it again
    /// and no measured width chose that kernel.
    fn release_stored(&self) {
        if self.csr.is_some() && !self.stored_chosen.load(Ordering::Relaxed) {
            *self.stored.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

/// The values the backend's own kernel reads.
enum Stored {
    F32(DeviceVec<f32>),
    F16(DeviceVec<f16>),
}

/// One way to run a product on fixed values ([`CudaBackend::with_fixed_spmm`] forces one;
/// by default `Impl::Auto` measures them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixedPath {
    /// The backend's own kernel (the plan's `spmm`) as [`SpmmOp::spmm`] runs it (on the f16 copy
    /// where there is one).
    Stored,
    /// The CSR kernel on CSR-ordered values and an f16 copy of X.
    CsrHalf,
    /// The CSR kernel on CSR-ordered values and X as it is (f32).
    CsrF32,
}

/// The path [`CudaBackend::with_fixed_spmm`] forces (`None`: as `Impl::Auto` measures), kept in
/// the backend's op state.
#[derive(Clone, Copy, Default)]
struct ForcedFixedPath(Option<FixedPath>);

impl CudaBackend {
    /// Run products on fixed values (GCN's, SAGE's and GIN's adjacency) along `path` rather
    /// than the measured choice of `Impl::Auto` (`None`): for tests and comparisons.
    pub fn with_fixed_spmm(mut self, path: Option<FixedPath>) -> Self {
        self.op_state.set(ForcedFixedPath(path));
        self
    }

    /// The path products on fixed values are forced along, if any.
    fn fixed_spmm(&self) -> Option<FixedPath> {
        self.op_state.get::<ForcedFixedPath>().0
    }
}

/// Below this many entries `Impl::Auto` keeps the backend's own kernel for fixed values without
/// measuring: a product there takes microseconds, and the measurement (21 products a side and
/// width) would cost more than it saves on a short run or on a sampled batch's model, which is
/// built per batch. The CSR kernel's advantage is on large sparse graphs (bench/NOTES.md).
pub const FIXED_MEASURE_MIN_NNZ: usize = 1 << 20;

impl SpmmOp for CudaBackend {
    type Fixed = FixedValues;

    fn spmm(&self, g: &GpuGraph, side: Side, values: &DeviceVec<f32>, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed(self.op_name(side, FixedPath::Stored), || self.spmm_values(g, side, values, x, y))
    }

    fn fix(&self, g: &GpuGraph, side: Side, values: DeviceVec<f32>) -> Result<FixedValues> {
        let h = g.side(side)?;
        let len = values.len();
        let csr = if self.csr_copy(h.csr().nnz()) {
            let mut v = DeviceVec::zeros(&self.gpu, h.csr().nnz().max(1))?;
            gather_from_mebcrs(&h, &values, &mut v)?;
            Some(v)
        } else {
            None
        };
        // A forced CSR path never runs the backend's kernel; the CSR copy gives the values back.
        let csr_forced = csr.is_some() && matches!(self.fixed_spmm(), Some(FixedPath::CsrHalf | FixedPath::CsrF32));
        let (stored, kept) = if csr_forced {
            (None, None)
        } else if self.half_kernel_order() {
            let mut vh = DeviceVec::zeros(&self.gpu, len)?;
            cast_to_f16(&self.gpu, &values, &mut vh)?;
            // The f32 values are read by no product: kept only where nothing else gives them back.
            (Some(Stored::F16(vh)), csr.is_none().then_some(values))
        } else {
            (Some(Stored::F32(values)), None)
        };
        // The graph is this backend's own (`Backend::graph`): its products all pass values, so
        // the handle's copy of the values, from which `values` was copied, is read no more.
        h.release_own_values();
        Ok(FixedValues { stored: Mutex::new(stored), kept, csr, len, stored_chosen: AtomicBool::new(false) })
    }

    fn spmm_fixed(&self, g: &GpuGraph, side: Side, fixed: &FixedValues, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        let p = FixedProduct { g, side, fixed };
        let path = self.fixed_path(&p, x, y)?;
        self.timed(self.op_name(side, path), || self.run_fixed(&p, path, x, y))
    }

    fn unfix(g: &GpuGraph, side: Side, fixed: FixedValues) -> Result<DeviceVec<f32>> {
        let FixedValues { stored, kept, csr, len, .. } = fixed;
        if let Some(v) = kept {
            return Ok(v);
        }
        if let Some(Stored::F32(v)) = stored.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Ok(v);
        }
        // Released or f16: the values were in ME-BCRS order and their CSR-ordered copy is kept.
        let csr = csr.ok_or_else(|| Error::Unsupported("unfix: fixed values neither kept in f32 nor in CSR order".into()))?;
        let h = g.side(side)?;
        let mut v = DeviceVec::zeros(h.gpu()?, len)?;
        scatter_to_mebcrs(&h, &csr, &mut v)?;
        Ok(v)
    }

    fn unfix_symmetric(g: &GpuGraph, fixed: FixedValues) -> Result<[DeviceVec<f32>; 2]> {
        let v = Self::unfix(g, Side::Forward, fixed)?;
        let gpu = g.handle.gpu()?;
        let mut t = DeviceVec::zeros(gpu, v.len())?;
        gpu.stream().memcpy_dtod(v.slice(), t.slice_mut()).map_err(|e| Error::cuda("symmetric values copy", e))?;
        Ok([v, t])
    }
}

/// The sparse operand of a product on fixed values.
struct FixedProduct<'a> {
    g: &'a GpuGraph,
    side: Side,
    fixed: &'a FixedValues,
}

impl CudaBackend {
    /// f16 products on values in the kernel's (ME-BCRS) order: the values are cast to f16.
    fn half_kernel_order(&self) -> bool {
        self.precision == Precision::F16 && self.plan.order == ValueOrder::MeBcrs
    }

    /// Whether products on fixed values measure the CSR kernel beside the backend's own.
    fn csr_candidate(&self) -> bool {
        self.plan.measure_fixed && self.plan.spmm != Impl::Csr
    }

    /// Whether products on fixed values of a pattern of `nnz` entries are measured.
    fn measures(&self, nnz: usize) -> bool {
        self.csr_candidate() && nnz >= FIXED_MEASURE_MIN_NNZ
    }

    /// Whether [`SpmmOp::fix`] keeps a CSR-ordered copy of ME-BCRS-ordered values of a pattern
    /// of `nnz` entries: the CSR kernel may read them (measured or forced).
    fn csr_copy(&self, nnz: usize) -> bool {
        self.plan.order == ValueOrder::MeBcrs
            && match self.fixed_spmm() {
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
            FixedPath::Stored => match (self.plan.spmm, self.precision) {
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
        if let Some(path) = self.fixed_spmm() {
            return Ok(path);
        }
        let h = p.g.side(p.side)?;
        if !self.measures(h.csr().nnz()) || (self.plan.order == ValueOrder::MeBcrs && p.fixed.csr.is_none()) {
            return Ok(FixedPath::Stored);
        }
        let mut cands = vec![FixedPath::Stored, FixedPath::CsrF32];
        if self.precision == Precision::F16 {
            cands.insert(1, FixedPath::CsrHalf);
        }
        let key = PlanKey { precision: self.precision, width: x.ld, order: Some(self.plan.order), kernel: self.plan.spmm };
        let chosen = |path| {
            // What this width's choice leaves unread goes now (eager: measured outside capture).
            if path == FixedPath::Stored {
                p.fixed.stored_chosen.store(true, Ordering::Relaxed);
            } else {
                p.fixed.release_stored();
            }
        };
        measured(&self.gpu, &h, key, &cands, |path| self.run_fixed(p, path, x, y), chosen)
    }

    /// One product on fixed values along `path`.
    fn run_fixed(&self, p: &FixedProduct<'_>, path: FixedPath, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        let mut stored = p.fixed.stored.lock().unwrap_or_else(|e| e.into_inner());
        if path == FixedPath::Stored {
            if stored.is_none() {
                *stored = Some(self.restore_stored(p)?);
            }
            return match stored.as_ref().expect("made above") {
                Stored::F32(v) => self.spmm_as_stored(p.g, p.side, v, x, y),
                Stored::F16(vh) => self.spmm_half_values(p.g, p.side, vh, x, y),
            };
        }
        // Values in CSR order are read as they are (never released: there is no other copy).
        let v = match (&p.fixed.csr, stored.as_ref()) {
            (Some(v), _) if self.plan.order == ValueOrder::MeBcrs => v,
            (_, Some(Stored::F32(v))) if self.plan.order == ValueOrder::Csr => v,
            _ => return Err(Error::Unsupported("spmm_fixed: no CSR-ordered copy of the values".into())),
        };
        let h = p.g.side(p.side)?;
        match path {
            FixedPath::CsrHalf => self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::Csr(v), FeaturesRef::F16(xh), y, Impl::Csr)),
            _ => spmm_device_values(&h, EdgeValues::Csr(v), FeaturesRef::F32(x), y, Impl::Csr),
        }
    }

    /// The values the backend's own kernel reads, made again from the CSR-ordered copy (the
    /// same bits as [`SpmmOp::fix`] made: the f16 scatter rounds as the cast does, slots
    /// without an edge stay 0).
    fn restore_stored(&self, p: &FixedProduct<'_>) -> Result<Stored> {
        let csr = p
            .fixed
            .csr
            .as_ref()
            .ok_or_else(|| Error::Unsupported("spmm_fixed: fixed values released without a CSR-ordered copy".into()))?;
        let h = p.g.side(p.side)?;
        Ok(if self.half_kernel_order() {
            let mut vh = DeviceVec::zeros(&self.gpu, p.fixed.len)?;
            scatter_to_mebcrs(&h, csr, &mut vh)?;
            Stored::F16(vh)
        } else {
            let mut v = DeviceVec::zeros(&self.gpu, p.fixed.len)?;
            scatter_to_mebcrs(&h, csr, &mut v)?;
            Stored::F32(v)
        })
    }

    /// A product with the backend's own kernel on values passed per call (f16 on ME-BCRS
    /// order: cast into a scratch copy first).
    fn spmm_values(
        &self,
        g: &GpuGraph,
        side: Side,
        values: &DeviceVec<f32>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        if !self.half_kernel_order() {
            return self.spmm_as_stored(g, side, values, x, y);
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
        self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::MeBcrsF16(vh), FeaturesRef::F16(xh), y, self.plan.spmm))
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
        if self.plan.spmm == Impl::Tc8 && self.plan.order == ValueOrder::Csr {
            return self.spmm_tc8_from_csr(g, side, values, x, y);
        }
        match (self.precision, self.plan.order) {
            (Precision::F16, ValueOrder::Csr) => {
                self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F16(xh), y, self.plan.spmm))
            }
            (_, ValueOrder::Csr) => spmm_device_values(&h, EdgeValues::Csr(values), FeaturesRef::F32(x), y, self.plan.spmm),
            (_, ValueOrder::MeBcrs) => spmm_device_values(&h, EdgeValues::MeBcrs(values), FeaturesRef::F32(x), y, self.plan.spmm),
        }
    }
}
