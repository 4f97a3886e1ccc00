//! A GraphSAINT batch on the device, in the CPU sampler's exact layout (`host/sample/saint.rs`,
//! `aggregation.rs`, `prepared.rs`):
//!
//! 1. `draw`: the sampler's draws (node, edge or random walk) from the batch's counter stream,
//!    each marking the nodes it samples (`mark[v] = 1`; repeats write the same 1);
//! 2. a scan of the marks (`scan.rs`) gives each sampled node its local id (ids increase with
//!    global ids, as the CPU's sorted node list does) and lists the nodes;
//! 3. `rows_count`: per batch row, the neighbours inside the batch, plus the self-loop the model's
//!    aggregation adds; a scan of the counts gives the batch's row pointers;
//! 4. `rows_fill`: the rows, columns in the graph's (sorted) order, each value the aggregation
//!    weight of its full-graph entry with the self-loop merged in where it falls;
//! 5. `transpose`: the pattern of an induced subgraph of a symmetric graph is symmetric, so the
//!    transpose has the same rows and columns; each entry finds its mirror by binary search in
//!    the mirror's row (no atomics, the same order as a counting transpose);
//! 5b. sparse node features: `features.rs` (shared with the neighbour sampler);
//! 6. `finish`: clears the marks of the batch's nodes and writes the batch's sizes;
//! 7. `bind.rs` (after the host has read the sizes): the batch padded into a rebound model's
//!    buffers, as `PaddedBatch` pads it on the CPU.
//!
//! A warp per row in 3 and 4 (rows of hubs are long); a thread per item elsewhere.

use crate::abi::sample::{SAINT_KIND_EDGE, SAINT_KIND_NODE, SaintDrawArgs, SaintFinishArgs, SaintRowsArgs, SaintTransposeArgs};
use crate::nn::{global_thread, global_warp, grid_stride, grid_threads};
use crate::ptx;
use crate::rng::{sample_below, sample_draw, sample_unit};

/// Entries a warp takes per step of a row (four chunks of 32).
const CHUNK: u32 = 128;

