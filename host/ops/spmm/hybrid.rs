//! Hybrid SpMM (FTC-GNN on 8x1 vectors, `format::hybrid`): per ME-BCRS window, the vectors with
//! at least `t` nonzeros go to the tensor cores (TC8 on S_tc), the sparse remainder S_cc to the
//! CUDA cores (`kernels-gpu/src/spmm/remainder.rs`), on the same stream:
//!
//! 1. Y = S_tc X by TC8, which writes every row (rows without a dense vector as zeros);
//! 2. Y += S_cc X by the remainder kernel (a read-add-write of the rows S_cc touches).
//!
//! `t` is chosen by [`CostModel`] for the features' precision and width unless the caller passes
//! one. t <= 1 (everything on tensor cores) and an empty S_cc are exactly TC8 on the graph's own
//! handle; an empty S_tc is the remainder kernel alone, writing Y (every row is then one of its
//! work items, empty rows included).
//!
//! Per threshold, the split is made once and kept in the graph handle ([`HybridHandle`]): S_tc as
//! a child [`GraphHandle`] (TC8 translates and uploads its ME-BCRS on first use, as for any
//! graph), S_cc as another whose CSR, f16 values and work items are uploaded once.
//! Per-call edge values are not supported yet (`spmm::value_order(Impl::Hybrid)` is `None`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::hybrid::{CostModel, HybridSplit, HybridStats, hybrid_parts, hybrid_stats};
use crate::gpu::abi::hybrid::{self as kernels, CcSpmmArgs, CcZeroRowsArgs, HYBRID_CC_SPLIT_ROW, HYBRID_CC_WARPS};
use crate::gpu::launch::{Ptr, Shape};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::graph::Csr;
use crate::ops::spmm::tc8;
use crate::ops::{FeaturesRef, GraphHandle};

/// Thresholds above this put every vector on the CUDA cores (a vector holds at most 8 nonzeros).
const T_ALL_CC: usize = 9;

/// The cost model of the hybrid for features stored as f16 (f16 tensor cores, f16 gathers on
/// the CUDA cores) or f32 (tf32 tensor cores, f32 CUDA cores), at feature width `k` (the padded
/// width the kernels move).
pub fn cost_model(f16: bool, k: usize) -> CostModel {
    let base = if f16 { CostModel::F16_K128 } else { CostModel::TF32_K128 };
    CostModel { k, ..base }
}

/// The split statistics of `g`'s graph, computed once per handle.
pub fn stats(g: &GraphHandle) -> Result<Arc<HybridStats>> {
    g.cached(0, || hybrid_stats(g.csr()))
}

/// The split the hybrid runs with: at `t` when given (>= 1), else at the threshold the cost
/// model picks for the features' storage (`f16`) and padded width `k`.
pub fn threshold(g: &GraphHandle, f16: bool, k: usize, t: Option<usize>) -> Result<HybridSplit> {
    let st = stats(g)?;
    match t {
        Some(0) => Err(Error::Unsupported("hybrid threshold t = 0: use t >= 1 (1 puts every vector on tensor cores)".into())),
        Some(t) => Ok(st.split(t)),
        None => Ok(choose_threshold(&st, f16, k)),
    }
}

/// The cost model's choice on precomputed statistics (what [`threshold`] does with `t = None`).
pub fn choose_threshold(st: &HybridStats, f16: bool, k: usize) -> HybridSplit {
    cost_model(f16, k).choose(st)
}

/// The work items of the remainder kernel over a CSR's rows: item i covers nonzeros
/// `item_ptr[i]..item_ptr[i + 1]` of row `item_row[i] & !HYBRID_CC_SPLIT_ROW`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CcItems {
    /// n_items + 1 entries.
    pub item_ptr: Vec<u32>,
    /// The row of every item, with [`HYBRID_CC_SPLIT_ROW`] set when the row is cut into several.
    pub item_row: Vec<u32>,
    /// Rows cut into several items (ascending).
    pub split_rows: Vec<u32>,
}

impl CcItems {
    pub fn n_items(&self) -> usize {
        self.item_row.len()
    }
}

