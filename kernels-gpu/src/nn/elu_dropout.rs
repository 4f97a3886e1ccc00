//! GAT's hidden tail, ELU then dropout, in one pass, and the backward of both in one pass
//! (`ops::nn::elu_dropout`): grid-stride over float4s of whole padded buffers (padding is 0 and
//! stays 0: ELU(0) = 0).
//!
//! Forward: h = ELU(h) in place (the backward's ELU' reads it, as the unfused ELU's does) and
//! y = dropout(h), the mask drawn as the dropout kernel draws it (element i keyed `offset + i`),
//! not stored. Backward: the mask drawn again, dz = keep ? dy · scale · ELU'(h) : 0 with
//! ELU' = 1 where h > 0, else h + 1 — the unfused dropout' then ELU', in the same order.

use super::elu::elu1;
use super::grid_stride;
use crate::abi::nn::{EluDropoutArgs, EluDropoutBackwardArgs};
use crate::ptx;
use crate::rng::DropoutStep;

/// h = ELU(h), y = dropout(h) over `n4` float4s.
#[inline(always)]
pub unsafe fn elu_dropout(args: EluDropoutArgs) {
    let EluDropoutArgs { n4, h, y, threshold, scale, seed_key, step, offset } = args;
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n4) {
        let o = 4 * i;
        let p = unsafe { h.add(o as usize) };
        let v = unsafe { ptx::ld_v4_f32(p) };
        let keep = draw.keep4(seed_key, offset + o, threshold);
        let a = [elu1(v[0]), elu1(v[1]), elu1(v[2]), elu1(v[3])];
        let mut out = [0f32; 4];
        crate::unroll4!(k => {
            if keep[k] {
                out[k] = a[k] * scale;
            }
        });
        unsafe {
            ptx::st_v4_f32(p, a);
            ptx::st_v4_f32(y.add(o as usize), out);
        }
    }
}

/// dz = keep ? dy · scale · ELU'(h) : 0 over `n4` float4s (h: the forward's ELU output).
#[inline(always)]
pub unsafe fn elu_dropout_backward(args: EluDropoutBackwardArgs) {
    let EluDropoutBackwardArgs { n4, dy, h, threshold, scale, seed_key, step, offset, dz } = args;
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n4) {
        let o = 4 * i;
        let hv = unsafe { ptx::ld_nc_v4_f32(h.add(o as usize)) };
        let d = unsafe { ptx::ld_nc_v4_f32(dy.add(o as usize)) };
        let keep = draw.keep4(seed_key, offset + o, threshold);
        let mut out = [0f32; 4];
        crate::unroll4!(k => {
            if keep[k] {
                let g = d[k] * scale;
                out[k] = if hv[k] > 0.0 { g } else { g * (hv[k] + 1.0) };
            }
        });
        unsafe { ptx::st_v4_f32(dz.add(o as usize), out) };
    }
}
