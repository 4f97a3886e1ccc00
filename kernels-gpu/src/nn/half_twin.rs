//! An activation's f16 twin, written by the kernel that produces the activation (the
//! `WRITE_F16` variants of the elementwise producers): the copy a sparse product on tensor
//! cores (or the CSR kernel on f16 features) reads, which the f16 precision otherwise casts in
//! a launch of its own, reading the 4-byte activation again to write its 2-byte copy
//! (bench/NOTES.md, issue 42). Rounding is the cast kernel's (`cvt.rn`, `values.rs`), so the
//! twin is that cast's output bit for bit.

use crate::ptx;

/// `dst[o..o + 4] = f16(v)`: one 8-byte store (`o` a multiple of 4, `dst` 8-byte aligned as
/// every allocation is: a padded row holds a multiple of 8 halves).
#[inline(always)]
pub unsafe fn store4(dst: *mut u16, o: usize, v: [f32; 4]) {
    let h = [ptx::pack_f16x2(v[0], v[1]), ptx::pack_f16x2(v[2], v[3])];
    unsafe { ptx::st_v2_u32(dst.add(o) as *mut u32, h) };
}

/// `dst[o..o + 2] = f16(v)`: one 4-byte store (`o` even): a product's output pair (an mma
/// accumulator's two columns).
#[inline(always)]
pub unsafe fn store2(dst: *mut u16, o: usize, v: [f32; 2]) {
    unsafe { ptx::st_u32(dst.add(o) as *mut u32, ptx::pack_f16x2(v[0], v[1])) };
}
