//! A batch of node pairs read by index (u[p], v[p]: a link step's positives then negatives,
//! uploaded per step as plain arrays, no sparse pattern): the Hadamard product of the two ends'
//! rows of z (the MLP decoder's input) or its row sum (the dot decoder's score), and the
//! gradient of z scattered back through a by-node index (entries 2p | end, grouped by node,
//! built on the host by a counting sort) with no atomics: every node sums its own entries in
//! their order, so the result does not depend on the launch.

use super::{global_warp, grid_stride};
use crate::abi::nn::{PairHadamardArgs, PairHadamardBackwardArgs};
use crate::index::split_offset;
use crate::ptx;

#[inline(always)]
fn mul4(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
    [a[0] * b[0], a[1] * b[1], a[2] * b[2], a[3] * b[3]]
}

/// out[p][c] = z[u_p][c] z[v_p][c] over out's padded rows (z's padding is 0, so out's is
/// written 0; rows from `pairs` on are 0). Grid-stride, a thread per float4: the pairs' rows
/// of z are read from L2 (z is the small operand), out streamed once.
#[inline(always)]
pub unsafe fn pair_hadamard(a: PairHadamardArgs) {
    let PairHadamardArgs { rows, pairs, ld, out_ld: _, u, v, z, out } = a;
    let ld4 = ld / 4;
    if ld4 == 0 {
        return; // no columns; also lets `split_offset` compile without a panic path
    }
    for i in grid_stride(rows as u64 * ld4 as u64) {
        let (p, c4) = split_offset(i, ld4);
        let y = if p < pairs {
            let (a, b) = unsafe { (ptx::ld_nc_u32(u.add(p as usize)), ptx::ld_nc_u32(v.add(p as usize))) };
            let at = |r: u32| unsafe { ptx::ld_nc_v4_f32(z.add(r as usize * ld as usize + 4 * c4 as usize)) };
            mul4(at(a), at(b))
        } else {
            [0.0; 4]
        };
        unsafe { ptx::st_v4_f32(out.add(4 * i as usize), y) };
    }
}

/// out[p][0] = z[u_p] . z[v_p], out's padding columns (stride 8) and rows from `pairs` on 0.
/// A warp a pair, lanes over float4 columns, one warp sum.
#[inline(always)]
pub unsafe fn pair_hadamard_sum(a: PairHadamardArgs) {
    let PairHadamardArgs { rows, pairs, ld, out_ld, u, v, z, out } = a;
    let (ld4, lane) = (ld / 4, ptx::lane_id());
    let (mut p, warps) = global_warp();
    while p < rows {
        let mut acc = 0f32;
        if p < pairs {
            let (a, b) = unsafe { (ptx::ld_nc_u32(u.add(p as usize)), ptx::ld_nc_u32(v.add(p as usize))) };
            let (za, zb) = unsafe { (z.add(a as usize * ld as usize), z.add(b as usize * ld as usize)) };
            let mut c4 = lane;
            while c4 < ld4 {
                let m = unsafe { mul4(ptx::ld_nc_v4_f32(za.add(4 * c4 as usize)), ptx::ld_nc_v4_f32(zb.add(4 * c4 as usize))) };
                acc += (m[0] + m[1]) + (m[2] + m[3]);
                c4 += 32;
            }
        }
        let s = ptx::warp_sum(acc);
        if lane < out_ld {
            unsafe { ptx::st_f32(out.add(p as usize * out_ld as usize + lane as usize), if lane == 0 { s } else { 0.0 }) };
        }
        p += warps;
    }
}

/// dz[x] (= or +=) sum over x's entries, in order, of dout[p] ⊙ z[other end of p]. A warp per
/// (node, 32 float4 columns): the warp loads 32 entries' (pair, other end) at once, one a lane,
/// then walks them by shuffles, four at a time with their loads in flight together (the rows
/// of dout come from memory; a load each in turn would leave the warp waiting on every one).
#[inline(always)]
pub unsafe fn pair_hadamard_backward(a: PairHadamardBackwardArgs) {
    let PairHadamardBackwardArgs { n, ld, dout_ld, broadcast, u, v, row_ptr, ends, z, dout, accumulate, dz } = a;
    let (ld4, lane) = (ld / 4, ptx::lane_id());
    let chunks = ld4.div_ceil(32);
    if chunks == 0 {
        return; // no columns; also lets `split_offset` compile without a panic path
    }
    let (w0, warps) = global_warp();
    let total = n as u64 * chunks as u64;
    let mut w = w0 as u64;
    while w < total {
        let (x, k) = split_offset(w, chunks);
        let c4 = 32 * k + lane;
        let live = c4 < ld4;
        let (lo, hi) = unsafe { (ptx::ld_nc_u32(row_ptr.add(x as usize)), ptx::ld_nc_u32(row_ptr.add(x as usize + 1))) };
        // One entry's product, or 0 in a lane past the columns.
        let term = |p: u32, o: u32| -> ([f32; 4], [f32; 4]) {
            if !live {
                return ([0.0; 4], [0.0; 4]);
            }
            let zo = unsafe { ptx::ld_nc_v4_f32(z.add(o as usize * ld as usize + 4 * c4 as usize)) };
            let g = if broadcast != 0 {
                [unsafe { ptx::ld_nc_f32(dout.add(p as usize * dout_ld as usize)) }; 4]
            } else {
                unsafe { ptx::ld_nc_v4_f32(dout.add(p as usize * dout_ld as usize + 4 * c4 as usize)) }
            };
            (g, zo)
        };
        let mut acc = [0f32; 4];
        let add = |acc: &mut [f32; 4], (g, zo): ([f32; 4], [f32; 4])| {
            for i in 0..4 {
                acc[i] += g[i] * zo[i];
            }
        };
        let mut e0 = lo;
        while e0 < hi {
            let cnt = (hi - e0).min(32);
            let (mut p, mut o) = (0u32, 0u32);
            if lane < cnt {
                let ent = unsafe { ptx::ld_nc_u32(ends.add((e0 + lane) as usize)) };
                p = ent >> 1;
                o = unsafe { ptx::ld_nc_u32(if ent & 1 == 0 { v.add(p as usize) } else { u.add(p as usize) }) };
            }
            let mut j = 0;
            while j + 4 <= cnt {
                let t0 = term(ptx::shfl_idx_u32(p, j), ptx::shfl_idx_u32(o, j));
                let t1 = term(ptx::shfl_idx_u32(p, j + 1), ptx::shfl_idx_u32(o, j + 1));
                let t2 = term(ptx::shfl_idx_u32(p, j + 2), ptx::shfl_idx_u32(o, j + 2));
                let t3 = term(ptx::shfl_idx_u32(p, j + 3), ptx::shfl_idx_u32(o, j + 3));
                // In entry order, as the CPU reference sums.
                add(&mut acc, t0);
                add(&mut acc, t1);
                add(&mut acc, t2);
                add(&mut acc, t3);
                j += 4;
            }
            while j < cnt {
                add(&mut acc, term(ptx::shfl_idx_u32(p, j), ptx::shfl_idx_u32(o, j)));
                j += 1;
            }
            e0 += cnt;
        }
        if live {
            let at = unsafe { dz.add(x as usize * ld as usize + 4 * c4 as usize) };
            if accumulate != 0 {
                let old = unsafe { ptx::ld_v4_f32(at) };
                for i in 0..4 {
                    acc[i] += old[i];
                }
            }
            unsafe { ptx::st_v4_f32(at, acc) };
        }
        w += warps as u64;
    }
}
