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
            Layout::Coo => {
                let row_of: Vec<u32> =
                    (0..csr.n_rows()).flat_map(|r| std::iter::repeat_n(r as u32, csr.row_len(r))).collect();
                DeviceVec::upload(gpu, &row_of)?
            }
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
                sys::cusparseCreateCsr(&mut descr, n_rows, n_cols, nnz, rows_ptr, cols_ptr, vptr as *mut c_void, i32i, i32i, base0, values.cuda())
            })?,
            Layout::Coo => check("CreateCoo", unsafe {
                sys::cusparseCreateCoo(&mut descr, n_rows, n_cols, nnz, rows_ptr, cols_ptr, vptr as *mut c_void, i32i, base0, values.cuda())
            })?,
        }
        Ok(SparseMatrix {
            descr,
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
}

// SAFETY: the descriptor is an immutable handle over device buffers the struct owns.
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
        let (alpha, beta) = (1.0f32, 0.0f32);
        let mut bytes = 0usize;
        check(&format!("SpMM_bufferSize({alg:?})"), unsafe {
            sys::cusparseSpMM_bufferSize(
                handle.raw,
                Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
                Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
                &alpha as *const f32 as *const c_void,
                a.raw() as _,
                xd.raw() as _,
                &beta as *const f32 as *const c_void,
                yd.raw(),
                cudaDataType::CUDA_R_32F,
                alg.raw(),
                &mut bytes,
            )
        })?;
        let mut workspace = handle.gpu.stream.alloc_zeros::<u8>(bytes.max(1)).map_err(|e| Error::cuda("SpMM workspace", e))?;
        let wptr = {
            use cudarc::driver::DevicePtrMut;
            workspace.device_ptr_mut(&handle.gpu.stream).0
        };
        check(&format!("SpMM_preprocess({alg:?})"), unsafe {
            sys::cusparseSpMM_preprocess(
                handle.raw,
                Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
                Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
                &alpha as *const f32 as *const c_void,
                a.raw() as _,
                xd.raw() as _,
                &beta as *const f32 as *const c_void,
                yd.raw(),
                cudaDataType::CUDA_R_32F,
                alg.raw(),
                wptr as *mut c_void,
            )
        })?;
        Ok(SpmmPlan { handle: handle.clone(), a: a.clone(), x: xd, y: yd, alg, workspace })
    }

    pub fn alg(&self) -> SpmmAlg {
        self.alg
    }

    /// Enqueue Y = A X.
    pub fn run(&mut self) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let wptr = self.workspace.device_ptr_mut(&self.handle.gpu.stream).0;
        let (alpha, beta) = (1.0f32, 0.0f32);
        check(&format!("SpMM({:?})", self.alg), unsafe {
            sys::cusparseSpMM(
                self.handle.raw,
                Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
                Op::CUSPARSE_OPERATION_NON_TRANSPOSE,
                &alpha as *const f32 as *const c_void,
                self.a.raw() as _,
                self.x.raw() as _,
                &beta as *const f32 as *const c_void,
                self.y.raw(),
                cudaDataType::CUDA_R_32F,
                self.alg.raw(),
                wptr as *mut c_void,
            )
        })
    }
}