/// Cut the rows of `row_ptr` into work items of at most `max_nnz` nonzeros: a longer row becomes
/// ceil(len / max_nnz) items of near-equal length (added atomically). Empty rows are items only
/// with `every_row` (the kernel then writes them: it is the only writer of Y).
pub fn cc_items(row_ptr: &[u32], max_nnz: u32, every_row: bool) -> Result<CcItems> {
    let n_rows = row_ptr.len().saturating_sub(1);
    if n_rows > HYBRID_CC_SPLIT_ROW as usize {
        return Err(Error::Unsupported(format!("hybrid SpMM: {n_rows} rows, at most 2^31 supported")));
    }
    let max_nnz = max_nnz.max(1);
    let mut items = CcItems { item_ptr: Vec::with_capacity(n_rows + 1), item_row: Vec::with_capacity(n_rows), split_rows: Vec::new() };
    for r in 0..n_rows {
        let (a, b) = (row_ptr[r], row_ptr[r + 1]);
        let len = b - a;
        if len == 0 && !every_row {
            continue;
        }
        if len <= max_nnz {
            items.item_ptr.push(a);
            items.item_row.push(r as u32);
            continue;
        }
        let parts = len.div_ceil(max_nnz) as u64;
        for i in 0..parts {
            items.item_ptr.push(a + (len as u64 * i / parts) as u32);
            items.item_row.push(r as u32 | HYBRID_CC_SPLIT_ROW);
        }
        items.split_rows.push(r as u32);
    }
    items.item_ptr.push(row_ptr.last().copied().unwrap_or(0));
    Ok(items)
}

/// Longest run of nonzeros one work item takes: about two items per warp the device holds at
/// once (`sm_count` x 64) when the rows are long enough, between 64 and 256 nonzeros (a group
/// issues up to 8 gathers at a time, so shorter runs would mostly add atomics).
pub fn cc_item_nnz(nnz: usize, sm_count: u32) -> u32 {
    let resident = sm_count.max(1) as usize * 64;
    (2 * nnz).div_ceil(resident).clamp(64, 256) as u32
}

/// The host side of one threshold: S's two parts and the remainder's work items.
#[derive(Clone, Debug, PartialEq)]
pub struct HybridHost {
    pub split: HybridSplit,
    /// S_tc, `None` when empty.
    pub tc: Option<Csr>,
    /// S_cc, `None` when empty.
    pub cc: Option<Csr>,
    /// Work items of S_cc (empty rows included when S_tc is empty: the remainder writes Y).
    pub items: Option<CcItems>,
}

impl HybridHost {
    /// Split `csr` at `t` (>= 2; t = 1 is TC8 and needs no split) with work items of at most
    /// `item_nnz` nonzeros.
    pub fn build(csr: &Csr, split: HybridSplit, item_nnz: u32) -> Result<Self> {
        let p = hybrid_parts(csr, split.t)?;
        // An empty S_cc runs as TC8 on the graph itself: no copy of it as S_tc.
        let tc = (p.tc.nnz() > 0 && p.cc.nnz() > 0).then_some(p.tc);
        let (cc, items) = if p.cc.nnz() > 0 {
            let items = cc_items(p.cc.row_ptr(), item_nnz, tc.is_none())?;
            (Some(p.cc), Some(items))
        } else {
            (None, None)
        };
        Ok(HybridHost { split, tc, cc, items })
    }
}

/// The remainder on the device: S_cc's handle (CSR uploaded) and its work items.
struct CcDevice {
    handle: GraphHandle,
    item_ptr: DeviceVec<u32>,
    item_row: DeviceVec<u32>,
    split_rows: DeviceVec<u32>,
    n_items: u32,
    n_split: u32,
    /// Y already holds S_tc X (false: S_tc is empty and the remainder writes Y).
    accumulate: bool,
}

/// S_cc's values as f16 (for f16 features), uploaded on first f16 use.
struct CcValuesF16(DeviceVec<half::f16>);

/// One threshold's split on the device, cached in the graph handle per `t`.
pub struct HybridHandle {
    pub split: HybridSplit,
    /// S_tc's handle (`None`: S_tc is empty).
    tc: Option<GraphHandle>,
    /// `None`: S_cc is empty (S_tc is then S, and TC8 runs on the graph's own handle).
    cc: Option<CcDevice>,
}

impl HybridHandle {
    /// Nonzeros on the tensor cores and on the CUDA cores.
    pub fn nnz(&self) -> (usize, usize) {
        (self.split.tc_nnz, self.split.cc_nnz)
    }
    /// S_tc's graph handle, when S_tc is not empty.
    pub fn tc_handle(&self) -> Option<&GraphHandle> {
        self.tc.as_ref()
    }
    /// S_cc's graph handle, when S_cc is not empty.
    pub fn cc_handle(&self) -> Option<&GraphHandle> {
        self.cc.as_ref().map(|c| &c.handle)
    }
}

