//! Adam (torch.optim.Adam with L2 weight decay, amsgrad off) over whole padded buffers
//! (padding: grad 0 and param 0 give m = v = 0 and a zero update), grid-stride over float4s.
//! The step t (>= 1) is read from device memory, so a replayed CUDA graph advances it through
//! `step_increment`.

use super::{global_thread, grid_stride};
use crate::abi::nn::{AdamArgs, StepIncrementArgs};
use crate::ptx;

/// b^t by squaring, in f64 (as torch computes the bias corrections on the host in double).
#[inline(always)]
fn powi(b: f64, mut t: u32) -> f64 {
    let (mut r, mut x) = (1.0f64, b);
    while t > 0 {
        if t & 1 == 1 {
            r *= x;
        }
        x *= x;
        t >>= 1;
    }
    r
}

/// g = grad + wd param; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
/// param -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#[inline(always)]
pub unsafe fn adam(args: AdamArgs) {
    let AdamArgs { n4, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step } = args;
    let t = unsafe { ptx::ld_nc_u32(step) };
    let bc1 = 1.0 - powi(beta1 as f64, t);
    let bc2 = 1.0 - powi(beta2 as f64, t);
    let step_size = (lr as f64 / bc1) as f32;
    let bc2_sqrt = ptx::sqrt(bc2 as f32);
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let g = unsafe { ptx::ld_nc_v4_f32(grad.add(o)) };
        let (pp, mp, vp) = unsafe { (param.add(o), m.add(o), v.add(o)) };
        let (mut pv, mut mv, mut vv) = unsafe { (ptx::ld_v4_f32(pp), ptx::ld_v4_f32(mp), ptx::ld_v4_f32(vp)) };
        for k in 0..4 {
            let gk = g[k] + weight_decay * pv[k];
            mv[k] = beta1 * mv[k] + (1.0 - beta1) * gk;
            vv[k] = beta2 * vv[k] + (1.0 - beta2) * gk * gk;
            pv[k] -= step_size * mv[k] / (ptx::sqrt(vv[k]) / bc2_sqrt + eps);
        }
        unsafe {
            ptx::st_v4_f32(pp, pv);
            ptx::st_v4_f32(mp, mv);
            ptx::st_v4_f32(vp, vv);
        }
    }
}

/// step[0] += 1 (one thread).
#[inline(always)]
pub unsafe fn step_increment(args: StepIncrementArgs) {
    let StepIncrementArgs { step } = args;
    if global_thread() == 0 {
        unsafe { ptx::st_u32(step, ptx::ld_u32(step) + 1) };
    }
}
