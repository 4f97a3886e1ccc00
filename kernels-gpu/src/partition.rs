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

/// Longest run of blocks one TC8 work item may take: long windows are cut into runs of this
/// many blocks so that a few dense rows do not serialise the launch, but runs stay long enough
/// to amortise the per-item set-up (and the atomic adds that split windows need).
pub const fn tc8_max_blocks(total_blocks: u32, sm_count: u32) -> u32 {
    let per_warp = total_blocks.div_ceil(if sm_count == 0 { 1 } else { sm_count * 32 });
    if per_warp < 8 { 8 } else { per_warp }
}
