//! Dropout with a counter-based mask (`crate::rng`, the file the host also includes): element
//! `i` is kept iff `dropout_keep_keyed(seed_key, step, offset + i, threshold)` (through
//! `DropoutStep`: the span key once per thread; on a part of a partitioned graph, row r of
//! the key is the row's original id, `DropoutArgs::ids`), where `step` is read from device memory at run
//! time (so a replayed CUDA graph draws a fresh mask per step).
//! Grid-stride over groups of 4 elements (float4 values, one u32 of 4 mask bytes); the last
//! `n % 4` elements go one per thread to the first threads of the grid.

use super::{global_thread, grid_stride};
use crate::abi::nn::{DropoutArgs, DropoutBackwardArgs};
use crate::index::split_offset;
use crate::ptx;
use crate::rng::DropoutStep;

/// The row of the whole graph's mask that row `r` draws: `ids[r]` on a part of a partitioned
/// graph (its rows' original node ids, so every partition draws the one-device mask), else r.
#[inline(always)]
pub fn key_row(ids: *const u32, r: u32) -> u64 {
    if ids.is_null() { r as u64 } else { unsafe { ptx::ld_nc_u32(ids.add(r as usize)) as u64 } }
}

/// `keep` of the four elements of float4 `i` of a padded matrix of `ld4` float4s a row (> 0),
/// element (r, c) keyed `offset + key_row(r) 4 ld4 + c`: without ids `offset + 4 i`, the
/// dropout kernel's keys.
#[inline(always)]
pub fn keep4_rows(draw: DropoutStep, seed_key: u64, threshold: u32, offset: u64, ids: *const u32, ld4: u32, i: u64) -> [bool; 4] {
    // (ld4 = 0: no columns, nothing drawn; the test also spares `split_offset` a panic path.)
    if ids.is_null() || ld4 == 0 {
        return draw.keep4(seed_key, offset + 4 * i, threshold);
    }
    let (r, c4) = split_offset(i, ld4);
    draw.keep4(seed_key, offset + key_row(ids, r) * (4 * ld4) as u64 + 4 * c4 as u64, threshold)
}

/// The key of element `j` of a buffer of rows `ld` wide under `ids` (as `keep4_rows`, one
/// element: `ld` = 1 for a vector of edges, `ids` their original indices).
#[inline(always)]
fn key_at(offset: u64, ids: *const u32, ld: u32, j: u64) -> u64 {
    if ids.is_null() || ld == 0 {
        return offset + j;
    }
    let (r, c) = split_offset(j, ld);
    offset + key_row(ids, r) * ld as u64 + c as u64
}

/// `keep` of elements `4 i..4 i + 4` under `ids` with rows `ld` wide: four at a time where a
/// row holds whole float4s (ld a multiple of 4: a padded matrix), else element by element.
#[inline(always)]
fn keep4_at(draw: DropoutStep, seed_key: u64, threshold: u32, offset: u64, ids: *const u32, ld: u32, i: u64) -> [bool; 4] {
    if ids.is_null() || ld % 4 == 0 {
        return keep4_rows(draw, seed_key, threshold, offset, ids, ld / 4, i);
    }
    let mut kept = 0u32;
    let mut e = 0;
    while e < 4 {
        kept |= (draw.keep(seed_key, key_at(offset, ids, ld, 4 * i + e), threshold) as u32) << e;
        e += 1;
    }
    [kept & 1 != 0, kept & 2 != 0, kept & 4 != 0, kept & 8 != 0]
}

/// y = keep ? x * scale : 0, mask = keep (one byte per element; none where `mask` is null),
/// over the first `n` elements.
#[inline(always)]
pub unsafe fn dropout(args: DropoutArgs) {
    let DropoutArgs { n, x, y, mask, threshold, scale, seed_key, step, offset, ids, ld } = args;
    let masked = !mask.is_null();
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    let n4 = n / 4;
    for i in grid_stride(n4) {
        let o = 4 * i;
        let v = unsafe { ptx::ld_nc_v4_f32(x.add(o as usize)) };
        let mut out = [0f32; 4];
        let mut bits = 0u32;
        let keep = keep4_at(draw, seed_key, threshold, offset, ids, ld, i);
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
        let keep = draw.keep(seed_key, key_at(offset, ids, ld, j), threshold);
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
    let DropoutArgs { n, x, y, threshold, scale, seed_key, step, offset, ids, ld, .. } = args;
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n / 4) {
        let o = 4 * i;
        // Elements o .. o + 4: two words of two halves each (element 2m + b: word m's low half
        // for b = 0, its high half for b = 1).
        let w = unsafe { ptx::ld_nc_v2_f32(x.add(o as usize / 2)) };
        let keep = keep4_at(draw, seed_key, threshold, offset, ids, ld, i);
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