/// The row holding entry `e` of a CSR of `n` rows: the last row whose start is <= e.
#[inline(always)]
unsafe fn row_of_entry(row_ptr: *const u32, n: u32, e: u32) -> u32 {
    // partition_point(|p| p <= e) over row_ptr[0..=n], minus one.
    let (mut lo, mut hi) = (0u32, n + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if unsafe { *row_ptr.add(mid as usize) } <= e {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo - 1
}

#[inline(always)]
unsafe fn mark(m: *mut u32, v: u32) {
    unsafe { *m.add(v as usize) = 1 };
}

/// Step 1: thread j makes draw j (a node draw, an edge draw, or walk j).
#[inline(always)]
pub unsafe fn draw(args: SaintDrawArgs) {
    let SaintDrawArgs { kind, draws, walk_length, key, n_nodes, row_ptr, col_idx, alias_prob, alias, marks } = args;
    let nnz = unsafe { *row_ptr.add(n_nodes as usize) } as u64;
    let mut j = global_thread();
    while j < draws {
        let jj = j as u64;
        if kind == SAINT_KIND_NODE {
            let e = sample_below(sample_draw(key, jj), nnz) as u32;
            unsafe { mark(marks, row_of_entry(row_ptr, n_nodes, e)) };
        } else if kind == SAINT_KIND_EDGE {
            let slot = sample_below(sample_draw(key, 2 * jj), nnz) as u32;
            let coin = sample_unit(sample_draw(key, 2 * jj + 1));
            let e = if coin < unsafe { *alias_prob.add(slot as usize) } { slot } else { unsafe { *alias.add(slot as usize) } };
            unsafe { mark(marks, row_of_entry(row_ptr, n_nodes, e)) };
            unsafe { mark(marks, *col_idx.add(e as usize)) };
        } else {
            let per_walk = walk_length as u64 + 1;
            let base = jj * per_walk;
            let mut v = sample_below(sample_draw(key, base), n_nodes as u64) as u32;
            unsafe { mark(marks, v) };
            let mut step = 0u64;
            while step < walk_length as u64 {
                let (start, end) = unsafe { (*row_ptr.add(v as usize), *row_ptr.add(v as usize + 1)) };
                if end > start {
                    let k = sample_below(sample_draw(key, base + 1 + step), (end - start) as u64) as u32;
                    v = unsafe { *col_idx.add((start + k) as usize) };
                }
                unsafe { mark(marks, v) };
                step += 1;
            }
        }
        j += grid_threads();
    }
}

/// One batch row as a warp sees it: its node, its full-graph row, the self-loop to merge.
struct Row {
    v: u32,
    start: u32,
    end: u32,
    /// The aggregation's self-loop weight of v (0: none to add).
    self_loop: f32,
}

impl Row {
    #[inline(always)]
    unsafe fn load(a: &SaintRowsArgs, r: u32) -> Row {
        let v = unsafe { *a.nodes.add(r as usize) };
        let (start, end) = unsafe { (*a.row_ptr.add(v as usize), *a.row_ptr.add(v as usize + 1)) };
        Row { v, start, end, self_loop: unsafe { *a.self_loop.add(v as usize) } }
    }

    /// (kept entries, kept entries with column < v, whether v's own loop is an entry). Four
    /// warp-wide chunks per step: their column and mark loads are in flight together (a hub's
    /// row is thousands of entries, and each chunk is two dependent loads).
    #[inline(always)]
    unsafe fn census(&self, a: &SaintRowsArgs) -> (u32, u32, bool) {
        let lane = ptx::lane_id();
        let (mut kept, mut below, mut own) = (0u32, 0u32, false);
        let mut e0 = self.start;
        while e0 < self.end {
            let chunk = unsafe { self.chunk(a, e0 + lane) };
            crate::unroll4!(k => {
                let (c, m) = chunk[k];
                kept += ptx::ballot(m).count_ones();
                below += ptx::ballot(m && c < self.v).count_ones();
                own |= ptx::ballot(c == self.v) != 0;
            });
            e0 += CHUNK;
        }
        (kept, below, own)
    }

    /// (column, kept) of entries `e, e + 32, e + 64, e + 96` (column u32::MAX past the row).
    #[inline(always)]
    unsafe fn chunk(&self, a: &SaintRowsArgs, e: u32) -> [(u32, bool); 4] {
        let mut c = [u32::MAX; 4];
        crate::unroll4!(k => {
            let ek = e + 32 * k as u32;
            if ek < self.end {
                c[k] = unsafe { *a.col_idx.add(ek as usize) };
            }
        });
        let mut out = [(u32::MAX, false); 4];
        crate::unroll4!(k => {
            out[k] = (c[k], c[k] != u32::MAX && unsafe { *a.marks.add(c[k] as usize) } != 0);
        });
        out
    }

    /// Whether the aggregation's self-loop is a new entry of the row (else none, or merged).
    #[inline(always)]
    fn inserts_loop(&self, own: bool) -> bool {
        self.self_loop != 0.0 && !own
    }
}

/// Step 3: `counts[r]` = row r's entries (0 past the batch's nodes, up to `rows`); adds the kept
/// graph entries and the batch's train nodes to `totals[0]` and `totals[1]`.
#[inline(always)]
pub unsafe fn rows_count(a: SaintRowsArgs) {
    let n = unsafe { *a.n_batch };
    let (mut r, warps) = global_warp();
    while r < a.rows {
        let count = if r < n {
            let row = unsafe { Row::load(&a, r) };
            let (kept, below, own) = unsafe { row.census(&a) };
            if ptx::lane_id() == 0 {
                // For the fill: where the inserted self-loop goes, and whether there is one.
                unsafe { *a.loops.add(r as usize) = (below << 1) | row.inserts_loop(own) as u32 };
                unsafe { ptx::red_add_u32(a.totals, kept) };
                if unsafe { *a.mask_bits.add(row.v as usize) } as u32 & a.train_bit != 0 {
                    unsafe { ptx::red_add_u32(a.totals.add(1), 1) };
                }
            }
            kept + row.inserts_loop(own) as u32
        } else {
            0
        };
        if ptx::lane_id() == 0 {
            unsafe { *a.counts.add(r as usize) = count };
        }
        r += warps;
    }
}

/// Step 4: row r's entries at `out_ptr[r]..`: local column ids, values `entry_w[e]` (the
/// aggregation weight of full-graph entry e) with the self-loop weight added at the diagonal
/// or inserted before the first column past it (where `rows_count` put it), and the row of
/// every entry.
#[inline(always)]
pub unsafe fn rows_fill(a: SaintRowsArgs) {
    let n = unsafe { *a.n_batch };
    let lane = ptx::lane_id();
    let lower = (1u32 << lane) - 1;
    let (mut r, warps) = global_warp();
    while r < n {
        let row = unsafe { Row::load(&a, r) };
        let loops = unsafe { *a.loops.add(r as usize) };
        let (below, insert) = (loops >> 1, loops & 1 != 0);
        let out0 = unsafe { *a.out_ptr.add(r as usize) };
        let mut base = out0;
        let mut e0 = row.start;
        while e0 < row.end {
            let chunk = unsafe { row.chunk(&a, e0 + lane) };
            crate::unroll4!(k => {
                let (c, m) = chunk[k];
                let kept = ptx::ballot(m);
                if m {
                    let e = e0 + 32 * k as u32 + lane;
                    let at = base + (kept & lower).count_ones() + (insert && c > row.v) as u32;
                    let x = unsafe { *a.entry_w.add(e as usize) };
                    let value = if c == row.v && row.self_loop != 0.0 { x + row.self_loop } else { x };
                    unsafe {
                        *a.out_cols.add(at as usize) = *a.local.add(c as usize);
                        *a.out_values.add(at as usize) = value;
                        *a.out_rows.add(at as usize) = r;
                    }
                }
                base += kept.count_ones();
            });
            e0 += CHUNK;
        }
        if insert && lane == 0 {
            let at = (out0 + below) as usize;
            unsafe {
                *a.out_cols.add(at) = r;
                *a.out_values.add(at) = row.self_loop;
                *a.out_rows.add(at) = r;
            }
        }
        r += warps;
    }
}

/// Step 5: entry p = (r, c) of the batch goes to the transpose's row c at r's place among
/// that row's columns: `t_values[q] = values[p]`, `t_of[q] = p`.
#[inline(always)]
pub unsafe fn transpose(a: SaintTransposeArgs) {
    let nnz = unsafe { *a.row_ptr.add(a.rows as usize) } as u64;
    for p in grid_stride(nnz) {
        let p = p as u32;
        let (r, c) = unsafe { (*a.entry_rows.add(p as usize), *a.cols.add(p as usize)) };
        let (mut lo, mut hi) = unsafe { (*a.row_ptr.add(c as usize), *a.row_ptr.add(c as usize + 1)) };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if unsafe { *a.cols.add(mid as usize) } < r {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        unsafe {
            *a.t_values.add(lo as usize) = *a.values.add(p as usize);
            *a.t_of.add(lo as usize) = p;
        }
    }
}

/// Step 6: the marks of the batch's nodes back to 0 (the next batch starts clean), and
/// `totals[2..5]` = (nodes, entries, feature entries).
#[inline(always)]
pub unsafe fn finish(a: SaintFinishArgs) {
    let n = unsafe { *a.n_batch };
    let mut r = global_thread();
    while r < n {
        unsafe { *a.marks.add(*a.nodes.add(r as usize) as usize) = 0 };
        r += grid_threads();
    }
    if global_thread() == 0 {
        unsafe {
            *a.totals.add(2) = n;
            *a.totals.add(3) = *a.row_ptr.add(a.rows as usize);
            *a.totals.add(4) = if a.fx_ptr.is_null() { 0 } else { *a.fx_ptr.add(a.rows as usize) };
        }
    }
}
