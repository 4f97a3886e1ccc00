//! TC16 SDDMM (TC-GNN Alg. 3): SGT with 16-column blocks. A warp computes one block's dense
//! 16 x 16 tile, A[window rows] (16 x K) * B[block columns]^T (K x 16), as two 16 x 8 halves,
//! parks it in shared memory and samples it at the block's edges, writing CSR order through
//! `blk_edge_csr`.

use crate::abi::sddmm::Tc16SddmmArgs;
use crate::config::TC16_SDDMM_WARPS as WARPS;
use crate::ptx;
use crate::sddmm::precision::{SddmmPrecision, run};
use crate::smem::SmemCarver;

const W: u32 = 16; // rows per window = columns per block

/// The loop shared by both precisions (`abi::sddmm` lists the instances).
#[inline(always)]
pub unsafe fn tc16_sddmm<P: SddmmPrecision>(args: Tc16SddmmArgs) {
    let Tc16SddmmArgs {
        n_blocks,
        n_rows,
        ld,
        blk_win,
        win_ptr,
        blk_ptr,
        win_cols,
        blk_edge_ptr,
        blk_edge_pos,
        blk_edge_val,
        blk_edge_csr,
        a,
        b,
        out,
    } = args;
    let warp = ptx::warp_id();
    let blk = ptx::ctaid_x() * WARPS + warp;
    let tile = SmemCarver::new().take(4 * W * W * WARPS) + 4 * W * W * warp;
    if blk >= n_blocks {
        return;
    }
    let lane = ptx::lane_id();
    let (g, t) = (lane / 4, lane % 4);
    let w = unsafe { ptx::ld_nc_u32(blk_win.add(blk as usize)) };
    let (c_begin, c_end, b0) = unsafe {
        (ptx::ld_nc_u32(win_ptr.add(w as usize)), ptx::ld_nc_u32(win_ptr.add(w as usize + 1)), ptx::ld_nc_u32(blk_ptr.add(w as usize)))
    };
    let col0 = c_begin + (blk - b0) * W;
    let (ok0, ok1) = (col0 + g < c_end, col0 + g + 8 < c_end);
    let c0 = if ok0 { unsafe { ptx::ld_nc_u32(win_cols.add((col0 + g) as usize)) } } else { 0 };
    let c1 = if ok1 { unsafe { ptx::ld_nc_u32(win_cols.add((col0 + g + 8) as usize)) } } else { 0 };
    let (r0, r1) = (W * w + g, W * w + g + 8);
    let (rok0, rok1) = (r0 < n_rows, r1 < n_rows);

    let mut acc = [[0.0f32; 4]; 2];
    let mut d0 = 0;
    while d0 < ld {
        let d = d0 + P::RUN * t;
        let ok = d < ld;
        let (x0, x1) = unsafe { (run::<P>(a, r0, ld, d, ok && rok0), run::<P>(a, r1, ld, d, ok && rok1)) };
        let (y0, y1) = unsafe { (run::<P>(b, c0, ld, d, ok && ok0), run::<P>(b, c1, ld, d, ok && ok1)) };
        acc[0] = P::mma(acc[0], x0, x1, y0);
        acc[1] = P::mma(acc[1], x0, x1, y1);
        d0 += P::STEP;
    }
    // D half h: c0 (row g, col 2t + 8h), c1 (row g, col 2t+1 + 8h), c2/c3 rows g + 8.
    let mut h = 0;
    while h < 2 {
        let mut q = 0;
        while q < 4 {
            let (row, col) = (g + 8 * (q / 2), 2 * t + q % 2 + 8 * h);
            unsafe { ptx::st_shared_f32(tile + 4 * (row * W + col), acc[h as usize][q as usize]) };
            q += 1;
        }
        h += 1;
    }
    ptx::sync_warp();
    let (e0, e1) = unsafe { (ptx::ld_nc_u32(blk_edge_ptr.add(blk as usize)), ptx::ld_nc_u32(blk_edge_ptr.add(blk as usize + 1))) };
    let mut e = e0 + lane;
    while e < e1 {
        unsafe {
            let pos = *blk_edge_pos.add(e as usize) as u32;
            let v = ptx::ld_nc_f32(blk_edge_val.add(e as usize)) * ptx::ld_shared_f32(tile + 4 * pos);
            *out.add(ptx::ld_nc_u32(blk_edge_csr.add(e as usize)) as usize) = v;
        }
        e += 32;
    }
}