/// The split of `g` at `t` on the device, made and uploaded on first use (t > 9 counts as 9).
pub fn hybrid_handle(g: &GraphHandle, t: usize) -> Result<Arc<HybridHandle>> {
    if t == 0 {
        return Err(Error::Unsupported("hybrid threshold t = 0: use t >= 1".into()));
    }
    let t = t.min(T_ALL_CC);
    let gpu = g.gpu()?.clone();
    g.cached(t as u64, || {
        let split = stats(g)?.split(t);
        let host = HybridHost::build(g.csr(), split, cc_item_nnz(split.cc_nnz, gpu.info().sm_count))?;
        let accumulate = host.tc.is_some();
        let tc = host.tc.map(|c| GraphHandle::new(c, Some(gpu.clone())));
        let cc = match (host.cc, host.items) {
            (Some(csr), Some(items)) => {
                let handle = GraphHandle::new(csr, Some(gpu.clone()));
                handle.device_csr()?; // upload now, not inside the first timed call
                Some(CcDevice {
                    item_ptr: DeviceVec::upload(&gpu, &items.item_ptr)?,
                    item_row: DeviceVec::upload(&gpu, &items.item_row)?,
                    split_rows: DeviceVec::upload(&gpu, &items.split_rows)?,
                    n_items: items.n_items() as u32,
                    n_split: items.split_rows.len() as u32,
                    accumulate,
                    handle,
                })
            }
            _ => None,
        };
        Ok(HybridHandle { split, tc, cc })
    })
}

/// Y = S X, tensor cores for the vectors with >= t nonzeros and CUDA cores for the rest: tf32
/// and f32 with f32 features, f16 (f32 accumulation) with f16 features. `t = None`: the cost
/// model's choice ([`threshold`]). Returns the split it ran.
pub fn spmm_hybrid(g: &GraphHandle, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, t: Option<usize>) -> Result<HybridSplit> {
    spmm_hybrid_with(g, x, y, t, CcUnroll::U4)
}

/// Gathers in flight per lane of the remainder kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcUnroll {
    /// 4 (ptxas: 54 registers f32, 56 f16).
    U4,
    /// 8 (80 / 92 registers: fewer warps, twice the gathers per warp).
    U8,
}

/// [`spmm_hybrid`] with a chosen remainder kernel (the tests run both).
pub fn spmm_hybrid_with(
    g: &GraphHandle,
    x: FeaturesRef<'_>,
    y: &mut DeviceMatrix<f32>,
    t: Option<usize>,
    unroll: CcUnroll,
) -> Result<HybridSplit> {
    let csr = g.csr();
    if x.rows() != csr.n_cols() || y.rows != csr.n_rows() || y.cols != x.cols() {
        return Err(Error::Shape(format!(
            "hybrid SpMM: S is {}x{}, X {}x{}, Y {}x{}",
            csr.n_rows(),
            csr.n_cols(),
            x.rows(),
            x.cols(),
            y.rows,
            y.cols
        )));
    }
    let split = threshold(g, matches!(x, FeaturesRef::F16(_)), y.ld, t)?;
    if split.t <= 1 || split.cc_nnz == 0 {
        tc8::spmm_tc8(g, x, y)?; // everything on tensor cores: exactly TC8
        return Ok(split);
    }
    let h = hybrid_handle(g, split.t)?;
    if let Some(tc) = &h.tc {
        tc8::spmm_tc8(tc, x, y)?;
    }
    let cc = h.cc.as_ref().expect("S_cc is not empty when cc_nnz > 0");
    spmm_remainder(g.gpu()?, cc, x, y, unroll)?;
    Ok(split)
}

fn unroll_of(choice: CcUnroll) -> u32 {
    match choice {
        CcUnroll::U8 => 8,
        CcUnroll::U4 => 4,
    }
}

/// The remainder kernel's launch geometry at padded width `ld`: (log2 lanes per item, 16-byte
/// chunks per X row, K slices). One 16-byte chunk per lane, at most a warp per item.
pub fn cc_geometry(ld: usize, f16: bool) -> (u32, u32, u32) {
    let chunks = (ld * if f16 { 2 } else { 4 } / 16) as u32;
    let group = chunks.next_power_of_two().min(32);
    (group.trailing_zeros(), chunks, chunks.div_ceil(group))
}

