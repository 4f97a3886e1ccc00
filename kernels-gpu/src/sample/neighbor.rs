//! A neighbour-sampled batch on the device, in the CPU sampler's exact layout
//! (`host/sample/neighbor.rs`, `batch.rs::from_blocks`, the model's `model_graph`):
//!
//! 1. `targets`: the batch's slice of the epoch's target order (the shared Feistel permutation),
//!    local ids 0..n_out;
//! 2. per hop, over the `sizes[hop]` nodes so far: `hop_count` (draws per row) and a scan give
//!    the hop's row pointers; `hop_draw` draws each row's neighbours by Floyd's algorithm with
//!    the CPU's counters (row d, draw j: counter d * fanout + j), in increasing row position;
//!    `hop_first` / `hop_flags` / a scan / `hop_assign` give every node reached for the first
//!    time the next local id in the order the CPU's loop meets it (the first drawn position
//!    that reaches it, found by an atomic min, then a scan of the "first and new" flags);
//! 3. `union_count` / a scan / `union_fill`: per row the union of its hops' draws, sorted and
//!    deduplicated, with the model's normalisation (GCN's self-loop inserted and D^-1/2 on both
//!    sides in f64, SAGE's 1 / row length, GIN's 1), counting every column's entries;
//!    Per-layer blocks (`NeighborNormalized`) instead: per hop, `block_count` / a scan /
//!    `block_fill` make the hop's block with the full graph's normalisation over the batch's
//!    local ids (`Aggregation::block_matrix`), then step 4 transposes it;
//! 4. `transpose_fill` (atomic cursors, any order) and `transpose_sort` (a warp sorts each
//!    column's entries by position, so the order is a counting transpose's: deterministic);
//! 5. `finish`: clears the local ids and writes the batch's sizes; `bind.rs` pads it into the
//!    model after the host has read them.
//!
//! A warp per row where a row's draws are merged (in registers up to 32 draws), a warp per
//! column in the sort, a thread per item elsewhere.

use crate::abi::sample::{NEIGHBOR_NORM_GCN, NEIGHBOR_NORM_MEAN, NeighborBatchArgs, NeighborHopArgs, NeighborTargetsArgs};
use crate::nn::{global_thread, global_warp, grid_threads};
use crate::ptx;
use crate::rng::{sample_below, sample_draw, sample_permuted_index};
use crate::warp_sort::warp_sort;

/// The local id of a node not (yet) in the batch, and a `first` entry between uses.
const ABSENT: u32 = u32::MAX;

/// Step 1: thread p takes position `start + p` of the epoch's order.
#[inline(always)]
pub unsafe fn targets(a: NeighborTargetsArgs) {
    let mut p = global_thread();
    while p < a.n_out {
        let at = (a.start + p) as u64;
        let q = if a.shuffle != 0 { sample_permuted_index(a.key, a.n_targets as u64, at) } else { at };
        let v = unsafe { *a.targets.add(q as usize) };
        unsafe {
            *a.nodes.add(p as usize) = v;
            *a.local.add(v as usize) = p;
        }
        p += grid_threads();
    }
    if global_thread() == 0 {
        unsafe { *a.sizes = a.n_out };
    }
}

/// The row of node `v`: (start, length).
#[inline(always)]
unsafe fn graph_row(a: &NeighborHopArgs, v: u32) -> (u32, u32) {
    let (s, e) = unsafe { (*a.row_ptr.add(v as usize), *a.row_ptr.add(v as usize + 1)) };
    (s, e - s)
}

/// Draws of a row of `deg` neighbours: all of them, or `fanout`.
#[inline(always)]
fn draws(fanout: i32, deg: u32) -> u32 {
    if fanout < 0 || fanout as u32 >= deg { deg } else { fanout as u32 }
}

