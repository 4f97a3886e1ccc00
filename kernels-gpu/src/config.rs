// Launch shapes shared by the device kernels and their host launchers: the host `include!`s
// this file, so a block size lives in one place.

/// Warps (rows) per block of the CSR warp-per-row SpMM.
pub const CSR_SPMM_WARPS: u32 = 8;

/// Warps per block of HP-SpMM.
pub const HP_SPMM_WARPS: u32 = 8;
