//! The two TC8 precisions: which vectors a lane supplies, how a block's values become the B
//! fragment, and how gathered X words become A fragments of the MMA atom.

use crate::config::TC8_BLOCK_VECTORS as KV;
use crate::mma::{F16K8, MmaAtom, Tf32K8};
use crate::ptx;

/// Where a block's values are read from: global memory or a shared-memory stage.
pub trait Words: Copy {
    /// 32-bit word `i`.
    unsafe fn word(self, i: usize) -> u32;
    /// 16-bit half-word `i`.
    unsafe fn half(self, i: usize) -> u16;
}

#[derive(Clone, Copy)]
pub struct Global(pub *const u32);
#[derive(Clone, Copy)]
pub struct Shared(pub u32);

impl Words for Global {
    #[inline(always)]
    unsafe fn word(self, i: usize) -> u32 {
        unsafe { ptx::ld_nc_u32(self.0.add(i)) }
    }
    #[inline(always)]
    unsafe fn half(self, i: usize) -> u16 {
        unsafe { ptx::ld_nc_u16((self.0 as *const u16).add(i)) }
    }
}

impl Words for Shared {
    #[inline(always)]
    unsafe fn word(self, i: usize) -> u32 {
        unsafe { ptx::ld_shared_u32(self.0 + 4 * i as u32) }
    }
    #[inline(always)]
    unsafe fn half(self, i: usize) -> u16 {
        unsafe { ptx::ld_shared_u16(self.0 + 2 * i as u32) }
    }
}

pub trait Tc8Precision {
    /// Bytes of an X element and of a value.
    const BYTES: u32;
    /// The MMA atom (m16n8k8: k = the block's 8 vectors).
    type Atom: MmaAtom<B = Self::B>;
    type B: Copy + Default;
    /// The two vector slots (0..8) whose X rows this lane supplies (A's k columns).
    fn slots(lane: u32) -> (u32, u32);
    /// B fragment of a block of `kb` vectors whose row `lane / 4` starts at value `row_base`
    /// (values are row-major 8 x kb per block).
    unsafe fn load_b<M: Words>(m: M, row_base: usize, kb: u32, lane: u32) -> Self::B;
    /// acc[q] += A_q B for the NT tiles; `xa` / `xb` hold this lane's 2*NT dims of the X rows of
    /// its two slots, packed in 32-bit words.
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], xa: &[u32; 8], xb: &[u32; 8], b: Self::B);
}

/// f16: lane (g, t) supplies vectors 2t and 2t+1; a word holds two f16 dims.
pub struct F16;
/// tf32: lane (g, t) supplies vectors t and t+4; a word is one f32 dim.
pub struct Tf32;

impl Tc8Precision for F16 {
    const BYTES: u32 = 2;
    type Atom = F16K8;
    type B = u32;

    #[inline(always)]
    fn slots(lane: u32) -> (u32, u32) {
        let t = lane % 4;
        (2 * t, 2 * t + 1)
    }

    #[inline(always)]
    unsafe fn load_b<M: Words>(m: M, row_base: usize, kb: u32, lane: u32) -> u32 {
        let t = lane % 4;
        if kb == KV {
            // A full block: S[g][2t..2t+2] is one aligned 32-bit word (row_base is even).
            unsafe { m.word(row_base / 2 + t as usize) }
        } else {
            let (j0, j1) = Self::slots(lane);
            let lo = if j0 < kb { unsafe { m.half(row_base + j0 as usize) } } else { 0 };
            let hi = if j1 < kb { unsafe { m.half(row_base + j1 as usize) } } else { 0 };
            ptx::pack_u16x2(lo, hi)
        }
    }

    #[inline(always)]
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], xa: &[u32; 8], xb: &[u32; 8], b: u32) {
        let mut q = 0;
        while q < NT {
            // Row m = g is dim 2q of the lane's run, m = g + 8 dim 2q + 1; k = vectors 2t, 2t+1.
            let a = [ptx::lo_halves(xa[q], xb[q]), ptx::hi_halves(xa[q], xb[q])];
            acc[q] = F16K8::mma(a, b, acc[q]);
            q += 1;
        }
    }
}

impl Tc8Precision for Tf32 {
    const BYTES: u32 = 4;
    type Atom = Tf32K8;
    type B = [u32; 2];

    #[inline(always)]
    fn slots(lane: u32) -> (u32, u32) {
        let t = lane % 4;
        (t, t + 4)
    }

    #[inline(always)]
    unsafe fn load_b<M: Words>(m: M, row_base: usize, kb: u32, lane: u32) -> [u32; 2] {
        let (j0, j1) = Self::slots(lane);
        let b0 = if j0 < kb { unsafe { m.word(row_base + j0 as usize) } } else { 0 };
        let b1 = if j1 < kb { unsafe { m.word(row_base + j1 as usize) } } else { 0 };
        [ptx::cvt_tf32(f32::from_bits(b0)), ptx::cvt_tf32(f32::from_bits(b1))]
    }

    #[inline(always)]
    fn mma<const NT: usize>(acc: &mut [[f32; 4]; NT], xa: &[u32; 8], xb: &[u32; 8], b: [u32; 2]) {
        let cv = |w: u32| ptx::cvt_tf32(f32::from_bits(w));
        let mut q = 0;
        while q < NT {
            let a = [cv(xa[2 * q]), cv(xa[2 * q + 1]), cv(xb[2 * q]), cv(xb[2 * q + 1])];
            acc[q] = Tf32K8::mma(a, b, acc[q]);
            q += 1;
        }
    }
}
