//! The GPU backend: device matrices and graphs, cuBLAS, and the choices every op reads
//! (precision, sparse kernels, edge-value order). The ops themselves (dense products through
//! cuBLAS, sparse products on our SpMM / SDDMM kernels with per-call edge values, the training
//! kernels) are in `ops/nn/`, one file each; all enqueue on the GPU's one explicit stream, so
//! [`Backend::record`] can capture a whole step as a CUDA graph.
//!
//! Precision: f32 runs the CUDA-core sparse kernels on edge values in CSR order; tf32 and f16
//! run the TC8 tensor-core kernels on values in ME-BCRS order, f16 reading f16 copies of the
//! features and edge values cast on the device just before each sparse product — except values
//! fixed for the run, cast once (`SpmmOp::fix`), and node features the fused first-layer
//! products read, stored once in f16 (`DropoutGemmOp::half_features`). Parameters, the loss,
//! softmax and Adam stay f32 in every precision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaEvent;
use half::f16;

use crate::error::{Error, Result};
use crate::gpu::abi::nn::{self as kernels, StepIncrementArgs};
use crate::gpu::cublas::{Blas, GemmMath};
use crate::gpu::graph::CapturedGraph;
use crate::gpu::launch::Shape;
use crate::gpu::timing::{Timing, time_gpu};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::graph::Csr;
use crate::ops::ValueOrder;
use crate::ops::backend::op_state::OpState;
use crate::ops::backend::{Backend, Side, Stats};
pub use crate::ops::spmm::plan::EdgeLayout;
use crate::ops::spmm::plan::SpmmPlan;
use crate::ops::spmm::spmm_device_values;
use crate::ops::values::{cast_matrix_to_f16, scatter_to_mebcrs};
use crate::ops::{EdgeValues, FeaturesRef, GraphHandle, Impl, Precision};
use crate::tensor::Matrix;

/// An op's name and the events around it.
type OpEvents = (&'static str, CudaEvent, CudaEvent);

/// A pattern on the device; its transpose is built on first use and cached in the handle.
pub struct GpuGraph {
    pub handle: Arc<GraphHandle>,
    /// ME-BCRS value slots of each side for `EdgeLayout::Csr` with TC8, zeroed once (scatters
    /// write only edge slots): [forward, transposed].
    slots_f32: Mutex<[Option<DeviceVec<f32>>; 2]>,
    slots_f16: Mutex<[Option<DeviceVec<f16>>; 2]>,
}

impl GpuGraph {
    pub(crate) fn side(&self, side: Side) -> Result<Arc<GraphHandle>> {
        match side {
            Side::Forward => Ok(self.handle.clone()),
            Side::Transposed => self.handle.transpose(),
        }
    }
}

/// f16 copies of features and edge values, one per shape and use, reused across calls: the
/// stream orders every cast after the product that last read the buffer.
#[derive(Default)]
pub(crate) struct HalfScratch {
    mats: HashMap<(usize, usize, u8), DeviceMatrix<f16>>,
    pub(crate) vecs: HashMap<usize, DeviceVec<f16>>,
}

pub struct CudaBackend {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) blas: Blas,
    pub(crate) precision: Precision,
    /// The sparse kernels and the edge-value order, chosen once from what was asked for.
    pub(crate) plan: SpmmPlan,
    pub(crate) math: GemmMath,
    /// Training steps begun: seeds dropout, drives Adam's bias correction; lives on the device
    /// so a replayed graph advances it.
    step: Mutex<DeviceVec<u32>>,
    pub(crate) half: Mutex<HalfScratch>,
    /// Per-op event pairs while op timing is on (see [`CudaBackend::time_ops`]).
    op_events: Mutex<Option<Vec<OpEvents>>>,
    /// Whether the first layer multiplies dropped-out node features without storing them
    /// (`ops::nn::dropout_gemm`); on unless turned off for a comparison.
    pub(crate) fuse_input_dropout: bool,
    /// Whether tall products with at most 32 output columns run on the streaming kernels
    /// (`ops::nn::dropout_gemm::skinny_gemm`) rather than cuBLAS; on unless turned off.
    pub(crate) skinny_gemm: bool,
    /// What ops keep between calls and the ops' own settings, each of a type its op's file
    /// defines and manages (the backend only holds them: one per backend, as the ops run on
    /// its stream).
    pub(crate) op_state: OpState,
}

