//! Launcher of `kernels-gpu/src/spmm/tc8.rs`: ME-BCRS (k = 8) uploaded once per graph, a work
//! list that splits long windows, and the gather source ([`Tc8Source`]) chosen as a value.

use crate::error::{Error, Result};
use crate::format::worklist::{WorkListBuilder, tc8_work_list};
use crate::gpu::abi::spmm::{self as kernels, QuantizeE4m3Args, Tc8SpmmArgs, ZeroWindowsArgs};
use crate::gpu::launch::{Kernel, Ptr, PtrMut, Shape};
use crate::gpu::module::KERNELS_ARCH;
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::values::check_len;
use crate::ops::{EdgeValues, FeaturesRef, GraphHandle, OutputMut, ValueOrder};
use crate::shared::config::{TC8_ASYNC_STAGES, TC8_BLOCK_VECTORS, TC8_WARPS, tc8_async_stage_bytes, tc8_bulk_warp_bytes};

/// What the work lists need of the format (shared by both precisions and every K).
struct Tc8Shape {
    /// Blocks of every window.
    blocks_per_window: Vec<u32>,
}

/// A work list on the device, one per number of K slices (the split depends on it).
struct DeviceWorkList {
    item_win: DeviceVec<u32>,
    item_blocks: DeviceVec<u32>,
    split_windows: DeviceVec<u32>,
    n_items: u32,
    n_split: u32,
}

fn shape(g: &GraphHandle) -> Result<std::sync::Arc<Tc8Shape>> {
    g.cached(TC8_BLOCK_VECTORS as u64, || {
        // Window pointers only: the whole ME-BCRS would be a download of gigabytes on large graphs.
        let win_ptr = g.mebcrs_win_ptr()?;
        Ok(Tc8Shape { blocks_per_window: win_ptr.windows(2).map(|w| (w[1] - w[0]).div_ceil(TC8_BLOCK_VECTORS)).collect() })
    })
}

fn device_work_list(
    g: &GraphHandle,
    gpu: &Gpu,
    f: &Tc8Shape,
    k_slices: u32,
    builder: WorkListBuilder,
) -> Result<std::sync::Arc<DeviceWorkList>> {
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (k_slices, builder).hash(&mut h);
        h.finish()
    };
    g.cached(key, || {
        let wl = tc8_work_list(&f.blocks_per_window, k_slices, gpu.info().sm_count, builder);
        Ok(DeviceWorkList {
            item_win: DeviceVec::upload(gpu, &wl.item_win)?,
            item_blocks: DeviceVec::upload(gpu, &wl.item_blocks)?,
            split_windows: DeviceVec::upload(gpu, &wl.split_windows)?,
            n_items: wl.item_win.len() as u32,
            n_split: wl.split_windows.len() as u32,
        })
    })
}

/// How TC8 brings the gathered X rows into the tensor cores: a tuning value passed in (the
/// tests and the benchmark run every source), never read from the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tc8Source {
    /// The measured default for the precision, K and device ([`Tc8Source::resolve`]).
    #[default]
    Auto,
    /// Loads straight into registers, one group of 4 blocks at a time; `tiles` 16-dim MMA tiles
    /// per warp (2 or 4).
    Registers { tiles: u32 },
    /// `cp.async` into shared memory, a group ahead (sm_80+).
    CpAsync,
    /// One `cp.async.bulk` copy per gathered row slice, completed on an mbarrier, `stages`
    /// shared-memory stages per warp (2; more measured slower, bench/NOTES.md). sm_90 only.
    Bulk { stages: u32 },
}

impl Tc8Source {
    /// The sources this device and build can run, for tests and benchmarks.
    pub fn all(gpu: &Gpu) -> Vec<Tc8Source> {
        let mut v = vec![Tc8Source::Registers { tiles: 2 }, Tc8Source::Registers { tiles: 4 }, Tc8Source::CpAsync];
        if bulk_available(gpu) {
            v.push(Tc8Source::Bulk { stages: 2 });
        }
        v
    }

    /// What `Auto` means here. f16 with K <= 32: registers with 2 tiles (one warp covers the
    /// row; the shared-memory sources move 64-dim f16 slices). Otherwise `CpAsync`, measured
    /// ahead of `Registers` on the H100 suite (bench/NOTES.md).
    pub fn resolve(self, ld: u32, f16: bool) -> Tc8Source {
        match self {
            Tc8Source::Auto if f16 && ld <= 32 => Tc8Source::Registers { tiles: 2 },
            Tc8Source::Auto => Tc8Source::CpAsync,
            s => s,
        }
    }

