//! cuSPARSE, called the way a careful user would: handle, descriptors and workspace created once
//! outside any timed loop, preprocessing done once, and the algorithm chosen by the caller so a
//! benchmark can report the fastest. RAII types over cudarc's raw `sys`/`result` layers.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cusparse::sys::{self, cudaDataType, cusparseOperation_t as Op};
use cudarc::driver::CudaSlice;

use crate::error::{Error, Result};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::graph::Csr;

fn check(what: &str, status: sys::cusparseStatus_t) -> Result<()> {
    status.result().map_err(|e| Error::cuda(format!("cuSPARSE {what}"), format!("{:?}", e.0)))
}

/// Is libcusparse loadable? (The baseline is optional; our kernels are not.)
pub fn available() -> bool {
    unsafe { sys::is_culib_present() }
}

/// A cuSPARSE handle bound to the GPU's stream.
pub struct Handle {
    raw: sys::cusparseHandle_t,
    gpu: Arc<Gpu>,
}

impl Handle {
    /// The GPU whose stream the handle queues on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

impl Handle {
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        if !available() {
            return Err(Error::Unsupported("libcusparse was not found (set LD_LIBRARY_PATH to CUDA's lib64)".into()));
        }
        let raw = cudarc::cusparse::result::create().map_err(|e| Error::cuda("cusparseCreate", format!("{:?}", e.0)))?;
        let h = Handle { raw, gpu: gpu.clone() };
        check("SetStream", unsafe { sys::cusparseSetStream(raw, gpu.stream.cu_stream() as sys::cudaStream_t) })?;
        Ok(h)
    }
}

// SAFETY: a cuSPARSE handle may be used from any thread as long as calls are not concurrent;
// tcgnn enqueues everything on one stream from the thread that holds the graph handle.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { cudarc::cusparse::result::destroy(self.raw).ok() };
    }
}

/// A sparse matrix uploaded for cuSPARSE (32-bit indices, values in f32 or f16), in CSR layout
/// or in COO layout (the one `CUSPARSE_SPMM_COO_ALG4` takes).
pub struct SparseMatrix {
    descr: sys::cusparseSpMatDescr_t,
    /// Device address of the matrix's own values (`_values`).
    own_values: u64,
    /// CSR: row pointers; COO: the row of every nonzero.
    _rows: DeviceVec<u32>,
    _col_idx: DeviceVec<u32>,
    _values: ValuesBuf,
    pub n_rows: usize,
    pub n_cols: usize,
    pub nnz: usize,
}

// Owned only to keep the device values alive as long as the descriptor that points at them.
#[allow(dead_code)]
enum ValuesBuf {
    F32(DeviceVec<f32>),
    F16(DeviceVec<half::f16>),
}

/// Storage type of values or dense operands handed to cuSPARSE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    F32,
    F16,
}

impl DataType {
    fn cuda(self) -> cudaDataType {
        match self {
            DataType::F32 => cudaDataType::CUDA_R_32F,
            DataType::F16 => cudaDataType::CUDA_R_16F,
        }
    }
}

/// Which sparse layout a [`SparseMatrix`] descriptor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    Csr,
    Coo,
}

impl SparseMatrix {
    /// Upload `csr` for cuSPARSE in `layout` with values stored as `values`.
    pub fn upload(gpu: &Arc<Gpu>, csr: &Csr, layout: Layout, values: DataType) -> Result<Self> {
        let mut rows = match layout {
            Layout::Csr => DeviceVec::upload(gpu, csr.row_ptr())?,
            Layout::Coo => DeviceVec::upload(gpu, &crate::format::coo::Coo::from_csr(csr).row)?,
        };
        let mut col_idx = DeviceVec::upload(gpu, csr.col_idx())?;
        let (mut vals, vptr) = match values {
            DataType::F32 => {
                let mut v = DeviceVec::upload(gpu, csr.values())?;
                let p = v.ptr_mut(gpu);
                (ValuesBuf::F32(v), p)
            }
            DataType::F16 => {
                let h: Vec<half::f16> = csr.values().iter().map(|&v| half::f16::from_f32(v)).collect();
                let mut v = DeviceVec::upload(gpu, &h)?;
                let p = v.ptr_mut(gpu);
                (ValuesBuf::F16(v), p)
            }
        };
        let _ = &mut vals;
        let mut descr = std::ptr::null_mut();
        let (i32i, base0) = (sys::cusparseIndexType_t::CUSPARSE_INDEX_32I, sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO);
        let (n_rows, n_cols, nnz) = (csr.n_rows() as i64, csr.n_cols() as i64, csr.nnz() as i64);
        let (rows_ptr, cols_ptr) = (rows.ptr_mut(gpu) as *mut c_void, col_idx.ptr_mut(gpu) as *mut c_void);
        match layout {
            Layout::Csr => check("CreateCsr", unsafe {
                sys::cusparseCreateCsr(
                    &mut descr,
                    n_rows,
                    n_cols,
                    nnz,
                    rows_ptr,
                    cols_ptr,
                    vptr as *mut c_void,
                    i32i,
                    i32i,
                    base0,
                    values.cuda(),
                )
            })?,
            Layout::Coo => check("CreateCoo", unsafe {
                sys::cusparseCreateCoo(&mut descr, n_rows, n_cols, nnz, rows_ptr, cols_ptr, vptr as *mut c_void, i32i, base0, values.cuda())
            })?,
        }
        Ok(SparseMatrix {
            descr,
            own_values: vptr,
            _rows: rows,
            _col_idx: col_idx,
            _values: vals,
            n_rows: csr.n_rows(),
            n_cols: csr.n_cols(),
            nnz: csr.nnz(),
        })
    }

