//! How the fused row kernels (GAT's and AGNN's attention) spread a pattern's rows over one
//! launch (`kernels-gpu/src/nn/row_split.rs`): the per-graph lists (rows of a warp, segments of
//! long rows), the segments' scratch, and the launcher of a pass and its combine launch.

use std::sync::Arc;

use cudarc::driver::DeviceRepr;

use super::NN_BLOCKS_PER_SM;
use crate::error::{Error, Result};
use crate::gpu::abi::row_split::RowSplit;
use crate::gpu::launch::{Kernel, Ptr, PtrMut, Shape};
use crate::gpu::{DeviceVec, Gpu};
use crate::ops::GraphHandle;

/// Rows of at least this many entries are cut into segments, a block each (a warp would walk
/// them alone while the rest of the GPU waits).
pub const ROW_LONG_MIN: u32 = 256;
/// Entries of a long row's segment: a block of 8 warps walks a segment (at most a few steps of
/// its edges), so a hub row of tens of thousands of entries is spread over many blocks.
pub const ROW_SEGMENT: u32 = 2048;
/// Threads of a block of the fused row kernels (a segment, 8 warps' rows, or 8 warps' slots).
pub const ROW_BLOCK: u32 = 256;
/// Shared memory of a segment's block: `SMEM_FIELDS` words per lane and warp
/// (`row_split::smem`).
pub const SMEM_FIELDS: u32 = 34;

/// A list of a pattern's rows on the device (at least one element, so that an empty list is
/// still a valid pointer), built once per graph and key.
pub(crate) struct RowList {
    pub rows: DeviceVec<u32>,
    pub n: u32,
}

fn row_list(g: &GraphHandle, key: u64, build: impl FnOnce() -> Vec<u32>) -> Result<Arc<RowList>> {
    let gpu = g.gpu()?.clone();
    g.cached(key, || {
        let rows = build();
        Ok(RowList { n: rows.len() as u32, rows: DeviceVec::upload(&gpu, if rows.is_empty() { &[0] } else { &rows })? })
    })
}

/// Cache key of [`short_rows`]' lists (apart from [`listed_rows`]', keyed by `min` < 2^32).
const SHORT_ROWS_KEY: u64 = 1 << 40;

/// Rows `lo..hi` of a pattern, or all of them: the rows a launch covers (a part's overlapped
/// step runs its attention in row blocks around the halo exchange). Each row is walked the
/// same way whichever rows a launch covers, so the blocks' results are the whole launch's.
pub type RowRange = Option<(usize, usize)>;

fn in_range(range: RowRange, r: usize) -> bool {
    range.is_none_or(|(lo, hi)| (lo..hi).contains(&r))
}

/// A cache key's part for `range` (0 for all rows): a mix of its ends with the top bit set,
/// apart from every key of all rows.
fn range_key(range: RowRange) -> u64 {
    match range {
        None => 0,
        Some((lo, hi)) => {
            let mut z = ((lo as u64) << 32 ^ hi as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) | 1 << 63
        }
    }
}

/// The rows of at least `min` entries of a pattern (within `range`), in row order.
pub(crate) fn listed_rows(g: &GraphHandle, min: u32, range: RowRange) -> Result<Arc<RowList>> {
    let rp = g.csr().row_ptr();
    row_list(g, min as u64 ^ range_key(range), || {
        (0..g.csr().n_rows()).filter(|&r| rp[r + 1] - rp[r] >= min && in_range(range, r)).map(|r| r as u32).collect()
    })
}

/// The rows of fewer than `max` entries of a pattern (within `range`), longest first (rows of
/// one length in row order): the slot blocks' list. A warp's slots each walk one row alone; in
/// row order their lengths differ (on power-law graphs most rows hold one or two entries and a
/// few of every 32 hold ten), and the warp runs until its longest row is done.
pub(crate) fn short_rows(g: &GraphHandle, max: u32, range: RowRange) -> Result<Arc<RowList>> {
    row_list(g, (SHORT_ROWS_KEY | max as u64) ^ range_key(range), || {
        let mut rows = longest_first(g.csr().row_ptr(), max);
        rows.retain(|&r| in_range(range, r as usize));
        rows
    })
}