impl CudaBackend {
    /// A backend for `precision`; `imp` picks the sparse kernels (`Auto`: HP-SpMM on CUDA
    /// cores in f32, TC8 on tensor cores in tf32 and f16; products on fixed values, GCN's,
    /// SAGE's and GIN's adjacency, also measure the CSR kernel, see `SpmmOp::spmm_fixed`).
    ///
    /// cuSPARSE is not an `Auto` choice here ([`SpmmPlan::choose`] says why).
    pub fn new(gpu: Arc<Gpu>, precision: Precision, imp: Impl) -> Result<Self> {
        let plan = SpmmPlan::choose(precision, imp, EdgeLayout::Kernel)?;
        let math = match precision {
            Precision::F32 => GemmMath::F32,
            Precision::Tf32 | Precision::F16 => GemmMath::Tf32,
        };
        Ok(CudaBackend {
            blas: Blas::new(&gpu)?,
            step: Mutex::new(DeviceVec::zeros(&gpu, 1)?),
            half: Mutex::default(),
            op_events: Mutex::new(None),
            fuse_input_dropout: true,
            skinny_gemm: true,
            op_state: OpState::default(),
            gpu,
            precision,
            plan,
            math,
        })
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Keep edge values in `layout` (see [`EdgeLayout`]); only TC8 has a choice, the CUDA-core
    /// kernels read CSR order either way.
    pub fn with_edge_layout(mut self, layout: EdgeLayout) -> Self {
        self.plan = self.plan.with_layout(self.precision, layout);
        self
    }

    /// Multiply dropped-out node features without storing them (`true`, the default) or
    /// through a dropped copy and cuBLAS (`false`: the unfused path, for comparisons).
    pub fn with_fused_input_dropout(mut self, on: bool) -> Self {
        self.fuse_input_dropout = on;
        self
    }

    /// Tall narrow products on the streaming kernels (`true`, the default) or all on cuBLAS
    /// (`false`, for comparisons).
    pub fn with_skinny_gemm(mut self, on: bool) -> Self {
        self.skinny_gemm = on;
        self
    }

    /// TC8 SpMM on CSR-ordered values: scattered into this side's ME-BCRS slots first.
    pub(crate) fn spmm_tc8_from_csr(
        &self,
        g: &GpuGraph,
        side: Side,
        values: &DeviceVec<f32>,
        x: &DeviceMatrix<f32>,
        y: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        let h = g.side(side)?;
        let len = h.value_len(ValueOrder::MeBcrs)?;
        if self.precision == Precision::F16 {
            let mut slots = g.slots_f16.lock().expect("slots poisoned");
            let v = slot_buffer(&self.gpu, &mut slots, side, len)?;
            scatter_to_mebcrs(&h, values, v)?;
            self.with_half(x, 0, |xh| spmm_device_values(&h, EdgeValues::MeBcrsF16(v), FeaturesRef::F16(xh), y, Impl::Tc8))
        } else {
            let mut slots = g.slots_f32.lock().expect("slots poisoned");
            let v = slot_buffer(&self.gpu, &mut slots, side, len)?;
            scatter_to_mebcrs(&h, values, v)?;
            spmm_device_values(&h, EdgeValues::MeBcrs(v), FeaturesRef::F32(x), y, Impl::Tc8)
        }
    }

    /// Runs `f` on an f16 copy of `x`, cast on the device into a scratch matrix reused per shape
    /// and `slot` (the lock is not held while `f` runs, so calls nest with distinct slots).
    pub(crate) fn with_half<R>(&self, x: &DeviceMatrix<f32>, slot: u8, f: impl FnOnce(&DeviceMatrix<f16>) -> Result<R>) -> Result<R> {
        self.with_half_scratch(x.rows, x.cols, slot, |xh| {
            cast_matrix_to_f16(x, xh)?;
            f(xh)
        })
    }

    /// Runs `f` on the f16 scratch matrix of `rows` x `cols` for `slot` as it is (for kernels
    /// that write it before they read it), under the same rules as [`CudaBackend::with_half`].
    pub(crate) fn with_half_scratch<R>(
        &self,
        rows: usize,
        cols: usize,
        slot: u8,
        f: impl FnOnce(&mut DeviceMatrix<f16>) -> Result<R>,
    ) -> Result<R> {
        let mut xh = self.half.lock().expect("f16 scratch poisoned").mat(&self.gpu, rows, cols, slot)?;
        let r = f(&mut xh);
        self.half.lock().expect("f16 scratch poisoned").put(xh, slot);
        r
    }

    /// Runs `f`, bracketed by events when op timing is on.
    pub(crate) fn timed(&self, name: &'static str, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut guard = self.op_events.lock().expect("op timer poisoned");
        let Some(events) = guard.as_mut() else {
            drop(guard);
            return f();
        };
        let ev = || {
            self.gpu.ctx.new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| Error::cuda("cuEventCreate", e))
        };
        let (start, end) = (ev()?, ev()?);
        start.record(self.gpu.stream()).map_err(|e| Error::cuda("cuEventRecord", e))?;
        f()?;
        end.record(self.gpu.stream()).map_err(|e| Error::cuda("cuEventRecord", e))?;
        events.push((name, start, end));
        Ok(())
    }

