//! Adam (torch.optim.Adam with L2 weight decay, amsgrad off) over whole padded buffers
//! (padding: grad 0 and param 0 give m = v = 0 and a zero update), grid-stride over float4s.
//! The step t (>= 1) is read from device memory, so a replayed CUDA graph advances it through
//! `step_increment`.

use super::{global_thread, grid_stride};
use crate::abi::nn::{AdamArgs, AdamManyArgs, StepIncrementArgs};
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

/// Step t's constants: Adam's hyperparameters with the bias corrections folded in.
#[derive(Clone, Copy)]
struct Update {
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    /// lr / (1 - b1^t).
    step_size: f32,
    /// sqrt(1 - b2^t).
    bc2_sqrt: f32,
}

impl Update {
    #[inline(always)]
    unsafe fn new(lr: f32, beta1: f32, beta2: f32, eps: f32, weight_decay: f32, step: *const u32) -> Self {
        let t = unsafe { ptx::ld_nc_u32(step) };
        let bc1 = 1.0 - powi(beta1 as f64, t);
        let bc2 = 1.0 - powi(beta2 as f64, t);
        Update { beta1, beta2, eps, weight_decay, step_size: (lr as f64 / bc1) as f32, bc2_sqrt: ptx::sqrt(bc2 as f32) }
    }

    /// g = grad + wd param; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    /// param -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps), on float4 `o / 4`.
    #[inline(always)]
    unsafe fn float4(&self, param: *mut f32, grad: *const f32, m: *mut f32, v: *mut f32, o: usize) {
        let g = unsafe { ptx::ld_nc_v4_f32(grad.add(o)) };
        let (pp, mp, vp) = unsafe { (param.add(o), m.add(o), v.add(o)) };
        let (mut pv, mut mv, mut vv) = unsafe { (ptx::ld_v4_f32(pp), ptx::ld_v4_f32(mp), ptx::ld_v4_f32(vp)) };
        for k in 0..4 {
            let gk = g[k] + self.weight_decay * pv[k];
            mv[k] = self.beta1 * mv[k] + (1.0 - self.beta1) * gk;
            vv[k] = self.beta2 * vv[k] + (1.0 - self.beta2) * gk * gk;
            pv[k] -= self.step_size * mv[k] / (ptx::sqrt(vv[k]) / self.bc2_sqrt + self.eps);
        }
        unsafe {
            ptx::st_v4_f32(pp, pv);
            ptx::st_v4_f32(mp, mv);
            ptx::st_v4_f32(vp, vv);
        }
    }
}

/// One Adam step over a buffer (see [`Update::float4`]).
#[inline(always)]
pub unsafe fn adam(args: AdamArgs) {
    let AdamArgs { n4, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step } = args;
    let up = unsafe { Update::new(lr, beta1, beta2, eps, weight_decay, step) };
    for i in grid_stride(n4) {
        unsafe { up.float4(param, grad, m, v, 4 * i as usize) };
    }
}

/// One Adam step over every tensor of the table, grid-stride over their concatenation; a
/// float4's tensor found by bisecting the table's starts (a few tensors: cached loads).
#[inline(always)]
pub unsafe fn adam_many(args: AdamManyArgs) {
    let AdamManyArgs { tensors, table, lr, beta1, beta2, eps, weight_decay, step } = args;
    let up = unsafe { Update::new(lr, beta1, beta2, eps, weight_decay, step) };
    let start = unsafe { table.add(4 * tensors as usize) };
    let total = unsafe { ptx::ld_nc_u64(start.add(tensors as usize)) };
    for i in grid_stride(total) {
        // The last tensor whose start is at most i (empty tensors share their successor's start
        // and are skipped, as the search lands past them).
        let (mut lo, mut hi) = (0u32, tensors);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if unsafe { ptx::ld_nc_u64(start.add(mid as usize)) } <= i {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let t = unsafe { table.add(4 * lo as usize) };
        let o = 4 * (i - unsafe { ptx::ld_nc_u64(start.add(lo as usize)) }) as usize;
        unsafe {
            let at = |k: usize| ptx::ld_nc_u64(t.add(k)) as *mut f32;
            up.float4(at(0), at(1), at(2), at(3), o);
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