/// The rows of fewer than `max` entries of the pattern with row pointers `rp`, longest first,
/// rows of one length in row order (a counting sort: bucket b holds the rows of max - 1 - b
/// entries).
fn longest_first(rp: &[u32], max: u32) -> Vec<u32> {
    let len = |r: usize| rp[r + 1] - rp[r];
    let short = || (0..rp.len().saturating_sub(1)).filter(|&r| len(r) < max);
    let mut start = vec![0u32; max as usize + 1];
    for r in short() {
        start[(max - len(r)) as usize] += 1;
    }
    for b in 1..start.len() {
        start[b] += start[b - 1];
    }
    let mut rows = vec![0u32; start[max as usize] as usize];
    for r in short() {
        let next = &mut start[(max - 1 - len(r)) as usize];
        rows[*next as usize] = r as u32;
        *next += 1;
    }
    rows
}

/// The rows of at least [`ROW_LONG_MIN`] entries cut into segments of at most [`ROW_SEGMENT`].
struct Segments {
    /// (row, first entry, end) per segment.
    segs: DeviceVec<u32>,
    n_segs: u32,
    rows: DeviceVec<u32>,
    n_long: u32,
    /// Row r's segments are seg_ptr[r] .. seg_ptr[r + 1].
    seg_ptr: DeviceVec<u32>,
}

fn segments(h: &GraphHandle, range: RowRange) -> Result<Arc<Segments>> {
    let gpu = h.gpu()?.clone();
    h.cached(ROW_SEGMENT as u64 ^ range_key(range), || {
        let rp = h.csr().row_ptr();
        let (mut segs, mut rows, mut seg_ptr) = (Vec::new(), Vec::new(), vec![0u32]);
        for r in 0..h.csr().n_rows() {
            let (start, end) = (rp[r], rp[r + 1]);
            if end - start < ROW_LONG_MIN || !in_range(range, r) {
                continue;
            }
            let n = (end - start).div_ceil(ROW_SEGMENT);
            // Equal segments (a short last one would leave its block mostly idle).
            let len = (end - start).div_ceil(n);
            for k in 0..n {
                segs.extend([r as u32, start + k * len, (start + (k + 1) * len).min(end)]);
            }
            rows.push(r as u32);
            seg_ptr.push((segs.len() / 3) as u32);
        }
        let up = |v: &[u32]| DeviceVec::upload(&gpu, if v.is_empty() { &[0] } else { v });
        Ok(Segments {
            n_segs: (segs.len() / 3) as u32,
            n_long: rows.len() as u32,
            segs: up(&segs)?,
            rows: up(&rows)?,
            seg_ptr: up(&seg_ptr)?,
        })
    })
}

/// Scratch of the fused row kernels (`len` floats at least), kept with the graph and shared by
/// its layers' passes, which run one after another on one stream; keyed by `kind` (one of the
/// `*_KEY`s: apart from the other `DeviceVec<f32>` entries a handle keeps) and length (a
/// graph's layers of different widths get one each).
pub(crate) fn scratch(h: &GraphHandle, kind: u64, len: usize) -> Result<Arc<DeviceVec<f32>>> {
    let gpu = h.gpu()?.clone();
    h.cached(kind ^ len as u64, || DeviceVec::zeros(&gpu, len.max(1)))
}

/// [`scratch`] of the segments' partial states.
const PARTIALS_KEY: u64 = 0x6a7_0000_0000_0000;
/// [`scratch`] of GAT's row state, which its row pass leaves for its column pass.
pub(crate) const ROW_STATE_KEY: u64 = 0x6a7_5000_0000_0000;

/// Segments a pattern of `n` rows and `nnz` entries can have at most (for memory estimates).
pub fn max_segments(n: u64, nnz: u64) -> u64 {
    (nnz + n).div_ceil(ROW_LONG_MIN as u64)
}

/// How one pass is spread: slots of `1 << shift` lanes, rows shorter than `short_max` a slot
/// each (none where `!slot_rows`: another kernel takes them), `pstride` floats of partial state
/// a segment (a segment's blocks get [`SMEM_FIELDS`] words of shared memory per lane and warp;
/// the other blocks none).
#[derive(Clone, Copy)]
pub(crate) struct Pass {
    pub shift: u32,
    pub short_max: u32,
    pub pstride: u32,
    pub slot_rows: bool,
}