    /// Runs `f` (eagerly: not while recording a graph) with every op bracketed by events, and
    /// returns per op name the total milliseconds and the number of calls, slowest first:
    /// where a step's time goes. Events add a little time to each op.
    pub fn time_ops_with(&self, f: impl FnOnce() -> Result<()>) -> Result<Vec<(String, f64, usize)>> {
        *self.op_events.lock().expect("op timer poisoned") = Some(Vec::new());
        let r = f();
        let events = self.op_events.lock().expect("op timer poisoned").take().unwrap_or_default();
        r?;
        self.gpu.synchronize()?;
        let mut totals: Vec<(String, f64, usize)> = Vec::new();
        for (name, s, e) in &events {
            let ms = s.elapsed_ms(e).map_err(|err| Error::cuda("cuEventElapsedTime", err))? as f64;
            match totals.iter_mut().find(|t| t.0 == *name) {
                Some(t) => {
                    t.1 += ms;
                    t.2 += 1;
                }
                None => totals.push((name.to_string(), ms, 1)),
            }
        }
        totals.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(totals)
    }

    pub(crate) fn step_ptr(&self) -> std::sync::MutexGuard<'_, DeviceVec<u32>> {
        self.step.lock().expect("step counter poisoned")
    }
}

/// `step[0] += 1` on the device (one thread), so a captured CUDA graph advances its counter on
/// every replay. The kernel is in `kernels-gpu/src/nn/adam.rs`, beside Adam, which reads the
/// counter for its bias correction.
pub fn step_increment(gpu: &Gpu, step: &mut DeviceVec<u32>) -> Result<()> {
    if step.is_empty() {
        return Err(Error::Shape("step_increment: empty step counter".into()));
    }
    let args = StepIncrementArgs { step: step.arg_mut(gpu) };
    // SAFETY: step holds at least one u32.
    unsafe { kernels::step_increment.launch(gpu, Shape::linear(1, 32, 0), &args) }
}

