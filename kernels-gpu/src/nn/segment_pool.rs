//! Global pooling over contiguous row segments (graph classification's readout): segment g is
//! rows `offsets[g]..offsets[g + 1]` of x, and out[g][c] is the sum, mean or max of its rows'
//! column c. Forward: a thread per element of out's padded rows (grid-stride), walking its
//! segment's rows down one column (a warp's threads read consecutive columns of a row:
//! coalesced). Backward: a thread per element of dx's padded rows, its segment found by a binary
//! search of the offsets. Empty segments pool to 0 and take no gradient; padding columns are
//! written 0. `KIND`: 0 sum, 1 mean, 2 max (the host's `Pooling` order).

use super::grid_stride;
use crate::abi::nn::{SegmentPoolArgs, SegmentPoolBackwardArgs};
use crate::index::{elem_offset, split_offset};
use crate::ptx;

/// The max pooling's argmax of an empty segment: no row.
pub const NO_ROW: u32 = u32::MAX;

#[inline(always)]
pub unsafe fn segment_pool<const KIND: u32>(args: SegmentPoolArgs) {
    let SegmentPoolArgs { graphs, cols, ld, offsets, x, out, argmax } = args;
    if ld == 0 {
        return; // no columns; also lets `split_offset` compile without a panic path
    }
    for i in grid_stride(graphs as u64 * ld as u64) {
        let (g, c) = split_offset(i, ld);
        let (lo, hi) = unsafe { (ptx::ld_nc_u32(offsets.add(g as usize)), ptx::ld_nc_u32(offsets.add(g as usize + 1))) };
        let mut v = 0f32;
        let mut arg = NO_ROW;
        if c < cols && lo < hi {
            if KIND == 2 {
                v = f32::NEG_INFINITY;
                let mut r = lo;
                while r < hi {
                    let y = unsafe { ptx::ld_nc_f32(x.add(elem_offset(r, ld, c) as usize)) };
                    // Strictly greater: the first row of a tie wins (as the CPU reference); a NaN
                    // never wins, and a segment of NaNs keeps its first row.
                    if y > v || arg == NO_ROW {
                        v = y;
                        arg = r;
                    }
                    r += 1;
                }
            } else {
                // Two chains of adds: the loads of the next row overlap the adds.
                let (mut a, mut b) = (0f32, 0f32);
                let mut r = lo;
                while r + 1 < hi {
                    a += unsafe { ptx::ld_nc_f32(x.add(elem_offset(r, ld, c) as usize)) };
                    b += unsafe { ptx::ld_nc_f32(x.add(elem_offset(r + 1, ld, c) as usize)) };
                    r += 2;
                }
                if r < hi {
                    a += unsafe { ptx::ld_nc_f32(x.add(elem_offset(r, ld, c) as usize)) };
                }
                v = a + b;
                if KIND == 1 {
                    v /= (hi - lo) as f32;
                }
            }
        }
        unsafe { ptx::st_f32(out.add(i as usize), v) };
        if KIND == 2 {
            unsafe { ptx::st_u32(argmax.add(i as usize), arg) };
        }
    }
}

/// The segment of row `r` (< offsets[graphs]): the last g with offsets[g] <= r, so that empty
/// segments sharing r's offset are passed over.
#[inline(always)]
fn segment_of(offsets: *const u32, graphs: u32, r: u32) -> u32 {
    let (mut lo, mut hi) = (0u32, graphs);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if unsafe { ptx::ld_nc_u32(offsets.add(mid as usize)) } <= r { lo = mid } else { hi = mid - 1 }
    }
    lo
}

#[inline(always)]
pub unsafe fn segment_pool_backward<const KIND: u32>(args: SegmentPoolBackwardArgs) {
    let SegmentPoolBackwardArgs { rows, graphs, cols, ld, offsets, dout, argmax, dx } = args;
    if ld == 0 {
        return;
    }
    for i in grid_stride(rows as u64 * ld as u64) {
        let (r, c) = split_offset(i, ld);
        let mut v = 0f32;
        if c < cols {
            let g = segment_of(offsets, graphs, r);
            let at = elem_offset(g, ld, c) as usize;
            if KIND == 2 {
                if unsafe { ptx::ld_nc_u32(argmax.add(at)) } == r {
                    v = unsafe { ptx::ld_nc_f32(dout.add(at)) };
                }
            } else {
                v = unsafe { ptx::ld_nc_f32(dout.add(at)) };
                if KIND == 1 {
                    let len = unsafe { ptx::ld_nc_u32(offsets.add(g as usize + 1)) - ptx::ld_nc_u32(offsets.add(g as usize)) };
                    v /= len as f32;
                }
            }
        }
        unsafe { ptx::st_f32(dx.add(i as usize), v) };
    }
}
