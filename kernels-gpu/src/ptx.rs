//! Small typed wrappers over inline PTX: the only place in the device crate that writes `asm!`.
//! Kernels call these and read as algorithms.
//!
//! Fragment layouts of the `mma.sync` shapes (PTX ISA, "Matrix fragments for mma.m16n8kK"),
//! with `g = lane / 4` (group) and `t = lane % 4` (thread in group); see `layout.rs`, which the
//! host tests include and check against CPU products.

use core::arch::asm;

// ---------------------------------------------------------------- ids and sizes

macro_rules! special_reg {
    ($name:ident, $reg:literal) => {
        #[inline(always)]
        pub fn $name() -> u32 {
            let r: u32;
            unsafe { asm!(concat!("mov.u32 {}, ", $reg, ";"), out(reg32) r, options(pure, nomem, nostack)) };
            r
        }
    };
}
special_reg!(tid_x, "%tid.x");
special_reg!(tid_y, "%tid.y");
special_reg!(ntid_x, "%ntid.x");
special_reg!(ntid_y, "%ntid.y");
special_reg!(ctaid_x, "%ctaid.x");
special_reg!(ctaid_y, "%ctaid.y");
special_reg!(nctaid_x, "%nctaid.x");
special_reg!(nctaid_y, "%nctaid.y");
special_reg!(lane_id, "%laneid");

/// `x` through a `mov` the compiler may not move or merge: what is computed from the result
/// stays where it is used (a loop-invariant address otherwise hoisted out of a loop, held
/// across it and spilled under a register cap, is recomputed at its one use instead).
#[inline(always)]
pub fn opaque_u32(x: u32) -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {}, {};", out(reg32) r, in(reg32) x, options(nomem, nostack)) };
    r
}

/// Warp index inside the block (x-major thread numbering).
#[inline(always)]
pub fn warp_id() -> u32 {
    (tid_y() * ntid_x() + tid_x()) / 32
}

// ---------------------------------------------------------------- synchronisation

/// `bar.sync 0`: block-wide barrier.
#[inline(always)]
pub fn sync_threads() {
    unsafe { asm!("bar.sync 0;", options(nostack)) };
}

/// `bar.warp.sync`: reconverge the full warp.
#[inline(always)]
pub fn sync_warp() {
    unsafe { asm!("bar.warp.sync -1;", options(nostack)) };
}

pub const FULL_MASK: u32 = 0xffff_ffff;

#[inline(always)]
pub fn shfl_xor_f32(v: f32, lane_mask: u32) -> f32 {
    let r: f32;
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 0x1f, -1;", r = out(reg32) r, v = in(reg32) v, m = in(reg32) lane_mask, options(nomem, nostack))
    };
    r
}

/// `shfl_xor_f32` among the lanes of `members` only (a slot of lanes that may run apart from
/// the rest of its warp; `lane_mask` stays inside the slot).
#[inline(always)]
pub fn shfl_xor_f32_in(v: f32, lane_mask: u32, members: u32) -> f32 {
    let r: f32;
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 0x1f, {k};", r = out(reg32) r, v = in(reg32) v, m = in(reg32) lane_mask, k = in(reg32) members, options(nomem, nostack))
    };
    r
}

#[inline(always)]
pub fn shfl_down_f32(v: f32, delta: u32) -> f32 {
    let r: f32;
    unsafe {
        asm!("shfl.sync.down.b32 {r}, {v}, {d}, 0x1f, -1;", r = out(reg32) r, v = in(reg32) v, d = in(reg32) delta, options(nomem, nostack))
    };
    r
}

#[inline(always)]
pub fn shfl_idx_u32(v: u32, src_lane: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 0x1f, -1;", r = out(reg32) r, v = in(reg32) v, s = in(reg32) src_lane, options(nomem, nostack))
    };
    r
}

#[inline(always)]
pub fn shfl_idx_f32(v: f32, src_lane: u32) -> f32 {
    f32::from_bits(shfl_idx_u32(v.to_bits(), src_lane))
}

#[inline(always)]
pub fn shfl_up_u32(v: u32, delta: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.up.b32 {r}, {v}, {d}, 0, -1;", r = out(reg32) r, v = in(reg32) v, d = in(reg32) delta, options(nomem, nostack))
    };
    r
}

