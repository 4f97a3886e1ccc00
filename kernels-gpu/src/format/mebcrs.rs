//! Step 3 of CSR -> ME-BCRS: with window pointers known, place every window's vector columns
//! and every edge's value at its slot (`translate::mebcrs_slot`). Repeated (row, column)
//! entries share a slot: the first in CSR order adds the chain of the others (from
//! `window_cols`' `dup`) in CSR order, as the CPU translation does, and stores the sum once.
//! `values_out` must be zero beforehand (slots of absent entries stay 0).

use crate::abi::format::MebcrsScatterArgs;
use crate::format::block::Window;
use crate::ptx;
use crate::smem::SmemCarver;
use crate::translate::{DUP_NONE, DUP_NOT_HEAD, mebcrs_slot};

/// One block per window of 8 rows; shared memory for the 9 row pointers (`window_smem_bytes(0)`
/// is enough).
#[inline(always)]
pub unsafe fn mebcrs_scatter(args: MebcrsScatterArgs) {
    let MebcrsScatterArgs { n_rows, k, row_ptr, values, loc, ucol, dup, win_ptr, vec_col, values_out, csr_to_slot } = args;
    let mut smem = SmemCarver::new();
    let w = unsafe { Window::load(ptx::ctaid_x(), 8, n_rows, row_ptr, &mut smem) };
    let vec_base = unsafe { ptx::ld_nc_u32(win_ptr.add(w.w as usize)) };
    let n_vec = unsafe { ptx::ld_nc_u32(win_ptr.add(w.w as usize + 1)) } - vec_base;
    let mut u = ptx::tid_x();
    while u < n_vec {
        unsafe { *vec_col.add((vec_base + u) as usize) = ptx::ld_nc_u32(ucol.add((w.e0 + u) as usize)) };
        u += ptx::ntid_x();
    }
    let mut off = ptx::tid_x();
    while off < w.len {
        let e = (w.e0 + off) as usize;
        let row = unsafe { w.row_of(off) };
        let slot = mebcrs_slot(vec_base, n_vec, k, unsafe { ptx::ld_nc_u32(loc.add(e)) }, row);
        unsafe { *csr_to_slot.add(e) = slot };
        let d = unsafe { ptx::ld_nc_u32(dup.add(e)) };
        if d & DUP_NOT_HEAD == 0 {
            let mut acc = 0.0f32 + unsafe { ptx::ld_nc_f32(values.add(e)) };
            let mut next = d & DUP_NONE;
            while next != DUP_NONE {
                acc += unsafe { ptx::ld_nc_f32(values.add(next as usize)) };
                next = unsafe { ptx::ld_nc_u32(dup.add(next as usize)) } & DUP_NONE;
            }
            unsafe { *values_out.add(slot as usize) = acc };
        }
        off += ptx::ntid_x();
    }
}