/// Step 2a: per row (0 past the hop's rows, up to the bound) its draws.
#[inline(always)]
pub unsafe fn hop_count(a: NeighborHopArgs) {
    let n_dst = unsafe { *a.sizes.add(a.hop as usize) };
    let mut d = global_thread();
    while d < a.rows {
        let c = if d < n_dst {
            let v = unsafe { *a.nodes.add(d as usize) };
            draws(a.fanout, unsafe { graph_row(&a, v) }.1)
        } else {
            0
        };
        unsafe { *a.counts.add(d as usize) = c };
        d += grid_threads();
    }
}

/// Step 2b: row d's neighbours at its scanned offset, in increasing position in the graph's row
/// (Floyd's k distinct positions of 0..deg, draw j from counter d * fanout + j, then sorted).
/// A warp per row: lane j makes draw j, the draws are resolved in order by ballots (draw j
/// takes its candidate unless an earlier draw holds it), and each lane writes its position's
/// neighbour at its rank. Fan-outs past 32 fall back to lane 0 alone.
#[inline(always)]
pub unsafe fn hop_draw(a: NeighborHopArgs) {
    let n_dst = unsafe { *a.sizes.add(a.hop as usize) };
    let lane = ptx::lane_id();
    let (mut d, warps) = global_warp();
    while d < n_dst {
        let v = unsafe { *a.nodes.add(d as usize) };
        let (start, deg) = unsafe { graph_row(&a, v) };
        let k = draws(a.fanout, deg);
        let out = unsafe { a.nbrs.add(*a.hop_ptr.add(d as usize) as usize) };
        let base = d as u64 * a.fanout as u64;
        if k == deg {
            let mut j = lane;
            while j < deg {
                unsafe { *out.add(j as usize) = *a.col_idx.add((start + j) as usize) };
                j += 32;
            }
        } else if k <= 32 {
            let (cand, own) = if lane < k {
                let i = deg - k + lane;
                (sample_below(sample_draw(a.key, base + lane as u64), i as u64 + 1) as u32, i)
            } else {
                (u32::MAX, u32::MAX)
            };
            let mut pos = u32::MAX;
            for j in 0..k {
                let t = ptx::shfl_idx_u32(cand, j);
                let taken = ptx::ballot(lane < j && pos == t) != 0;
                if lane == j {
                    pos = if taken { own } else { cand };
                }
            }
            let mut rank = 0u32;
            for m in 0..k {
                rank += (ptx::shfl_idx_u32(pos, m) < pos) as u32;
            }
            if lane < k {
                unsafe { *out.add(rank as usize) = *a.col_idx.add((start + pos) as usize) };
            }
        } else if lane == 0 {
            for j in 0..k {
                let i = deg - k + j;
                let t = sample_below(sample_draw(a.key, base + j as u64), i as u64 + 1) as u32;
                let mut seen = false;
                for m in 0..j {
                    seen |= unsafe { *out.add(m as usize) } == t;
                }
                unsafe { *out.add(j as usize) = if seen { i } else { t } };
            }
            unsafe { insertion_sort(out, k) };
            for j in 0..k {
                unsafe { *out.add(j as usize) = *a.col_idx.add((start + *out.add(j as usize)) as usize) };
            }
        }
        d += warps;
    }
}

/// Sorts `len` u32s at `p` ascending (a row of draws: fan-out long).
#[inline(always)]
unsafe fn insertion_sort(p: *mut u32, len: u32) {
    for i in 1..len {
        let x = unsafe { *p.add(i as usize) };
        let mut j = i;
        while j > 0 && unsafe { *p.add(j as usize - 1) } > x {
            unsafe { *p.add(j as usize) = *p.add(j as usize - 1) };
            j -= 1;
        }
        unsafe { *p.add(j as usize) = x };
    }
}

/// The hop's drawn entries (device: the row pointer past its last row).
#[inline(always)]
unsafe fn hop_total(a: &NeighborHopArgs) -> u32 {
    unsafe { *a.hop_ptr.add(*a.sizes.add(a.hop as usize) as usize) }
}

