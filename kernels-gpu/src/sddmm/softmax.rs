//! Edge softmax: a warp per row, max-subtracted, over values in CSR order or (through
//! `slot_of`) in any other order such as ME-BCRS slots. Empty rows write nothing.

use crate::abi::sddmm::EdgeSoftmaxArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn edge_softmax(args: EdgeSoftmaxArgs) {
    let EdgeSoftmaxArgs { n_rows, row_ptr, slot_of, vals } = args;
    let row = ptx::ctaid_x() * (ptx::ntid_x() / 32) + ptx::warp_id();
    if row >= n_rows {
        return;
    }
    let lane = ptx::lane_id();
    let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
    let at = |e: u32| -> usize { if slot_of.is_null() { e as usize } else { unsafe { ptx::ld_nc_u32(slot_of.add(e as usize)) as usize } } };
    let mut max = f32::NEG_INFINITY;
    let mut e = start + lane;
    while e < end {
        max = max.max(unsafe { *vals.add(at(e)) });
        e += 32;
    }
    let max = ptx::warp_max(max);
    let mut sum = 0.0f32;
    let mut e = start + lane;
    while e < end {
        let p = unsafe { vals.add(at(e)) };
        let v = ptx::exp(unsafe { *p } - max);
        unsafe { *p = v };
        sum += v;
        e += 32;
    }
    let inv = ptx::rcp(ptx::warp_sum(sum));
    let mut e = start + lane;
    while e < end {
        let p = unsafe { vals.add(at(e)) };
        unsafe { *p *= inv };
        e += 32;
    }
}
