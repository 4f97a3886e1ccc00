//! AGNN's fused attention on the tensor cores (`kernels-gpu/src/nn/attention_tc.rs`), forward
//! and backward: the per-graph window lists the kernels walk and their launchers. f16
//! precision, rows of 32 features (AGNN's hidden width), on graphs of at least `TC_MIN_DEGREE`
//! entries a row unless asked otherwise (`CudaBackend::with_attention_tc`); the CUDA-core
//! kernels (`fused_attention`) take everything else.
//!
//! Windows are 8 consecutive rows; a window's unique neighbours, sorted, are cut into blocks of
//! 16, each with a 16 x 8 bit mask of the window's edges. Rows of at least `row_max` entries stay
//! out of the windows and go to the CUDA-core kernels (their warp-per-row and segment paths):
//! one such row would make its window's warp walk hundreds of blocks alone. Graphs with a
//! repeated (row, column) entry have no lists (a mask bit cannot count an edge twice): the
//! backend keeps the CUDA-core kernel for them.

use std::sync::Arc;

use half::f16;
use rayon::prelude::*;

use super::fused_attention::{BackwardPasses, GradInputs, Grads, Normalized, attention_forward_rows};
use super::row_split::ROW_LONG_MIN;
use super::{NN_BLOCKS_PER_SM, check_gpu, check_same};
use crate::error::{Error, Result};
use crate::gpu::abi::attention::{
    AttentionTcColGradArgs, AttentionTcForwardArgs, AttentionTcRowGradArgs, TcWindows, attention_col_grad_tc_d32, attention_forward_tc_d32,
    attention_row_grad_tc_d32,
};
use crate::gpu::launch::Shape;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::graph::Csr;
use crate::ops::GraphHandle;
use crate::ops::backend::cuda::CudaBackend;

/// Rows of a window (the MMAs' N: the sparse side swapped in).
pub const WINDOW_ROWS: usize = 8;
/// Neighbours of a block (the score product's M, the weighted sum's K).
pub const BLOCK_COLS: usize = 16;
/// The feature width the kernel is written for.
pub const TC_WIDTH: usize = 32;
/// The largest `row_max`, the backend's default: rows of 256 entries or more are the CUDA-core
/// kernels' segments.
pub const TC_ROW_MAX: u32 = ROW_LONG_MIN;
/// Entries a row (on average) below which the backend keeps the CUDA-core kernels: windows of
/// fewer than ~40 edges did not repay the f16 copies and the extra launches on the graphs
/// measured (bench/NOTES.md, 2026-11-27 evening).
pub const TC_MIN_DEGREE: f64 = 5.0;

/// The window lists on the host (what [`tc_windows`] uploads; `build_windows` is tested on the
/// CPU).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowLists {
    /// Window w's blocks are `win_ptr[w] .. win_ptr[w + 1]`.
    pub win_ptr: Vec<u32>,
    /// 16 neighbour ids a block (a short block repeats its first id; those slots' bits are 0).
    pub cols: Vec<u32>,
    /// 16 bytes a block: bit r of byte c set where the window's row r has an edge to the
    /// block's neighbour c.
    pub mask: Vec<u8>,
    /// The windows with blocks, most blocks first (the order warps take them in); windows
    /// without blocks are listed last (their rows still get zero outputs).
    pub order: Vec<u32>,
}

