//! Row L2 normalisation (AGNN's cosine, as PyTorch's F.normalize) and its backward: a warp per
//! row (grid-stride over rows), lanes over the float4s of the padded row (padding is 0: it adds
//! nothing to the norms and dots, and the outputs' padding is written 0).

use super::global_warp;
use crate::ptx;

/// inv_norm[r] = 1 / max(||h_r||, 1e-12); n_r = h_r * inv_norm[r].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn row_normalize_f32(rows: u32, ld4: u32, h: *const f32, n: *mut f32, inv_norm: *mut f32) {
    let lane = ptx::lane_id();
    let (mut row, n_warps) = global_warp();
    while row < rows {
        let base = row as usize * 4 * ld4 as usize;
        let mut ss = 0f32;
        let mut c4 = lane;
        while c4 < ld4 {
            let v = unsafe { ptx::ld_nc_v4_f32(h.add(base + 4 * c4 as usize)) };
            ss += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
            c4 += 32;
        }
        let inv = 1.0 / ptx::sqrt(ptx::warp_sum(ss)).max(1e-12);
        let mut c4 = lane;
        while c4 < ld4 {
            let o = base + 4 * c4 as usize;
            let v = unsafe { ptx::ld_nc_v4_f32(h.add(o)) };
            unsafe { ptx::st_v4_f32(n.add(o), [v[0] * inv, v[1] * inv, v[2] * inv, v[3] * inv]) };
            c4 += 32;
        }
        if lane == 0 {
            unsafe { ptx::st_f32(inv_norm.add(row as usize), inv) };
        }
        row += n_warps;
    }
}

/// dh_r += (dn_r - n_r (n_r . dn_r)) * inv_norm[r].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn row_normalize_backward_f32(
    rows: u32,
    ld4: u32,
    n: *const f32,
    inv_norm: *const f32,
    dn: *const f32,
    dh: *mut f32,
) {
    let lane = ptx::lane_id();
    let (mut row, n_warps) = global_warp();
    while row < rows {
        let base = row as usize * 4 * ld4 as usize;
        let mut dot = 0f32;
        let mut c4 = lane;
        while c4 < ld4 {
            let o = base + 4 * c4 as usize;
            let (a, b) = unsafe { (ptx::ld_nc_v4_f32(n.add(o)), ptx::ld_nc_v4_f32(dn.add(o))) };
            dot += a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
            c4 += 32;
        }
        let dot = ptx::warp_sum(dot);
        let inv = unsafe { ptx::ld_nc_f32(inv_norm.add(row as usize)) };
        let mut c4 = lane;
        while c4 < ld4 {
            let o = base + 4 * c4 as usize;
            let (a, b) = unsafe { (ptx::ld_nc_v4_f32(n.add(o)), ptx::ld_nc_v4_f32(dn.add(o))) };
            let p = unsafe { dh.add(o) };
            let d = unsafe { ptx::ld_v4_f32(p) };
            let g = |k: usize| d[k] + (b[k] - a[k] * dot) * inv;
            unsafe { ptx::st_v4_f32(p, [g(0), g(1), g(2), g(3)]) };
            c4 += 32;
        }
        row += n_warps;
    }
}
