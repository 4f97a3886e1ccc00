//! One-tile MMA self-tests: each kernel multiplies a 16 x K tile by a K x 8 tile with one
//! `mma.sync` instruction, loading operands and storing D through the `layout` functions.
//! The host compares with a CPU product, which pins the fragment layouts every kernel uses.

use crate::abi::selftest::MmaSelftestArgs;
use crate::layout::{frag_a_f16, frag_a_tf32, frag_b_f16, frag_b_tf32, frag_c};
use crate::ptx;

/// Store the 16 x 8 accumulator tile row-major.
#[inline(always)]
unsafe fn store_c(d: *mut f32, acc: [f32; 4]) {
    let lane = ptx::lane_id();
    for (i, v) in acc.iter().enumerate() {
        let (r, c) = frag_c(lane, i as u32);
        unsafe { *d.add((r * 8 + c) as usize) = *v };
    }
}

/// A element (row-major 16 x K) for fragment index `i`, f16 layout.
#[inline(always)]
unsafe fn a_f16<const K: u32>(a: *const f32, i: u32) -> f32 {
    let (r, k) = frag_a_f16(ptx::lane_id(), i);
    unsafe { *a.add((r * K + k) as usize) }
}

/// B element (row-major K x 8) for fragment index `i`, f16 layout.
#[inline(always)]
unsafe fn b_f16(b: *const f32, i: u32) -> f32 {
    let (k, c) = frag_b_f16(ptx::lane_id(), i);
    unsafe { *b.add((k * 8 + c) as usize) }
}

#[inline(always)]
unsafe fn a_tf32<const K: u32>(a: *const f32, i: u32) -> u32 {
    let (r, k) = frag_a_tf32(ptx::lane_id(), i);
    ptx::cvt_tf32(unsafe { *a.add((r * K + k) as usize) })
}

#[inline(always)]
unsafe fn b_tf32(b: *const f32, i: u32) -> u32 {
    let (k, c) = frag_b_tf32(ptx::lane_id(), i);
    ptx::cvt_tf32(unsafe { *b.add((k * 8 + c) as usize) })
}

#[inline(always)]
pub unsafe fn f16_m16n8k8(args: MmaSelftestArgs) {
    let MmaSelftestArgs { a, b, d } = args;
    unsafe {
        let fa = [ptx::pack_f16x2(a_f16::<8>(a, 0), a_f16::<8>(a, 1)), ptx::pack_f16x2(a_f16::<8>(a, 2), a_f16::<8>(a, 3))];
        let fb = ptx::pack_f16x2(b_f16(b, 0), b_f16(b, 1));
        store_c(d, ptx::mma_m16n8k8_f16(fa, fb, [0.0; 4]));
    }
}

#[inline(always)]
pub unsafe fn f16_m16n8k16(args: MmaSelftestArgs) {
    let MmaSelftestArgs { a, b, d } = args;
    unsafe {
        let mut fa = [0u32; 4];
        for (j, r) in fa.iter_mut().enumerate() {
            let j = j as u32;
            *r = ptx::pack_f16x2(a_f16::<16>(a, 2 * j), a_f16::<16>(a, 2 * j + 1));
        }
        let fb = [ptx::pack_f16x2(b_f16(b, 0), b_f16(b, 1)), ptx::pack_f16x2(b_f16(b, 2), b_f16(b, 3))];
        store_c(d, ptx::mma_m16n8k16_f16(fa, fb, [0.0; 4]));
    }
}

#[inline(always)]
pub unsafe fn tf32_m16n8k4(args: MmaSelftestArgs) {
    let MmaSelftestArgs { a, b, d } = args;
    unsafe {
        let fa = [a_tf32::<4>(a, 0), a_tf32::<4>(a, 1)];
        store_c(d, ptx::mma_m16n8k4_tf32(fa, b_tf32(b, 0), [0.0; 4]));
    }
}

#[inline(always)]
pub unsafe fn tf32_m16n8k8(args: MmaSelftestArgs) {
    let MmaSelftestArgs { a, b, d } = args;
    unsafe {
        let fa = [a_tf32::<8>(a, 0), a_tf32::<8>(a, 1), a_tf32::<8>(a, 2), a_tf32::<8>(a, 3)];
        let fb = [b_tf32(b, 0), b_tf32(b, 1)];
        store_c(d, ptx::mma_m16n8k8_tf32(fa, fb, [0.0; 4]));
    }
}