    /// 16-dim tiles per warp of the kernel: the shared-memory sources move 16-byte chunks per
    /// lane (8 f16 dims: 4 tiles; 4 f32 dims: 2 tiles).
    fn tiles(self, f16: bool) -> u32 {
        match self {
            Tc8Source::Registers { tiles } => tiles,
            _ if f16 => 4,
            _ => 2,
        }
    }
}

/// How a TC8 product runs: the gather source and the grid (tuning values, passed in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Tc8Config {
    pub source: Tc8Source,
    pub grid: Tc8Grid,
    pub work_list: WorkListBuilder,
}

/// The grid of a TC8 product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tc8Grid {
    /// `Persistent` when the work list is more than [`PERSISTENT_WAVES`] waves of resident
    /// blocks (large sparse graphs: many windows of a few groups each), else `PerItem`.
    #[default]
    Auto,
    /// One warp per work item.
    PerItem,
    /// As many blocks as fit on the device at once; each warp walks several work items and its
    /// copies run ahead across item boundaries.
    Persistent,
}

/// Above this many waves of resident blocks, `Tc8Grid::Auto` goes persistent. H100, K = 128,
/// f16 with f16 output: R-MAT 2^20 x 8 relabelled (~80 waves) 0.62 -> 0.54 ms; musae_github
/// (~3 waves) 0.045 -> 0.049 ms (bench/NOTES.md).
pub const PERSISTENT_WAVES: u32 = 8;

impl From<Tc8Source> for Tc8Config {
    fn from(source: Tc8Source) -> Self {
        Tc8Config { source, grid: Tc8Grid::Auto, work_list: WorkListBuilder::Balanced }
    }
}

/// Bulk copies need sm_90 hardware and PTX built for sm_90.
fn bulk_available(gpu: &Gpu) -> bool {
    gpu.info().compute_capability.0 >= 9 && KERNELS_ARCH == "sm_90"
}

/// The kernel for a (source, features, output) triple and its dynamic shared memory.
fn kernel(source: Tc8Source, f16: bool, f16_out: bool) -> Result<(Kernel<Tc8SpmmArgs>, u32)> {
    use Tc8Source::*;
    let vb = if f16 { 2 } else { 4 };
    let async_smem = TC8_WARPS * TC8_ASYNC_STAGES * tc8_async_stage_bytes(vb, false);
    let bulk_smem = |stages: u32| TC8_WARPS * tc8_bulk_warp_bytes(vb, stages);
    Ok(match (source, f16, f16_out) {
        (Registers { tiles: 2 }, false, false) => (kernels::spmm_tc8_tf32_nt2, 0),
        (Registers { tiles: 4 }, false, false) => (kernels::spmm_tc8_tf32_nt4, 0),
        (Registers { tiles: 2 }, true, false) => (kernels::spmm_tc8_f16_nt2, 0),
        (Registers { tiles: 4 }, true, false) => (kernels::spmm_tc8_f16_nt4, 0),
        (Registers { tiles: 2 }, true, true) => (kernels::spmm_tc8_f16_nt2_h, 0),
        (Registers { tiles: 4 }, true, true) => (kernels::spmm_tc8_f16_nt4_h, 0),
        (CpAsync, false, false) => (kernels::spmm_tc8a_tf32, async_smem),
        (CpAsync, true, false) => (kernels::spmm_tc8a_f16, async_smem),
        (CpAsync, true, true) => (kernels::spmm_tc8a_f16_h, async_smem),
        (Bulk { stages: 2 }, false, false) => (kernels::spmm_tc8b_tf32, bulk_smem(2)),
        (Bulk { stages: 2 }, true, false) => (kernels::spmm_tc8b_f16, bulk_smem(2)),
        (Bulk { stages: 2 }, true, true) => (kernels::spmm_tc8b_f16_h, bulk_smem(2)),
        (s, f16, f16_out) => {
            return Err(Error::Unsupported(format!(
                "TC8 SpMM has no {s:?} kernel for {} features with {} output (f16 output needs f16 features; Registers takes 2 or 4 tiles; Bulk 2 stages)",
                if f16 { "f16" } else { "f32" },
                if f16_out { "f16" } else { "f32" }
            )));
        }
    })
}

/// Y = S X on tensor cores: tf32 for f32 features, f16 for f16 features.
pub fn spmm_tc8(g: &GraphHandle, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_tc8_with(g, x, y, Tc8Source::Auto)
}