/// The value slots of `side`, allocated zeroed on first use.
fn slot_buffer<'a, T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Clone + Default + Unpin>(
    gpu: &Gpu,
    slots: &'a mut [Option<DeviceVec<T>>; 2],
    side: Side,
    len: usize,
) -> Result<&'a mut DeviceVec<T>> {
    let slot = &mut slots[usize::from(side == Side::Transposed)];
    if slot.is_none() {
        *slot = Some(DeviceVec::zeros(gpu, len)?);
    }
    Ok(slot.as_mut().expect("allocated above"))
}

impl HalfScratch {
    fn mat(&mut self, gpu: &Arc<Gpu>, rows: usize, cols: usize, slot: u8) -> Result<DeviceMatrix<f16>> {
        match self.mats.remove(&(rows, cols, slot)) {
            Some(m) => Ok(m),
            None => DeviceMatrix::zeros(gpu, rows, cols),
        }
    }
    fn put(&mut self, m: DeviceMatrix<f16>, slot: u8) {
        self.mats.insert((m.rows, m.cols, slot), m);
    }
}

impl Backend for CudaBackend {
    type Mat = DeviceMatrix<f32>;
    type Edges = DeviceVec<f32>;
    type Graph = GpuGraph;
    type Ids = DeviceVec<u32>;
    type Mask = DeviceVec<u8>;
    type Labels = (DeviceVec<i32>, DeviceVec<u8>);
    type Stats = DeviceVec<f32>;
    type Recording = CapturedGraph;

    fn describe(&self) -> String {
        format!(
            "{} {:?} spmm {:?}{} sddmm {:?} edges {:?}",
            self.gpu.info().name,
            self.precision,
            self.plan.spmm,
            if self.plan.measure_fixed { " (auto: or csr on fixed values)" } else { "" },
            self.plan.sddmm,
            self.plan.order
        )
        .to_lowercase()
    }

