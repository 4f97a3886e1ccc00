//! Row L2 normalisation (AGNN's cosine, as PyTorch's F.normalize) and its backward: one group
//! of `1 << shift` lanes per row (a warp for rows of >= 32 float4s, several rows per warp for
//! narrower ones), groups over the rows grid-stride, lanes over the float4s of the padded row
//! (padding is 0: it adds nothing to the norms and dots, and the outputs' padding is written 0).
//! The row loop runs on warp-uniform bounds, so every lane reaches the shuffles.

use super::{global_warp, group_sum, row_group};
use crate::abi::nn::{RowNormalizeArgs, RowNormalizeBackwardArgs};
use crate::ptx;

/// inv_norm[r] = 1 / max(||h_r||, 1e-12); n_r = h_r * inv_norm[r], and n_r in f16 into `n16`
/// unless it is null (the copy the tensor-core attention gathers: written here, where n is
/// made, not cast from n in a pass of its own).
#[inline(always)]
pub unsafe fn row_normalize(args: RowNormalizeArgs) {
    let RowNormalizeArgs { rows, ld4, shift, h, n, n16, inv_norm } = args;
    let (grp, sub, lanes, per_warp) = row_group(shift);
    let (w, n_warps) = global_warp();
    let mut row0 = w * per_warp;
    while row0 < rows {
        let row = row0 + grp;
        let active = row < rows;
        let base = row as usize * 4 * ld4 as usize;
        let mut ss = 0f32;
        let mut c4 = sub;
        while active && c4 < ld4 {
            let v = unsafe { ptx::ld_nc_v4_f32(h.add(base + 4 * c4 as usize)) };
            ss += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
            c4 += lanes;
        }
        let inv = 1.0 / ptx::sqrt(group_sum(ss, lanes)).max(1e-12);
        let mut c4 = sub;
        while active && c4 < ld4 {
            let o = base + 4 * c4 as usize;
            let v = unsafe { ptx::ld_nc_v4_f32(h.add(o)) };
            let x = [v[0] * inv, v[1] * inv, v[2] * inv, v[3] * inv];
            unsafe { ptx::st_v4_f32(n.add(o), x) };
            if !n16.is_null() {
                // Element o is f16 pair o / 2.
                unsafe { ptx::st_v2_u32(n16.add(o / 2), [ptx::pack_f16x2(x[0], x[1]), ptx::pack_f16x2(x[2], x[3])]) };
            }
            c4 += lanes;
        }
        if active && sub == 0 {
            unsafe { ptx::st_f32(inv_norm.add(row as usize), inv) };
        }
        row0 += n_warps * per_warp;
    }
}

/// dh_r += (dn_r - n_r (n_r . dn_r)) * inv_norm[r].
#[inline(always)]
pub unsafe fn row_normalize_backward(args: RowNormalizeBackwardArgs) {
    let RowNormalizeBackwardArgs { rows, ld4, shift, n, inv_norm, dn, dh } = args;
    let (grp, sub, lanes, per_warp) = row_group(shift);
    let (w, n_warps) = global_warp();
    let mut row0 = w * per_warp;
    while row0 < rows {
        let row = row0 + grp;
        let active = row < rows;
        let base = row as usize * 4 * ld4 as usize;
        let mut dot = 0f32;
        let mut c4 = sub;
        while active && c4 < ld4 {
            let o = base + 4 * c4 as usize;
            let (a, b) = unsafe { (ptx::ld_nc_v4_f32(n.add(o)), ptx::ld_nc_v4_f32(dn.add(o))) };
            dot += a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
            c4 += lanes;
        }
        let dot = group_sum(dot, lanes);
        if active {
            let inv = unsafe { ptx::ld_nc_f32(inv_norm.add(row as usize)) };
            let mut c4 = sub;
            while c4 < ld4 {
                let o = base + 4 * c4 as usize;
                let (a, b) = unsafe { (ptx::ld_nc_v4_f32(n.add(o)), ptx::ld_nc_v4_f32(dn.add(o))) };
                let p = unsafe { dh.add(o) };
                let d = unsafe { ptx::ld_v4_f32(p) };
                let g = |k: usize| d[k] + (b[k] - a[k] * dot) * inv;
                unsafe { ptx::st_v4_f32(p, [g(0), g(1), g(2), g(3)]) };
                c4 += lanes;
            }
        }
        row0 += n_warps * per_warp;
    }
}