/// The lists of `s` (square) for rows shorter than `row_max`; None if a row repeats a column.
pub fn build_windows(s: &Csr, row_max: u32) -> Option<WindowLists> {
    let (rp, ci) = (s.row_ptr(), s.col_idx());
    let n_win = s.n_rows().div_ceil(WINDOW_ROWS);
    // Per window: its blocks' columns and masks, or None on a repeated entry.
    let per_window: Vec<Option<(Vec<u32>, Vec<u8>)>> = (0..n_win)
        .into_par_iter()
        .map(|w| {
            let r0 = w * WINDOW_ROWS;
            let r1 = (r0 + WINDOW_ROWS).min(s.n_rows());
            let mut keys: Vec<(u32, u8)> = Vec::new();
            for r in r0..r1 {
                let (a, b) = (rp[r] as usize, rp[r + 1] as usize);
                if (b - a) as u64 >= row_max as u64 {
                    continue;
                }
                keys.extend(ci[a..b].iter().map(|&c| (c, (r - r0) as u8)));
            }
            keys.sort_unstable();
            if keys.windows(2).any(|p| p[0] == p[1]) {
                return None;
            }
            let (mut cols, mut mask) = (Vec::new(), Vec::new());
            let mut k = 0;
            while k < keys.len() {
                let c = keys[k].0;
                if cols.len() % BLOCK_COLS == 0 {
                    mask.extend([0u8; BLOCK_COLS]);
                }
                let slot = cols.len();
                cols.push(c);
                while k < keys.len() && keys[k].0 == c {
                    mask[slot] |= 1 << keys[k].1;
                    k += 1;
                }
            }
            if let Some(&first) = cols.get(cols.len() / BLOCK_COLS * BLOCK_COLS) {
                cols.resize(cols.len().next_multiple_of(BLOCK_COLS), first);
            }
            Some((cols, mask))
        })
        .collect();
    let mut win_ptr = Vec::with_capacity(n_win + 1);
    win_ptr.push(0u32);
    let (mut cols, mut mask) = (Vec::new(), Vec::new());
    for win in per_window {
        let (c, m) = win?;
        cols.extend(c);
        mask.extend(m);
        win_ptr.push((cols.len() / BLOCK_COLS) as u32);
    }
    let mut order: Vec<u32> = (0..n_win as u32).collect();
    order.sort_by_key(|&w| std::cmp::Reverse(win_ptr[w as usize + 1] - win_ptr[w as usize]));
    Some(WindowLists { win_ptr, cols, mask, order })
}

/// The lists on the device.
pub(crate) struct DeviceWindows {
    win_ptr: DeviceVec<u32>,
    cols: DeviceVec<u32>,
    mask: DeviceVec<u8>,
    order: DeviceVec<u32>,
    n_windows: u32,
}

/// The window lists of `g` for `row_max`, built and uploaded on first use (None: a repeated
/// entry, or more blocks than u32 ids reach).
pub(crate) fn tc_windows(g: &GraphHandle, row_max: u32) -> Result<Arc<Option<DeviceWindows>>> {
    let gpu = g.gpu()?.clone();
    g.cached(TC_WINDOWS_KEY ^ row_max as u64, || {
        let Some(l) = build_windows(g.csr(), row_max) else { return Ok(None) };
        if l.cols.len() >= u32::MAX as usize / 2 {
            return Ok(None);
        }
        let up = |v: &[u32]| DeviceVec::upload(&gpu, if v.is_empty() { &[0] } else { v });
        Ok(Some(DeviceWindows {
            n_windows: l.order.len() as u32,
            win_ptr: up(&l.win_ptr)?,
            cols: up(&l.cols)?,
            mask: DeviceVec::upload(&gpu, if l.mask.is_empty() { &[0u8] } else { &l.mask })?,
            order: up(&l.order)?,
        }))
    })
}

/// Cache key of [`tc_windows`].
const TC_WINDOWS_KEY: u64 = 0x7c3_0000_0000_0000;

/// `g`'s lists as a kernel argument (None: `g` has none), with the launch's block count.
fn windows_arg(g: &GraphHandle, row_max: u32, what: &str) -> Result<(TcWindows, u32)> {
    let lists = tc_windows(g, row_max)?;
    let Some(l) = lists.as_ref() else {
        return Err(Error::Unsupported(format!("{what}: the graph repeats a (row, column) entry")));
    };
    let gpu = g.gpu()?.clone();
    let csr = g.device_csr()?;
    // A warp a window (8 a block), grid-stride over the ordered list.
    let blocks = (l.n_windows as u64).div_ceil(8).min((gpu.info().sm_count * NN_BLOCKS_PER_SM) as u64) as u32;
    let arg = TcWindows {
        n_rows: g.csr().n_rows() as u32,
        row_ptr: csr.row_ptr.arg(&gpu),
        row_max,
        order: l.order.arg(&gpu),
        n_windows: l.n_windows,
        win_ptr: l.win_ptr.arg(&gpu),
        blk_cols: l.cols.arg(&gpu),
        blk_mask: l.mask.arg(&gpu),
    };
    // The lists live as long as the graph's cache, which outlives every launch on it.
    Ok((arg, blocks))
}

