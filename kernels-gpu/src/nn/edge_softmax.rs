//! AGNN attention over the edges of each row: alpha = softmax_row(beta * cos) and its backward,
//! a warp per row (grid-stride over rows), lanes over the row's edges; rows of at least
//! `long_min` edges are skipped there and taken by the `_long` kernels, a block per row. Values in CSR order
//! (`slot_of` null) or at `slot_of[e]` (e.g. ME-BCRS slots). `beta` is read on the device.
//! Empty rows and slots that are no edge are never touched.

use super::{BlockSums, block_reduce, global_warp};
use crate::ptx;

/// Where edge `e`'s value lives.
#[inline(always)]
unsafe fn slot(slot_of: *const u32, e: u32) -> usize {
    if slot_of.is_null() { e as usize } else { unsafe { ptx::ld_nc_u32(slot_of.add(e as usize)) as usize } }
}

/// alpha_e = exp(s_e - max_row s) / sum_row exp(s - max), s_e = beta * cos_e.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn edge_softmax_scaled_f32(
    n_rows: u32,
    long_min: u32,
    row_ptr: *const u32,
    slot_of: *const u32,
    beta: *const f32,
    cos: *const f32,
    alpha: *mut f32,
) {
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let lane = ptx::lane_id();
    let s = |e: u32| beta * unsafe { ptx::ld_nc_f32(cos.add(slot(slot_of, e))) };
    let (mut row, n_warps) = global_warp();
    while row < n_rows {
        let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
        if end - start >= long_min {
            row += n_warps;
            continue;
        }
        let mut max = f32::NEG_INFINITY;
        let mut e = start + lane;
        while e < end {
            max = max.max(s(e));
            e += 32;
        }
        let max = ptx::warp_max(max);
        let mut sum = 0f32;
        let mut e = start + lane;
        while e < end {
            sum += ptx::exp(s(e) - max);
            e += 32;
        }
        let inv = 1.0 / ptx::warp_sum(sum);
        let mut e = start + lane;
        while e < end {
            unsafe { ptx::st_f32(alpha.add(slot(slot_of, e)), ptx::exp(s(e) - max) * inv) };
            e += 32;
        }
        row += n_warps;
    }
}

/// Per row: dot = sum alpha dalpha; ds_e = alpha_e (dalpha_e - dot); dcos_e = beta ds_e;
/// dbeta += sum_e ds_e cos_e (per-lane partials over all of the warp's rows, then one atomic
/// per block into `dbeta`, which the launcher zeroes; 4 bytes of dynamic shared memory).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn edge_softmax_backward_f32(
    n_rows: u32,
    long_min: u32,
    row_ptr: *const u32,
    slot_of: *const u32,
    beta: *const f32,
    alpha: *const f32,
    dalpha: *const f32,
    cos: *const f32,
    dcos: *mut f32,
    dbeta: *mut f32,
) {
    let sums = BlockSums::<1>::new();
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let lane = ptx::lane_id();
    let mut dbeta_part = 0f32;
    let (mut row, n_warps) = global_warp();
    while row < n_rows {
        let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
        if end - start >= long_min {
            row += n_warps;
            continue;
        }
        let mut dot = 0f32;
        let mut e = start + lane;
        while e < end {
            let i = unsafe { slot(slot_of, e) };
            dot += unsafe { ptx::ld_nc_f32(alpha.add(i)) * ptx::ld_nc_f32(dalpha.add(i)) };
            e += 32;
        }
        let dot = ptx::warp_sum(dot);
        let mut e = start + lane;
        while e < end {
            let i = unsafe { slot(slot_of, e) };
            let ds = unsafe { ptx::ld_nc_f32(alpha.add(i)) * (ptx::ld_nc_f32(dalpha.add(i)) - dot) };
            unsafe { ptx::st_f32(dcos.add(i), beta * ds) };
            dbeta_part += ds * unsafe { ptx::ld_nc_f32(cos.add(i)) };
            e += 32;
        }
        row += n_warps;
    }
    unsafe { sums.flush([dbeta_part], dbeta) };
}

/// `edge_softmax_scaled_f32` for the rows in `long_rows`, one block per row (128 bytes of
/// dynamic shared memory for the block reductions).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn edge_softmax_scaled_long_f32(
    long_rows: *const u32,
    row_ptr: *const u32,
    slot_of: *const u32,
    beta: *const f32,
    cos: *const f32,
    alpha: *mut f32,
) {
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let s = |e: u32| beta * unsafe { ptx::ld_nc_f32(cos.add(slot(slot_of, e))) };
    let row = unsafe { ptx::ld_nc_u32(long_rows.add(ptx::ctaid_x() as usize)) };
    let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
    let (t, nt) = (ptx::tid_x(), ptx::ntid_x());
    let mut max = f32::NEG_INFINITY;
    let mut e = start + t;
    while e < end {
        max = max.max(s(e));
        e += nt;
    }
    let max = block_reduce(max, ptx::warp_max, f32::NEG_INFINITY);
    let mut sum = 0f32;
    let mut e = start + t;
    while e < end {
        sum += ptx::exp(s(e) - max);
        e += nt;
    }
    let inv = 1.0 / block_reduce(sum, ptx::warp_sum, 0.0);
    let mut e = start + t;
    while e < end {
        unsafe { ptx::st_f32(alpha.add(slot(slot_of, e)), ptx::exp(s(e) - max) * inv) };
        e += nt;
    }
}

/// `edge_softmax_backward_f32` for the rows in `long_rows`, one block per row; the block's
/// share of dbeta goes in with one atomic add.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn edge_softmax_backward_long_f32(
    long_rows: *const u32,
    row_ptr: *const u32,
    slot_of: *const u32,
    beta: *const f32,
    alpha: *const f32,
    dalpha: *const f32,
    cos: *const f32,
    dcos: *mut f32,
    dbeta: *mut f32,
) {
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let row = unsafe { ptx::ld_nc_u32(long_rows.add(ptx::ctaid_x() as usize)) };
    let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
    let (t, nt) = (ptx::tid_x(), ptx::ntid_x());
    let mut dot = 0f32;
    let mut e = start + t;
    while e < end {
        let i = unsafe { slot(slot_of, e) };
        dot += unsafe { ptx::ld_nc_f32(alpha.add(i)) * ptx::ld_nc_f32(dalpha.add(i)) };
        e += nt;
    }
    let dot = block_reduce(dot, ptx::warp_sum, 0.0);
    let mut part = 0f32;
    let mut e = start + t;
    while e < end {
        let i = unsafe { slot(slot_of, e) };
        let ds = unsafe { ptx::ld_nc_f32(alpha.add(i)) * (ptx::ld_nc_f32(dalpha.add(i)) - dot) };
        unsafe { ptx::st_f32(dcos.add(i), beta * ds) };
        part += ds * unsafe { ptx::ld_nc_f32(cos.add(i)) };
        e += nt;
    }
    let total = block_reduce(part, ptx::warp_sum, 0.0);
    if t == 0 {
        unsafe { ptx::red_add_f32(dbeta, total) };
    }
}
