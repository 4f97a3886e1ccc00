// Index arithmetic of the GPU translations CSR -> ME-BCRS / SGT, shared by the device kernels
// (`kernels-gpu/src/format/`) and their host launchers (`src/format/gpu/`), which `include!`
// this file and test it on the CPU.

/// Keys (u64 each, 32 KB) one block sorts in shared memory: windows with more edges take the
/// large path (global scratch, sorted in chunks of this many keys).
pub const SORT_SMEM_KEYS: u32 = 4096;
/// Threads per block of the per-window kernels that sort in shared memory.
pub const WINDOW_THREADS: u32 = 256;
/// Threads per block of the large-window sort (one block per large window).
pub const LARGE_THREADS: u32 = 1024;
/// Threads of the single-block scan over windows.
pub const SCAN_THREADS: u32 = 1024;
/// `dup` entry: no next duplicate (low 31 bits).
pub const DUP_NONE: u32 = 0x7fff_ffff;
/// `dup` entry: this edge is not the first of its (row, column) in CSR order.
pub const DUP_NOT_HEAD: u32 = 0x8000_0000;

/// `a / d`, 0 for d = 0 (the device has no panics: a plain `/` would link a panic path).
pub const fn div_or_zero(a: u32, d: u32) -> u32 {
    match a.checked_div(d) {
        Some(q) => q,
        None => 0,
    }
}

/// `a % d`, 0 for d = 0.
pub const fn rem_or_zero(a: u32, d: u32) -> u32 {
    match a.checked_rem(d) {
        Some(r) => r,
        None => 0,
    }
}

/// `ceil(a / d)`, 0 for d = 0: SGT blocks of a window with `a` unique columns.
pub const fn blocks_of(a: u32, d: u32) -> u32 {
    div_or_zero(a, d) + (rem_or_zero(a, d) != 0) as u32
}

/// Keys sorted for a window of `len` edges: the next power of two (bitonic network), at least 1.
pub const fn sort_len(len: u32) -> u32 {
    if len <= 1 { 1 } else { len.next_power_of_two() }
}

/// Whether a window of `len` edges is sorted on the large path.
pub const fn window_is_large(len: u32) -> bool {
    len > SORT_SMEM_KEYS
}

/// Rows `r0..r1` of window `w` (windows of `win` rows; the last one may be shorter).
pub const fn window_rows(w: u32, win: u32, n_rows: u32) -> (u32, u32) {
    let r0 = w * win;
    let r1 = if r0 + win < n_rows { r0 + win } else { n_rows };
    (r0, r1)
}

/// Sort key of one edge: the primary value (column, or block) high, the edge's offset in its
/// window low, so equal primaries keep CSR order.
pub const fn sort_key(primary: u32, offset: u32) -> u64 {
    ((primary as u64) << 32) | offset as u64
}

/// Slot in ME-BCRS `values` of (row `row_in_window`, vector `local`) of a window whose vectors
/// start at `vec_base` and number `n_vec`, with `k` vectors per block (the last block unpadded).
pub const fn mebcrs_slot(vec_base: u32, n_vec: u32, k: u32, local: u32, row_in_window: u32) -> u32 {
    let b = div_or_zero(local, k);
    let j = rem_or_zero(local, k);
    let rest = n_vec - b * k;
    let kb = if rest < k { rest } else { k };
    8 * vec_base + 8 * b * k + row_in_window * kb + j
}

/// SGT block position of an edge: `row_in_window * block_w + column within its block`.
pub const fn sgt_pos(row_in_window: u32, local: u32, block_w: u32) -> u32 {
    row_in_window * block_w + rem_or_zero(local, block_w)
}

/// Dynamic shared memory of the small-window kernels for windows of at most `max_len` edges:
/// the keys, 17 row pointers and 32 warp sums.
pub const fn window_smem_bytes(max_len: u32) -> u32 {
    let keys = if max_len > SORT_SMEM_KEYS { SORT_SMEM_KEYS } else { sort_len(max_len) };
    8 * keys + 16 + 4 * 17 + 12 + 4 * 32
}