fn spmm_remainder(gpu: &Gpu, cc: &CcDevice, x: FeaturesRef<'_>, y: &mut DeviceMatrix<f32>, unroll: CcUnroll) -> Result<()> {
    let f16 = matches!(x, FeaturesRef::F16(_));
    let ld = y.ld as u32;
    let csr = cc.handle.device_csr()?;
    let values_f16;
    let values: Ptr<u32> = if f16 {
        values_f16 = cc.handle.cached(1, || {
            let h: Vec<half::f16> = cc.handle.csr().values().iter().map(|&v| half::f16::from_f32(v)).collect();
            Ok(CcValuesF16(DeviceVec::upload(gpu, &h)?))
        })?;
        values_f16.0.arg(gpu).cast()
    } else {
        csr.values.arg(gpu).cast()
    };
    let x_ptr: Ptr<u32> = match x {
        FeaturesRef::F32(m) => m.arg().cast(),
        FeaturesRef::F16(m) => m.arg().cast(),
    };
    if !cc.accumulate && cc.n_split > 0 {
        let args = CcZeroRowsArgs { rows: cc.split_rows.arg(gpu), ld, y: y.arg_mut() };
        // SAFETY: every listed row is below n_rows and Y holds n_rows * ld floats.
        unsafe { kernels::spmm_cc_zero_rows.launch(gpu, Shape::linear(cc.n_split, 128, 0), &args)? };
    }
    let (group_shift, chunks, slices) = cc_geometry(y.ld, f16);
    let items_per_block = (32 >> group_shift) * HYBRID_CC_WARPS;
    let kernel = match (f16, unroll_of(unroll)) {
        (false, 8) => kernels::spmm_cc_f32_u8,
        (false, _) => kernels::spmm_cc_f32_u4,
        (true, 8) => kernels::spmm_cc_f16_u8,
        (true, _) => kernels::spmm_cc_f16_u4,
    };
    let shape = Shape { grid: (cc.n_items.div_ceil(items_per_block), slices, 1), block: (32 * HYBRID_CC_WARPS, 1, 1), smem_bytes: 0 };
    let args = CcSpmmArgs {
        n_items: cc.n_items,
        group_shift,
        chunks,
        ld,
        accumulate: u32::from(cc.accumulate),
        item_ptr: cc.item_ptr.arg(gpu),
        item_row: cc.item_row.arg(gpu),
        col_idx: csr.col_idx.arg(gpu),
        values,
        x: x_ptr,
        y: y.arg_mut(),
    };
    // SAFETY: the items cover S_cc's nonzeros (built from its CSR) and name rows below n_rows;
    // the values hold S_cc's nnz entries in the features' storage type; X (n_cols rows) and Y
    // (n_rows rows) share the padded stride ld, a multiple of 8, so every 16-byte chunk is in
    // bounds and aligned; in accumulate mode TC8 wrote every row of Y earlier on this stream.
    unsafe { kernel.launch(gpu, shape, &args) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_cut_long_rows_and_skip_empty_ones() {
        // Rows of 0, 3, 0, 10 and 1 nonzeros, at most 4 per item.
        let row_ptr = [0u32, 0, 3, 3, 13, 14];
        let it = cc_items(&row_ptr, 4, false).unwrap();
        let s = HYBRID_CC_SPLIT_ROW;
        assert_eq!(it.item_row, vec![1, 3 | s, 3 | s, 3 | s, 4]);
        assert_eq!(it.item_ptr, vec![0, 3, 6, 9, 13, 14]);
        assert_eq!(it.split_rows, vec![3]);
        // Every row an item (the remainder writes Y alone): empty items for rows 0 and 2.
        let all = cc_items(&row_ptr, 4, true).unwrap();
        assert_eq!(all.item_row, vec![0, 1, 2, 3 | s, 3 | s, 3 | s, 4]);
        assert_eq!(all.item_ptr, vec![0, 0, 3, 3, 6, 9, 13, 14]);
        // No rows, and only empty rows.
        assert_eq!(cc_items(&[0], 4, true).unwrap().item_ptr, vec![0]);
        assert_eq!(cc_items(&[0, 0, 0], 4, false).unwrap().n_items(), 0);
    }

    #[test]
    fn item_length_follows_the_device_and_stays_bounded() {
        assert_eq!(cc_item_nnz(1_000, 132), 64);
        assert_eq!(cc_item_nnz(100_000_000, 132), 256);
        let mid = cc_item_nnz(1_700_000, 132);
        assert!((64..=256).contains(&mid), "{mid}");
        assert_eq!(cc_item_nnz(0, 0), 64);
    }

    #[test]
    fn geometry_covers_the_row_with_16_byte_chunks() {
        // f32 K = 128: 32 chunks, a warp per item; f16: 16 chunks, two items per warp.
        assert_eq!(cc_geometry(128, false), (5, 32, 1));
        assert_eq!(cc_geometry(128, true), (4, 16, 1));
        // K = 8: 2 chunks (f32), 1 chunk (f16, one lane per item).
        assert_eq!(cc_geometry(8, false), (1, 2, 1));
        assert_eq!(cc_geometry(8, true), (0, 1, 1));
        // K = 24 (f32): 6 chunks in a group of 8; K = 136 (f32): 34 chunks, two slices of 32.
        assert_eq!(cc_geometry(24, false), (3, 6, 1));
        assert_eq!(cc_geometry(136, false), (5, 34, 2));
        assert_eq!(cc_geometry(256, true), (5, 32, 1));
    }

    #[test]
    fn cost_model_follows_k_and_precision() {
        assert_eq!(cost_model(false, 128), CostModel::TF32_K128);
        assert_eq!(cost_model(true, 128), CostModel::F16_K128);
        assert_eq!(cost_model(true, 32).k, 32);
        assert_eq!(cost_model(true, 32).feature_bytes, 2);
    }
}
