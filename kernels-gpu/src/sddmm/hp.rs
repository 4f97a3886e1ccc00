//! HP-SDDMM (hybrid parallel), f32 on CUDA cores: each warp takes the same number of
//! consecutive nonzeros of the row-sorted COO; its lanes form groups of `group` lanes (a power
//! of two, `1 << group_shift`, covering K in float4s), each group computes one edge's dot product with vector loads
//! and a shuffle reduction inside the group, so a warp finishes 32 / group edges per step.
//! Consecutive edges share their row, so the A row stays in L1 while the row does not change.

use crate::abi::sddmm::HpSddmmArgs;
use crate::ptx;

/// `out[slot(e)] = values[e] * dot(A[row(e)], B[col(e)])`; `slot_of` null means CSR order.
#[inline(always)]
pub unsafe fn hp_sddmm(args: HpSddmmArgs) {
    let HpSddmmArgs { nnz, ld, nnz_per_warp, group_shift, row_of, col_idx, values, slot_of, a, b, out } = args;
    let warp = ptx::ctaid_x() * (ptx::ntid_x() / 32) + ptx::warp_id();
    let start = warp * nnz_per_warp;
    if start >= nnz {
        return;
    }
    let end = if nnz - start < nnz_per_warp { nnz } else { start + nnz_per_warp };
    let lane = ptx::lane_id();
    // Shifts, not divisions: a run-time divisor would pull in core's divide-by-zero panic.
    let group = 1u32 << group_shift;
    let (sub, gl, groups) = (lane >> group_shift, lane & (group - 1), 32 >> group_shift);
    let k4 = ld / 4;
    let mut base = start;
    // Warp-uniform trip count: every lane reaches the shuffles.
    while base < end {
        let e = base + sub;
        let active = e < end;
        let mut dot = 0.0f32;
        if active {
            let (row, col) = unsafe { (ptx::ld_nc_u32(row_of.add(e as usize)), ptx::ld_nc_u32(col_idx.add(e as usize))) };
            let (pa, pb) = unsafe { (a.add(row as usize * ld as usize), b.add(col as usize * ld as usize)) };
            let mut c4 = gl;
            while c4 < k4 {
                let (x, y) = unsafe { (ptx::ld_nc_v4_f32(pa.add(4 * c4 as usize)), ptx::ld_nc_v4_f32(pb.add(4 * c4 as usize))) };
                dot += x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3];
                c4 += group;
            }
        }
        let mut off = group / 2;
        while off > 0 {
            dot += ptx::shfl_xor_f32(dot, off);
            off /= 2;
        }
        if active && gl == 0 {
            let slot = if slot_of.is_null() { e } else { unsafe { ptx::ld_nc_u32(slot_of.add(e as usize)) } };
            unsafe { *out.add(slot as usize) = ptx::ld_nc_f32(values.add(e as usize)) * dot };
        }
        base += groups;
    }
}