/// Step 2c: every node not yet in the batch keeps the first drawn position that reaches it.
#[inline(always)]
pub unsafe fn hop_first(a: NeighborHopArgs) {
    let total = unsafe { hop_total(&a) };
    let mut p = global_thread();
    while p < total {
        let u = unsafe { *a.nbrs.add(p as usize) };
        if unsafe { *a.local.add(u as usize) } == ABSENT {
            unsafe { ptx::red_min_u32(a.first.add(u as usize), p) };
        }
        p += grid_threads();
    }
}

/// Step 2d: 1 at the first position of every new node (0 elsewhere, up to the bound).
#[inline(always)]
pub unsafe fn hop_flags(a: NeighborHopArgs) {
    let total = unsafe { hop_total(&a) };
    let mut p = global_thread();
    while p < a.entries {
        let new = p < total && {
            let u = unsafe { *a.nbrs.add(p as usize) } as usize;
            unsafe { *a.local.add(u) == ABSENT && *a.first.add(u) == p }
        };
        unsafe { *a.flags.add(p as usize) = new as u32 };
        p += grid_threads();
    }
}

/// Step 2e: new nodes take the next local ids in order of first position; their `first`
/// entries are cleared for the next hop and batch.
#[inline(always)]
pub unsafe fn hop_assign(a: NeighborHopArgs) {
    let (total, n_before) = unsafe { (hop_total(&a), *a.sizes.add(a.hop as usize)) };
    let mut p = global_thread();
    while p < total {
        if unsafe { *a.flags.add(p as usize) } != 0 {
            let u = unsafe { *a.nbrs.add(p as usize) };
            let l = n_before + unsafe { *a.new_pos.add(p as usize) };
            unsafe {
                *a.local.add(u as usize) = l;
                *a.nodes.add(l as usize) = u;
                *a.first.add(u as usize) = ABSENT;
            }
        }
        p += grid_threads();
    }
    if global_thread() == 0 {
        unsafe { *a.sizes.add(a.hop as usize + 1) = n_before + *a.new_pos.add(a.entries as usize) };
    }
}

/// Row d's hop rows: for every hop that has d as a row, (its neighbours, its entry range).
/// The rows' union is laid out at the sum of the hop rows' starts (every row's union fits
/// before the next row's: at most its hop rows' lengths).
struct UnionRow {
    d: u32,
    base: u32,
}

impl UnionRow {
    #[inline(always)]
    unsafe fn new(a: &NeighborBatchArgs, d: u32) -> UnionRow {
        let mut base = 0;
        for h in 0..a.hops {
            let ptr = unsafe { a.hop_ptr.add(*a.ptr_at.add(h as usize) as usize) };
            let rows = unsafe { *a.sizes.add(h as usize) };
            base += unsafe { *ptr.add((if d < rows { d } else { rows }) as usize) };
        }
        UnionRow { d, base }
    }

    /// Copies the hop rows' neighbours (as local ids) to the row's place, sorted and
    /// deduplicated; returns how many distinct.
    #[inline(always)]
    unsafe fn gather(&self, a: &NeighborBatchArgs) -> u32 {
        let out = unsafe { a.scratch.add(self.base as usize) };
        let mut len = 0u32;
        for h in 0..a.hops {
            if self.d < unsafe { *a.sizes.add(h as usize) } {
                let ptr = unsafe { a.hop_ptr.add(*a.ptr_at.add(h as usize) as usize) };
                let nbrs = unsafe { a.hop_nbrs.add(*a.nbr_at.add(h as usize) as usize) };
                let (lo, hi) = unsafe { (*ptr.add(self.d as usize), *ptr.add(self.d as usize + 1)) };
                for e in lo..hi {
                    unsafe { *out.add(len as usize) = *a.local.add(*nbrs.add(e as usize) as usize) };
                    len += 1;
                }
            }
        }
        unsafe { insertion_sort(out, len) };
        let mut unique = 0u32;
        for i in 0..len {
            let c = unsafe { *out.add(i as usize) };
            if unique == 0 || unsafe { *out.add(unique as usize - 1) } != c {
                unsafe { *out.add(unique as usize) = c };
                unique += 1;
            }
        }
        unique
    }
}

