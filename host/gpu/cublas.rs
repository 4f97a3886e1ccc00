//! cuBLAS dense GEMM (the feature update X W of a GNN layer) on the GPU's stream. An RAII handle
//! over cudarc's raw `sys`/`result` layers: every cuBLAS call and all of its `unsafe` stay in
//! this file.
//!
//! Our matrices are row-major with a padded row stride; cuBLAS is column-major. A row-major
//! `r x c` matrix with stride `ld` is, read column-major, its transpose (`c x r`, leading
//! dimension `ld`). So the row-major `C = op(A) op(B)` is the column-major `Cᵀ = op(B)ᵀ op(A)ᵀ`:
//! cuBLAS gets B as its first operand and A as its second, with the transposes carried over,
//! and m and n swapped ([`column_major_args`], a plain function tested without a GPU).
//!
//! The handle owns a fixed workspace (`cublasSetWorkspace`), so no cuBLAS call allocates and
//! every call can be captured into a CUDA graph ([`crate::gpu::Gpu::capture`]).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::sys::{self, cublasComputeType_t as Compute, cublasOperation_t as Op, cudaDataType};
use cudarc::driver::{CudaSlice, DevicePtrMut};

use crate::error::{Error, Result};
use crate::gpu::memory::Element;
use crate::gpu::{DeviceMatrix, Gpu};

/// Bytes of the workspace each [`Blas`] hands to cuBLAS (NVIDIA's recommendation for Hopper is
/// 32 MiB; smaller GPUs need less).
pub const WORKSPACE_BYTES: usize = 32 << 20;
/// cuBLAS requires the workspace to be aligned to 256 bytes.
const WORKSPACE_ALIGN: u64 = 256;

/// Is libcublas loadable?
pub fn available() -> bool {
    // SAFETY: only tries to dlopen the library names cudarc knows.
    unsafe { sys::is_culib_present() }
}

/// The arithmetic of an f32 GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmMath {
    /// Plain f32 multiply-add (`CUBLAS_COMPUTE_32F`, default math mode): no tensor cores,
    /// accurate to f32 rounding (relative error ~1e-6).
    F32,
    /// Tensor cores on tf32-rounded inputs with f32 accumulation
    /// (`CUBLAS_COMPUTE_32F_FAST_TF32`): several times faster, relative error ~1e-3.
    Tf32,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
}

/// Element types cuBLAS takes as GEMM inputs A and B here (the output C is always f32).
pub trait GemmInput: Element + sealed::Sealed {
    #[doc(hidden)]
    fn data_type() -> cudaDataType;
    /// The cuBLAS compute type for this input type and `math` (f16 inputs always accumulate in
    /// f32 on tensor cores; `math` only matters for f32 inputs).
    #[doc(hidden)]
    fn compute_type(math: GemmMath) -> Compute;
}

impl GemmInput for f32 {
    fn data_type() -> cudaDataType {
        cudaDataType::CUDA_R_32F
    }
    fn compute_type(math: GemmMath) -> Compute {
        match math {
            GemmMath::F32 => Compute::CUBLAS_COMPUTE_32F,
            GemmMath::Tf32 => Compute::CUBLAS_COMPUTE_32F_FAST_TF32,
        }
    }
}

impl GemmInput for half::f16 {
    fn data_type() -> cudaDataType {
        cudaDataType::CUDA_R_16F
    }
    fn compute_type(_: GemmMath) -> Compute {
        Compute::CUBLAS_COMPUTE_32F
    }
}

/// The shape of a row-major matrix: `rows x cols` elements, row `r` starting at element `r * ld`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowMajor {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

impl RowMajor {
    pub fn new(rows: usize, cols: usize, ld: usize) -> Self {
        RowMajor { rows, cols, ld }
    }
    /// Rows and columns of `op(X)`: X itself, or Xᵀ when `trans`.
    fn op(self, trans: bool) -> (usize, usize) {
        if trans { (self.cols, self.rows) } else { (self.rows, self.cols) }
    }
}

impl std::fmt::Display for RowMajor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{} (ld {})", self.rows, self.cols, self.ld)
    }
}

/// The column-major cuBLAS call computing a row-major `C = op(A) op(B)`: cuBLAS's first
/// operand is **our B** (transposed when `transa`, leading dimension `lda` = B's `ld`), its second
/// operand is **our A** (`transb`, `ldb` = A's `ld`), `m` = C's columns, `n` = C's rows, `k` the
/// inner dimension, `ldc` = C's `ld`. Leading dimensions are at least 1 (cuBLAS rejects 0, which
/// an empty matrix's padded stride can be).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnMajorGemm {
    pub transa: bool,
    pub transb: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
}

