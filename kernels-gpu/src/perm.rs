//! Row gathers for reordered graph handles (`src/ops/permute.rs`): X' = P X on the way in and
//! Y = Pᵀ Y' on the way out, both as dst row r = src row idx[r]. Precision-blind: rows move as
//! 16-byte chunks. A group of lanes per row (a warp for rows of >= 32 chunks, several rows per
//! warp for narrower ones), groups over the rows grid-stride, lanes over the chunks: each
//! group reads one source row and writes one destination row, both contiguous.

use crate::abi::perm::{GatherRowsArgs, ScatterAddRowsArgs};
use crate::nn::{global_warp, row_group};
use crate::ptx;

#[inline(always)]
pub unsafe fn gather_rows(a: GatherRowsArgs) {
    let GatherRowsArgs { n_rows, ld4, shift, idx, src, dst } = a;
    let (grp, sub, lanes, per_warp) = row_group(shift);
    let (w, n_warps) = global_warp();
    let mut row0 = w * per_warp;
    while row0 < n_rows {
        let row = row0 + grp;
        if row < n_rows {
            let s = unsafe { ptx::ld_nc_u32(idx.add(row as usize)) };
            let (from, to) = (4 * s as usize * ld4 as usize, 4 * row as usize * ld4 as usize);
            let mut c = sub;
            while c < ld4 {
                let v = unsafe { ptx::ld_nc_v4_u32(src.add(from + 4 * c as usize)) };
                unsafe { ptx::st_v4_u32(dst.add(to + 4 * c as usize), v) };
                c += lanes;
            }
        }
        row0 += n_warps * per_warp;
    }
}

/// dst row idx[r] += src row r (f32), the groups laid out as in [`gather_rows`]. The caller's
/// indices are distinct within a launch, so each destination row has one writer.
#[inline(always)]
pub unsafe fn scatter_add_rows(a: ScatterAddRowsArgs) {
    let ScatterAddRowsArgs { n_rows, ld4, shift, idx, src, dst } = a;
    let (grp, sub, lanes, per_warp) = row_group(shift);
    let (w, n_warps) = global_warp();
    let mut row0 = w * per_warp;
    while row0 < n_rows {
        let row = row0 + grp;
        if row < n_rows {
            let d = unsafe { ptx::ld_nc_u32(idx.add(row as usize)) };
            let (from, to) = (4 * row as usize * ld4 as usize, 4 * d as usize * ld4 as usize);
            let mut c = sub;
            while c < ld4 {
                let v = unsafe { ptx::ld_nc_v4_f32(src.add(from + 4 * c as usize)) };
                let p = unsafe { dst.add(to + 4 * c as usize) };
                let o = unsafe { ptx::ld_v4_f32(p) };
                unsafe { ptx::st_v4_f32(p, [o[0] + v[0], o[1] + v[1], o[2] + v[2], o[3] + v[3]]) };
                c += lanes;
            }
        }
        row0 += n_warps * per_warp;
    }
}
