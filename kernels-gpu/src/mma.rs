//! Tensor-core MMA atoms: one type per precision and shape, naming its operand registers and
//! issuing `mma.sync.aligned.m16n8kK` (wrappers in `ptx`; element positions in `layout`).
//!
//! A kernel family picks the atoms it multiplies with; how it packs its data into `A` and `B`
//! (which feature dims and which vectors a lane supplies) is the family's business.

use crate::ptx;

/// One `mma.sync.aligned.m16n8kK` shape with f32 accumulators (D = A B + C, D/C 16 x 8).
pub trait MmaAtom {
    /// The K of the shape.
    const K: u32;
    /// A fragment (16 x K, row-major): what one lane holds.
    type A: Copy + Default;
    /// B fragment (K x 8, column-major): what one lane holds.
    type B: Copy + Default;
    fn mma(a: Self::A, b: Self::B, c: [f32; 4]) -> [f32; 4];
}

/// f16 m16n8k8: A two f16x2 registers, B one.
pub struct F16K8;
/// f16 m16n8k16.
pub struct F16K16;
/// e4m3 m16n8k32 (sm_89+): A four registers of 4 e4m3, B two.
pub struct E4m3K32;
/// tf32 m16n8k4.
pub struct Tf32K4;
/// tf32 m16n8k8: A four tf32 registers, B two.
pub struct Tf32K8;

impl MmaAtom for F16K8 {
    const K: u32 = 8;
    type A = [u32; 2];
    type B = u32;
    #[inline(always)]
    fn mma(a: [u32; 2], b: u32, c: [f32; 4]) -> [f32; 4] {
        ptx::mma_m16n8k8_f16(a, b, c)
    }
}

impl MmaAtom for F16K16 {
    const K: u32 = 16;
    type A = [u32; 4];
    type B = [u32; 2];
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        ptx::mma_m16n8k16_f16(a, b, c)
    }
}

impl MmaAtom for Tf32K4 {
    const K: u32 = 4;
    type A = [u32; 2];
    type B = u32;
    #[inline(always)]
    fn mma(a: [u32; 2], b: u32, c: [f32; 4]) -> [f32; 4] {
        ptx::mma_m16n8k4_tf32(a, b, c)
    }
}

impl MmaAtom for Tf32K8 {
    const K: u32 = 8;
    type A = [u32; 4];
    type B = [u32; 2];
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        ptx::mma_m16n8k8_tf32(a, b, c)
    }
}

impl MmaAtom for E4m3K32 {
    const K: u32 = 32;
    type A = [u32; 4];
    type B = [u32; 2];
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        ptx::mma_m16n8k32_e4m3(a, b, c)
    }
}
