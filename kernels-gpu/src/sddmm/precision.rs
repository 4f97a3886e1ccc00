//! What differs between f16 and tf32 in the tensor-core SDDMM kernels. Both compute
//! D (16 x 8) += M (16 rows of one operand, x K) * N^T (K x 8 rows of the other) a step of K at a
//! time; the K order inside one MMA is free (a dot product does not care), so lane (g, t) loads
//! one run of consecutive dims of each row it needs with a single 16-byte load and the fragment
//! slots take the run's words in order.

use crate::ptx;

/// One precision: the dims one step covers and how a lane turns its runs into MMAs.
pub trait SddmmPrecision {
    /// Feature dims per step.
    const STEP: u32;
    /// Dims in one lane's run (a 16-byte load).
    const RUN: u32;
    /// acc += (vectors g, g+8 runs) x (row g run).
    fn mma(acc: [f32; 4], v0: [u32; 4], v1: [u32; 4], r: [u32; 4]) -> [f32; 4];
    /// Word offset of dim `d` in row `row` of a row-major matrix with stride `ld`.
    fn word(row: u32, ld: u32, d: u32) -> usize;
}

pub struct F16;
pub struct Tf32;

impl SddmmPrecision for F16 {
    const STEP: u32 = 32;
    const RUN: u32 = 8;
    #[inline(always)]
    fn mma(acc: [f32; 4], v0: [u32; 4], v1: [u32; 4], r: [u32; 4]) -> [f32; 4] {
        // m16n8k16: A regs (m=g,k lo) (m=g+8,k lo) (m=g,k hi) (m=g+8,k hi), B regs (k lo) (k hi).
        let acc = ptx::mma_m16n8k16_f16([v0[0], v1[0], v0[1], v1[1]], [r[0], r[1]], acc);
        ptx::mma_m16n8k16_f16([v0[2], v1[2], v0[3], v1[3]], [r[2], r[3]], acc)
    }
    #[inline(always)]
    fn word(row: u32, ld: u32, d: u32) -> usize {
        (row as usize * ld as usize + d as usize) / 2
    }
}

impl SddmmPrecision for Tf32 {
    const STEP: u32 = 16;
    const RUN: u32 = 4;
    #[inline(always)]
    fn mma(acc: [f32; 4], v0: [u32; 4], v1: [u32; 4], r: [u32; 4]) -> [f32; 4] {
        let t = |w: u32| ptx::cvt_tf32(f32::from_bits(w));
        // m16n8k8 tf32: A (m=g,k=t) (m=g+8,k=t) (m=g,k=t+4) (m=g+8,k=t+4); B (k=t) (k=t+4).
        let acc = ptx::mma_m16n8k8_tf32([t(v0[0]), t(v1[0]), t(v0[1]), t(v1[1])], [t(r[0]), t(r[1])], acc);
        ptx::mma_m16n8k8_tf32([t(v0[2]), t(v1[2]), t(v0[3]), t(v1[3])], [t(r[2]), t(r[3])], acc)
    }
    #[inline(always)]
    fn word(row: u32, ld: u32, d: u32) -> usize {
        row as usize * ld as usize + d as usize
    }
}

#[inline(always)]
pub unsafe fn run<P: SddmmPrecision>(m: *const u32, row: u32, ld: u32, d: u32, ok: bool) -> [u32; 4] {
    if ok { unsafe { ptx::ld_nc_v4_u32(m.add(P::word(row, ld, d))) } } else { [0; 4] }
}