/// Check the shapes of a row-major `C = op(A) op(B)` (op(A) `m x k`, op(B) `k x n`, C `m x n`,
/// every `ld >= cols`) and map them to cuBLAS's column-major arguments (see [`ColumnMajorGemm`]).
/// `Error::Shape` names the three shapes; sizes beyond cuBLAS's 32-bit `int` are
/// `Error::Unsupported`.
pub fn column_major_args(a: RowMajor, trans_a: bool, b: RowMajor, trans_b: bool, c: RowMajor) -> Result<ColumnMajorGemm> {
    let (m, ka) = a.op(trans_a);
    let (kb, n) = b.op(trans_b);
    let t = |trans: bool| if trans { "ᵀ" } else { "" };
    let shapes = || format!("op(A) = A{} with A {a}, op(B) = B{} with B {b}, C {c}", t(trans_a), t(trans_b));
    if ka != kb || c.rows != m || c.cols != n {
        return Err(Error::Shape(format!(
            "GEMM C = op(A) op(B) needs op(A) m x k, op(B) k x n and C m x n; got {} (op(A) {m}x{ka}, op(B) {kb}x{n})",
            shapes()
        )));
    }
    for (name, x) in [("A", a), ("B", b), ("C", c)] {
        if x.ld < x.cols {
            return Err(Error::Shape(format!("GEMM: {name}'s row stride {} is below its {} columns; {}", x.ld, x.cols, shapes())));
        }
    }
    let g = ColumnMajorGemm { transa: trans_b, transb: trans_a, m: n, n: m, k: ka, lda: b.ld.max(1), ldb: a.ld.max(1), ldc: c.ld.max(1) };
    if [g.m, g.n, g.k, g.lda, g.ldb, g.ldc].iter().any(|&v| v > i32::MAX as usize) {
        return Err(Error::Unsupported(format!("GEMM sizes beyond cuBLAS's 32-bit int: {}", shapes())));
    }
    Ok(g)
}

/// A row-major operand in device memory for [`Blas::gemm_raw`]: `rows x cols` elements at
/// device address `ptr`, row `r` starting `r * ld` elements in (a sub-matrix of a larger
/// matrix is its first element's address with the parent's `ld`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawMatrix {
    pub ptr: u64,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

impl RawMatrix {
    pub fn shape(&self) -> RowMajor {
        RowMajor::new(self.rows, self.cols, self.ld)
    }
}

fn op(trans: bool) -> Op {
    if trans { Op::CUBLAS_OP_T } else { Op::CUBLAS_OP_N }
}

fn check(status: sys::cublasStatus_t, context: impl FnOnce() -> String) -> Result<()> {
    status.result().map_err(|e| Error::cuda(format!("cuBLAS {}", context()), e))
}

/// A cuBLAS handle bound to the GPU's stream, with its own workspace. Create one per `Gpu` and
/// keep it: creation is slow (tens of ms), calls are not.
pub struct Blas {
    raw: sys::cublasHandle_t,
    /// `WORKSPACE_BYTES` plus alignment slack; freed (stream-ordered) after the handle is
    /// destroyed, since fields drop after `Drop::drop`.
    _workspace: CudaSlice<u8>,
    gpu: Arc<Gpu>,
}

// SAFETY: cuBLAS allows one handle to be used from several host threads as long as its
// configuration (stream, workspace, modes) does not change, and it never does after `new`; all
// calls go to the one stream of `gpu`.
unsafe impl Send for Blas {}
unsafe impl Sync for Blas {}

impl std::fmt::Debug for Blas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blas").field("gpu", &self.gpu.info().name).finish()
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: `raw` came from cublasCreate and is destroyed once.
        unsafe { cudarc::cublas::result::destroy_handle(self.raw).ok() };
    }
}