/// Inclusive prefix sum over the lanes of a full warp.
#[inline(always)]
pub fn warp_inclusive_scan_u32(mut v: u32) -> u32 {
    let lane = lane_id();
    let mut d = 1;
    while d < 32 {
        let o = shfl_up_u32(v, d);
        if lane >= d {
            v += o;
        }
        d *= 2;
    }
    v
}

/// Sum over the 32 lanes (every lane gets the total).
#[inline(always)]
pub fn warp_sum(mut v: f32) -> f32 {
    v += shfl_xor_f32(v, 16);
    v += shfl_xor_f32(v, 8);
    v += shfl_xor_f32(v, 4);
    v += shfl_xor_f32(v, 2);
    v += shfl_xor_f32(v, 1);
    v
}

/// Maximum over the 32 lanes (every lane gets it).
#[inline(always)]
pub fn warp_max(mut v: f32) -> f32 {
    v = v.max(shfl_xor_f32(v, 16));
    v = v.max(shfl_xor_f32(v, 8));
    v = v.max(shfl_xor_f32(v, 4));
    v = v.max(shfl_xor_f32(v, 2));
    v = v.max(shfl_xor_f32(v, 1));
    v
}

// ---------------------------------------------------------------- global memory

/// Read-only (non-coherent texture path) 4-float vector load; `p` must be 16-byte aligned.
#[inline(always)]
pub unsafe fn ld_nc_v4_f32(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    unsafe {
        asm!("ld.global.nc.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(readonly, nostack))
    };
    [a, b, c, d]
}

/// Read-only 2-float vector load; `p` must be 8-byte aligned.
#[inline(always)]
pub unsafe fn ld_nc_v2_f32(p: *const f32) -> [f32; 2] {
    let (a, b): (f32, f32);
    unsafe {
        asm!("ld.global.nc.v2.f32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, p = in(reg64) p, options(readonly, nostack))
    };
    [a, b]
}

#[inline(always)]
pub unsafe fn ld_nc_f32(p: *const f32) -> f32 {
    let a: f32;
    unsafe { asm!("ld.global.nc.f32 {a}, [{p}];", a = out(reg32) a, p = in(reg64) p, options(readonly, nostack)) };
    a
}

#[inline(always)]
pub unsafe fn ld_nc_u32(p: *const u32) -> u32 {
    let a: u32;
    unsafe { asm!("ld.global.nc.u32 {a}, [{p}];", a = out(reg32) a, p = in(reg64) p, options(readonly, nostack)) };
    a
}

#[inline(always)]
pub unsafe fn ld_nc_u64(p: *const u64) -> u64 {
    let a: u64;
    unsafe { asm!("ld.global.nc.u64 {a}, [{p}];", a = out(reg64) a, p = in(reg64) p, options(readonly, nostack)) };
    a
}

/// Read-only 4 x 32-bit load (e.g. 8 halves); `p` 16-byte aligned.
#[inline(always)]
pub unsafe fn ld_nc_v4_u32(p: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    unsafe {
        asm!("ld.global.nc.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(readonly, nostack))
    };
    [a, b, c, d]
}

/// Read-only 2 x 32-bit load; `p` 8-byte aligned.
#[inline(always)]
pub unsafe fn ld_nc_v2_u32(p: *const u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    unsafe {
        asm!("ld.global.nc.v2.u32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, p = in(reg64) p, options(readonly, nostack))
    };
    [a, b]
}

#[inline(always)]
pub unsafe fn st_v4_f32(p: *mut f32, v: [f32; 4]) {
    unsafe {
        asm!("st.global.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack))
    };
}

/// 4 x 32-bit store (e.g. 8 halves); `p` 16-byte aligned.
#[inline(always)]
pub unsafe fn st_v4_u32(p: *mut u32, v: [u32; 4]) {
    unsafe {
        asm!("st.global.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack))
    };
}

#[inline(always)]
pub unsafe fn st_v2_f32(p: *mut f32, v: [f32; 2]) {
    unsafe { asm!("st.global.v2.f32 [{p}], {{{a}, {b}}};", p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], options(nostack)) };
}

/// `red.global.add.f32`: atomic accumulate without a return value.
#[inline(always)]
pub unsafe fn red_add_f32(p: *mut f32, v: f32) {
    unsafe { asm!("red.global.add.f32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

// ---------------------------------------------------------------- shared memory

/// 32-bit shared-window address of the dynamic shared memory base.
#[inline(always)]
pub fn dyn_smem_base() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {}, dyn_smem;", out(reg32) r, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub unsafe fn st_shared_f32(addr: u32, v: f32) {
    unsafe { asm!("st.shared.f32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack)) };
}

#[inline(always)]
pub unsafe fn ld_shared_f32(addr: u32) -> f32 {
    let r: f32;
    unsafe { asm!("ld.shared.f32 {r}, [{a}];", r = out(reg32) r, a = in(reg32) addr, options(readonly, nostack)) };
    r
}

#[inline(always)]
pub unsafe fn st_shared_u32(addr: u32, v: u32) {
    unsafe { asm!("st.shared.u32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack)) };
}

#[inline(always)]
pub unsafe fn ld_shared_u32(addr: u32) -> u32 {
    let r: u32;
    unsafe { asm!("ld.shared.u32 {r}, [{a}];", r = out(reg32) r, a = in(reg32) addr, options(readonly, nostack)) };
    r
}

#[inline(always)]
pub unsafe fn st_shared_u64(addr: u32, v: u64) {
    unsafe { asm!("st.shared.u64 [{a}], {v};", a = in(reg32) addr, v = in(reg64) v, options(nostack)) };
}

#[inline(always)]
pub unsafe fn ld_shared_u64(addr: u32) -> u64 {
    let r: u64;
    unsafe { asm!("ld.shared.u64 {r}, [{a}];", r = out(reg64) r, a = in(reg32) addr, options(readonly, nostack)) };
    r
}

#[inline(always)]
pub unsafe fn st_shared_u16(addr: u32, v: u16) {
    unsafe { asm!("st.shared.u16 [{a}], {v};", a = in(reg32) addr, v = in(reg16) v, options(nostack)) };
}

#[inline(always)]
pub unsafe fn st_shared_v4_f32(addr: u32, v: [f32; 4]) {
    unsafe {
        asm!("st.shared.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg32) addr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack))
    };
}

// ---------------------------------------------------------------- conversions

/// Round an f32 to tf32 (round to nearest, ties away), kept in a 32-bit register.
#[inline(always)]
pub fn cvt_tf32(v: f32) -> u32 {
    let r: u32;
    unsafe { asm!("cvt.rna.tf32.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(pure, nomem, nostack)) };
    r
}

/// Pack two f32 into an f16x2 register: `lo` in the low half (the lower-indexed element).
#[inline(always)]
pub fn pack_f16x2(lo: f32, hi: f32) -> u32 {
    let r: u32;
    // cvt.rn.f16x2.f32 d, a, b puts a in the upper half and b in the lower half.
    unsafe {
        asm!("cvt.rn.f16x2.f32 {r}, {hi}, {lo};", r = out(reg32) r, hi = in(reg32) hi, lo = in(reg32) lo, options(pure, nomem, nostack))
    };
    r
}

/// Pack two raw f16 bit patterns into an f16x2 register (`lo` in the low half).
#[inline(always)]
pub fn pack_u16x2(lo: u16, hi: u16) -> u32 {
    (lo as u32) | ((hi as u32) << 16)
}

/// f16 bits -> f32.
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let r: f32;
    unsafe { asm!("cvt.f32.f16 {r}, {h};", r = out(reg32) r, h = in(reg16) h, options(pure, nomem, nostack)) };
    r
}

/// `ex2.approx.ftz.f32`: 2^x (for exp in softmax: exp(x) = 2^(x * log2 e)).
#[inline(always)]
pub fn ex2(v: f32) -> f32 {
    let r: f32;
    unsafe { asm!("ex2.approx.ftz.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(pure, nomem, nostack)) };
    r
}

/// e^x through `ex2.approx`.
#[inline(always)]
pub fn exp(v: f32) -> f32 {
    ex2(v * core::f32::consts::LOG2_E)
}

/// 1 / x through `rcp.approx.ftz` (within an ulp or two; for per-edge scale factors).
#[inline(always)]
pub fn rcp_approx(v: f32) -> f32 {
    let r: f32;
    unsafe { asm!("rcp.approx.ftz.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn rcp(v: f32) -> f32 {
    let r: f32;
    unsafe { asm!("rcp.rn.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(pure, nomem, nostack)) };
    r
}

/// `fma.rn.f32`: a * b + c with one rounding (Rust's `a * b + c` becomes `mul.rn` + `add.rn`,
/// which ptxas does not fuse).
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    let r: f32;
    unsafe {
        asm!("fma.rn.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack))
    };
    r
}

// ---------------------------------------------------------------- tensor cores

/// D = A * B + C, m16n8k8, f16 inputs, f32 accumulators.
/// A: 2 x f16x2 (row-major 16x8), B: 1 x f16x2 (col-major 8x8), C/D: 4 x f32.
#[inline(always)]
pub fn mma_m16n8k8_f16(a: [u32; 2], b: u32, c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}}}, {{{b0}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], b0 = in(reg32) b,
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            options(pure, nomem, nostack)
        )
    };
    [d0, d1, d2, d3]
}

/// D = A * B + C, m16n8k16, f16 inputs, f32 accumulators.
/// A: 4 x f16x2, B: 2 x f16x2, C/D: 4 x f32.
#[inline(always)]
pub fn mma_m16n8k16_f16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b[0], b1 = in(reg32) b[1],
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            options(pure, nomem, nostack)
        )
    };
    [d0, d1, d2, d3]
}

/// `movmatrix.sync.aligned.m8n8.trans.b16`: the transpose of an 8 x 8 f16 matrix held as an
/// MMA fragment (lane l: row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, low half first).
#[inline(always)]
pub fn movmatrix_trans(a: u32) -> u32 {
    let d: u32;
    unsafe { asm!("movmatrix.sync.aligned.m8n8.trans.b16 {d}, {a};", d = out(reg32) d, a = in(reg32) a, options(pure, nomem, nostack)) };
    d
}

/// D = A * B + C, m16n8k4, tf32 inputs (from `cvt_tf32`), f32 accumulators.
/// A: 2 x tf32, B: 1 x tf32, C/D: 4 x f32.
#[inline(always)]
pub fn mma_m16n8k4_tf32(a: [u32; 2], b: u32, c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}}}, {{{b0}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], b0 = in(reg32) b,
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            options(pure, nomem, nostack)
        )
    };
    [d0, d1, d2, d3]
}

/// D = A * B + C, m16n8k8, tf32 inputs, f32 accumulators.
/// A: 4 x tf32, B: 2 x tf32, C/D: 4 x f32.
#[inline(always)]
pub fn mma_m16n8k8_tf32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b[0], b1 = in(reg32) b[1],
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            options(pure, nomem, nostack)
        )
    };
    [d0, d1, d2, d3]
}

// ---------------------------------------------------------------- byte permutes and narrow loads

/// `prmt.b32`: pick four bytes out of (a, b) by the nibbles of `sel` (bytes 0-3 from a, 4-7 from b).
#[inline(always)]
pub fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("prmt.b32 {r}, {a}, {b}, {s};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, s = in(reg32) sel, options(pure, nomem, nostack))
    };
    r
}

/// Low halves of `a` and `b` as one f16x2 (`a`'s in the low half).
#[inline(always)]
pub fn lo_halves(a: u32, b: u32) -> u32 {
    prmt(a, b, 0x5410)
}

/// High halves of `a` and `b` as one f16x2 (`a`'s in the low half).
#[inline(always)]
pub fn hi_halves(a: u32, b: u32) -> u32 {
    prmt(a, b, 0x7632)
}

#[inline(always)]
pub unsafe fn ld_nc_u16(p: *const u16) -> u16 {
    let a: u16;
    unsafe { asm!("ld.global.nc.u16 {a}, [{p}];", a = out(reg16) a, p = in(reg64) p, options(readonly, nostack)) };
    a
}

/// Read-only byte load (zero-extended).
#[inline(always)]
pub unsafe fn ld_nc_u8(p: *const u8) -> u32 {
    let a: u32;
    unsafe { asm!("ld.global.nc.u8 {a}, [{p}];", a = out(reg32) a, p = in(reg64) p, options(readonly, nostack)) };
    a
}

/// `red.shared.add.f32`: atomic add into shared memory (32-bit shared-window address).
#[inline(always)]
pub unsafe fn red_shared_add_f32(addr: u32, v: f32) {
    unsafe { asm!("red.shared.add.f32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack)) };
}

// ---------------------------------------------------------------- asynchronous copies (sm_80+)

/// `cp.async.cg`: copy 16 bytes from global `src` to shared `dst` without holding registers;
/// `src_bytes` = 0 writes 16 zero bytes instead (src is then not read).
#[inline(always)]
pub unsafe fn cp_async_16(dst: u32, src: *const u32, src_bytes: u32) {
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes, options(nostack))
    };
}

/// Close the copies issued so far by this thread into one group.
#[inline(always)]
pub fn cp_async_commit() {
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// Wait until at most `N` of this thread's committed groups are still in flight.
#[inline(always)]
pub fn cp_async_wait<const N: u32>() {
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
}

#[inline(always)]
pub unsafe fn ld_shared_v4_u32(addr: u32) -> [u32; 4] {
    let r: [u32; 4];
    unsafe {
        let (a, b, c, d): (u32, u32, u32, u32);
        asm!("ld.shared.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg32) addr, options(readonly, nostack));
        r = [a, b, c, d];
    }
    r
}

#[inline(always)]
pub unsafe fn ld_shared_u16(addr: u32) -> u16 {
    let r: u16;
    unsafe { asm!("ld.shared.u16 {r}, [{a}];", r = out(reg16) r, a = in(reg32) addr, options(readonly, nostack)) };
    r
}

#[inline(always)]
pub unsafe fn st_shared_v4_u32(addr: u32, v: [u32; 4]) {
    unsafe {
        asm!("st.shared.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg32) addr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack))
    };
}

// ---------------------------------------------------------------- bulk copies and mbarriers (sm_90)
//
// PTX ISA 8.0 / sm_90 only. Builds for older targets keep the functions (so generic kernels
// compile) but they trap: the host never launches a bulk-copy kernel below sm_90.

#[cfg(target_feature = "sm_90")]
macro_rules! sm90_asm {
    ($($t:tt)*) => { unsafe { asm!($($t)*) } };
}
#[cfg(not(target_feature = "sm_90"))]
macro_rules! sm90_asm {
    ($($t:tt)*) => {
        unsafe { core::arch::nvptx::trap() }
    };
}

/// `mbarrier.init`: a barrier in shared memory (8-byte aligned) expecting `count` arrivals.
#[inline(always)]
#[cfg_attr(not(target_feature = "sm_90"), allow(unused_variables))]
pub unsafe fn mbarrier_init(bar: u32, count: u32) {
    sm90_asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count, options(nostack));
}

/// Make barrier initialisations visible to the async proxy (the bulk copies complete on them).
#[inline(always)]
pub fn fence_mbarrier_init() {
    sm90_asm!("fence.mbarrier_init.release.cluster;", options(nostack));
}

/// Order this thread's earlier generic-proxy shared-memory accesses before later async-proxy
/// ones (a bulk copy refilling a buffer that was just read or zeroed with ordinary stores).
#[inline(always)]
pub fn fence_proxy_async_shared() {
    sm90_asm!("fence.proxy.async.shared::cta;", options(nostack));
}

/// Arrive on `bar` and raise its expected transaction count by `bytes` (the copies that will
/// complete on this phase).
#[inline(always)]
#[cfg_attr(not(target_feature = "sm_90"), allow(unused_variables))]
pub unsafe fn mbarrier_arrive_expect_tx(bar: u32, bytes: u32) {
    sm90_asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};", b = in(reg32) bar, n = in(reg32) bytes, options(nostack));
}

/// Whether the phase of `bar` with parity `parity` has completed (may suspend briefly).
#[cfg(target_feature = "sm_90")]
#[inline(always)]
pub unsafe fn mbarrier_try_wait_parity(bar: u32, parity: u32) -> bool {
    let done: u32;
    unsafe {
        asm!(
            "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph}; selp.u32 {r}, 1, 0, p; }}",
            b = in(reg32) bar,
            ph = in(reg32) parity,
            r = out(reg32) done,
            options(nostack)
        )
    };
    done != 0
}
#[cfg(not(target_feature = "sm_90"))]
#[inline(always)]
pub unsafe fn mbarrier_try_wait_parity(_bar: u32, _parity: u32) -> bool {
    unsafe { core::arch::nvptx::trap() }
}

/// Spin until the phase of `bar` with parity `parity` has completed.
#[inline(always)]
pub unsafe fn mbarrier_wait_parity(bar: u32, parity: u32) {
    while !unsafe { mbarrier_try_wait_parity(bar, parity) } {}
}

/// `cp.async.bulk` global -> shared: `bytes` (a multiple of 16; both addresses 16-byte aligned)
/// copied by the TMA unit, completing as transactions on `bar`.
#[inline(always)]
#[cfg_attr(not(target_feature = "sm_90"), allow(unused_variables))]
pub unsafe fn cp_async_bulk_g2s(dst: u32, src: *const u32, bytes: u32, bar: u32) {
    sm90_asm!(
        "{{ .reg .u64 g; cvta.to.global.u64 g, {s}; cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [g], {n}, [{b}]; }}",
        d = in(reg32) dst,
        s = in(reg64) src,
        n = in(reg32) bytes,
        b = in(reg32) bar,
        options(nostack)
    );
}

/// Atomic accumulate of 4 consecutive floats (`p` 16-byte aligned): one `red.global.v4.f32.add`
/// on sm_90 (PTX 8.1), four scalar reductions elsewhere.
#[inline(always)]
pub unsafe fn red_add_v4_f32(p: *mut f32, v: [f32; 4]) {
    #[cfg(target_feature = "sm_90")]
    unsafe {
        asm!("red.global.v4.f32.add [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack))
    };
    #[cfg(not(target_feature = "sm_90"))]
    for (i, e) in v.iter().enumerate() {
        unsafe { red_add_f32(p.add(i), *e) };
    }
}

/// `mma.sync.aligned.m16n8k32` with e4m3 A and B, f32 accumulators (sm_89+; traps below).
#[inline(always)]
#[cfg_attr(not(target_feature = "sm_89"), allow(unused_variables))]
pub fn mma_m16n8k32_e4m3(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    #[cfg(target_feature = "sm_89")]
    {
        let (d0, d1, d2, d3): (f32, f32, f32, f32);
        unsafe {
            asm!(
                "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                options(pure, nomem, nostack)
            )
        };
        [d0, d1, d2, d3]
    }
    #[cfg(not(target_feature = "sm_89"))]
    unsafe {
        core::arch::nvptx::trap()
    }
}

/// Four f32 rounded to e4m3 (saturating) in one word: byte 0 = `v[0]` ... byte 3 = `v[3]`
/// (sm_89+; traps below).
#[inline(always)]
#[cfg_attr(not(target_feature = "sm_89"), allow(unused_variables))]
pub fn pack_e4m3x4(v: [f32; 4]) -> u32 {
    #[cfg(target_feature = "sm_89")]
    {
        let r: u32;
        // cvt ... e4m3x2 d, a, b puts a in the upper byte of d.
        unsafe {
            asm!(
                "{{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, {b}, {a}; cvt.rn.satfinite.e4m3x2.f32 hi, {d}, {c}; mov.b32 {r}, {{lo, hi}}; }}",
                a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], r = out(reg32) r,
                options(pure, nomem, nostack)
            )
        };
        r
    }
    #[cfg(not(target_feature = "sm_89"))]
    unsafe {
        core::arch::nvptx::trap()
    }
}

/// `red.global.max.u32` (a non-negative f32's bits order like the float).
#[inline(always)]
pub unsafe fn red_max_u32(p: *mut u32, v: u32) {
    unsafe { asm!("red.global.max.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

/// `cp.async.ca` of 4 bytes (`src_bytes` = 0 writes zeros instead).
#[inline(always)]
pub unsafe fn cp_async_4(dst: u32, src: *const u32, src_bytes: u32) {
    unsafe {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 4, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes, options(nostack))
    };
}

/// `red.global.add.noftz.f16x2`: atomic accumulate of two packed halves.
#[inline(always)]
pub unsafe fn red_add_f16x2(p: *mut u32, v: u32) {
    unsafe { asm!("red.global.add.noftz.f16x2 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

#[inline(always)]
pub unsafe fn st_v2_u32(p: *mut u32, v: [u32; 2]) {
    unsafe { asm!("st.global.v2.u32 [{p}], {{{a}, {b}}};", p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], options(nostack)) };
}

// ---------------------------------------------------------------- coherent global access (nn ops)

/// Coherent 4-float vector load (for buffers the same kernel also writes); `p` 16-byte aligned.
#[inline(always)]
pub unsafe fn ld_v4_f32(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    unsafe {
        asm!("ld.global.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(readonly, nostack))
    };
    [a, b, c, d]
}

#[inline(always)]
pub unsafe fn ld_f32(p: *const f32) -> f32 {
    let a: f32;
    unsafe { asm!("ld.global.f32 {a}, [{p}];", a = out(reg32) a, p = in(reg64) p, options(readonly, nostack)) };
    a
}

#[inline(always)]
pub unsafe fn st_f32(p: *mut f32, v: f32) {
    unsafe { asm!("st.global.f32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

#[inline(always)]
pub unsafe fn ld_u32(p: *const u32) -> u32 {
    let a: u32;
    unsafe { asm!("ld.global.u32 {a}, [{p}];", a = out(reg32) a, p = in(reg64) p, options(readonly, nostack)) };
    a
}

#[inline(always)]
pub unsafe fn st_u32(p: *mut u32, v: u32) {
    unsafe { asm!("st.global.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

/// Store the low byte of `v`.
#[inline(always)]
pub unsafe fn st_u8(p: *mut u8, v: u32) {
    unsafe { asm!("st.global.u8 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

#[inline(always)]
pub fn shfl_xor_u32(v: u32, lane_mask: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 0x1f, -1;", r = out(reg32) r, v = in(reg32) v, m = in(reg32) lane_mask, options(nomem, nostack))
    };
    r
}

// ---------------------------------------------------------------- math (nn ops)

/// `sqrt.rn.f32`: IEEE square root (round to nearest).
#[inline(always)]
pub fn sqrt(v: f32) -> f32 {
    let r: f32;
    unsafe { asm!("sqrt.rn.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(pure, nomem, nostack)) };
    r
}

/// `lg2.approx.f32`: log2(x) (max relative error about 2^-22).
#[inline(always)]
pub fn lg2(v: f32) -> f32 {
    let r: f32;
    unsafe { asm!("lg2.approx.f32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(pure, nomem, nostack)) };
    r
}

/// Natural logarithm through `lg2.approx`.
#[inline(always)]
pub fn ln(v: f32) -> f32 {
    lg2(v) * core::f32::consts::LN_2
}

// ---------------------------------------------------------------- warp votes and counters (samplers)

/// `vote.sync.ballot.b32` over the full warp: bit i set iff lane i's `p` holds.
#[inline(always)]
pub fn ballot(p: bool) -> u32 {
    let r: u32;
    unsafe {
        asm!("{{ .reg .pred q; setp.ne.u32 q, {v}, 0; vote.sync.ballot.b32 {r}, q, -1; }}", r = out(reg32) r, v = in(reg32) p as u32, options(nomem, nostack))
    };
    r
}

/// `red.global.add.u32`.
#[inline(always)]
pub unsafe fn red_add_u32(p: *mut u32, v: u32) {
    unsafe { asm!("red.global.add.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

/// `red.global.min.u32`.
#[inline(always)]
pub unsafe fn red_min_u32(p: *mut u32, v: u32) {
    unsafe { asm!("red.global.min.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

/// `atom.global.add.u32`: adds `v` and returns the value before.
#[inline(always)]
pub unsafe fn atom_add_u32(p: *mut u32, v: u32) -> u32 {
    let r: u32;
    unsafe { asm!("atom.global.add.u32 {r}, [{p}], {v};", r = out(reg32) r, p = in(reg64) p, v = in(reg32) v, options(nostack)) };
    r
}

/// `sqrt.rn.f64`: IEEE square root (round to nearest), as the host's `f64::sqrt`.
#[inline(always)]
pub fn sqrt_f64(v: f64) -> f64 {
    let r: f64;
    unsafe { asm!("sqrt.rn.f64 {r}, {v};", r = out(reg64) r, v = in(reg64) v, options(pure, nomem, nostack)) };
    r
}