    pub(crate) fn raw(&self) -> sys::cusparseSpMatDescr_t {
        self.descr
    }

    /// Point the descriptor at other values of the same pattern, order and storage type
    /// (`Some(address)`), or back at its own (`None`). Plans built on this matrix read whatever it
    /// points at when they run; descriptors, workspaces and preprocessing (which depends on the
    /// pattern only) stay valid.
    ///
    /// # Safety
    /// `Some(address)` must hold `nnz` values of the matrix's storage type, in CSR order, and stay
    /// alive until every SpMM enqueued while it is set has run; callers serialise the swap and
    /// the run (the descriptor is shared by every plan on this matrix).
    pub unsafe fn set_values(&self, values: Option<u64>) -> Result<()> {
        let ptr = values.unwrap_or(self.own_values);
        check("SpMatSetValues", unsafe { sys::cusparseSpMatSetValues(self.descr, ptr as *mut c_void) })
    }
}

// SAFETY: the descriptor is a handle over device buffers the struct owns; the only mutation
// (`set_values`) is unsafe and serialised by its callers.
unsafe impl Send for SparseMatrix {}
unsafe impl Sync for SparseMatrix {}

impl Drop for SparseMatrix {
    fn drop(&mut self) {
        unsafe { sys::cusparseDestroySpMat(self.descr) };
    }
}

/// A dense row-major descriptor over a [`DeviceMatrix`] (its padded stride as leading dimension).
pub struct DenseDescr {
    raw: sys::cusparseDnMatDescr_t,
}

impl DenseDescr {
    pub fn new<T: crate::gpu::memory::Element>(m: &mut DeviceMatrix<T>, dtype: DataType) -> Result<Self> {
        let (rows, cols, ld, ptr) = (m.rows, m.cols, m.ld, m.ptr_mut());
        Self::from_raw(ptr, rows, cols, ld, dtype)
    }

    /// A descriptor over `rows x cols` row-major elements at device address `ptr`, stride `ld`.
    /// The caller keeps the allocation alive as long as the descriptor is used.
    pub fn from_raw(ptr: u64, rows: usize, cols: usize, ld: usize, dtype: DataType) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        check("CreateDnMat", unsafe {
            sys::cusparseCreateDnMat(
                &mut raw,
                rows as i64,
                cols as i64,
                ld as i64,
                ptr as *mut c_void,
                dtype.cuda(),
                sys::cusparseOrder_t::CUSPARSE_ORDER_ROW,
            )
        })?;
        Ok(DenseDescr { raw })
    }
    pub(crate) fn raw(&self) -> sys::cusparseDnMatDescr_t {
        self.raw
    }
}

impl Drop for DenseDescr {
    fn drop(&mut self) {
        unsafe { sys::cusparseDestroyDnMat(self.raw) };
    }
}

/// cuSPARSE SpMM algorithms worth trying: the CSR ones and COO ALG4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SpmmAlg {
    Default,
    CsrAlg1,
    CsrAlg2,
    CsrAlg3,
    CooAlg4,
}

impl SpmmAlg {
    pub const ALL: [SpmmAlg; 5] = [SpmmAlg::Default, SpmmAlg::CsrAlg1, SpmmAlg::CsrAlg2, SpmmAlg::CsrAlg3, SpmmAlg::CooAlg4];
    /// The sparse layout the algorithm reads.
    pub fn layout(self) -> Layout {
        if self == SpmmAlg::CooAlg4 { Layout::Coo } else { Layout::Csr }
    }
    fn raw(self) -> sys::cusparseSpMMAlg_t {
        match self {
            SpmmAlg::Default => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT,
            SpmmAlg::CsrAlg1 => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG1,
            SpmmAlg::CsrAlg2 => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG2,
            SpmmAlg::CsrAlg3 => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3,
            SpmmAlg::CooAlg4 => sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_COO_ALG4,
        }
    }
}