/// Step 3a: per row (0 past the batch's nodes, up to the bound) its entries in the model's
/// matrix, and the column counters cleared. A warp per row: rows of at most 32 draws (fan-outs
/// summed over the hops) are merged in registers (each lane one draw; the first of equal
/// columns is kept and written at its rank among the kept); longer ones by lane 0 in place.
#[inline(always)]
pub unsafe fn union_count(a: NeighborBatchArgs) {
    let n = unsafe { *a.sizes.add(a.hops as usize) };
    let lane = ptx::lane_id();
    let (mut d, warps) = global_warp();
    while d < a.rows {
        if lane == 0 {
            unsafe {
                *a.t_counts.add(d as usize) = 0;
                *a.t_cursor.add(d as usize) = 0;
            }
        }
        if d >= n {
            if lane == 0 {
                unsafe { *a.counts.add(d as usize) = 0 };
            }
            d += warps;
            continue;
        }
        let row = unsafe { UnionRow::new(&a, d) };
        // This lane's draw (if the row has at most 32): its hop and place in the hop's row.
        let (mut total, mut c) = (0u32, u32::MAX);
        for h in 0..a.hops {
            if d < unsafe { *a.sizes.add(h as usize) } {
                let ptr = unsafe { a.hop_ptr.add(*a.ptr_at.add(h as usize) as usize) };
                let (lo, hi) = unsafe { (*ptr.add(d as usize), *ptr.add(d as usize + 1)) };
                if lane >= total && lane < total + (hi - lo) {
                    let nbrs = unsafe { a.hop_nbrs.add(*a.nbr_at.add(h as usize) as usize) };
                    c = unsafe { *a.local.add(*nbrs.add((lo + lane - total) as usize) as usize) };
                }
                total += hi - lo;
            }
        }
        let (unique, own) = if total <= 32 {
            let mut first = lane < total;
            for m in 0..total {
                // Every lane shuffles (a shuffle under `&&` would leave lanes out of it).
                let cm = ptx::shfl_idx_u32(c, m);
                first &= !(m < lane && cm == c);
            }
            let kept = ptx::ballot(first);
            let mut rank = 0u32;
            for m in 0..total {
                let cm = ptx::shfl_idx_u32(c, m);
                rank += (kept >> m & 1 != 0 && cm < c) as u32;
            }
            if first {
                unsafe { *a.scratch.add((row.base + rank) as usize) = c };
            }
            (kept.count_ones(), ptx::ballot(first && c == d) != 0)
        } else {
            let (mut unique, mut own) = (0, false);
            if lane == 0 {
                unique = unsafe { row.gather(&a) };
                for i in 0..unique {
                    own |= unsafe { *a.scratch.add((row.base + i) as usize) } == d;
                }
            }
            (unique, own)
        };
        if lane == 0 {
            unsafe {
                *a.unique.add(d as usize) = unique;
                *a.counts.add(d as usize) = unique + (a.norm == NEIGHBOR_NORM_GCN && !own) as u32;
            }
        }
        d += warps;
    }
}

/// 1 / sqrt(row sum of A + I) of row r, in f64 as `gcn_normalize` takes it (every value is 1,
/// so the sum is the row's length).
#[inline(always)]
unsafe fn gcn_inv_sqrt(a: &NeighborBatchArgs, r: u32) -> f64 {
    let len = unsafe { *a.row_ptr.add(r as usize + 1) - *a.row_ptr.add(r as usize) };
    1.0 / ptx::sqrt_f64(len as f64)
}

