// Launch shapes shared by the device kernels and their host launchers: the host `include!`s
// this file, so a block size lives in one place.

/// Warps (rows) per block of the CSR warp-per-row SpMM.
pub const CSR_SPMM_WARPS: u32 = 8;

/// Warps per block of HP-SpMM.
pub const HP_SPMM_WARPS: u32 = 8;

/// Vectors per ME-BCRS block read by TC8 (the K of mma.m16n8k8 for f16 and tf32).
pub const TC8_BLOCK_VECTORS: u32 = 8;
/// Warps (work items) per block of TC8 SpMM.
pub const TC8_WARPS: u32 = 4;