/// When the backend runs AGNN's fused attention (f16 precision, 32 features) on the tensor
/// cores: rows shorter than `row_max` there (0: never), on graphs of at least `min_degree`
/// entries a row on average.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcPolicy {
    pub row_max: u32,
    pub min_degree: f64,
}

impl Default for TcPolicy {
    /// Every row the CUDA-core kernels do not cut into segments, on graphs of `TC_MIN_DEGREE`.
    fn default() -> Self {
        TcPolicy { row_max: TC_ROW_MAX, min_degree: TC_MIN_DEGREE }
    }
}

impl TcPolicy {
    /// Rows shorter than `row_max` on the tensor cores on every graph (0: never).
    pub fn always(row_max: u32) -> Self {
        TcPolicy { row_max, min_degree: 0.0 }
    }

    /// Whether the tensor-core kernels take these shapes: on, 32 features at stride 32, a
    /// square graph of at least `min_degree` entries a row on average, with lists.
    pub(crate) fn applies(&self, g: &GraphHandle, n: &DeviceMatrix<f32>) -> Result<bool> {
        Ok(self.row_max > 0 && tc_applies(g, n, self.row_max, self.min_degree)?)
    }
}

impl CudaBackend {
    /// AGNN's fused attention on the tensor cores for rows shorter than `row_max` (at most 256;
    /// [`TC_ROW_MAX`] takes every row the CUDA-core kernels do not cut into segments) on every
    /// graph, or never (0). f16 precision, 32 features. By default ([`TcPolicy::default`],
    /// kept in the backend's op state) the backend takes them with `TC_ROW_MAX` on graphs of at
    /// least `TC_MIN_DEGREE` entries a row: sparser windows do not repay the f16 copies and the
    /// extra launches, and where neighbours are local (road networks, batched molecules) the
    /// CUDA-core kernels' gathers hit the caches (bench/NOTES.md, 2026-11-27 evening).
    pub fn with_attention_tc(mut self, row_max: u32) -> Self {
        self.op_state.set(TcPolicy::always(row_max));
        self
    }
}

/// Whether the tensor-core kernels take these shapes: 32 features at stride 32, a square
/// graph of at least `min_degree` entries a row on average, with lists.
fn tc_applies(g: &GraphHandle, n: &DeviceMatrix<f32>, row_max: u32, min_degree: f64) -> Result<bool> {
    let s = g.csr();
    Ok(n.ld == TC_WIDTH
        && n.cols <= TC_WIDTH
        && s.n_rows() == s.n_cols()
        && s.nnz() as f64 >= min_degree * s.n_rows() as f64
        && tc_windows(g, row_max)?.is_some())
}

/// `row_max` in range and the f16 copies shaped as `n` at the kernels' stride.
fn check_tc(n: &DeviceMatrix<f32>, copies: &[&DeviceMatrix<f16>], row_max: u32, what: &str) -> Result<()> {
    if row_max == 0 || row_max > ROW_LONG_MIN {
        return Err(Error::Unsupported(format!("{what}: row_max {row_max} (1 ..= {ROW_LONG_MIN}: longer rows are the segments')")));
    }
    if n.ld != TC_WIDTH {
        return Err(Error::Shape(format!("{what}: n {} x {} at stride {}; the kernels take stride {TC_WIDTH}", n.rows, n.cols, n.ld)));
    }
    for c in copies {
        if (c.rows, c.cols, c.ld) != (n.rows, n.cols, n.ld) {
            return Err(Error::Shape(format!(
                "{what}: f16 copy {} x {} (stride {}) of n {} x {} (stride {})",
                c.rows, c.cols, c.ld, n.rows, n.cols, n.ld
            )));
        }
        check_gpu(n.gpu(), c.gpu(), what)?;
    }
    Ok(())
}

