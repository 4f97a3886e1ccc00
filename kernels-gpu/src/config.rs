// Launch shapes shared by the device kernels and their host launchers: the host `include!`s
// this file, so a block size lives in one place.

/// Warps per block of the CSR SpMM (each runs 32 / lanes-a-row rows).
pub const CSR_SPMM_WARPS: u32 = 8;
/// Above this many entries in one row of a warp, the CSR SpMM takes that warp's rows one at a
/// time with all 32 lanes (a hub spread over the warp) instead of a lane group per row.
pub const CSR_SPMM_LONG_ROW: u32 = 128;
/// Rows of more entries than this are the CSR SpMM's hubs: each is summed by a whole block of
/// its own (appended to the launch's grid) rather than by one warp, whose walk of a power-law
/// graph's largest row (16k entries on R-MAT 2^18) outlasted the rest of the product.
pub const CSR_SPMM_HUB_ROW: u32 = 512;
/// f32 columns of one column pass of a hub block (32 lanes x 8 f16 columns), per warp, in shared
/// memory: the warps' partial sums meet there.
pub const CSR_SPMM_HUB_COLS: u32 = 256;
/// Dynamic shared memory of the CSR SpMM: the hub blocks' partial sums.
pub const CSR_SPMM_SMEM_BYTES: u32 = CSR_SPMM_WARPS * CSR_SPMM_HUB_COLS * 4;

/// Warps per block of HP-SpMM.
pub const HP_SPMM_WARPS: u32 = 8;

/// Vectors per ME-BCRS block read by TC8 (the K of mma.m16n8k8 for f16 and tf32).
pub const TC8_BLOCK_VECTORS: u32 = 8;
/// Warps (work items) per block of TC8 SpMM.
pub const TC8_WARPS: u32 = 4;
/// Shared-memory stages per warp of the pipelined TC8 SpMM (3 measured 12% slower at K = 128:
/// shared memory then holds fewer warps per SM).
pub const TC8_ASYNC_STAGES: u32 = 2;
/// Bytes of one stage of the pipelined TC8 SpMM: 32 vectors x 128 bytes of X, then the 8
/// values of each vector (`value_bytes` each), then (`scaled`, e4m3) each vector's X row scale.
pub const fn tc8_async_stage_bytes(value_bytes: u32, scaled: bool) -> u32 {
    32 * 128 + 32 * TC8_BLOCK_VECTORS * value_bytes + if scaled { 32 * 4 } else { 0 }
}

/// Bulk-copy TC8 SpMM (sm_90): shared-memory stride of one gathered 128-byte X slice. Padded by
/// 16 bytes (f16: 8 dims) or 32 bytes (tf32) so the fragment reads of a quarter-warp hit eight
/// different 16-byte bank groups (a bulk copy cannot swizzle inside a row).
pub const fn tc8_bulk_row_stride(value_bytes: u32) -> u32 {
    if value_bytes == 2 { 144 } else { 160 }
}
/// Bytes of one stage of the bulk-copy TC8 SpMM: 32 padded X slices, then 8 values per vector.
pub const fn tc8_bulk_stage_bytes(value_bytes: u32) -> u32 {
    32 * tc8_bulk_row_stride(value_bytes) + 32 * TC8_BLOCK_VECTORS * value_bytes
}
/// Bytes of one warp of the bulk-copy TC8 SpMM: its stage barriers (16 bytes, room for two 8-byte
/// mbarriers per 16) and `stages` stages.
pub const fn tc8_bulk_warp_bytes(value_bytes: u32, stages: u32) -> u32 {
    16 * stages.div_ceil(2) + stages * tc8_bulk_stage_bytes(value_bytes)
}

/// Rows per SGT window of TC16 SpMM (the M of mma.m16n8k8).
pub const TC16_WINDOW: u32 = 16;
/// Unique columns per SGT block of TC16 SpMM (the K of mma.m16n8k8).
pub const TC16_BLOCK_W: u32 = 8;
/// Most warps per thread block of TC16 SpMM (one work item, warps over K slices).
pub const TC16_MAX_WARPS: u32 = 4;
/// SGT blocks staged in shared memory per step of TC16 SpMM (4 x 8 columns = one per lane).
pub const TC16_GROUP: u32 = 4;
/// Dynamic shared memory of TC16 SpMM: GROUP dense 16 x 8 f32 tiles.
pub const TC16_SMEM_BYTES: u32 = TC16_GROUP * TC16_WINDOW * TC16_BLOCK_W * 4;

/// Warps (SGT blocks) per thread block of TC16 SDDMM; each parks a 16 x 16 f32 tile in shared memory.
pub const TC16_SDDMM_WARPS: u32 = 4;

/// Threads per block of the nn kernels (elementwise: grid-stride over float4s; row ops: a warp
/// per row, 8 rows per block at a time).
pub const NN_BLOCK: u32 = 256;
/// Blocks per SM the grid-stride nn launches size their grids for (2048 resident threads).
pub const NN_BLOCKS_PER_SM: u32 = 8;

/// Rows with at least this many edges are too long for a lane group (one hub row of a
/// power-law graph held the whole warp-per-row edge-softmax launch: 0.6-0.9 ms on R-MAT 2^18):
/// the short-row kernels skip them and a block of `NN_LONG_ROW_BLOCK` threads takes each one.
pub const NN_LONG_ROW: u32 = 256;
/// Threads of the block that takes one long row.
pub const NN_LONG_ROW_BLOCK: u32 = 1024;
/// Lanes per row in the edge-softmax kernels' short-row path (a warp takes 32 / this rows at
/// once): rows average 4-90 edges, so a warp per row left most lanes idle and the launch
/// latency-bound (0.18 ms forward on R-MAT 2^18, 4.2 M edges).
pub const NN_EDGE_GROUP: u32 = 8;

/// Items per thread and threads per block of the tile scan of the device samplers
/// (`sample/scan.rs`); a tile is one block's items.
pub const SCAN_ITEMS: u32 = 4;
pub const SCAN_BLOCK: u32 = 1024;
pub const SCAN_TILE: u32 = SCAN_ITEMS * SCAN_BLOCK;
