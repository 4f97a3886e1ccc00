//! Column blocks of a wide matrix: GAT keeps `W h` as one n x (H F) matrix (one GEMM for all
//! heads) and runs each head's SpMM on an n x F block taken out of it; the heads' outputs are
//! put back side by side (concat) or summed with weight 1/H (mean). Grid-stride, a thread per
//! element of the narrow side.

use super::grid_stride;
use crate::abi::nn::HeadColumnsArgs;
use crate::index::{elem_offset, split_offset};
use crate::ptx;

/// dst[r][c] = alpha src[r][col0 + c] over dst's whole padded rows (padding written 0).
#[inline(always)]
pub unsafe fn take(args: HeadColumnsArgs) {
    let HeadColumnsArgs { rows, cols, src_ld, dst_ld, col0, alpha, src, dst, .. } = args;
    if dst_ld == 0 {
        return; // no columns; also lets `/ dst_ld` compile without a panic path
    }
    for i in grid_stride(rows as u64 * dst_ld as u64) {
        let (r, c) = split_offset(i, dst_ld);
        let v = if c < cols { alpha * unsafe { ptx::ld_nc_f32(src.add(elem_offset(r, src_ld, col0 + c) as usize)) } } else { 0.0 };
        unsafe { ptx::st_f32(dst.add(i as usize), v) };
    }
}

/// dst[r][col0 + c] = (accumulate ? dst[r][col0 + c] : 0) + alpha src[r][c] for c < cols.
#[inline(always)]
pub unsafe fn put(args: HeadColumnsArgs) {
    let HeadColumnsArgs { rows, cols, src_ld, dst_ld, col0, alpha, accumulate, src, dst } = args;
    if cols == 0 {
        return; // no columns; also lets `/ cols` compile without a panic path
    }
    for i in grid_stride(rows as u64 * cols as u64) {
        let (r, c) = split_offset(i, cols);
        let p = unsafe { dst.add(elem_offset(r, dst_ld, col0 + c) as usize) };
        let old = if accumulate != 0 { unsafe { ptx::ld_f32(p) } } else { 0.0 };
        unsafe { ptx::st_f32(p, old + alpha * ptx::ld_nc_f32(src.add(elem_offset(r, src_ld, c) as usize))) };
    }
}
