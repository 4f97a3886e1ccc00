//! ReLU and its backward, in place over whole padded buffers (padding is 0 and stays 0):
//! grid-stride over float4s.

use super::{global_thread, grid_threads};
use crate::ptx;

#[inline(always)]
fn relu1(v: f32) -> f32 {
    if v > 0.0 { v } else { 0.0 }
}

/// x = max(x, 0) over `n4` float4s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn relu_f32(n4: u32, x: *mut f32) {
    let mut i = global_thread();
    while i < n4 {
        let p = unsafe { x.add(4 * i as usize) };
        let v = unsafe { ptx::ld_v4_f32(p) };
        unsafe { ptx::st_v4_f32(p, [relu1(v[0]), relu1(v[1]), relu1(v[2]), relu1(v[3])]) };
        i += grid_threads();
    }
}

/// dy = y > 0 ? dy : 0 over `n4` float4s (y: the ReLU's output).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn relu_backward_f32(n4: u32, y: *const f32, dy: *mut f32) {
    let mut i = global_thread();
    while i < n4 {
        let o = 4 * i as usize;
        let yv = unsafe { ptx::ld_nc_v4_f32(y.add(o)) };
        let p = unsafe { dy.add(o) };
        let d = unsafe { ptx::ld_v4_f32(p) };
        let g = |k: usize| if yv[k] > 0.0 { d[k] } else { 0.0 };
        unsafe { ptx::st_v4_f32(p, [g(0), g(1), g(2), g(3)]) };
        i += grid_threads();
    }
}
