//! The two TC8 precisions: which vectors a lane supplies, how a block's values become the B
//! fragment, and how gathered X words become A fragments of the MMA atom.

use super::Operands;
use super::source::GatherSource;
use super::work::WorkItem;
use crate::config::TC8_BLOCK_VECTORS as KV;
use crate::mma::{E4m3K32, F16K8, MmaAtom, Tf32K8};
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

pub trait Tc8Precision: Sized {
    /// Bytes of an X element.
    const X_BYTES: u32;
    /// Bytes of a stored edge value.
    const VALUE_BYTES: u32;
    /// X rows come quantised with a per-row scale (`Operands::x_scales`) that the B fragments
    /// fold in, and the output is multiplied back by the global scale.
    const SCALED: bool = false;
    /// The MMA atom every product of this precision goes through (m16n8k8: k = a block's 8
    /// vectors; e4m3 m16n8k32: k = a group's 32).
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

    /// The MMAs of group `gi` (4 blocks of 8 vectors): one k = 8 product per block and tile.
    #[inline(always)]
    unsafe fn group_mma<S: GatherSource<Self, NT>, const NT: usize>(
        acc: &mut [[f32; 4]; NT],
        source: &S,
        ops: &Operands,
        item: &WorkItem,
        stage: &S::Stage,
        gi: u32,
    ) {
        crate::unroll4!(i => {
            let kb = item.block_vectors(gi, i as u32);
            if kb > 0 {
                let (xa, xb, b) = unsafe { source.block(ops, item, stage, i as u32, kb) };
                Self::mma::<NT>(acc, &xa, &xb, b);
            }
        });
    }
}

/// f16: lane (g, t) supplies vectors 2t and 2t+1; a word holds two f16 dims.
pub struct F16;
/// tf32: lane (g, t) supplies vectors t and t+4; a word is one f32 dim.
pub struct Tf32;

impl Tc8Precision for F16 {
    const X_BYTES: u32 = 2;
    const VALUE_BYTES: u32 = 2;
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
            acc[q] = Self::Atom::mma(a, b, acc[q]);
            q += 1;
        }
    }
}

impl Tc8Precision for Tf32 {
    const X_BYTES: u32 = 4;
    const VALUE_BYTES: u32 = 4;
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
            acc[q] = Self::Atom::mma(a, b, acc[q]);
            q += 1;
        }
    }
}

/// e4m3 (sm_89+): X rows quantised to e4m3 with a per-row scale, f16 edge values scaled by their
/// column's X scale and rounded to e4m3 in the B fragment, one `m16n8k32` per group and tile:
/// the group's 32 vectors are the MMA's k. Lane (g, t) supplies vectors 4t..4t+3 (A/B registers
/// 0/1 of k 4t..) and 16+4t..16+4t+3 (registers 2/3 and B 1); its 16-byte chunk g holds dims
/// 16g..16g+15 of each, so tile q's rows g / g+8 are bytes 2q / 2q+1 of the chunk, transposed
/// across the 4 vectors with byte permutes. Only shared-memory sources provide whole stages.
pub struct E4m3;

impl Tc8Precision for E4m3 {
    const X_BYTES: u32 = 1;
    const VALUE_BYTES: u32 = 2;
    const SCALED: bool = true;
    type Atom = E4m3K32;
    type B = [u32; 2];

    // The per-block path is not used: `group_mma` multiplies whole groups.
    #[inline(always)]
    fn slots(lane: u32) -> (u32, u32) {
        let t = lane % 4;
        (4 * t, 16 + 4 * t)
    }
    #[inline(always)]
    unsafe fn load_b<M: Words>(_m: M, _row_base: usize, _kb: u32, _lane: u32) -> [u32; 2] {
        [0, 0]
    }
    #[inline(always)]
    fn mma<const NT: usize>(_acc: &mut [[f32; 4]; NT], _xa: &[u32; 8], _xb: &[u32; 8], _b: [u32; 2]) {}

    #[inline(always)]
    unsafe fn group_mma<S: GatherSource<Self, NT>, const NT: usize>(
        acc: &mut [[f32; 4]; NT],
        source: &S,
        ops: &Operands,
        item: &WorkItem,
        stage: &S::Stage,
        gi: u32,
    ) {
        let (g, t) = (ops.lane / 4, ops.lane % 4);
        // X chunks of the lane's 8 vectors: 4t + j (j < 4) and 16 + 4t + j - 4.
        let mut w = [[0u32; 4]; 8];
        crate::unroll4!(j => {
            w[j] = unsafe { source.stage_chunk(stage, 4 * t + j as u32, g) };
            w[j + 4] = unsafe { source.stage_chunk(stage, 16 + 4 * t + j as u32, g) };
        });
        // B: window row g at the same vectors, value x column scale / global scale, in e4m3.
        let b = [unsafe { e4m3_b(source, item, stage, gi, 4 * t, g, ops.inv_scale) }, unsafe {
            e4m3_b(source, item, stage, gi, 16 + 4 * t, g, ops.inv_scale)
        }];
        // Word wi of a chunk holds dims 4wi..4wi+3: tiles q = 2wi (bytes 0, 1) and 2wi + 1
        // (bytes 2, 3). Unrolled, so the chunk arrays stay in registers.
        crate::unroll4!(wi => {
            let mut half = 0;
            while half < 2 {
                let q = 2 * wi + half;
                let s = 2 * half as u32;
                let sel = s | (4 + s) << 4 | (s + 1) << 8 | (5 + s) << 12;
                let quad = |h: usize| {
                    let p01 = ptx::prmt(w[4 * h][wi], w[4 * h + 1][wi], sel);
                    let p23 = ptx::prmt(w[4 * h + 2][wi], w[4 * h + 3][wi], sel);
                    (ptx::prmt(p01, p23, 0x5410), ptx::prmt(p01, p23, 0x7632))
                };
                let (lo0, hi0) = quad(0);
                let (lo1, hi1) = quad(1);
                if q < NT {
                    acc[q] = Self::Atom::mma([lo0, hi0, lo1, hi1], b, acc[q]);
                }
                half += 1;
            }
        });
    }
}

/// The e4m3 B register for group vectors v0..v0+4 (one block's half) and window row g.
#[inline(always)]
unsafe fn e4m3_b<S: GatherSource<E4m3, NT>, const NT: usize>(
    source: &S,
    item: &WorkItem,
    stage: &S::Stage,
    gi: u32,
    v0: u32,
    g: u32,
    inv_scale: f32,
) -> u32 {
    let block = v0 / KV;
    let kb = item.block_vectors(gi, block);
    let values = unsafe { source.stage_values(stage) };
    let scales = unsafe { source.stage_scales(stage) };
    let mut f = [0.0f32; 4];
    crate::unroll4!(i => {
        let j = v0 % KV + i as u32;
        if j < kb {
            let h = unsafe { ptx::ld_shared_u16(values + 2 * (8 * KV * block + g * kb + j)) };
            let s = unsafe { ptx::ld_shared_f32(scales + 4 * (v0 + i as u32)) };
            f[i] = ptx::f16_to_f32(h) * s * inv_scale;
        }
    });
    ptx::pack_e4m3x4(f)
}
