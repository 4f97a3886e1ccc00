//! Link prediction's dot-product decoder on a symmetric pair pattern (a pair (u, v) is entry
//! `v << 1` of row u and entry `u << 1 | 1` of row v, rows sorted; `nn/negative_pattern.rs`
//! builds the negatives' on the device, the host uploads the positives' once): the scores,
//! the loss fused with its gradient, and the gradient of z. A warp a row for the row kernels,
//! lanes over the columns; both entries of a pair get the same score bit for bit (the same
//! products in the same lanes and the same shuffle tree), and every row sums its entries in
//! their sorted order: deterministic, whatever the launch.

use super::{BlockSums, global_warp, grid_stride};
use crate::abi::nn::{PairBceArgs, PairDotArgs, PairDotBackwardArgs};
use crate::ptx;

/// scores[e] = z_u . z_c for every entry e (column c = key >> 1) of every row u.
#[inline(always)]
pub unsafe fn pair_dot(a: PairDotArgs) {
    let PairDotArgs { n, d, ld, row_ptr, keys, z, scores } = a;
    let lane = ptx::lane_id();
    let (mut u, warps) = global_warp();
    while u < n {
        let (lo, hi) = unsafe { (ptx::ld_nc_u32(row_ptr.add(u as usize)), ptx::ld_nc_u32(row_ptr.add(u as usize + 1))) };
        let zu = unsafe { z.add(u as usize * ld as usize) };
        let mut e = lo;
        while e < hi {
            let c = unsafe { ptx::ld_nc_u32(keys.add(e as usize)) } >> 1;
            let zc = unsafe { z.add(c as usize * ld as usize) };
            let mut acc = 0f32;
            let mut k = lane;
            while k < d {
                acc += unsafe { ptx::ld_nc_f32(zu.add(k as usize)) * ptx::ld_nc_f32(zc.add(k as usize)) };
                k += 32;
            }
            let s = ptx::warp_sum(acc);
            if lane == 0 {
                unsafe { ptx::st_f32(scores.add(e as usize), s) };
            }
            e += 1;
        }
        u += warps;
    }
}

/// Binary cross entropy with logits of every entry against its target (+1, -1; 0: a repeat,
/// skipped), over the mean of the pairs of both lists (`count_a[0] + count_b[0]` pairs):
/// grad[e] = (sigmoid(s) - t) / pairs, and half of each entry's loss term into stats[0] (every
/// pair is two entries). A thread an entry, grid-stride to the pattern's `row_ptr[n]`.
#[inline(always)]
pub unsafe fn pair_bce(a: PairBceArgs) {
    let PairBceArgs { n, row_ptr, scores, targets, count_a, count_b, grad, stats } = a;
    let sums = BlockSums::<1>::new();
    let nnz = unsafe { ptx::ld_nc_u32(row_ptr.add(n as usize)) };
    let pairs = unsafe { ptx::ld_nc_u32(count_a) + ptx::ld_nc_u32(count_b) };
    let inv = 1.0 / (pairs.max(1) as f32);
    let mut loss = 0f32;
    for i in grid_stride(nnz as u64) {
        let i = i as usize;
        let (s, y) = unsafe { (ptx::ld_nc_f32(scores.add(i)), ptx::ld_nc_f32(targets.add(i))) };
        let g = if y == 0.0 {
            0.0
        } else {
            let t = if y > 0.0 { 1.0 } else { 0.0 };
            // Stable in both tails: exp of a non-positive number only.
            let e = ptx::exp(-s.abs());
            loss += 0.5 * (s.max(0.0) - s * t + ptx::ln(1.0 + e)) * inv;
            let sig = if s >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) };
            (sig - t) * inv
        };
        unsafe { ptx::st_f32(grad.add(i), g) };
    }
    unsafe { sums.flush([loss], stats) };
}

/// dz_u (= or +=) sum over row u's entries e, in order, of grad[e] z_c: a pair (u, v) adds
/// its gradient times z_v to dz_u through row u and times z_u to dz_v through row v. Lanes over
/// the padded columns (z's padding is 0, so dz's is written 0).
#[inline(always)]
pub unsafe fn pair_dot_backward(a: PairDotBackwardArgs) {
    let PairDotBackwardArgs { n, ld, row_ptr, keys, grad, z, accumulate, dz } = a;
    let lane = ptx::lane_id();
    let (mut u, warps) = global_warp();
    while u < n {
        let (lo, hi) = unsafe { (ptx::ld_nc_u32(row_ptr.add(u as usize)), ptx::ld_nc_u32(row_ptr.add(u as usize + 1))) };
        let out = unsafe { dz.add(u as usize * ld as usize) };
        let mut k0 = 0;
        while k0 < ld {
            let k = k0 + lane;
            let mut acc = 0f32;
            let mut e = lo;
            while e < hi {
                let g = unsafe { ptx::ld_nc_f32(grad.add(e as usize)) };
                let c = unsafe { ptx::ld_nc_u32(keys.add(e as usize)) } >> 1;
                if k < ld {
                    acc += g * unsafe { ptx::ld_nc_f32(z.add(c as usize * ld as usize + k as usize)) };
                }
                e += 1;
            }
            if k < ld {
                let p = unsafe { out.add(k as usize) };
                let v = if accumulate != 0 { acc + unsafe { ptx::ld_f32(p) } } else { acc };
                unsafe { ptx::st_f32(p, v) };
            }
            k0 += 32;
        }
        u += warps;
    }
}
