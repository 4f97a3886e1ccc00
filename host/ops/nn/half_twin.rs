//! An activation's f16 twin, written by the op that produces the activation. In f16 precision
//! the sparse products read their dense operand in f16; unless handed a copy, each casts the
//! operand first (`cast_f32_f16`: 4 bytes read and 2 written per element, a launch of its own,
//! 3-7 % of a step on the 1M-node SBM, bench/NOTES.md, issue 42). A producer that is an
//! elementwise pass already holds the values it stores: its `WRITE_F16` kernel variant writes
//! the 2-byte copy beside the f32 result (`kernels-gpu/src/nn/half_twin.rs`), bit for bit the
//! cast's, and the product reads that ([`SpmmOp::spmm_fixed_twin`](super::spmm::SpmmOp::spmm_fixed_twin)).
//!
//! The twin is the f16 scratch matrix the product's cast would have written (slot 0 at the
//! operand's shape), taken out for the span of [`HalfTwinOp::with_twin`]: no more memory is
//! held than the cast held.

use crate::error::Result;
use crate::gpu::DeviceMatrix;
use crate::ops::Precision;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::CpuBackend;
use crate::ops::backend::cuda::CudaBackend;
use crate::ops::values::cast_matrix_to_f16;
use crate::util::Real;
use half::f16;

pub trait HalfTwinOp: Backend {
    /// An f16 copy of a matrix of this backend (`()` on the CPU, which makes none).
    type Twin;
    /// Runs `f` with the twin of a `rows x cols` operand where this backend's sparse products
    /// read their dense operand in f16 (the GPU in f16 precision, unless turned off:
    /// [`CudaBackend::with_half_twins`]), else with `None`. Within
    /// `f`, the op producing the operand writes all of the twin when handed it, and the sparse
    /// product reading the operand is handed it; nothing may rewrite the operand in between.
    fn with_twin<R>(&self, rows: usize, cols: usize, f: impl FnOnce(Option<&mut Self::Twin>) -> Result<R>) -> Result<R>;
    /// `twin = f16(m)`: the cast, for a producer that cannot write the twin in its own pass
    /// (cuBLAS, the sparse-feature product), so that a twin handed out is always written.
    fn fill_twin(&self, m: &Self::Mat, twin: &mut Self::Twin) -> Result<()>;
}

impl<T: Real> HalfTwinOp for CpuBackend<T> {
    type Twin = ();
    fn with_twin<R>(&self, _: usize, _: usize, f: impl FnOnce(Option<&mut ()>) -> Result<R>) -> Result<R> {
        f(None)
    }
    fn fill_twin(&self, _: &Self::Mat, _: &mut ()) -> Result<()> {
        Ok(())
    }
}

impl HalfTwinOp for CudaBackend {
    type Twin = DeviceMatrix<f16>;
    fn with_twin<R>(&self, rows: usize, cols: usize, f: impl FnOnce(Option<&mut DeviceMatrix<f16>>) -> Result<R>) -> Result<R> {
        if self.precision != Precision::F16 || self.op_state.get::<TwinsOff>().0 {
            return f(None);
        }
        // Slot 0: the one the sparse products cast their dense operand into.
        self.with_half_scratch(rows, cols, 0, |h| f(Some(h)))
    }
    fn fill_twin(&self, m: &DeviceMatrix<f32>, twin: &mut DeviceMatrix<f16>) -> Result<()> {
        self.timed("cast", || cast_matrix_to_f16(m, twin))
    }
}

/// Twins turned off ([`CudaBackend::with_half_twins`]); on by default.
#[derive(Clone, Copy, Default)]
struct TwinsOff(bool);

impl CudaBackend {
    /// f16 sparse products read the f16 twins their operands' producers wrote (`true`, the
    /// default) or cast every operand themselves (`false`, for comparisons).
    pub fn with_half_twins(mut self, on: bool) -> Self {
        self.op_state.set(TwinsOff(!on));
        self
    }
}

/// `twin`'s address for a kernel writing the twin of `m` (checked: same shape and GPU), or
/// null without a twin (the kernel variant that writes none ignores it).
pub(crate) fn twin_arg(
    twin: Option<&mut DeviceMatrix<f16>>,
    m: &DeviceMatrix<f32>,
    what: &str,
) -> Result<Option<crate::gpu::launch::PtrMut<u16>>> {
    let Some(t) = twin else { return Ok(None) };
    if (t.rows, t.cols, t.ld) != (m.rows, m.cols, m.ld) {
        return Err(crate::error::Error::Shape(format!(
            "{what}: an f16 twin of {} x {} (ld {}) for a matrix of {} x {} (ld {})",
            t.rows, t.cols, t.ld, m.rows, m.cols, m.ld
        )));
    }
    super::check_gpu(t.gpu(), m.gpu(), what)?;
    Ok(Some(t.arg_mut().cast()))
}