impl Blas {
    /// Create the handle on `gpu`'s stream and give it a `WORKSPACE_BYTES` workspace.
    /// `Error::Unsupported` when libcublas cannot be loaded.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Blas> {
        if !available() {
            return Err(Error::Unsupported("libcublas was not found (set LD_LIBRARY_PATH to CUDA's lib64)".into()));
        }
        gpu.ctx.bind_to_thread().map_err(|e| Error::cuda("binding the CUDA context", e))?;
        let mut workspace =
            gpu.stream.alloc_zeros::<u8>(WORKSPACE_BYTES + WORKSPACE_ALIGN as usize).map_err(|e| Error::cuda("cuBLAS workspace", e))?;
        let base = workspace.device_ptr_mut(&gpu.stream).0;
        let aligned = base.div_ceil(WORKSPACE_ALIGN) * WORKSPACE_ALIGN;
        let raw = cudarc::cublas::result::create_handle().map_err(|e| Error::cuda("cublasCreate", e))?;
        // From here on Drop destroys the handle on any error.
        let blas = Blas { raw, _workspace: workspace, gpu: gpu.clone() };
        // SAFETY: a live handle and this context's stream (which `blas.gpu` keeps alive).
        check(unsafe { sys::cublasSetStream_v2(raw, gpu.stream.cu_stream() as sys::cudaStream_t) }, || "SetStream".into())?;
        // After SetStream, which resets the workspace to cuBLAS's own pool (it would allocate from
        // it during a graph capture). SAFETY: `aligned .. aligned + WORKSPACE_BYTES` lies inside
        // the workspace allocation the handle owns, which outlives the handle.
        check(unsafe { sys::cublasSetWorkspace_v2(raw, aligned as *mut c_void, WORKSPACE_BYTES) }, || "SetWorkspace".into())?;
        Ok(blas)
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Row-major `C = alpha op(A) op(B) + beta C` on f32 matrices, each operand given with
    /// whether it is transposed (`op(X)` = X or Xᵀ), queued on the GPU's stream. op(A) must be `m x k`, op(B) `k x n`, C `m x n`
    /// (`Error::Shape` otherwise). Only the `m x n` values of C are written: padding columns are
    /// left untouched. With `beta = 0`, C's old contents are never read (NaN in C does not
    /// propagate). An empty C is a no-op; `k = 0` gives `C = beta C`.
    pub fn gemm(
        &self,
        math: GemmMath,
        alpha: f32,
        (a, trans_a): (&DeviceMatrix<f32>, bool),
        (b, trans_b): (&DeviceMatrix<f32>, bool),
        beta: f32,
        c: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        let (ra, rb, rc) = (self.operand("A", a)?, self.operand("B", b)?, self.operand_mut("C", c)?);
        // SAFETY: the three are live buffers of this Gpu holding rows * ld elements (checked
        // above); C is borrowed mutably, so it cannot overlap A or B; a DeviceMatrix frees its
        // buffer stream-ordered on this same stream, so the buffers outlive the queued GEMM.
        unsafe { self.gemm_raw::<f32>(math, alpha, (ra, trans_a), (rb, trans_b), beta, rc) }
    }

    /// As [`Blas::gemm`] with f16 inputs: f32 output, f32 accumulation on tensor cores
    /// (`cublasGemmEx`, `CUDA_R_16F` inputs, `CUBLAS_COMPUTE_32F`).
    pub fn gemm_f16(
        &self,
        alpha: f32,
        (a, trans_a): (&DeviceMatrix<half::f16>, bool),
        (b, trans_b): (&DeviceMatrix<half::f16>, bool),
        beta: f32,
        c: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        let (ra, rb, rc) = (self.operand("A", a)?, self.operand("B", b)?, self.operand_mut("C", c)?);
        // SAFETY: as in `gemm`.
        unsafe { self.gemm_raw::<half::f16>(GemmMath::F32, alpha, (ra, trans_a), (rb, trans_b), beta, rc) }
    }

