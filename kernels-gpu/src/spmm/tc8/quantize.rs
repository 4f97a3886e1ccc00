//! Features to e4m3 for the e4m3 TC8 SpMM: a warp per row finds max |x|, scales the row into
//! e4m3's range (448) and writes 4 bytes per lane step; the row's scale goes to `scales` and the
//! largest scale is reduced into `scale_max` (the SpMM's global scale needs it), once per warp.

use crate::abi::spmm::QuantizeE4m3Args;
use crate::ptx;

#[inline(always)]
pub unsafe fn quantize_rows_e4m3(args: QuantizeE4m3Args) {
    let QuantizeE4m3Args { n_rows, ld_in, ld_out, x, out, scales, scale_max } = args;
    let lane = ptx::lane_id();
    let warps = ptx::nctaid_x() * (ptx::ntid_x() / 32);
    let mut row = ptx::ctaid_x() * (ptx::ntid_x() / 32) + ptx::warp_id();
    // The warp's largest scale, reduced into scale_max once at the end: an atomic per row on
    // one address serialised (1 ms for 2^20 rows on an H100).
    let mut warp_scale_max = 0.0f32;
    while row < n_rows {
        let src = unsafe { x.add(row as usize * ld_in as usize) };
        let mut m = 0.0f32;
        let mut d = 4 * lane;
        while d < ld_in {
            let v = unsafe { ptx::ld_nc_v4_f32(src.add(d as usize)) };
            m = m.max(v[0].abs()).max(v[1].abs()).max(v[2].abs()).max(v[3].abs());
            d += 128;
        }
        let m = ptx::warp_max(m);
        let scale = m / 448.0;
        let inv = if m > 0.0 { 448.0 / m } else { 0.0 };
        if lane == 0 {
            unsafe { *scales.add(row as usize) = scale };
        }
        warp_scale_max = warp_scale_max.max(scale);
        let dst = unsafe { out.add(row as usize * ld_out as usize / 4) };
        let mut d = 4 * lane;
        while d < ld_out {
            let v = if d < ld_in { unsafe { ptx::ld_nc_v4_f32(src.add(d as usize)) } } else { [0.0; 4] };
            unsafe { *dst.add(d as usize / 4) = ptx::pack_e4m3x4([v[0] * inv, v[1] * inv, v[2] * inv, v[3] * inv]) };
            d += 128;
        }
        row += warps;
    }
    if lane == 0 {
        unsafe { ptx::red_max_u32(scale_max, warp_scale_max.to_bits()) };
    }
}
