//! Rows of a resident matrix picked by id: a sampled batch's feature rows gathered on the
//! device from the whole feature matrix, so a batch carries its node ids (4 bytes a row)
//! instead of its rows. Grid-stride, a thread per element of the destination's padded rows.

use super::grid_stride;
use crate::abi::nn::GatherRowsArgs;
use crate::index::{elem_offset, split_offset};
use crate::ptx;

/// dst[r][c] = src[ids[r]][c] for r < n_ids and c < cols; every other element of dst's padded
/// rows (padding columns, rows past the ids) written 0.
#[inline(always)]
pub unsafe fn gather_rows(args: GatherRowsArgs) {
    let GatherRowsArgs { rows, n_ids, cols, src_ld, dst_ld, ids, src, dst } = args;
    if dst_ld == 0 {
        return; // no columns; also lets `split_offset` compile without a panic path
    }
    for i in grid_stride(rows as u64 * dst_ld as u64) {
        let (r, c) = split_offset(i, dst_ld);
        let v = if r < n_ids && c < cols {
            let from = unsafe { ptx::ld_nc_u32(ids.add(r as usize)) };
            unsafe { ptx::ld_nc_f32(src.add(elem_offset(from, src_ld, c) as usize)) }
        } else {
            0.0
        };
        unsafe { ptx::st_f32(dst.add(i as usize), v) };
    }
}
