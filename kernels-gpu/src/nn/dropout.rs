//! Dropout with a counter-based mask (`crate::rng`, the file the host also includes): element
//! `i` is kept iff `dropout_keep_keyed(seed_key, step, offset + i, threshold)` (through
//! `DropoutStep`: the span key once per thread), where `step` is read from device memory at run
//! time (so a replayed CUDA graph draws a fresh mask per step).
//! Grid-stride over groups of 4 elements (float4 values, one u32 of 4 mask bytes); the last
//! `n % 4` elements go one per thread to the first threads of the grid.

use super::{global_thread, grid_stride};
use crate::abi::nn::{DropoutArgs, DropoutBackwardArgs};
use crate::ptx;
use crate::rng::DropoutStep;

/// y = keep ? x * scale : 0, mask = keep (one byte per element; none where `mask` is null),
/// over the first `n` elements.
#[inline(always)]
pub unsafe fn dropout(args: DropoutArgs) {
    let DropoutArgs { n, x, y, mask, threshold, scale, seed_key, step, offset } = args;
    let masked = !mask.is_null();
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    let n4 = n / 4;
    for i in grid_stride(n4) {
        let o = 4 * i;
        let v = unsafe { ptx::ld_nc_v4_f32(x.add(o as usize)) };
        let mut out = [0f32; 4];
        let mut bits = 0u32;
        let keep = draw.keep4(seed_key, offset + o, threshold);
        for k in 0..4 {
            if keep[k] {
                out[k] = v[k] * scale;
                bits |= 1 << (8 * k);
            }
        }
        unsafe { ptx::st_v4_f32(y.add(o as usize), out) };
        if masked {
            unsafe { ptx::st_u32(mask.add(o as usize) as *mut u32, bits) };
        }
    }
    let j = 4 * n4 + global_thread() as u64;
    if j < n {
        let keep = draw.keep(seed_key, offset + j, threshold);
        let v = unsafe { ptx::ld_nc_f32(x.add(j as usize)) };
        unsafe { ptx::st_f32(y.add(j as usize), if keep { v * scale } else { 0.0 }) };
        if masked {
            unsafe { ptx::st_u8(mask.add(j as usize), keep as u32) };
        }
    }
}

/// `dropout` of f16 elements (x's f16 copy, read through the same pointer) into f32, no mask
/// (`mask` unused): the input dropout of a first layer whose products read the dropped copy
/// (the features need no gradient, so nothing reads a mask). `n` a multiple of 4 (a padded
/// matrix's buffer): four elements a thread and iteration, one 8-byte load, as many loads in
/// flight as `dropout`'s (eight elements a thread halved them and ran slower than the f32 read).
#[inline(always)]
pub unsafe fn dropout_from_half(args: DropoutArgs) {
    let DropoutArgs { n, x, y, threshold, scale, seed_key, step, offset, .. } = args;
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n / 4) {
        let o = 4 * i;
        // Elements o .. o + 4: two words of two halves each (element 2m + b: word m's low half
        // for b = 0, its high half for b = 1).
        let w = unsafe { ptx::ld_nc_v2_f32(x.add(o as usize / 2)) };
        let keep = draw.keep4(seed_key, offset + o, threshold);
        let mut out = [0f32; 4];
        for k in 0..4 {
            let bits = (w[k / 2].to_bits() >> (16 * (k % 2))) as u16;
            if keep[k] {
                out[k] = ptx::f16_to_f32(bits) * scale;
            }
        }
        unsafe { ptx::st_v4_f32(y.add(o as usize), out) };
    }
}

/// dx = mask ? dy * scale : 0 over the first `n` elements.
#[inline(always)]
pub unsafe fn dropout_backward(args: DropoutBackwardArgs) {
    let DropoutBackwardArgs { n, dy, mask, scale, dx } = args;
    let n4 = n / 4;
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let d = unsafe { ptx::ld_nc_v4_f32(dy.add(o)) };
        let bits = unsafe { ptx::ld_nc_u32(mask.add(o) as *const u32) };
        let g = |k: usize| if (bits >> (8 * k)) & 0xff != 0 { d[k] * scale } else { 0.0 };
        unsafe { ptx::st_v4_f32(dx.add(o), [g(0), g(1), g(2), g(3)]) };
    }
    let j = 4 * n4 as usize + global_thread() as usize;
    if j < n as usize {
        let keep = unsafe { ptx::ld_nc_u8(mask.add(j)) } != 0;
        let v = unsafe { ptx::ld_nc_f32(dy.add(j)) };
        unsafe { ptx::st_f32(dx.add(j), if keep { v * scale } else { 0.0 }) };
    }
}
