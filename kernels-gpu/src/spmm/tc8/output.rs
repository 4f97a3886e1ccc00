//! Output tile writers: lane (g, t) holds rows 2t and 2t+1 of the window, 2*NT consecutive dims
//! each (c0/c1 are rows 2t/2t+1 of dim 2q of tile q, c2/c3 of dim 2q+1).

use crate::ptx;

pub trait Tc8Output {
    /// Store (or, for items that cover part of a window, add) this lane's outputs. `y` is the
    /// output matrix in this writer's element type, `ld` its row stride in elements.
    unsafe fn write<const NT: usize>(y: *mut f32, ld: u32, n_rows: u32, row0: u32, dim: u32, acc: &[[f32; 4]; NT], atomic: bool);
}

/// f32 Y: two tiles make one float4 per row.
pub struct F32Out;
/// f16 Y (for a next layer that reads f16): f32 accumulators rounded once, pairs of dims per
/// 32-bit word; partial windows add with `red.add.f16x2`.
pub struct F16Out;

impl Tc8Output for F32Out {
    #[inline(always)]
    unsafe fn write<const NT: usize>(y: *mut f32, ld: u32, n_rows: u32, row0: u32, dim: u32, acc: &[[f32; 4]; NT], atomic: bool) {
        let t = ptx::lane_id() % 4;
        let mut half = 0;
        while half < 2 {
            let row = row0 + 2 * t + half;
            if row < n_rows {
                let p = unsafe { y.add(row as usize * ld as usize + dim as usize) };
                let mut q = 0;
                while q < NT && (dim + (2 * q) as u32) < ld {
                    let v = [acc[q][half as usize], acc[q][2 + half as usize], acc[q + 1][half as usize], acc[q + 1][2 + half as usize]];
                    unsafe {
                        if atomic {
                            ptx::red_add_v4_f32(p.add(2 * q), v);
                        } else {
                            ptx::st_v4_f32(p.add(2 * q), v);
                        }
                    }
                    q += 2;
                }
            }
            half += 1;
        }
    }
}

impl Tc8Output for F16Out {
    #[inline(always)]
    unsafe fn write<const NT: usize>(y: *mut f32, ld: u32, n_rows: u32, row0: u32, dim: u32, acc: &[[f32; 4]; NT], atomic: bool) {
        let t = ptx::lane_id() % 4;
        let mut half = 0;
        while half < 2 {
            let row = row0 + 2 * t + half;
            if row < n_rows {
                // Word offset of (row, dim) in f16 elements; ld and dim are even.
                let p = unsafe { (y as *mut u32).add((row as usize * ld as usize + dim as usize) / 2) };
                let mut w = [0u32; 4];
                let mut q = 0;
                while q < NT {
                    w[q] = ptx::pack_f16x2(acc[q][half as usize], acc[q][2 + half as usize]);
                    q += 1;
                }
                unsafe {
                    if atomic {
                        let mut q = 0;
                        while q < NT {
                            ptx::red_add_f16x2(p.add(q), w[q]);
                            q += 1;
                        }
                    } else if NT == 4 {
                        ptx::st_v4_u32(p, w);
                    } else {
                        ptx::st_v2_u32(p, [w[0], w[1]]);
                    }
                }
            }
            half += 1;
        }
    }
}