/// [`spmm_tc8`] with a chosen gather source (the tests run all of them). Shapes are the
/// caller's to check, as `ops::spmm::spmm_device` does.
pub fn spmm_tc8_with<'y>(g: &GraphHandle, x: FeaturesRef<'_>, y: impl Into<OutputMut<'y>>, config: impl Into<Tc8Config>) -> Result<()> {
    spmm_tc8_values(g, None, x, y, config)
}

/// [`spmm_tc8_with`] with per-call values in ME-BCRS order (`None`: the handle's): f32
/// ([`EdgeValues::MeBcrs`]) with f32 features, f16 ([`EdgeValues::MeBcrsF16`]) with f16 ones.
/// Y may be f16 when X is.
pub fn spmm_tc8_values<'y>(
    g: &GraphHandle,
    values: Option<EdgeValues>,
    x: FeaturesRef<'_>,
    y: impl Into<OutputMut<'y>>,
    config: impl Into<Tc8Config>,
) -> Result<()> {
    let gpu = g.gpu()?;
    let m = g.device_mebcrs()?;
    // The values the kernel reads: ME-BCRS slots in the features' storage type.
    let handle_f16;
    let values_ptr = match (values, x) {
        // Released only by whoever runs every product on this graph with values of its own.
        (None, FeaturesRef::F32(_)) => m.with_values(|v| Ok(v.ptr(gpu)))?,
        (None, FeaturesRef::F16(_)) => {
            handle_f16 = g.device_mebcrs_f16()?;
            handle_f16.0.ptr(gpu)
        }
        (Some(v @ EdgeValues::MeBcrs(_)), FeaturesRef::F32(_)) | (Some(v @ EdgeValues::MeBcrsF16(_)), FeaturesRef::F16(_)) => {
            check_len("TC8 SpMM: the edge values", v.len(), g.value_len(ValueOrder::MeBcrs)?, ValueOrder::MeBcrs)?;
            v.ptr(gpu)
        }
        (Some(v), x) => {
            return Err(Error::Unsupported(format!(
                "SpMM Tc8 with {} features reads {} values in ME-BCRS order, got {v:?}",
                x.type_name(),
                x.type_name()
            )));
        }
    };
    let xin = match x {
        FeaturesRef::F32(xm) => XIn { kind: XKind::F32, ptr: xm.ptr(), ld: xm.ld as u32, scaling: None },
        FeaturesRef::F16(xm) => XIn { kind: XKind::F16, ptr: xm.ptr(), ld: xm.ld as u32, scaling: None },
    };
    launch_tc8(g, values_ptr, xin, y.into(), config.into())
}

/// Y = S X with X quantised to e4m3 ([`E4m3Features`], one scale per row): the f16 edge values
/// are multiplied by their column's X scale and rounded to e4m3 inside the kernel, one
/// `mma.m16n8k32.e4m3` per group of 32 vectors, f32 accumulation and output. sm_89+ (and PTX
/// built for sm_89 or sm_90); `Tc8Source::Auto` / `CpAsync` only.
pub fn spmm_tc8_e4m3(g: &GraphHandle, x: &E4m3Features, y: &mut DeviceMatrix<f32>, config: impl Into<Tc8Config>) -> Result<()> {
    let gpu = g.gpu()?;
    if !e4m3_available(gpu) {
        return Err(Error::Unsupported(format!(
            "TC8 e4m3 needs an sm_89+ GPU and PTX built for sm_89 or sm_90 (this is {} {}.{}, PTX for {KERNELS_ARCH})",
            gpu.info().name,
            gpu.info().compute_capability.0,
            gpu.info().compute_capability.1
        )));
    }
    let values = g.device_mebcrs_f16()?;
    let value_max =
        *g.cached(0xe4, || Ok(ValueMax(g.csr().values().iter().map(|&v| half::f16::from_f32(v).to_f32().abs()).fold(0.0f32, f32::max))))?;
    let xin = XIn {
        kind: XKind::E4m3,
        ptr: x.data.ptr(gpu),
        ld: x.ld as u32,
        scaling: Some((value_max.0, x.scales.arg(gpu), Ptr::new(x.scale_max.ptr(gpu)))),
    };
    launch_tc8(g, values.0.ptr(gpu), xin, OutputMut::F32(y), config.into())
}

