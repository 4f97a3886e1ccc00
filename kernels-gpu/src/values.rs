//! Edge-value and feature plumbing for training: gather values through a slot map (edge values
//! of S into the order of Sᵀ) and cast f32 buffers to f16. Grid-stride loops, so any grid
//! covers any length.

use crate::abi::values::{CastF16Args, GatherValuesArgs, ScatterValuesArgs, ScatterValuesF16Args};
use crate::ptx;

/// First index of this thread and the grid-wide stride.
#[inline(always)]
fn grid_stride() -> (u32, u32) {
    (ptx::ctaid_x() * ptx::ntid_x() + ptx::tid_x(), ptx::nctaid_x() * ptx::ntid_x())
}

/// `dst[i] = map[i] == u32::MAX ? 0 : src[map[i]]` for `i < n`. `src` is not written here.
#[inline(always)]
pub unsafe fn gather(args: GatherValuesArgs) {
    let GatherValuesArgs { n, map, src, dst } = args;
    let (mut i, stride) = grid_stride();
    while i < n {
        let m = unsafe { ptx::ld_nc_u32(map.add(i as usize)) };
        let v = if m == u32::MAX { 0.0 } else { unsafe { ptx::ld_nc_f32(src.add(m as usize)) } };
        unsafe { *dst.add(i as usize) = v };
        i += stride;
    }
}

/// Eight f16 values: one 16-byte store.
#[repr(C, align(16))]
struct Halves8([u32; 4]);

/// `dst[i] = f16(src[i])` (round to nearest even) for `i < n`: groups of 8 with two 16-byte
/// loads and one 16-byte store (both buffers 16-byte aligned, as every allocation is), then
/// the last `n % 8` one by one.
#[inline(always)]
pub unsafe fn cast_f16(args: CastF16Args) {
    let CastF16Args { n, src, dst } = args;
    let (first, stride) = grid_stride();
    let groups = n / 8;
    let mut g = first;
    while g < groups {
        let e = 8 * g as usize;
        let (a, b) = unsafe { (ptx::ld_nc_v4_f32(src.add(e)), ptx::ld_nc_v4_f32(src.add(e + 4))) };
        let h =
            Halves8([ptx::pack_f16x2(a[0], a[1]), ptx::pack_f16x2(a[2], a[3]), ptx::pack_f16x2(b[0], b[1]), ptx::pack_f16x2(b[2], b[3])]);
        unsafe { *(dst.add(e) as *mut Halves8) = h };
        g += stride;
    }
    if first < n % 8 {
        let e = (8 * groups + first) as usize;
        let v = unsafe { ptx::ld_nc_f32(src.add(e)) };
        unsafe { *dst.add(e) = (ptx::pack_f16x2(v, 0.0) & 0xffff) as u16 };
    }
}

/// `dst[slot_of[i]] = src[i]` for `i < n`: CSR-ordered edge values into the ME-BCRS slots TC8
/// SpMM reads. Slots that hold no edge are never written (they stay as allocated: zero).
#[inline(always)]
pub unsafe fn scatter_f32(args: ScatterValuesArgs) {
    let ScatterValuesArgs { n, slot_of, src, dst } = args;
    let (mut i, stride) = grid_stride();
    while i < n {
        let slot = unsafe { ptx::ld_nc_u32(slot_of.add(i as usize)) };
        unsafe { *dst.add(slot as usize) = ptx::ld_nc_f32(src.add(i as usize)) };
        i += stride;
    }
}

/// `scatter_f32` into f16 slots (round to nearest even).
#[inline(always)]
pub unsafe fn scatter_f16(args: ScatterValuesF16Args) {
    let ScatterValuesF16Args { n, slot_of, src, dst } = args;
    let (mut i, stride) = grid_stride();
    while i < n {
        let slot = unsafe { ptx::ld_nc_u32(slot_of.add(i as usize)) };
        let v = unsafe { ptx::ld_nc_f32(src.add(i as usize)) };
        unsafe { *dst.add(slot as usize) = (ptx::pack_f16x2(v, 0.0) & 0xffff) as u16 };
        i += stride;
    }
}