/// The argument list the three SpMM entry points share: Y = 1 * A X + 0 * Y, no transposes,
/// f32 compute; only the function and its last argument (size out-pointer or workspace) differ.
macro_rules! spmm_call {
    ($f:path, $handle:expr, $a:expr, $x:expr, $y:expr, $alg:expr, $last:expr) => {{
        let (alpha, beta) = (1.0f32, 0.0f32);
        $f(
            $handle,
            Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
            Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
            &alpha as *const f32 as *const c_void,
            $a as _,
            $x as _,
            &beta as *const f32 as *const c_void,
            $y,
            cudaDataType::CUDA_R_32F,
            $alg.raw(),
            $last,
        )
    }};
}

/// Y = A X with everything bound once: `run` only enqueues `cusparseSpMM`.
pub struct SpmmPlan {
    handle: Arc<Handle>,
    a: Arc<SparseMatrix>,
    x: DenseDescr,
    y: DenseDescr,
    alg: SpmmAlg,
    workspace: CudaSlice<u8>,
}

// SAFETY: the descriptors are plain handles owned by the plan; every use goes through `&mut self`
// on the one stream the handle is bound to.
unsafe impl Send for SpmmPlan {}
unsafe impl Sync for SpmmPlan {}

impl SpmmPlan {
    /// Bind A (N x N), X (N x K, `x_type`) and Y (N x K, f32) with algorithm `alg`; allocates the
    /// workspace and runs `cusparseSpMM_preprocess`.
    pub fn new<T: crate::gpu::memory::Element>(
        handle: &Arc<Handle>,
        a: &Arc<SparseMatrix>,
        x: &DeviceMatrix<T>,
        x_type: DataType,
        y: &mut DeviceMatrix<f32>,
        alg: SpmmAlg,
    ) -> Result<Self> {
        if x.rows != a.n_cols || y.rows != a.n_rows || x.cols != y.cols || x.ld != y.ld {
            return Err(Error::Shape(format!(
                "cuSPARSE SpMM: A {}x{}, X {}x{}, Y {}x{}",
                a.n_rows, a.n_cols, x.rows, x.cols, y.rows, y.cols
            )));
        }
        // cuSPARSE only reads X; its non-const API still takes a mutable pointer.
        let xd = DenseDescr::from_raw(x.ptr(), x.rows, x.cols, x.ld, x_type)?;
        let yd = DenseDescr::new(y, DataType::F32)?;
        let mut bytes = 0usize;
        check(&format!("SpMM_bufferSize({alg:?})"), unsafe {
            spmm_call!(sys::cusparseSpMM_bufferSize, handle.raw, a.raw(), xd.raw(), yd.raw(), alg, &mut bytes)
        })?;
        let mut workspace = handle.gpu.stream.alloc_zeros::<u8>(bytes.max(1)).map_err(|e| Error::cuda("SpMM workspace", e))?;
        let wptr = {
            use cudarc::driver::DevicePtrMut;
            workspace.device_ptr_mut(&handle.gpu.stream).0
        };
        check(&format!("SpMM_preprocess({alg:?})"), unsafe {
            spmm_call!(sys::cusparseSpMM_preprocess, handle.raw, a.raw(), xd.raw(), yd.raw(), alg, wptr as *mut c_void)
        })?;
        Ok(SpmmPlan { handle: handle.clone(), a: a.clone(), x: xd, y: yd, alg, workspace })
    }

    pub fn alg(&self) -> SpmmAlg {
        self.alg
    }

    /// Enqueue Y = A X with the values A's descriptor points at (its own unless
    /// [`SparseMatrix::set_values`] swapped them).
    pub fn run(&mut self) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let wptr = self.workspace.device_ptr_mut(&self.handle.gpu.stream).0;
        // No formatting on the hot path: the baseline's timed loop is this call alone.
        check("SpMM", unsafe {
            spmm_call!(sys::cusparseSpMM, self.handle.raw, self.a.raw(), self.x.raw(), self.y.raw(), self.alg, wptr as *mut c_void)
        })
    }

    /// Enqueue Y = A X reading A's values at `values` (`None`: A's own).
    ///
    /// # Safety
    /// As for [`SparseMatrix::set_values`].
    pub unsafe fn run_with_values(&mut self, values: Option<u64>) -> Result<()> {
        unsafe { self.a.set_values(values)? };
        self.run()
    }
}