    #[track_caller]
    fn matrix(&self, rows: usize, cols: usize) -> Result<DeviceMatrix<f32>> {
        DeviceMatrix::zeros(&self.gpu, rows, cols)
    }
    #[track_caller]
    fn upload(&self, m: &Matrix) -> Result<DeviceMatrix<f32>> {
        DeviceMatrix::upload(&self.gpu, m)
    }
    fn download(&self, m: &DeviceMatrix<f32>) -> Result<Matrix> {
        m.download()
    }
    fn download_head_into(&self, m: &DeviceMatrix<f32>, rows: usize, dst: &mut [f32]) -> Result<()> {
        if dst.len() != rows * m.cols {
            return Err(Error::Shape(format!("download_head_into: {rows} rows of {} columns into {} values", m.cols, dst.len())));
        }
        if m.ld == m.cols {
            return m.download_rows_into(0, rows, dst);
        }
        let padded = m.download_rows(0, rows)?;
        for (d, s) in dst.chunks_exact_mut(m.cols.max(1)).zip(padded.chunks_exact(m.ld.max(1))) {
            d.copy_from_slice(&s[..m.cols]);
        }
        Ok(())
    }
    fn download_edges(&self, e: &DeviceVec<f32>, len: usize) -> Result<Vec<f32>> {
        if len > e.len() {
            return Err(Error::Shape(format!("download_edges: {len} of {} values", e.len())));
        }
        let mut v = e.download(&self.gpu)?;
        v.truncate(len);
        Ok(v)
    }
    fn shape(m: &DeviceMatrix<f32>) -> (usize, usize) {
        (m.rows, m.cols)
    }
    fn on_rows(
        &self,
        m: &mut DeviceMatrix<f32>,
        rows: std::ops::Range<usize>,
        f: &mut dyn FnMut(&mut DeviceMatrix<f32>) -> Result<()>,
    ) -> Result<()> {
        m.with_rows(rows, |v| f(v))
    }
    fn on_rows_ref(
        &self,
        m: &DeviceMatrix<f32>,
        rows: std::ops::Range<usize>,
        f: &mut dyn FnMut(&DeviceMatrix<f32>) -> Result<()>,
    ) -> Result<()> {
        m.with_rows_ref(rows, |v| f(v))
    }
    fn on_ids_ref(
        &self,
        ids: &DeviceVec<u32>,
        range: std::ops::Range<usize>,
        f: &mut dyn FnMut(&DeviceVec<u32>) -> Result<()>,
    ) -> Result<()> {
        ids.with_range_ref(&self.gpu, range, |v| f(v))
    }
    fn graph(&self, csr: Csr) -> Result<GpuGraph> {
        Ok(GpuGraph {
            handle: Arc::new(GraphHandle::new(csr, Some(self.gpu.clone()))),
            slots_f32: Mutex::default(),
            slots_f16: Mutex::default(),
        })
    }
    fn graph_shape(g: &GpuGraph) -> (usize, usize) {
        (g.handle.csr().n_rows(), g.handle.csr().n_cols())
    }
    #[track_caller]
    fn edges(&self, g: &GpuGraph, side: Side) -> Result<DeviceVec<f32>> {
        DeviceVec::zeros(&self.gpu, g.side(side)?.value_len(self.plan.order)?)
    }
    #[track_caller]
    fn graph_values(&self, g: &GpuGraph, side: Side) -> Result<DeviceVec<f32>> {
        let h = g.side(side)?;
        match self.plan.order {
            ValueOrder::Csr => DeviceVec::upload(&self.gpu, h.csr().values()),
            ValueOrder::MeBcrs => h.device_mebcrs_values(),
        }
    }
    #[track_caller]
    fn mask(&self, rows: usize, cols: usize) -> Result<DeviceVec<u8>> {
        DeviceVec::zeros(&self.gpu, rows * crate::gpu::memory::padded_ld(cols))
    }
    #[track_caller]
    fn edge_mask(&self, edges: &DeviceVec<f32>) -> Result<DeviceVec<u8>> {
        DeviceVec::zeros(&self.gpu, edges.len())
    }
    #[track_caller]
    fn ids(&self, ids: &[u32]) -> Result<DeviceVec<u32>> {
        DeviceVec::upload(&self.gpu, ids)
    }
    #[track_caller]
    fn labels(&self, labels: &[i32], mask_bits: &[u8]) -> Result<(DeviceVec<i32>, DeviceVec<u8>)> {
        Ok((DeviceVec::upload(&self.gpu, labels)?, DeviceVec::upload(&self.gpu, mask_bits)?))
    }
    #[track_caller]
    fn stats(&self) -> Result<DeviceVec<f32>> {
        DeviceVec::zeros(&self.gpu, 4)
    }
    fn read_stats(&self, s: &DeviceVec<f32>) -> Result<Stats> {
        let v = s.download(&self.gpu)?;
        Ok(Stats { loss: v[0] as f64, correct: [v[1] as f64, v[2] as f64, v[3] as f64] })
    }
    fn record(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<Option<CapturedGraph>> {
        Ok(Some(self.gpu.capture(f)?))
    }
    fn replay(&self, r: &CapturedGraph) -> Result<()> {
        r.replay()
    }
    fn time(&self, warmup: usize, reps: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<Timing> {
        time_gpu(&self.gpu, warmup, reps, f)
    }
    fn synchronize(&self) -> Result<()> {
        self.gpu.synchronize()
    }
    fn time_ops(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<Vec<(String, f64, usize)>> {
        self.time_ops_with(f)
    }
    fn begin_step(&self) -> Result<()> {
        self.timed("begin step", || step_increment(&self.gpu, &mut self.step_ptr()))
    }
    fn steps(&self) -> Result<u32> {
        Ok(self.step_ptr().download(&self.gpu)?[0])
    }
    fn set_steps(&self, steps: u32) -> Result<()> {
        // Written in place: a recorded step keeps the counter's address.
        let mut step = self.step_ptr();
        self.gpu.stream().memcpy_htod(&[steps], step.slice_mut()).map_err(|e| Error::cuda("set_steps", e))?;
        self.gpu.synchronize()
    }
}
