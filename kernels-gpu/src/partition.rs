// Work partitioning shared by device kernels and host launchers (the host `include!`s this
// file and tests it on the CPU).

/// Dynamic task partition (HP-SpMM, Eq. 3-5 in spirit): nonzeros per warp so that the launch
/// fills `sm_count` SMs with about `waves` rounds of `warps_per_sm` resident warps, but never
/// fewer than 32 (one coalesced batch of indices) and never so many that one warp serialises.
pub const fn hp_nnz_per_warp(nnz: u32, sm_count: u32, warps_per_sm: u32, waves: u32, k_chunks: u32) -> u32 {
    let target_warps = sm_count * warps_per_sm * waves;
    // Each K chunk is its own set of warps over the same nonzeros.
    let per_chunk_warps = match target_warps.checked_div(k_chunks) {
        Some(w) => w,
        None => target_warps,
    };
    let per_chunk_warps = if per_chunk_warps == 0 { 1 } else { per_chunk_warps };
    let npw = nnz.div_ceil(per_chunk_warps);
    let npw = if npw < 32 { 32 } else if npw > 4096 { 4096 } else { npw };
    npw.div_ceil(32) * 32
}

/// Longest run of blocks one TC8 work item may take. Long windows are cut into several items
/// (their rows then take atomic adds): far enough for `sm_count * 16` warps on graphs of few,
/// dense windows, and down to 4x the average window on skewed graphs so that a few heavy rows
/// do not leave a long tail; never below 32 blocks, so atomics stay amortised over long runs.
pub const fn tc8_max_blocks(total_blocks: u32, n_windows: u32, k_slices: u32, sm_count: u32) -> u32 {
    let warps_wanted = if sm_count == 0 { 16 } else { sm_count * 16 };
    let items_wanted = warps_wanted.div_ceil(if k_slices == 0 { 1 } else { k_slices });
    let for_parallelism = total_blocks / items_wanted;
    let for_balance = 4 * total_blocks.div_ceil(if n_windows == 0 { 1 } else { n_windows });
    let m = if for_parallelism < for_balance { for_parallelism } else { for_balance };
    if m < 32 { 32 } else { m }
}

/// Lanes per row of the nn row kernels (row normalisation, cross-entropy), as a shift: the
/// row's items (float4s or classes) rounded up to a power of two, at most 32. Rows narrower
/// than a warp share it (`32 >> shift` rows per warp), so narrow rows still keep every lane
/// loading.
pub const fn nn_row_group_shift(items_per_row: u32) -> u32 {
    let (mut lanes, mut shift) = (1u32, 0u32);
    while lanes < items_per_row && lanes < 32 {
        lanes *= 2;
        shift += 1;
    }
    shift
}
