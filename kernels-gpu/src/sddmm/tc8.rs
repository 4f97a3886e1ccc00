//! TC8 SDDMM (FlashSparse §3.4, swap-and-transpose): output blocks of 8 window rows x 16
//! nonzero vectors of ME-BCRS (k = 8, so two consecutive blocks). With the operands swapped,
//! D (16 vectors x 8 rows) = B[vector columns] (16 x K, MMA operand A) * A[window rows]^T
//! (K x 8, operand B), accumulated over K; then each D element is scaled by S's value and
//! written straight to its consumer's order: the ME-BCRS slot (what TC8 SpMM reads) or, via
//! `slot_to_csr`, the CSR position.
//!
//! The K index inside one MMA is free to permute (a dot product does not care), so lane (g, t)
//! loads one run of consecutive dims of each row it needs with a single vector load, and the
//! fragment slots take the run's words in order.

use crate::abi::sddmm::Tc8SddmmArgs;
use crate::config::TC8_BLOCK_VECTORS as KV;
use crate::ptx;
use crate::sddmm::precision::{SddmmPrecision, run};

/// The ME-BCRS slot of (window row i, window vector jw) for a window of `nvec` vectors at `vw0`.
#[inline(always)]
fn slot(vw0: u32, nvec: u32, i: u32, jw: u32) -> u32 {
    let blk = jw / KV;
    let kb = if nvec - blk * KV < KV { nvec - blk * KV } else { KV };
    8 * (vw0 + blk * KV) + i * kb + jw % KV
}

/// The loop shared by both precisions (`abi::sddmm` lists the instances).
#[inline(always)]
pub unsafe fn tc8_sddmm<P: SddmmPrecision>(args: Tc8SddmmArgs) {
    let Tc8SddmmArgs { n_items, n_rows, ld, win_ptr, vec_col, values, slot_to_csr, item_win, item_v0, a, b, out } = args;
    let item = ptx::ctaid_x() * (ptx::ntid_x() / 32) + ptx::warp_id();
    if item >= n_items {
        return;
    }
    let lane = ptx::lane_id();
    let (g, t) = (lane / 4, lane % 4);
    let (w, v0) = unsafe { (ptx::ld_nc_u32(item_win.add(item as usize)), ptx::ld_nc_u32(item_v0.add(item as usize))) };
    let (vw0, vw1) = unsafe { (ptx::ld_nc_u32(win_ptr.add(w as usize)), ptx::ld_nc_u32(win_ptr.add(w as usize + 1))) };
    let (ok0, ok1) = (v0 + g < vw1, v0 + g + 8 < vw1);
    let c0 = if ok0 { unsafe { ptx::ld_nc_u32(vec_col.add((v0 + g) as usize)) } } else { 0 };
    let c1 = if ok1 { unsafe { ptx::ld_nc_u32(vec_col.add((v0 + g + 8) as usize)) } } else { 0 };
    let row = 8 * w + g;
    let row_ok = row < n_rows;

    let mut acc = [0.0f32; 4];
    let mut d0 = 0;
    while d0 < ld {
        let d = d0 + P::RUN * t;
        let dim_ok = d < ld;
        let x0 = unsafe { run::<P>(b, c0, ld, d, dim_ok && ok0) };
        let x1 = unsafe { run::<P>(b, c1, ld, d, dim_ok && ok1) };
        let r = unsafe { run::<P>(a, row, ld, d, dim_ok && row_ok) };
        acc = P::mma(acc, x0, x1, r);
        d0 += P::STEP;
    }

    // c0: (vector g, row 2t), c1: (vector g, row 2t+1), c2/c3: vector g + 8.
    let nvec = vw1 - vw0;
    let mut q = 0;
    while q < 4 {
        let (jv, i) = (g + 8 * (q / 2), 2 * t + q % 2);
        if v0 + jv < vw1 {
            let s = slot(vw0, nvec, i, v0 + jv - vw0);
            let v = unsafe { ptx::ld_nc_f32(values.add(s as usize)) } * acc[q as usize];
            if slot_to_csr.is_null() {
                unsafe { *out.add(s as usize) = v };
            } else {
                let e = unsafe { ptx::ld_nc_u32(slot_to_csr.add(s as usize)) };
                if e != u32::MAX {
                    unsafe { *out.add(e as usize) = v };
                }
            }
        }
        q += 1;
    }
}
