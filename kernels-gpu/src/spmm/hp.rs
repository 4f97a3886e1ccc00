//! HP-SpMM (hybrid parallel), f32 on CUDA cores: every warp takes the same number of
//! consecutive nonzeros of the row-sorted COO (balanced however skewed the rows are), keeps a
//! float4 accumulator per lane while the row does not change, stores rows it owns entirely and
//! adds rows it shares with a neighbouring warp atomically (Y cleared before the launch).
//! grid.y splits K into chunks of 128 columns (one float4 per lane).

use crate::abi::spmm::HpSpmmArgs;
use crate::config::HP_SPMM_WARPS;
use crate::ptx;

/// Write the accumulator of `row`: a plain store when this warp holds all of the row's edges,
/// atomic adds when another warp holds some, none of zeros (Y is cleared first: exact). A
/// rebound batch's padding (thousands of zero entries in its last row) would otherwise have
/// every warp over it add to that one row: 0.10-0.30 ms an SpMM on tolokers' SAGE batches
/// against 0.04 unpadded.
#[inline(always)]
unsafe fn flush_row(y: *mut f32, k: u32, col4: u32, row: u32, acc: [f32; 4], owned: bool) {
    let p = unsafe { y.add(row as usize * k as usize + 4 * col4 as usize) };
    if owned {
        unsafe { ptx::st_v4_f32(p, acc) };
    } else if acc != [0.0; 4] {
        for (q, v) in acc.iter().enumerate() {
            unsafe { ptx::red_add_f32(p.add(q), *v) };
        }
    }
}

/// `ld` a multiple of 4, X/Y 16-byte aligned, Y zeroed before the launch.
#[inline(always)]
pub unsafe fn hp_spmm(args: HpSpmmArgs) {
    let HpSpmmArgs { nnz, ld: k, nnz_per_warp, row_ptr, row_of, col_idx, values, x, y } = args;
    let warp = ptx::ctaid_x() * HP_SPMM_WARPS + ptx::warp_id();
    let lane = ptx::lane_id();
    let start = warp * nnz_per_warp;
    if start >= nnz {
        return;
    }
    let end = if nnz - start < nnz_per_warp { nnz } else { start + nnz_per_warp };
    let col4 = ptx::ctaid_y() * 32 + lane;
    let active = col4 < k / 4;
    let owns = |row: u32| -> bool {
        unsafe { ptx::ld_nc_u32(row_ptr.add(row as usize)) >= start && ptx::ld_nc_u32(row_ptr.add(row as usize + 1)) <= end }
    };

    let mut cur_row = unsafe { ptx::ld_nc_u32(row_of.add(start as usize)) };
    let mut acc = [0.0f32; 4];
    let mut e = start;
    while e < end {
        let batch = if end - e < 32 { end - e } else { 32 };
        let (my_row, my_col, my_val) = if lane < batch {
            unsafe {
                let i = (e + lane) as usize;
                (ptx::ld_nc_u32(row_of.add(i)), ptx::ld_nc_u32(col_idx.add(i)), ptx::ld_nc_f32(values.add(i)))
            }
        } else {
            (0, 0, 0.0)
        };
        let mut j = 0;
        while j < batch {
            let row = ptx::shfl_idx_u32(my_row, j);
            let col = ptx::shfl_idx_u32(my_col, j);
            let val = ptx::shfl_idx_f32(my_val, j);
            if row != cur_row {
                if active {
                    unsafe { flush_row(y, k, col4, cur_row, acc, owns(cur_row)) };
                }
                acc = [0.0; 4];
                cur_row = row;
            }
            if active {
                let xv = unsafe { ptx::ld_nc_v4_f32(x.add(col as usize * k as usize + 4 * col4 as usize)) };
                for q in 0..4 {
                    acc[q] += val * xv[q];
                }
            }
            j += 1;
        }
        e += batch;
    }
    if active {
        unsafe { flush_row(y, k, col4, cur_row, acc, owns(cur_row)) };
    }
}
