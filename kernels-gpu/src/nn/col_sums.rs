//! Column sums out[c] = sum_r x[r][c] (`out` zeroed by the launcher, 1 x cols).
//!
//! Rows of <= 4 * blockDim columns (`ld4 <= blockDim.x`): the block's threads tile
//! `blockDim / ld4` rows x `ld4` float4s; each thread sums its float4 column over the rows
//! `ctaid * rpi + rsub + k * gridDim * rpi` (two loads in flight), the block combines its
//! threads in shared memory (`4 * ld` bytes) and adds one atomic per column to `out`.
//! Wider rows: each thread owns float4 columns `tid + k * blockDim` and sums rows
//! `ctaid + k * gridDim` in registers, one atomic per column per block.
//! Padding columns (zero) are summed but never written.

use crate::abi::nn::ColSumsArgs;
use crate::ptx;

#[inline(always)]
fn add4(a: &mut [f32; 4], b: [f32; 4]) {
    for k in 0..4 {
        a[k] += b[k];
    }
}

#[inline(always)]
pub unsafe fn col_sums(args: ColSumsArgs) {
    let ColSumsArgs { rows, cols, ld4, x, out } = args;
    let (t, nt) = (ptx::tid_x(), ptx::ntid_x());
    let (b, nb) = (ptx::ctaid_x(), ptx::nctaid_x());
    if ld4 == 0 {
        return; // no columns; also lets `/ ld4` compile without a panic path
    }
    let ld = 4 * ld4 as usize;
    let at = |r: u32, c4: u32| unsafe { ptx::ld_nc_v4_f32(x.add(r as usize * ld + 4 * c4 as usize)) };
    if ld4 <= nt {
        let base = ptx::dyn_smem_base();
        let mut c = t;
        while c < 4 * ld4 {
            unsafe { ptx::st_shared_f32(base + 4 * c, 0.0) };
            c += nt;
        }
        ptx::sync_threads();
        let rpi = nt / ld4; // rows per block iteration
        if t < rpi * ld4 {
            let (c4, rsub) = (t % ld4, t / ld4);
            let step = nb * rpi;
            let mut r = b * rpi + rsub;
            let (mut acc, mut acc2) = ([0f32; 4], [0f32; 4]);
            while r + step < rows {
                let (v, w) = (at(r, c4), at(r + step, c4));
                add4(&mut acc, v);
                add4(&mut acc2, w);
                r += 2 * step;
            }
            if r < rows {
                add4(&mut acc, at(r, c4));
            }
            add4(&mut acc, acc2);
            unsafe { add_to_block(acc, c4, ld4, base) };
        }
        ptx::sync_threads();
        unsafe { flush_block(base, cols, out) };
    } else {
        let mut c4 = t;
        while c4 < ld4 {
            let mut acc = [0f32; 4];
            let mut r = b;
            while r < rows {
                add4(&mut acc, at(r, c4));
                r += nb;
            }
            for k in 0..4 {
                let c = 4 * c4 + k as u32;
                if c < cols {
                    unsafe { ptx::red_add_f32(out.add(c as usize), acc[k]) };
                }
            }
            c4 += nt;
        }
    }
}

/// Adds a thread's sums of float4 column `c4` (of `ld4` a row) into the block's sums in shared
/// memory at `base` (4 ld4 floats, zeroed before). Narrow rows put many lanes of a warp on one
/// column: with a power-of-two ld4 below 32 (every lane of the warp active, each on column
/// lane % ld4) the warp adds its lanes of a column first, so one lane per column adds to
/// shared memory (a 3-wide bias: 32 adds per word -> 1).
#[inline(always)]
pub unsafe fn add_to_block(mut acc: [f32; 4], c4: u32, ld4: u32, base: u32) {
    let pow2 = ld4 & (ld4 - 1) == 0 && ld4 < 32;
    if pow2 {
        let mut off = ld4;
        while off < 32 {
            for a in acc.iter_mut() {
                *a += ptx::shfl_xor_f32(*a, off);
            }
            off <<= 1;
        }
    }
    if !pow2 || ptx::lane_id() < ld4 {
        for k in 0..4 {
            unsafe { ptx::red_shared_add_f32(base + 4 * (4 * c4 + k as u32), acc[k]) };
        }
    }
}

/// After a barrier: the block's sums at `base` added to `out`, one atomic per column below
/// `cols`.
#[inline(always)]
pub unsafe fn flush_block(base: u32, cols: u32, out: *mut f32) {
    let mut c = ptx::tid_x();
    while c < cols {
        unsafe { ptx::red_add_f32(out.add(c as usize), ptx::ld_shared_f32(base + 4 * c)) };
        c += ptx::ntid_x();
    }
}