/// cuSPARSE SDDMM, C = (A B^T) .* spy(C): the sampled products land in C's values, which are
/// the caller's output buffer. Note: cuSPARSE does not multiply by S's values (it samples the
/// pattern), so comparisons use unit-valued S.
pub struct SddmmPlan {
    handle: Arc<Handle>,
    a: DenseDescr,
    b: DenseDescr,
    c: sys::cusparseSpMatDescr_t,
    workspace: CudaSlice<u8>,
}

// SAFETY: as for SpmmPlan: owned descriptors, used through `&mut self` on one stream.
unsafe impl Send for SddmmPlan {}
unsafe impl Sync for SddmmPlan {}

/// The argument list the three SDDMM entry points share (alpha 1, beta 0, B transposed).
macro_rules! sddmm_call {
    ($f:path, $handle:expr, $a:expr, $b:expr, $c:expr, $last:expr) => {{
        let (alpha, beta) = (1.0f32, 0.0f32);
        $f(
            $handle,
            Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
            Op::CUSPARSE_OPERATION_TRANSPOSE,
            &alpha as *const f32 as *const c_void,
            $a as _,
            $b as _,
            &beta as *const f32 as *const c_void,
            $c,
            cudaDataType::CUDA_R_32F,
            sys::cusparseSDDMMAlg_t::CUSPARSE_SDDMM_ALG_DEFAULT,
            $last,
        )
    }};
}

impl SddmmPlan {
    /// Bind A (n_rows x K), B (n_cols x K) and the CSR pattern (device `row_ptr`, `col_idx`)
    /// with `out` (nnz f32) as C's values; workspace and preprocessing done here.
    pub fn new(
        handle: &Arc<Handle>,
        (n_rows, n_cols, nnz): (usize, usize, usize),
        row_ptr: u64,
        col_idx: u64,
        out: u64,
        a: &DeviceMatrix<f32>,
        b: &DeviceMatrix<f32>,
    ) -> Result<Self> {
        if a.rows != n_rows || b.rows != n_cols || a.cols != b.cols {
            return Err(Error::Shape(format!("cuSPARSE SDDMM: S {n_rows}x{n_cols}, A {}x{}, B {}x{}", a.rows, a.cols, b.rows, b.cols)));
        }
        let ad = DenseDescr::from_raw(a.ptr(), a.rows, a.cols, a.ld, DataType::F32)?;
        let bd = DenseDescr::from_raw(b.ptr(), b.rows, b.cols, b.ld, DataType::F32)?;
        let mut c = std::ptr::null_mut();
        let (i32i, base0) = (sys::cusparseIndexType_t::CUSPARSE_INDEX_32I, sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO);
        check("CreateCsr (SDDMM output)", unsafe {
            sys::cusparseCreateCsr(
                &mut c,
                n_rows as i64,
                n_cols as i64,
                nnz as i64,
                row_ptr as *mut c_void,
                col_idx as *mut c_void,
                out as *mut c_void,
                i32i,
                i32i,
                base0,
                cudaDataType::CUDA_R_32F,
            )
        })?;
        let mut plan = SddmmPlan {
            handle: handle.clone(),
            a: ad,
            b: bd,
            c,
            workspace: handle.gpu.stream.alloc_zeros::<u8>(1).map_err(|e| Error::cuda("alloc", e))?,
        };
        let mut bytes = 0usize;
        check("SDDMM_bufferSize", unsafe {
            sddmm_call!(sys::cusparseSDDMM_bufferSize, handle.raw, plan.a.raw(), plan.b.raw(), plan.c, &mut bytes)
        })?;
        plan.workspace = handle.gpu.stream.alloc_zeros::<u8>(bytes.max(1)).map_err(|e| Error::cuda("SDDMM workspace", e))?;
        let wptr = {
            use cudarc::driver::DevicePtrMut;
            plan.workspace.device_ptr_mut(&handle.gpu.stream).0
        };
        check("SDDMM_preprocess", unsafe {
            sddmm_call!(sys::cusparseSDDMM_preprocess, handle.raw, plan.a.raw(), plan.b.raw(), plan.c, wptr as *mut c_void)
        })?;
        Ok(plan)
    }

    /// Enqueue C = (A B^T) .* spy(C).
    pub fn run(&mut self) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let wptr = self.workspace.device_ptr_mut(&self.handle.gpu.stream).0;
        check("SDDMM", unsafe { sddmm_call!(sys::cusparseSDDMM, self.handle.raw, self.a.raw(), self.b.raw(), self.c, wptr as *mut c_void) })
    }
}

impl Drop for SddmmPlan {
    fn drop(&mut self) {
        unsafe { sys::cusparseDestroySpMat(self.c) };
    }
}