/// The largest |value| of a graph after f16 rounding (cached in the handle).
#[derive(Clone, Copy)]
struct ValueMax(f32);

/// e4m3 MMAs need sm_89+ hardware and PTX built for it.
fn e4m3_available(gpu: &Gpu) -> bool {
    let (major, minor) = gpu.info().compute_capability;
    (major, minor) >= (8, 9) && matches!(KERNELS_ARCH, "sm_89" | "sm_90")
}

/// Features quantised to e4m3 for [`spmm_tc8_e4m3`]: rows of `ld` bytes (K padded to 16), one f32
/// scale per row (max |x| / 448) and the largest scale, all on the device.
pub struct E4m3Features {
    pub rows: usize,
    pub cols: usize,
    /// Row stride in bytes (a multiple of 16).
    pub ld: usize,
    data: DeviceVec<u8>,
    scales: DeviceVec<f32>,
    scale_max: DeviceVec<u32>,
}

impl E4m3Features {
    pub fn zeros(gpu: &Gpu, rows: usize, cols: usize) -> Result<Self> {
        let ld = cols.div_ceil(16) * 16;
        Ok(E4m3Features {
            rows,
            cols,
            ld,
            data: DeviceVec::zeros(gpu, rows * ld)?,
            scales: DeviceVec::zeros(gpu, rows)?,
            scale_max: DeviceVec::zeros(gpu, 1)?,
        })
    }

    /// Quantise `x` (same shape) into this buffer on the GPU's stream.
    pub fn quantize(&mut self, x: &DeviceMatrix<f32>) -> Result<()> {
        if (x.rows, x.cols) != (self.rows, self.cols) {
            return Err(Error::Shape(format!("e4m3 features are {}x{}, X is {}x{}", self.rows, self.cols, x.rows, x.cols)));
        }
        let gpu = x.gpu().clone();
        if !e4m3_available(&gpu) {
            return Err(Error::Unsupported(format!(
                "e4m3 features need an sm_89+ GPU and PTX built for sm_89 or sm_90 (this is {} {}.{}, PTX for {KERNELS_ARCH})",
                gpu.info().name,
                gpu.info().compute_capability.0,
                gpu.info().compute_capability.1
            )));
        }
        gpu.stream.memset_zeros(self.scale_max.slice_mut()).map_err(|e| Error::cuda("clearing the e4m3 scale maximum", e))?;
        let args = QuantizeE4m3Args {
            n_rows: self.rows as u32,
            ld_in: x.ld as u32,
            ld_out: self.ld as u32,
            x: x.arg(),
            out: PtrMut::new(self.data.ptr_mut(&gpu)),
            scales: self.scales.arg_mut(&gpu),
            scale_max: self.scale_max.arg_mut(&gpu),
        };
        let blocks = (self.rows as u32).div_ceil(8).min(gpu.info().sm_count * 16);
        // SAFETY: X holds rows x ld_in floats, the output rows x ld_out bytes (ld_out a multiple
        // of 16 >= ld_in), scales one float per row, scale_max one word.
        unsafe { kernels::quantize_rows_e4m3.launch(&gpu, Shape::linear(blocks, 256, 0), &args) }
    }

    /// The quantised features back on the host as f32 (value x row scale), for tests.
    pub fn dequantize(&self, gpu: &Gpu) -> Result<crate::tensor::Matrix> {
        let bytes = self.data.download(gpu)?;
        let scales = self.scales.download(gpu)?;
        let mut m = crate::tensor::Matrix::zeros(self.rows, self.cols);
        for r in 0..self.rows {
            for c in 0..self.cols {
                m.data[r * self.cols + c] = e4m3_to_f32(bytes[r * self.ld + c]) * scales[r];
            }
        }
        Ok(m)
    }
}

/// An e4m3 byte (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities) as f32.
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> 3) & 0xf) as i32;
    let man = (b & 0x7) as f32;
    if exp == 0xf && b & 0x7 == 0x7 {
        return f32::NAN;
    }
    sign * if exp == 0 { man / 8.0 * 2f32.powi(-6) } else { (1.0 + man / 8.0) * 2f32.powi(exp - 7) }
}

/// Which storage the kernel reads X in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum XKind {
    F32,
    F16,
    E4m3,
}

/// X as the kernel sees it: address, row stride in elements, and for e4m3 the value maximum, the
/// row scales and the scale maximum.
struct XIn {
    kind: XKind,
    ptr: u64,
    ld: u32,
    scaling: Option<(f32, Ptr<f32>, Ptr<u32>)>,
}

