//! CSR SpMM, f32 on CUDA cores: a warp per row, lanes over K in 4-float vectors.
//! The simple baseline every tensor-core kernel is compared with.

use crate::abi::spmm::CsrSpmmArgs;
use crate::config::CSR_SPMM_WARPS;
use crate::ptx;

/// `ld` must be a multiple of 4 (the host pads K to a multiple of 8) and X, Y 16-byte aligned.
#[inline(always)]
pub unsafe fn csr_spmm(args: CsrSpmmArgs) {
    let CsrSpmmArgs { n_rows, ld: k, row_ptr, col_idx, values, x, y } = args;
    let row = ptx::ctaid_x() * CSR_SPMM_WARPS + ptx::warp_id();
    if row >= n_rows {
        return;
    }
    let lane = ptx::lane_id();
    let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
    let k4 = k / 4;
    // Column groups of 128 floats: one float4 per lane per group.
    let mut c4 = lane;
    while c4 < k4.div_ceil(32) * 32 {
        let active = c4 < k4;
        let mut acc = [0.0f32; 4];
        let mut e = start;
        while e < end {
            // The warp loads up to 32 (col, val) pairs at once and broadcasts them.
            let batch = (end - e).min(32);
            let (my_col, my_val) = if lane < batch {
                unsafe { (ptx::ld_nc_u32(col_idx.add((e + lane) as usize)), ptx::ld_nc_f32(values.add((e + lane) as usize))) }
            } else {
                (0, 0.0)
            };
            // Four independent gathers in flight per step: the loop is latency bound otherwise.
            let mut j = 0;
            while j + 4 <= batch {
                let mut xs = [[0.0f32; 4]; 4];
                let mut vs = [0.0f32; 4];
                for u in 0..4 {
                    let col = ptx::shfl_idx_u32(my_col, j + u as u32);
                    vs[u] = ptx::shfl_idx_f32(my_val, j + u as u32);
                    if active {
                        xs[u] = unsafe { ptx::ld_nc_v4_f32(x.add((col as usize) * k as usize + 4 * c4 as usize)) };
                    }
                }
                for u in 0..4 {
                    for q in 0..4 {
                        acc[q] += vs[u] * xs[u][q];
                    }
                }
                j += 4;
            }
            while j < batch {
                let col = ptx::shfl_idx_u32(my_col, j);
                let val = ptx::shfl_idx_f32(my_val, j);
                if active {
                    let xv = unsafe { ptx::ld_nc_v4_f32(x.add((col as usize) * k as usize + 4 * c4 as usize)) };
                    for q in 0..4 {
                        acc[q] += val * xv[q];
                    }
                }
                j += 1;
            }
            e += batch;
        }
        if active {
            unsafe { ptx::st_v4_f32(y.add(row as usize * k as usize + 4 * c4 as usize), acc) };
        }
        c4 += 32;
    }
}
