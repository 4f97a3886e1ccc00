//! AGNN attention over the edges of each row: alpha = softmax_row(beta * cos) and its backward,
//! a warp per row (grid-stride over rows), lanes over the row's edges; rows of at least
//! `long_min` edges are skipped there and taken by the `_long` kernels, a block per row. Values in CSR order
//! (`slot_of` null) or at `slot_of[e]` (e.g. ME-BCRS slots). `beta` is read on the device.
//! Empty rows and slots that are no edge are never touched.

use super::{BlockSums, block_reduce, global_warp};
use crate::abi::nn::{
    EdgeSoftmaxBackwardArgs, EdgeSoftmaxBackwardLongArgs, EdgeSoftmaxScaledArgs, EdgeSoftmaxScaledLongArgs, SoftmaxBackwardEdges,
    SoftmaxScaledEdges,
};
use crate::config::NN_EDGE_GROUP;
use crate::ptx;

/// Where edge `e`'s value lives.
#[inline(always)]
unsafe fn slot(slot_of: *const u32, e: u32) -> usize {
    if slot_of.is_null() { e as usize } else { unsafe { ptx::ld_nc_u32(slot_of.add(e as usize)) as usize } }
}

/// Reduce over the `NN_EDGE_GROUP` lanes of a row group (butterfly shuffles inside the group).
#[inline(always)]
fn group_reduce(mut v: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut m = NN_EDGE_GROUP / 2;
    while m > 0 {
        v = op(v, ptx::shfl_xor_f32(v, m));
        m /= 2;
    }
    v
}

/// The rows of this thread's group, one round at a time: (row, first edge, end edge), with an
/// empty range for rows past the end or long rows (so every lane of the warp runs the same
/// rounds and reaches the same shuffles).
#[inline(always)]
fn for_each_group_row(n_rows: u32, long_min: u32, row_ptr: *const u32, mut f: impl FnMut(u32, u32)) {
    let per_warp = 32 / NN_EDGE_GROUP;
    let (warp, n_warps) = global_warp();
    let group = ptx::lane_id() / NN_EDGE_GROUP;
    let mut base = warp * per_warp;
    while base < n_rows {
        let row = base + group;
        let (mut start, mut end) = (0, 0);
        if row < n_rows {
            (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
            if end - start >= long_min {
                end = start;
            }
        }
        f(start, end);
        base += n_warps * per_warp;
    }
}

/// alpha_e = exp(s_e - max_row s) / sum_row exp(s - max), s_e = beta * cos_e, for rows shorter
/// than `long_min` (`NN_EDGE_GROUP` lanes per row).
#[inline(always)]
pub unsafe fn scaled(args: EdgeSoftmaxScaledArgs) {
    let EdgeSoftmaxScaledArgs { n_rows, long_min, edges: SoftmaxScaledEdges { row_ptr, slot_of, beta, cos, alpha } } = args;
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let sub = ptx::lane_id() % NN_EDGE_GROUP;
    let s = |e: u32| beta * unsafe { ptx::ld_nc_f32(cos.add(slot(slot_of, e))) };
    for_each_group_row(n_rows, long_min, row_ptr, |start, end| {
        let mut max = f32::NEG_INFINITY;
        let mut e = start + sub;
        while e < end {
            max = max.max(s(e));
            e += NN_EDGE_GROUP;
        }
        let max = group_reduce(max, f32::max);
        let mut sum = 0f32;
        let mut e = start + sub;
        while e < end {
            sum += ptx::exp(s(e) - max);
            e += NN_EDGE_GROUP;
        }
        let inv = 1.0 / group_reduce(sum, |a, b| a + b);
        let mut e = start + sub;
        while e < end {
            unsafe { ptx::st_f32(alpha.add(slot(slot_of, e)), ptx::exp(s(e) - max) * inv) };
            e += NN_EDGE_GROUP;
        }
    });
}

/// Per row shorter than `long_min`: dot = sum alpha dalpha; ds_e = alpha_e (dalpha_e - dot);
/// dcos_e = beta ds_e; dbeta += sum_e ds_e cos_e (per-lane partials over all of the warp's
/// rows, then one atomic per block into `dbeta`, which the launcher zeroes; 4 bytes of dynamic
/// shared memory).
#[inline(always)]
pub unsafe fn backward(args: EdgeSoftmaxBackwardArgs) {
    let EdgeSoftmaxBackwardArgs {
        n_rows,
        long_min,
        edges: SoftmaxBackwardEdges { row_ptr, slot_of, beta, alpha, dalpha, cos, dcos, dbeta },
    } = args;
    let sums = BlockSums::<1>::new();
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let sub = ptx::lane_id() % NN_EDGE_GROUP;
    let mut dbeta_part = 0f32;
    for_each_group_row(n_rows, long_min, row_ptr, |start, end| {
        let mut dot = 0f32;
        let mut e = start + sub;
        while e < end {
            let i = unsafe { slot(slot_of, e) };
            dot += unsafe { ptx::ld_nc_f32(alpha.add(i)) * ptx::ld_nc_f32(dalpha.add(i)) };
            e += NN_EDGE_GROUP;
        }
        let dot = group_reduce(dot, |a, b| a + b);
        let mut e = start + sub;
        while e < end {
            let i = unsafe { slot(slot_of, e) };
            let ds = unsafe { ptx::ld_nc_f32(alpha.add(i)) * (ptx::ld_nc_f32(dalpha.add(i)) - dot) };
            unsafe { ptx::st_f32(dcos.add(i), beta * ds) };
            dbeta_part += ds * unsafe { ptx::ld_nc_f32(cos.add(i)) };
            e += NN_EDGE_GROUP;
        }
    });
    unsafe { sums.flush([dbeta_part], dbeta) };
}

/// `scaled` for the rows in `long_rows`, one block per row (128 bytes of dynamic shared memory
/// for the block reductions).
#[inline(always)]
pub unsafe fn scaled_long(args: EdgeSoftmaxScaledLongArgs) {
    let EdgeSoftmaxScaledLongArgs { long_rows, edges: SoftmaxScaledEdges { row_ptr, slot_of, beta, cos, alpha } } = args;
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

/// `backward` for the rows in `long_rows`, one block per row; the block's share of dbeta goes
/// in with one atomic add.
#[inline(always)]
pub unsafe fn backward_long(args: EdgeSoftmaxBackwardLongArgs) {
    let EdgeSoftmaxBackwardLongArgs { long_rows, edges: SoftmaxBackwardEdges { row_ptr, slot_of, beta, alpha, dalpha, cos, dcos, dbeta } } =
        args;
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