    /// [`Blas::gemm`] on raw device operands (e.g. row blocks of larger matrices): row-major
    /// `C = alpha op(A) op(B) + beta C` with A and B of element type `T` (f32 or f16) and C f32.
    /// `math` selects f32 or tf32 arithmetic for f32 inputs and is ignored for f16 inputs (always
    /// f32 accumulation on tensor cores). Shapes are checked as in `gemm`.
    ///
    /// # Safety
    /// - `a.ptr` and `b.ptr` address live device memory of this Blas's context holding `T`
    ///   elements at every `r * ld + c` for `r < rows`, `c < cols`; `c.ptr` likewise f32 elements,
    ///   writable, and overlapping neither A nor B.
    /// - Addresses are aligned to the element size (16-byte aligned rows let cuBLAS use its
    ///   fastest tensor-core kernels; any alignment of the element size is correct).
    /// - The memory stays allocated until the queued GEMM has run (memory freed stream-ordered on
    ///   the GPU's stream after this call is fine), and, when the call is captured into a graph,
    ///   for as long as the graph is replayed. The host must not read C before synchronising.
    pub unsafe fn gemm_raw<T: GemmInput>(
        &self,
        math: GemmMath,
        alpha: f32,
        (a, trans_a): (RawMatrix, bool),
        (b, trans_b): (RawMatrix, bool),
        beta: f32,
        c: RawMatrix,
    ) -> Result<()> {
        let g = column_major_args(a.shape(), trans_a, b.shape(), trans_b, c.shape())?;
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        self.gpu.ctx.bind_to_thread().map_err(|e| Error::cuda("binding the CUDA context", e))?;
        if g.k == 0 {
            // SAFETY: forwarded from the caller (C is valid for its m x n values).
            return unsafe { self.scale_c(beta, c) };
        }
        // SAFETY: the handle is live; the caller guarantees the operands (shapes and leading
        // dimensions checked above); alpha and beta are host scalars read during the call
        // (pointer mode host), so during a capture their values are baked into the graph.
        let status = unsafe {
            sys::cublasGemmEx(
                self.raw,
                op(g.transa),
                op(g.transb),
                g.m as i32,
                g.n as i32,
                g.k as i32,
                &alpha as *const f32 as *const c_void,
                b.ptr as *const c_void,
                T::data_type(),
                g.lda as i32,
                a.ptr as *const c_void,
                T::data_type(),
                g.ldb as i32,
                &beta as *const f32 as *const c_void,
                c.ptr as *mut c_void,
                cudaDataType::CUDA_R_32F,
                g.ldc as i32,
                T::compute_type(math),
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        check(status, || {
            let t = |trans: bool| if trans { " transposed" } else { "" };
            format!(
                "GemmEx ({} inputs, {math:?}; C = op(A) op(B) with A {}{}, B {}{}, C {})",
                std::any::type_name::<T>(),
                a.shape(),
                t(trans_a),
                b.shape(),
                t(trans_b),
                c.shape()
            )
        })
    }

    /// `C = beta C` on C's `rows x cols` values (the `k = 0` GEMM), padding untouched: a 2D
    /// memset for `beta = 0` (C is not read, so NaN does not survive), nothing for `beta = 1`,
    /// otherwise an in-place `cublasSgeam` (`C = beta C + 0 C`).
    ///
    /// # Safety
    /// `c` addresses live, writable f32 device memory for its `rows x cols` values.
    unsafe fn scale_c(&self, beta: f32, c: RawMatrix) -> Result<()> {
        if c.rows == 0 || c.cols == 0 || beta == 1.0 {
            return Ok(());
        }
        if beta == 0.0 {
            // SAFETY: rows of `cols` 32-bit words at pitch `ld * 4` bytes lie inside C; queued on
            // the GPU's stream (a memset node when captured).
            let r = unsafe { cudarc::driver::sys::cuMemsetD2D32Async(c.ptr, c.ld * 4, 0, c.cols, c.rows, self.gpu.stream.cu_stream()) };
            return r.result().map_err(|e| Error::cuda(format!("cuMemsetD2D32Async (GEMM with k = 0, C {})", c.shape()), e));
        }
        let zero = 0.0f32;
        // Column-major view of C: cols x rows, leading dimension ld (>= cols >= 1 here). In-place
        // geam (C = A = B, no transposes, equal leading dimensions) is allowed by cuBLAS.
        // SAFETY: the handle is live and C valid as the caller guarantees.
        let status = unsafe {
            sys::cublasSgeam(
                self.raw,
                Op::CUBLAS_OP_N,
                Op::CUBLAS_OP_N,
                c.cols as i32,
                c.rows as i32,
                &beta,
                c.ptr as *const f32,
                c.ld as i32,
                &zero,
                c.ptr as *const f32,
                c.ld as i32,
                c.ptr as *mut f32,
                c.ld as i32,
            )
        };
        check(status, || format!("Sgeam (GEMM with k = 0: C = beta C, C {})", c.shape()))
    }

    /// The raw view of a matrix of this Blas's Gpu, with its buffer checked to hold `rows * ld`.
    fn operand<T: GemmInput>(&self, name: &str, m: &DeviceMatrix<T>) -> Result<RawMatrix> {
        self.check_operand(name, m)?;
        Ok(RawMatrix { ptr: m.ptr(), rows: m.rows, cols: m.cols, ld: m.ld })
    }

    fn operand_mut<T: GemmInput>(&self, name: &str, m: &mut DeviceMatrix<T>) -> Result<RawMatrix> {
        self.check_operand(name, m)?;
        Ok(RawMatrix { ptr: m.ptr_mut(), rows: m.rows, cols: m.cols, ld: m.ld })
    }

    fn check_operand<T: GemmInput>(&self, name: &str, m: &DeviceMatrix<T>) -> Result<()> {
        if !Arc::ptr_eq(&m.gpu, &self.gpu) {
            return Err(Error::Unsupported(format!("GEMM: {name} lives on another Gpu than the cuBLAS handle")));
        }
        let need = m.rows.checked_mul(m.ld);
        if need.is_none_or(|n| n > m.buf.len()) || m.ld < m.cols {
            return Err(Error::Shape(format!(
                "GEMM: {name} claims {}x{} with stride {} but its buffer holds {} elements",
                m.rows,
                m.cols,
                m.ld,
                m.buf.len()
            )));
        }
        Ok(())
    }
}