/// Step 3b: the rows written at their scanned offsets, GCN's self-loop in column order. A warp
/// per row, a lane per entry (the loop after the entries below it).
#[inline(always)]
pub unsafe fn union_fill(a: NeighborBatchArgs) {
    let n = unsafe { *a.sizes.add(a.hops as usize) };
    let lane = ptx::lane_id();
    let (mut d, warps) = global_warp();
    while d < n {
        let row = unsafe { UnionRow::new(&a, d) };
        let unique = unsafe { *a.unique.add(d as usize) };
        let q0 = unsafe { *a.row_ptr.add(d as usize) };
        let with_loop = unsafe { *a.row_ptr.add(d as usize + 1) } - q0 > unique;
        let inv_d = if a.norm == NEIGHBOR_NORM_GCN { unsafe { gcn_inv_sqrt(&a, d) } } else { 0.0 };
        let mean = 1.0f32 / (if unique > 0 { unique } else { 1 }) as f32;
        let put = |q: u32, c: u32| {
            let value = match a.norm {
                NEIGHBOR_NORM_GCN => (inv_d * unsafe { gcn_inv_sqrt(&a, c) }) as f32,
                NEIGHBOR_NORM_MEAN => mean,
                _ => 1.0,
            };
            unsafe {
                *a.cols.add(q as usize) = c;
                *a.entry_rows.add(q as usize) = d;
                *a.values.add(q as usize) = value;
                ptx::red_add_u32(a.t_counts.add(c as usize), 1);
            }
        };
        let mut below = 0u32;
        let mut i0 = 0u32;
        while i0 < unique {
            let i = i0 + lane;
            let c = if i < unique { unsafe { *a.scratch.add((row.base + i) as usize) } } else { u32::MAX };
            if i < unique {
                put(q0 + i + (with_loop && c > d) as u32, c);
            }
            below += ptx::ballot(i < unique && c < d).count_ones();
            i0 += 32;
        }
        if with_loop && lane == 0 {
            put(q0 + below, d);
        }
        d += warps;
    }
}

/// Per-layer step 3a (instead of the union's): per row (0 past the block's rows, up to the
/// bound) its entries in block `a.block`'s matrix: the hop row's draws, plus the self-loop
/// where the node has one to add (`self_loops[v] != 0`) and did not draw itself; the column
/// counters cleared. A warp per row.
#[inline(always)]
pub unsafe fn block_count(a: NeighborBatchArgs) {
    let n_dst = unsafe { *a.sizes.add(a.block as usize) };
    let ptr = unsafe { a.hop_ptr.add(*a.ptr_at.add(a.block as usize) as usize) };
    let nbrs = unsafe { a.hop_nbrs.add(*a.nbr_at.add(a.block as usize) as usize) };
    let lane = ptx::lane_id();
    let (mut d, warps) = global_warp();
    while d < a.rows {
        if lane == 0 {
            unsafe {
                *a.t_counts.add(d as usize) = 0;
                *a.t_cursor.add(d as usize) = 0;
            }
        }
        // d is the warp's: the ballot below is uniform.
        let count = if d < n_dst {
            let v = unsafe { *a.nodes.add(d as usize) };
            let (lo, hi) = unsafe { (*ptr.add(d as usize), *ptr.add(d as usize + 1)) };
            let mut own = false;
            let mut e = lo + lane;
            while e < hi {
                own |= unsafe { *nbrs.add(e as usize) } == v;
                e += 32;
            }
            let own = ptx::ballot(own) != 0;
            (hi - lo) + (unsafe { *a.self_loops.add(v as usize) } != 0.0 && !own) as u32
        } else {
            0
        };
        if lane == 0 {
            unsafe { *a.counts.add(d as usize) = count };
        }
        d += warps;
    }
}