/// Launches `kernel` over the rows of `h` (S, or Sᵀ for a column pass): one launch of three
/// kinds of block — a block per segment of the rows of at least [`ROW_LONG_MIN`] entries, a
/// warp per row of at least `short_max`, a slot of lanes per shorter row (longest first) —
/// then, where there are long rows, the combine launch (`RowSplit::combine` = 1) that merges
/// each long row's segments. Only the rows in `range` (all: `None`) are listed. The lists are
/// made once per graph and range.
///
/// # Safety
/// `args(split)` must be valid arguments of `kernel` for the rows of `h` given that split.
pub(crate) unsafe fn launch_rows<A: DeviceRepr>(
    gpu: &Gpu,
    h: &GraphHandle,
    kernel: Kernel<A>,
    pass: Pass,
    range: RowRange,
    args: impl Fn(RowSplit) -> A,
) -> Result<()> {
    if let Some((lo, hi)) = range.filter(|&(lo, hi)| lo > hi || hi > h.csr().n_rows()) {
        return Err(Error::Shape(format!("fused row kernel: rows {lo}..{hi} of a pattern of {} rows", h.csr().n_rows())));
    }
    if range.is_some_and(|(lo, hi)| lo == hi) {
        return Ok(());
    }
    let short = if pass.slot_rows { Some(short_rows(h, pass.short_max, range)?) } else { None };
    let n_short = short.as_ref().map_or(0, |s| s.n);
    let mid = listed_rows(h, pass.short_max, range)?;
    let long = segments(h, range)?;
    let (warps, cap) = ((ROW_BLOCK / 32) as u64, (gpu.info().sm_count * NN_BLOCKS_PER_SM) as u64);
    let warp_blocks = if mid.n > long.n_long { (mid.n as u64).div_ceil(warps).min(cap) } else { 0 };
    let slot_blocks = (n_short as u64).div_ceil(warps * (32 >> pass.shift) as u64).min(cap);
    let blocks = long.n_segs as u64 + warp_blocks + slot_blocks;
    if blocks == 0 {
        return Ok(());
    }
    let partials = scratch(h, PARTIALS_KEY, long.n_segs as usize * pass.pstride as usize)?;
    let split = RowSplit {
        short: short.as_ref().map_or(Ptr::null(), |s| s.rows.arg(gpu)),
        n_short,
        short_max: pass.short_max,
        long_min: ROW_LONG_MIN,
        segs: long.segs.arg(gpu),
        n_segs: long.n_segs,
        mid: mid.rows.arg(gpu),
        n_mid: mid.n,
        warp_blocks: warp_blocks as u32,
        combine: 0,
        long: long.rows.arg(gpu),
        n_long: long.n_long,
        seg_ptr: long.seg_ptr.arg(gpu),
        partials: PtrMut::new(partials.arg(gpu).addr()),
        pstride: pass.pstride,
    };
    let smem = if long.n_segs > 0 { ROW_BLOCK * SMEM_FIELDS * 4 } else { 0 };
    let blocks = u32::try_from(blocks)
        .map_err(|_| Error::Unsupported(format!("fused row kernel: {blocks} blocks ({} segments of long rows)", long.n_segs)))?;
    // SAFETY: as the caller guarantees; the lists are this graph's (segments within their rows,
    // `n_segs + warp_blocks` of the blocks take listed work), `partials` holds `pstride` floats
    // per segment. The combine launch, queued after, reads each long row's segments.
    unsafe {
        kernel.launch(gpu, Shape::linear(blocks, ROW_BLOCK, smem), &args(split))?;
        if long.n_long > 0 {
            let combine = (long.n_long as u64).div_ceil(warps).min(cap) as u32;
            kernel.launch(gpu, Shape::linear(combine, ROW_BLOCK, 0), &args(RowSplit { combine: 1, ..split }))?;
        }
    }
    Ok(())
}

/// An argument struct's split before [`launch_rows`] fills it in.
pub(crate) fn unset() -> RowSplit {
    RowSplit {
        short: Ptr::null(),
        n_short: 0,
        short_max: 0,
        long_min: 0,
        segs: Ptr::null(),
        n_segs: 0,
        mid: Ptr::null(),
        n_mid: 0,
        warp_blocks: 0,
        combine: 0,
        long: Ptr::null(),
        n_long: 0,
        seg_ptr: Ptr::null(),
        partials: PtrMut::null(),
        pstride: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::longest_first;

    #[test]
    fn short_rows_come_longest_first_in_row_order() {
        // Row lengths 3, 0, 5, 1, 3, 2 (row 2 is not short for max = 4).
        let rp = [0, 3, 3, 8, 9, 12, 14];
        assert_eq!(longest_first(&rp, 4), vec![0, 4, 5, 3, 1]);
        assert_eq!(longest_first(&rp, 1), vec![1]);
        assert!(longest_first(&rp, 0).is_empty());
        assert!(longest_first(&[0], 16).is_empty());
    }
}