/// The forward with the window rows on the tensor cores and the rows of at least `row_max`
/// entries on the CUDA-core kernel: `out` (padding 0) and `stats` as
/// [`super::fused_attention::attention_forward`] writes them. `n16` is `n` in f16. The first
/// call on a graph builds its lists: warm up before capturing a CUDA graph.
pub fn attention_forward_tc(
    g: &GraphHandle,
    x: Normalized<'_, DeviceMatrix<f32>>,
    n16: &DeviceMatrix<f16>,
    out: &mut DeviceMatrix<f32>,
    stats: &mut DeviceMatrix<f32>,
    row_max: u32,
) -> Result<()> {
    let Normalized { beta, n, inv_norm, .. } = x;
    let what = "attention_forward_tc";
    check_tc(n, &[n16], row_max, what)?;
    check_same(n, out, what)?;
    let (win, blocks) = windows_arg(g, row_max, what)?;
    let gpu = g.gpu()?.clone();
    let args = AttentionTcForwardArgs {
        win,
        beta: beta.arg(),
        n16: n16.arg().cast(),
        inv_norm: inv_norm.buf.arg(&gpu),
        out: out.arg_mut(),
        stats: stats.buf.arg_mut(&gpu),
    };
    // The hub rows on the side stream, beside the windows (disjoint rows of out and stats);
    // `attention_forward_rows` also checks the graph, beta, inv_norm, stats and h, before the
    // windows' launch.
    gpu.fork_join(
        || attention_forward_rows(g, x, None, (out, stats), Some(row_max)),
        // SAFETY: shapes checked: n16 and out are rows x 32, inv_norm and stats cover the rows;
        // the lists are this graph's (column ids < n_rows).
        || if win.n_windows == 0 { Ok(()) } else { unsafe { attention_forward_tc_d32.launch(&gpu, Shape::linear(blocks, 256, 0), &args) } },
    )
}