/// The position of `u` among the `len` sorted, unique columns at `cols` (it is there: a drawn
/// neighbour of the row).
#[inline(always)]
unsafe fn find_column(cols: *const u32, len: u32, u: u32) -> u32 {
    let (mut lo, mut hi) = (0u32, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if unsafe { *cols.add(mid as usize) } < u {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Per-layer step 3b: block `a.block`'s rows at their scanned offsets, as
/// `Aggregation::block_matrix` builds them: row d (node v of deg(v) neighbours, k drawn) holds
/// its draws by local column, each the full graph's value of its raw entry times deg(v) / k
/// (in f64, rounded once), with v's self-loop value added at column d (to a drawn loop, else
/// inserted in column order). A warp per row: up to 32 draws are ranked by local id in
/// registers, longer rows sorted in the row's place of the scratch (the hop's draws' own
/// offsets); each entry's raw position is found by a binary search of its neighbour in v's
/// sorted row. Thread 0 also writes the block's entries
/// to `block_nnz` (the scan before this launch made them).
#[inline(always)]
pub unsafe fn block_fill(a: NeighborBatchArgs) {
    let n_dst = unsafe { *a.sizes.add(a.block as usize) };
    if global_thread() == 0 && !a.block_nnz.is_null() {
        unsafe { *a.block_nnz = *a.row_ptr.add(*a.sizes.add(a.hops as usize) as usize) };
    }
    let ptr = unsafe { a.hop_ptr.add(*a.ptr_at.add(a.block as usize) as usize) };
    let at = unsafe { *a.nbr_at.add(a.block as usize) } as usize;
    let nbrs = unsafe { a.hop_nbrs.add(at) };
    let lane = ptx::lane_id();
    let (mut d, warps) = global_warp();
    while d < n_dst {
        let v = unsafe { *a.nodes.add(d as usize) };
        let (lo, hi) = unsafe { (*ptr.add(d as usize), *ptr.add(d as usize + 1)) };
        let k = hi - lo;
        let (start, end) = unsafe { (*a.graph_ptr.add(v as usize), *a.graph_ptr.add(v as usize + 1)) };
        let row_cols = unsafe { a.graph_cols.add(start as usize) };
        let scale = (end - start) as f64 / (if k > 0 { k } else { 1 }) as f64;
        let own = unsafe { *a.self_loops.add(v as usize) };
        let q0 = unsafe { *a.row_ptr.add(d as usize) };
        let with_loop = unsafe { *a.row_ptr.add(d as usize + 1) } - q0 > k;
        let put = |q: u32, c: u32, value: f32| unsafe {
            *a.cols.add(q as usize) = c;
            *a.entry_rows.add(q as usize) = d;
            *a.values.add(q as usize) = value;
            ptx::red_add_u32(a.t_counts.add(c as usize), 1);
        };
        // The draw of local column c, at `rank` among the row's draws by column.
        let entry = |rank: u32, c: u32| {
            let u = unsafe { *a.nodes.add(c as usize) };
            let e = start + unsafe { find_column(row_cols, end - start, u) };
            let mut x = (unsafe { *a.entry_values.add(e as usize) } as f64 * scale) as f32;
            if c == d && own != 0.0 {
                x += own;
            }
            put(q0 + rank + (with_loop && c > d) as u32, c, x);
        };
        let mut below = 0u32;
        if k <= 32 {
            // In registers: lane j's draw goes to its rank (the columns are distinct).
            let c = if lane < k { unsafe { *a.local.add(*nbrs.add((lo + lane) as usize) as usize) } } else { u32::MAX };
            let mut rank = 0u32;
            for m in 0..k {
                rank += (ptx::shfl_idx_u32(c, m) < c) as u32;
            }
            if lane < k {
                entry(rank, c);
            }
            below = ptx::ballot(lane < k && c < d).count_ones();
        } else {
            let sorted = unsafe { a.scratch.add(at + lo as usize) };
            let mut i = lane;
            while i < k {
                unsafe { *sorted.add(i as usize) = *a.local.add(*nbrs.add((lo + i) as usize) as usize) };
                i += 32;
            }
            ptx::sync_warp();
            unsafe { warp_sort(sorted, k) };
            ptx::sync_warp();
            let mut i0 = 0u32;
            while i0 < k {
                let i = i0 + lane;
                let c = if i < k { unsafe { *sorted.add(i as usize) } } else { u32::MAX };
                if i < k {
                    entry(i, c);
                }
                below += ptx::ballot(i < k && c < d).count_ones();
                i0 += 32;
            }
        }
        if with_loop && lane == 0 {
            put(q0 + below, d, own);
        }
        d += warps;
    }
}

/// Step 4a: every entry takes a place in its column's row of the transpose (any order).
#[inline(always)]
pub unsafe fn transpose_fill(a: NeighborBatchArgs) {
    let n = unsafe { *a.sizes.add(a.hops as usize) };
    let nnz = unsafe { *a.row_ptr.add(n as usize) };
    let mut p = global_thread();
    while p < nnz {
        let c = unsafe { *a.cols.add(p as usize) } as usize;
        let q = unsafe { *a.t_ptr.add(c) + ptx::atom_add_u32(a.t_cursor.add(c), 1) };
        unsafe { *a.t_of.add(q as usize) = p };
        p += grid_threads();
    }
}

/// Step 4b: a warp per row of the transpose sorts its entries by position in the pattern (=
/// by row: the order a counting transpose lists them in), then writes their rows, values and
/// the transpose's own row of each.
#[inline(always)]
pub unsafe fn transpose_sort(a: NeighborBatchArgs) {
    let n = unsafe { *a.sizes.add(a.hops as usize) };
    let lane = ptx::lane_id();
    let (mut c, warps) = global_warp();
    while c < n {
        let (lo, hi) = unsafe { (*a.t_ptr.add(c as usize), *a.t_ptr.add(c as usize + 1)) };
        let len = hi - lo;
        if len <= 32 {
            // In registers: each lane's entry goes to its rank.
            let p = if lane < len { unsafe { *a.t_of.add((lo + lane) as usize) } } else { u32::MAX };
            let mut rank = 0u32;
            for m in 0..len {
                rank += (ptx::shfl_idx_u32(p, m) < p) as u32;
            }
            if lane < len {
                let q = (lo + rank) as usize;
                unsafe {
                    *a.t_of.add(q) = p;
                    *a.t_cols.add(q) = *a.entry_rows.add(p as usize);
                    *a.t_rows.add(q) = c;
                    *a.t_values.add(q) = *a.values.add(p as usize);
                }
            }
            c += warps;
            continue;
        }
        unsafe { warp_sort(a.t_of.add(lo as usize), len) };
        let mut q = lo + lane;
        while q < hi {
            let p = unsafe { *a.t_of.add(q as usize) } as usize;
            unsafe {
                *a.t_cols.add(q as usize) = *a.entry_rows.add(p);
                *a.t_rows.add(q as usize) = c;
                *a.t_values.add(q as usize) = *a.values.add(p);
            }
            q += 32;
        }
        c += warps;
    }
}

/// Step 5: the local ids of the batch's nodes back to absent, and `totals` = (drawn entries,
/// targets, nodes, entries, 0).
#[inline(always)]
pub unsafe fn finish(a: NeighborBatchArgs) {
    let n = unsafe { *a.sizes.add(a.hops as usize) };
    let mut i = global_thread();
    while i < n {
        unsafe { *a.local.add(*a.nodes.add(i as usize) as usize) = ABSENT };
        i += grid_threads();
    }
    if global_thread() == 0 {
        let mut drawn = 0;
        for h in 0..a.hops {
            let ptr = unsafe { a.hop_ptr.add(*a.ptr_at.add(h as usize) as usize) };
            drawn += unsafe { *ptr.add(*a.sizes.add(h as usize) as usize) };
        }
        unsafe {
            *a.totals = drawn;
            *a.totals.add(1) = *a.sizes;
            *a.totals.add(2) = n;
            *a.totals.add(3) = *a.row_ptr.add(n as usize);
            *a.totals.add(4) = if a.fx_ptr.is_null() { 0 } else { *a.fx_ptr.add(a.rows as usize) };
        }
    }
}
