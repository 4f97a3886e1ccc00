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

// Dynamic Task Partition exactly as HP-SpMM (paper 003, §III-B) states it, beside the launchers'
// `hp_nnz_per_warp` above, which differs: it aims at about `waves` rounds of resident warps
// (at most that many, not at least), never goes below 32 nonzeros per warp and rounds to any
// multiple of 32 up to 4096. The paper instead keeps the largest NnzPerWarp of a fixed candidate
// set that still gives at least alpha full waves of blocks (InEq. 5), which on batch-sized
// sampled graphs means smaller tasks and more warps.

/// The paper's NnzPerWarp candidates (§III-B2, HVMA): 64 is loaded with int2/float2 and 128 and
/// above with int4/float4, aligned because each warp starts at a multiple of NnzPerWarp.
pub const DTP_CANDIDATES: [u32; 6] = [8, 32, 64, 128, 256, 512];

/// Eq. 3: resident blocks per SM, the least of the warp, register and shared-memory limits
/// (a zero per-block use does not limit).
pub const fn dtp_active_blocks_per_sm(
    max_warps_per_sm: u32,
    warps_per_block: u32,
    registers_per_sm: u32,
    registers_per_block: u32,
    shared_mem_per_sm: u32,
    shared_mem_per_block: u32,
) -> u32 {
    let by_warps = match max_warps_per_sm.checked_div(warps_per_block) {
        Some(b) => b,
        None => 0,
    };
    let by_regs = match registers_per_sm.checked_div(registers_per_block) {
        Some(b) => b,
        None => u32::MAX,
    };
    let by_smem = match shared_mem_per_sm.checked_div(shared_mem_per_block) {
        Some(b) => b,
        None => u32::MAX,
    };
    let m = if by_warps < by_regs { by_warps } else { by_regs };
    if m < by_smem { m } else { by_smem }
}

/// Eq. 4: blocks in one full wave, `NumSM * ActiveBlocksPerSM`.
pub const fn dtp_full_wave_size(sm_count: u32, active_blocks_per_sm: u32) -> u32 {
    sm_count * active_blocks_per_sm
}

/// InEq. 5 + the candidate set: the largest candidate NnzPerWarp with
/// `alpha * FullWaveSize <= NNZ / (NnzPerWarp * WarpsPerBlock) * K / (WarpSize * VectorWidth)`,
/// `alpha = alpha_num / alpha_den` (integers, so the test is exact: both sides multiplied out
/// in u64). When even the smallest candidate gives fewer than alpha full waves (tiny graphs),
/// the smallest (8): the most parallelism there is.
pub const fn dtp_nnz_per_warp(
    nnz: u32,
    k: u32,
    full_wave_size: u32,
    warps_per_block: u32,
    vector_width: u32,
    alpha_num: u32,
    alpha_den: u32,
) -> u32 {
    let rhs = alpha_den as u64 * nnz as u64 * k as u64;
    let mut best = DTP_CANDIDATES[0];
    let mut i = 0;
    while i < DTP_CANDIDATES.len() {
        let npw = DTP_CANDIDATES[i] as u64;
        let lhs = alpha_num as u64 * full_wave_size as u64 * npw * warps_per_block as u64 * 32 * vector_width as u64;
        if lhs <= rhs {
            best = DTP_CANDIDATES[i];
        }
        i += 1;
    }
    best
}

/// HVMA: the vector width of the sparse loads (indices, values) a warp can use with this
/// NnzPerWarp, 1 (scalar), 2 (int2/float2) or 4 (int4/float4).
pub const fn hvma_sparse_vector_width(nnz_per_warp: u32) -> u32 {
    if nnz_per_warp >= 128 && nnz_per_warp.is_multiple_of(4) {
        4
    } else if nnz_per_warp >= 64 && nnz_per_warp.is_multiple_of(2) {
        2
    } else {
        1
    }
}