/// The backward with the windows' rows on the tensor cores (the row pass over S's windows, the
/// column pass over Sᵀ's) and the rows of at least `row_max` entries on the CUDA-core passes:
/// `dh`, `dbeta` (zeroed here) and the scratch `dn`, `d_row` as
/// [`super::fused_attention::attention_backward`] has them. `n16`: n in f16; `dout16` (shaped
/// as `n`) is written with dout in f16 by the row pass, for the column pass to gather (every
/// window is walked, so every row). Builds Sᵀ's lists on first use.
pub fn attention_backward_tc(
    g: &GraphHandle,
    inputs: GradInputs<'_, DeviceMatrix<f32>>,
    n16: &DeviceMatrix<f16>,
    dout16: &mut DeviceMatrix<f16>,
    grads: Grads<'_, DeviceMatrix<f32>>,
    row_max: u32,
) -> Result<()> {
    let what = "attention_backward_tc";
    let GradInputs { x: Normalized { beta, n, inv_norm, .. }, stats, out, dout } = inputs;
    let Grads { dn, d_row, dh, dbeta } = grads;
    check_tc(n, &[n16, dout16], row_max, what)?;
    let p = BackwardPasses::new(g, inputs, None, Some(row_max));
    p.check(dn, d_row, dh, dbeta)?;
    let t = g.transpose()?;
    let ((win_s, blocks_s), (win_t, blocks_t)) = (windows_arg(g, row_max, what)?, windows_arg(&t, row_max, what)?);
    let gpu = g.gpu()?.clone();
    dbeta.zero()?;
    let (n16p, inv, st) = (n16.arg().cast(), inv_norm.buf.arg(&gpu), stats.buf.arg(&gpu));
    // Each pass: the hub rows on the side stream beside the windows (disjoint rows; dbeta by
    // atomic adds). The column pass needs both row passes' D and dn: it forks after the join.
    let row = AttentionTcRowGradArgs {
        win: win_s,
        beta: beta.arg(),
        n16: n16p,
        dout16: dout16.arg_mut().cast(),
        inv_norm: inv,
        stats: st,
        out: out.arg(),
        dout: dout.arg(),
        dn: dn.arg_mut(),
        d_row: d_row.buf.arg_mut(&gpu),
        dbeta: dbeta.arg_mut(),
    };
    gpu.fork_join(
        || p.row_pass(dn, d_row, dbeta),
        // SAFETY: shapes checked (`check_tc`, `BackwardPasses::check`); S's lists.
        || {
            if win_s.n_windows == 0 {
                Ok(())
            } else {
                unsafe { attention_row_grad_tc_d32.launch(&gpu, Shape::linear(blocks_s, 256, 0), &row) }
            }
        },
    )?;
    let col = AttentionTcColGradArgs {
        win: win_t,
        beta: beta.arg(),
        n16: n16p,
        dout16: dout16.arg().cast(),
        n: n.arg(),
        inv_norm: inv,
        stats: st,
        d_row: d_row.buf.arg(&gpu),
        dn: dn.arg(),
        dh: dh.arg_mut(),
    };
    gpu.fork_join(
        || p.column_pass(dn, d_row, dh),
        // SAFETY: as above; Sᵀ's lists (square like S), after both row passes.
        || {
            if win_t.n_windows == 0 {
                Ok(())
            } else {
                unsafe { attention_col_grad_tc_d32.launch(&gpu, Shape::linear(blocks_t, 256, 0), &col) }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every entry of a short row is exactly one mask bit, and nothing else is.
    #[test]
    fn windows_reproduce_the_short_rows() {
        let mut rng = crate::util::rng::SplitMix64::new(3);
        for (n, row_max) in [(1usize, 256u32), (37, 256), (300, 5), (1000, 256)] {
            let mut t = Vec::new();
            for r in 0..n as u32 {
                let len = if r == 7 { 40 } else { rng.below(12) as u32 };
                let mut cols: Vec<u32> = (0..len).map(|_| rng.below(n as u64) as u32).collect();
                cols.sort_unstable();
                cols.dedup();
                t.extend(cols.into_iter().map(|c| (r, c, 1.0f32)));
            }
            let s = Csr::from_triplets(n, n, &t).unwrap();
            let l = build_windows(&s, row_max).unwrap();
            let mut seen = std::collections::BTreeSet::new();
            for w in 0..n.div_ceil(WINDOW_ROWS) {
                for b in l.win_ptr[w] as usize..l.win_ptr[w + 1] as usize {
                    for r in 0..WINDOW_ROWS {
                        for c in 0..BLOCK_COLS {
                            if l.mask[b * BLOCK_COLS + c] >> r & 1 == 1 {
                                assert!(seen.insert((w * WINDOW_ROWS + r, l.cols[b * BLOCK_COLS + c])), "an edge twice");
                            }
                        }
                    }
                }
            }
            let rp = s.row_ptr();
            let want: std::collections::BTreeSet<(usize, u32)> = (0..n)
                .filter(|&r| rp[r + 1] - rp[r] < row_max)
                .flat_map(|r| s.col_idx()[rp[r] as usize..rp[r + 1] as usize].iter().map(move |&c| (r, c)))
                .collect();
            assert_eq!(seen, want, "n = {n}, row_max = {row_max}");
            let mut order = l.order.clone();
            order.sort_unstable();
            assert_eq!(order, (0..n.div_ceil(WINDOW_ROWS) as u32).collect::<Vec<_>>());
        }
        // A repeated entry (`Csr::new` keeps it; `from_triplets` would sum it away): no lists,
        // unless its row is left to the CUDA-core kernels.
        let s = Csr::new(2, 2, vec![0, 2, 2], vec![1, 1], vec![1.0, 1.0]).unwrap();
        assert!(build_windows(&s, 256).is_none());
        assert!(build_windows(&s, 2).is_some());
    }
}