fn launch_tc8(g: &GraphHandle, values_ptr: u64, x: XIn, mut y: OutputMut<'_>, config: Tc8Config) -> Result<()> {
    let Tc8Config { source, grid, work_list } = config;
    let gpu = g.gpu()?;
    let f = shape(g)?;
    let m = g.device_mebcrs()?;
    let ld = y.ld() as u32;
    let n_rows = g.csr().n_rows() as u32;
    let f16 = x.kind == XKind::F16;
    let f16_out = matches!(y, OutputMut::F16(_));
    let source = source.resolve(ld, f16);
    if matches!(source, Tc8Source::Bulk { .. }) && !bulk_available(gpu) {
        return Err(Error::Unsupported(format!(
            "TC8 bulk copies need an sm_90 GPU and PTX built for sm_90 (this is {} {}.{}, PTX for {KERNELS_ARCH}); use Tc8Source::CpAsync",
            gpu.info().name,
            gpu.info().compute_capability.0,
            gpu.info().compute_capability.1
        )));
    }
    let (kernel, smem_bytes, tiles) = if x.kind == XKind::E4m3 {
        if !matches!(source, Tc8Source::CpAsync) {
            return Err(Error::Unsupported(format!("TC8 e4m3 runs with Tc8Source::CpAsync (or Auto), not {source:?}")));
        }
        (kernels::spmm_tc8a_e4m3, TC8_WARPS * TC8_ASYNC_STAGES * tc8_async_stage_bytes(2, true), 8)
    } else {
        let (k, smem) = kernel(source, f16, f16_out)?;
        (k, smem, source.tiles(f16))
    };
    let k_slices = ld.div_ceil(16 * tiles);
    let wl = device_work_list(g, gpu, &f, k_slices, work_list)?;
    let y_ptr = match &mut y {
        OutputMut::F32(ym) => ym.ptr_mut(),
        OutputMut::F16(ym) => ym.ptr_mut(),
    };
    if wl.n_split > 0 {
        let row_words = if f16_out { ld / 2 } else { ld };
        let args = ZeroWindowsArgs { windows: wl.split_windows.arg(gpu), n_rows, row_words, y: PtrMut::new(y_ptr) };
        // SAFETY: every listed window has rows below n_rows and Y holds n_rows * ld elements.
        unsafe { kernels::tc8_zero_windows.launch(gpu, Shape::linear(wl.n_split, 256, 0), &args)? };
    }
    let mut blocks = wl.n_items.div_ceil(TC8_WARPS);
    if grid != Tc8Grid::PerItem {
        // Resident blocks per K slice: with a persistent grid, every slice's blocks at once.
        let per_sm = kernel.max_active_blocks_per_sm(gpu, 32 * TC8_WARPS, smem_bytes)?.max(1);
        let resident = (gpu.info().sm_count * per_sm).div_ceil(k_slices).max(1);
        if grid == Tc8Grid::Persistent || blocks > PERSISTENT_WAVES * resident {
            blocks = blocks.min(resident);
        }
    }
    let shape = Shape { grid: (blocks, k_slices, 1), block: (32 * TC8_WARPS, 1, 1), smem_bytes };
    let (value_max, x_scales, scale_max) = x.scaling.unwrap_or((0.0, Ptr::null(), Ptr::null()));
    let args = Tc8SpmmArgs {
        n_items: wl.n_items,
        n_rows,
        ld,
        win_ptr: m.win_ptr.arg(gpu),
        vec_col: m.vec_col.arg(gpu),
        values: Ptr::new(values_ptr),
        item_win: wl.item_win.arg(gpu),
        item_blocks: wl.item_blocks.arg(gpu),
        x: Ptr::new(x.ptr),
        y: PtrMut::new(y_ptr),
        x_ld: x.ld,
        value_max,
        x_scales,
        scale_max,
    };
    // SAFETY: the ME-BCRS arrays and work list were built from this graph and the values hold
    // its 8 * n_vectors slots in the kernel's storage type (a whole allocation: 16-byte aligned
    // for cp.async and bulk copies); X has n_cols rows of stride x_ld and Y n_rows of stride ld
    // (multiples of 8, and of 16 bytes for e4m3 X, so vector loads, stores and copies stay
    // aligned; shapes checked by the callers), Y's element type is the kernel's output type,
    // and the e4m3 scales hold one float per X row.
    unsafe { kernel.launch(gpu, shape, &args) }
}
