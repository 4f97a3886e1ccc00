//! Fused multi-head GAT attention on CUDA cores: per layer, the edge logits, the per-head edge
//! softmax, attention dropout and the aggregation of every head in one pass over each row's
//! edges (forward), and the backward in two kernels. No per-edge value is stored: the forward
//! keeps per row and head the softmax's (max, sum); the backward recomputes alpha from them and
//! regenerates the dropout mask from the counter RNG.
//!
//! Lanes: a lane takes one (edge, head) pair: the warp is `S = 32 / Hp` slots of `Hp =
//! next_pow2(heads)` lanes (`shift` = log2 Hp), slot s walking edges s, s + S, ... of the row,
//! lane h of a slot head h, holding that head's `dim <= NF` columns in registers. So every
//! scalar of an (edge, head) (logit, exp, mask, the dot products of the backward) is computed
//! once, a slot's lanes read a neighbour's row contiguously, and `S x U` edges are in flight
//! (column ids read 32 at a time, `U` edges' gathers issued before any is used: `walk`). At a
//! row's end the slots meet through shuffles (online-softmax states merged, sums added). How
//! the rows are spread over one launch (a slot per short row, a warp per middle one, segments of
//! long rows merged by a combine launch) is `row_split.rs`, shared with AGNN's attention.
//!
//! Maths, per head h (dropping h): z_ij = s_dst_i + s_src_j, e = LeakyReLU(z), alpha =
//! softmax_j(e), alpha' = alpha m_ij / (1 - p), out_i = sum_j alpha'_ij Wh_j + b. Backward with
//! dout: da'_ij = dout_i . Wh_j, da = da' m / (1 - p), D_i = sum_j alpha_ij da_ij, dz_ij =
//! alpha_ij (da_ij - D_i) lk'_ij (lk' = 1 for z > 0, else the slope). The row pass walks row i
//! once: D_i, P_i = sum alpha da lk' and Q_i = sum alpha lk', so ds_dst_i = sum_j dz_ij = P_i -
//! D_i Q_i (subtracting D per edge needed a second walk; on the tf32 hub case both forms gave
//! the same error, and the f32 tests hold). The column pass walks Sᵀ: ds_src_j = sum_i dz_ij
//! and dWh_j = sum_i alpha'_ij dout_i (plus the per-node scores' part ds_src_j a_src + ds_dst_j
//! a_dst where the attention vectors are given), recomputing alpha, da and dz there from the source rows'
//! state: D_i is a reduction over all of row i, hence two kernels. The row pass leaves per row
//! and head (s_dst, lse = max + ln sum, D) in one 16-byte word (`row_state`), so the column
//! pass gathers one word an edge and head instead of four floats from three arrays, and alpha
//! = exp(e - lse) takes no division.

use super::row_split::{Lane, Span, block_sums, long_rows, partial, rows, slot_sum, smem, walk, walk_steps};
use crate::abi::gat_attention::GatAttentionArgs;
use crate::ptx;
use crate::rng::DropoutStep;

/// Every kernel's start: this lane's place, its head (0 for idle lanes, which read valid rows and
/// write nothing) and the dropout step's draw (its step read when the kernel runs).
#[inline(always)]
unsafe fn start(a: &GatAttentionArgs) -> (Lane, u32, DropoutStep) {
    let ln = Lane::new(a.shift, a.heads);
    let step = if a.threshold == 0 { DropoutStep { step: 0, span0: 0 } } else { DropoutStep::new(a.seed_key, unsafe { *a.step }) };
    (ln, if ln.on { ln.h } else { 0 }, step)
}

/// Head `h`'s `dim` columns of row `r` of an n x (heads dim) matrix (zeros past `dim`).
#[inline(always)]
unsafe fn head_row<const NF: usize>(a: &GatAttentionArgs, p: *const f32, r: u32, h: u32) -> [f32; NF] {
    let base = unsafe { p.add(r as usize * a.ld as usize + (h * a.dim) as usize) };
    let mut v = [0f32; NF];
    if a.dim % 4 == 0 {
        // 16-byte aligned: ld is a multiple of 8 and every head starts at a multiple of 4.
        for q in 0..NF / 4 {
            // (Element by element: a slice copy here became a byte loop over a stack array.)
            let x = if (4 * q as u32) < a.dim { unsafe { ptx::ld_nc_v4_f32(base.add(4 * q)) } } else { [0.0; 4] };
            for k in 0..4 {
                v[4 * q + k] = x[k];
            }
        }
    } else {
        for (c, x) in v.iter_mut().enumerate() {
            if (c as u32) < a.dim {
                *x = unsafe { ptx::ld_nc_f32(base.add(c)) };
            }
        }
    }
    v
}

#[inline(always)]
unsafe fn score(p: *const f32, r: u32, hld: u32, h: u32) -> f32 {
    unsafe { ptx::ld_nc_f32(p.add(r as usize * hld as usize + h as usize)) }
}

/// The dropout factor of edge `e`, head `h`: `keep_scale` if kept, else 0 (1 without dropout).
#[inline(always)]
fn keep(a: &GatAttentionArgs, step: DropoutStep, e: u32, h: u32) -> f32 {
    if a.threshold == 0 {
        return 1.0;
    }
    // A part's edge draws as its original edge (`GatAttentionArgs::edge_ids`).
    let e = if a.edge_ids.is_null() { e } else { unsafe { ptx::ld_nc_u32(a.edge_ids.add(e as usize)) } };
    let kept = if a.low_index != 0 {
        let index = (a.first_edge as u32).wrapping_add(e).wrapping_mul(a.heads).wrapping_add(h);
        crate::rng::dropout_bits_span(step.span0, index) >= a.threshold
    } else {
        step.keep(a.seed_key, (a.first_edge + e as u64) * a.heads as u64 + h as u64, a.threshold)
    };
    if kept { a.keep_scale } else { 0.0 }
}

/// LeakyReLU and its derivative at z.
#[inline(always)]
fn leaky(z: f32, slope: f32) -> (f32, f32) {
    if z > 0.0 { (z, 1.0) } else { (z * slope, slope) }
}

fn dot<const NF: usize>(x: &[f32; NF], y: &[f32; NF]) -> f32 {
    let mut s = 0.0;
    for c in 0..NF {
        s = ptx::fma_f32(x[c], y[c], s);
    }
    s
}

/// An online-softmax state (max, sum, weighted row) merged with another.
#[inline(always)]
fn merge<const NF: usize>(m: &mut f32, l: &mut f32, acc: &mut [f32; NF], m2: f32, l2: f32, acc2: &[f32; NF]) {
    let new_m = if m2 > *m { m2 } else { *m };
    if new_m == f32::NEG_INFINITY {
        return;
    }
    let (s1, s2) = (ptx::exp(*m - new_m), ptx::exp(m2 - new_m));
    *l = *l * s1 + l2 * s2;
    for c in 0..NF {
        acc[c] = acc[c] * s1 + acc2[c] * s2;
    }
    *m = new_m;
}

/// What the forward and the row pass gather per edge (source j, edge e) of head h: s_src[j],
/// head h's row of Wh_j, and the edge's dropout factor (computed while the gathers fly).
#[inline(always)]
unsafe fn source<const NF: usize>(a: &GatAttentionArgs, j: u32, e: u32, h: u32, step: DropoutStep) -> (f32, [f32; NF], f32) {
    unsafe { (score(a.s_src, j, a.hld, h), head_row::<NF>(a, a.wh, j, h), keep(a, step, e, h)) }
}

/// The forward: out (the heads' columns) and stats ((0, 0) and out = bias for an empty row).
/// A long row's segment writes its (max, sum, weighted row) per head to `partials`, which the
/// combine launch merges. `H16`: out is f16 (heads of exactly NF columns, NF a multiple of 8;
/// the launcher checks), written a head's NF / 8 16-byte stores at a time.
#[inline(always)]
pub unsafe fn forward<const NF: usize, const U: usize, const H16: bool>(a: GatAttentionArgs) {
    if a.split.combine != 0 {
        unsafe {
            long_rows(&a.split, a.heads, |i, h, s0, s1| {
                let (mut m, mut l, mut acc) = (f32::NEG_INFINITY, 0f32, [0f32; NF]);
                for seg in s0..s1 {
                    let p = partial(&a.split, seg, h, 2 + a.dim);
                    let mut acc2 = [0f32; NF];
                    for c in 0..NF {
                        if (c as u32) < a.dim {
                            acc2[c] = ptx::ld_f32(p.add(2 + c));
                        }
                    }
                    merge(&mut m, &mut l, &mut acc, ptx::ld_f32(p), ptx::ld_f32(p.add(1)), &acc2);
                }
                write_forward::<NF, H16>(&a, i, h, m, l, &acc, false);
            })
        };
        return;
    }
    let (ln, h, step) = unsafe { start(&a) };
    unsafe {
        rows(&a.split, &ln, a.row_ptr, |i, lo, hi, span, seg| {
            let (own, block) = (span == Span::Slot, span == Span::Block);
            let sd = score(a.s_dst, i, a.hld, h);
            let (mut m, mut l, mut acc) = (f32::NEG_INFINITY, 0f32, [0f32; NF]);
            walk_steps::<_, U>(
                &ln,
                own,
                a.col_idx,
                core::ptr::null(),
                lo,
                hi,
                |j, e| source::<NF>(&a, j, e, h, step),
                |src, ok| {
                    // The step's logits, then one rescale of the running state for the whole step.
                    let mut lg = [0f32; U];
                    let mut new_m = m;
                    crate::unroll4!(u => {
                        if u < U {
                            lg[u] = leaky(sd + src[u].0, a.slope).0;
                            if ok[u] && lg[u] > new_m {
                                new_m = lg[u];
                            }
                        }
                    });
                    // (new_m = -inf only when the step has no entry of the row: nothing to add.)
                    let scale = if new_m == f32::NEG_INFINITY { 1.0 } else { ptx::exp(m - new_m) };
                    l *= scale;
                    for v in acc.iter_mut() {
                        *v *= scale;
                    }
                    crate::unroll4!(u => {
                        if u < U {
                            let e = ptx::exp(lg[u] - new_m);
                            let p = if ok[u] { e } else { 0.0 };
                            l += p;
                            let w = p * src[u].2;
                            for c in 0..NF {
                                acc[c] = ptx::fma_f32(w, src[u].1[c], acc[c]);
                            }
                        }
                    });
                    m = new_m;
                },
            );
            // The slots' states merged (butterfly: every lane ends with its head's).
            let mut d = if own { 0 } else { ln.slots >> 1 };
            while d > 0 {
                let (m2, l2) = (ptx::shfl_xor_f32(m, d << a.shift), ptx::shfl_xor_f32(l, d << a.shift));
                let mut acc2 = [0f32; NF];
                for c in 0..NF {
                    acc2[c] = ptx::shfl_xor_f32(acc[c], d << a.shift);
                }
                merge(&mut m, &mut l, &mut acc, m2, l2, &acc2);
                d >>= 1;
            }
            if block {
                let w = ptx::warp_id();
                if ln.slot == 0 {
                    ptx::st_shared_f32(smem(w, ln.h, 0, NF + 2), m);
                    ptx::st_shared_f32(smem(w, ln.h, 1, NF + 2), l);
                    for c in 0..NF {
                        ptx::st_shared_f32(smem(w, ln.h, c + 2, NF + 2), acc[c]);
                    }
                }
                ptx::sync_threads();
                if w == 0 && ln.slot == 0 && ln.on {
                    for src in 1..ptx::ntid_x() / 32 {
                        let (m2, l2) = (ptx::ld_shared_f32(smem(src, ln.h, 0, NF + 2)), ptx::ld_shared_f32(smem(src, ln.h, 1, NF + 2)));
                        let mut acc2 = [0f32; NF];
                        for c in 0..NF {
                            acc2[c] = ptx::ld_shared_f32(smem(src, ln.h, c + 2, NF + 2));
                        }
                        merge(&mut m, &mut l, &mut acc, m2, l2, &acc2);
                    }
                    // The segment's state, for the combine launch.
                    let p = partial(&a.split, seg, h, 2 + a.dim);
                    ptx::st_f32(p, m);
                    ptx::st_f32(p.add(1), l);
                    for c in 0..NF {
                        if (c as u32) < a.dim {
                            ptx::st_f32(p.add(2 + c), acc[c]);
                        }
                    }
                }
                return;
            }
            if (own || ln.slot == 0) && ln.on {
                write_forward::<NF, H16>(&a, i, h, m, l, &acc, lo == hi);
            }
        })
    }
}

/// Row i's outputs of head h from its softmax state: out = acc / l + bias (f16 with `H16`),
/// stats (m, l) ((0, 0) for an empty row).
#[inline(always)]
unsafe fn write_forward<const NF: usize, const H16: bool>(
    a: &GatAttentionArgs,
    i: u32,
    h: u32,
    m: f32,
    l: f32,
    acc: &[f32; NF],
    empty: bool,
) {
    unsafe {
        let at = i as usize * a.ld as usize + (h * a.dim) as usize;
        if H16 {
            let out = (a.out as *mut u16).add(at) as *mut u32;
            let bias = a.bias.add((h * a.dim) as usize);
            let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
            let value = |c: usize| acc[c] * inv + ptx::ld_nc_f32(bias.add(c));
            for q in 0..NF / 8 {
                let c = 8 * q;
                let packed = [0, 1, 2, 3].map(|k| ptx::pack_f16x2(value(c + 2 * k), value(c + 2 * k + 1)));
                ptx::st_v4_u32(out.add(4 * q), packed);
            }
        } else {
            let out = a.out.add(at);
            let bias = a.bias.add((h * a.dim) as usize);
            // One division a row and head, not one a column.
            let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
            for c in 0..NF {
                if (c as u32) < a.dim {
                    let v = acc[c] * inv;
                    ptx::st_f32(out.add(c), v + ptx::ld_nc_f32(bias.add(c)));
                }
            }
        }
        let s = a.stats.add(i as usize * a.sld as usize + 2 * h as usize);
        ptx::st_f32(s, if empty { 0.0 } else { m });
        ptx::st_f32(s.add(1), if empty { 0.0 } else { l });
    }
}

/// Row `i`'s softmax statistics (max, sum) of head `h`.
#[inline(always)]
unsafe fn stat(a: &GatAttentionArgs, i: u32, h: u32) -> (f32, f32) {
    let s = unsafe { (a.stats as *const f32).add(i as usize * a.sld as usize + 2 * h as usize) };
    unsafe { (ptx::ld_nc_f32(s), ptx::ld_nc_f32(s.add(1))) }
}

/// Row `i`'s log-sum-exp of head `h` (max + ln sum): alpha_ij = exp(e_ij - lse_i), no division
/// an edge.
#[inline(always)]
unsafe fn lse(a: &GatAttentionArgs, i: u32, h: u32) -> f32 {
    let (m, l) = unsafe { stat(a, i, h) };
    m + ptx::ln(l)
}

/// alpha of an edge from its row's log-sum-exp, and LeakyReLU' there.
#[inline(always)]
fn alpha(a: &GatAttentionArgs, lse: f32, z: f32) -> (f32, f32) {
    let (lg, d) = leaky(z, a.slope);
    (ptx::exp(lg - lse), d)
}

/// Row `i`'s state of head `h` for the column pass, one 16-byte word: (s_dst, lse, D).
#[inline(always)]
fn row_state(a: &GatAttentionArgs, i: u32, h: u32) -> *mut f32 {
    unsafe { a.row_state.add(4 * (i as usize * a.heads as usize + h as usize)) }
}

/// The row pass, one walk of row i: D_i = sum alpha da, P = sum alpha da lk', Q = sum alpha
/// lk', and ds_dst_i = P - D_i Q (= sum alpha (da - D_i) lk'). A long row's segment writes its
/// (D, P, Q) per head to `partials`; the combine launch adds them in segment order.
#[inline(always)]
pub unsafe fn row_grad<const NF: usize, const U: usize>(a: GatAttentionArgs) {
    if a.split.combine != 0 {
        unsafe {
            long_rows(&a.split, a.heads, |i, h, s0, s1| {
                let (mut d, mut p, mut q) = (0f32, 0f32, 0f32);
                for seg in s0..s1 {
                    let x = partial(&a.split, seg, h, 3);
                    d += ptx::ld_f32(x);
                    p += ptx::ld_f32(x.add(1));
                    q += ptx::ld_f32(x.add(2));
                }
                write_row(&a, i, h, (score(a.s_dst, i, a.hld, h), lse(&a, i, h)), d, p - d * q);
            })
        };
        return;
    }
    let (ln, h, step) = unsafe { start(&a) };
    unsafe {
        rows(&a.split, &ln, a.row_ptr, |i, lo, hi, span, seg| {
            let (own, block) = (span == Span::Slot, span == Span::Block);
            let sd = score(a.s_dst, i, a.hld, h);
            let ls = lse(&a, i, h);
            let g = head_row::<NF>(&a, a.dout, i, h);
            let (mut d, mut p, mut q) = (0f32, 0f32, 0f32);
            walk::<_, U>(
                &ln,
                own,
                a.col_idx,
                core::ptr::null(),
                lo,
                hi,
                |j, e| source::<NF>(&a, j, e, h, step),
                |(ss, x, mk)| {
                    let (al, lk) = alpha(&a, ls, sd + ss);
                    let da = dot(&g, &x) * mk;
                    d += al * da;
                    p += al * da * lk;
                    q += al * lk;
                },
            );
            d = slot_sum(d, &ln, own, a.shift);
            p = slot_sum(p, &ln, own, a.shift);
            q = slot_sum(q, &ln, own, a.shift);
            if block {
                let [d, p, q] = block_sums(&ln, [d, p, q]);
                if ptx::warp_id() == 0 && ln.slot == 0 && ln.on {
                    let x = partial(&a.split, seg, h, 3);
                    ptx::st_f32(x, d);
                    ptx::st_f32(x.add(1), p);
                    ptx::st_f32(x.add(2), q);
                }
                return;
            }
            if (own || ln.slot == 0) && ln.on {
                write_row(&a, i, h, (sd, ls), d, p - d * q);
            }
        })
    }
}

/// Row i's D and ds_dst of head h, and its state for the column pass ((s_dst, lse) given).
#[inline(always)]
unsafe fn write_row(a: &GatAttentionArgs, i: u32, h: u32, (sd, ls): (f32, f32), d: f32, ds: f32) {
    let o = i as usize * a.hld as usize + h as usize;
    unsafe {
        ptx::st_f32(a.d_row.add(o), d);
        ptx::st_f32(a.ds_dst.add(o), ds);
        ptx::st_v4_f32(row_state(a, i, h), [sd, ls, d, 0.0]);
    }
}

/// The column pass: per node j over its in-edges (rows of Sᵀ), ds_src_j and dWh_j. A long
/// column's segment writes its sums per head to `partials`; the combine launch adds them in
/// segment order.
#[inline(always)]
pub unsafe fn col_grad<const NF: usize, const U: usize>(a: GatAttentionArgs) {
    if a.split.combine != 0 {
        unsafe {
            long_rows(&a.split, a.heads, |j, h, s0, s1| {
                let (mut dsrc, mut dw) = (0f32, [0f32; NF]);
                for seg in s0..s1 {
                    let x = partial(&a.split, seg, h, 1 + a.dim);
                    dsrc += ptx::ld_f32(x);
                    for c in 0..NF {
                        if (c as u32) < a.dim {
                            dw[c] += ptx::ld_f32(x.add(1 + c));
                        }
                    }
                }
                write_col::<NF>(&a, j, h, dsrc, &dw, ds_dst_of(&a, j, h));
            })
        };
        return;
    }
    let (ln, h, step) = unsafe { start(&a) };
    unsafe {
        rows(&a.split, &ln, a.t_ptr, |j, lo, hi, span, seg| {
            let (own, block) = (span == Span::Slot, span == Span::Block);
            let ss = score(a.s_src, j, a.hld, h);
            let x = head_row::<NF>(&a, a.wh, j, h);
            // Loaded with the row's other inputs, not after its walk (a latency a row).
            let ddst = ds_dst_of(&a, j, h);
            let (mut dsrc, mut dw) = (0f32, [0f32; NF]);
            walk::<_, U>(
                &ln,
                own,
                a.t_cols,
                a.t_of,
                lo,
                hi,
                |i, e| (ptx::ld_nc_v4_f32(row_state(&a, i, h)), head_row::<NF>(&a, a.dout, i, h), keep(&a, step, e, h)),
                |(rs, g, mk)| {
                    let [sd, ls, di, _] = rs;
                    let (al, lk) = alpha(&a, ls, sd + ss);
                    dsrc += al * (dot(&g, &x) * mk - di) * lk;
                    let w = al * mk;
                    for c in 0..NF {
                        dw[c] = ptx::fma_f32(w, g[c], dw[c]);
                    }
                },
            );
            dsrc = slot_sum(dsrc, &ln, own, a.shift);
            for v in dw.iter_mut() {
                *v = slot_sum(*v, &ln, own, a.shift);
            }
            if block {
                dsrc = block_sums(&ln, [dsrc])[0];
                dw = block_sums(&ln, dw);
                if ptx::warp_id() == 0 && ln.slot == 0 && ln.on {
                    let x = partial(&a.split, seg, h, 1 + a.dim);
                    ptx::st_f32(x, dsrc);
                    for c in 0..NF {
                        if (c as u32) < a.dim {
                            ptx::st_f32(x.add(1 + c), dw[c]);
                        }
                    }
                }
                return;
            }
            if (own || ln.slot == 0) && ln.on {
                write_col::<NF>(&a, j, h, dsrc, &dw, ddst);
            }
        })
    }
}

/// Node j's ds_dst of head h (from the row pass) where the column pass adds the scores' part
/// to dWh, else 0 (not read).
#[inline(always)]
unsafe fn ds_dst_of(a: &GatAttentionArgs, j: u32, h: u32) -> f32 {
    if a.a_src.is_null() { 0.0 } else { unsafe { ptx::ld_nc_f32(a.ds_dst.add(j as usize * a.hld as usize + h as usize)) } }
}

/// Node j's dWh (head h's columns) and ds_src; with the attention vectors given, dWh gets the
/// per-node scores' part ds_src a_src + ds_dst a_dst too (`ddst`: [`ds_dst_of`]).
#[inline(always)]
unsafe fn write_col<const NF: usize>(a: &GatAttentionArgs, j: u32, h: u32, dsrc: f32, dw: &[f32; NF], ddst: f32) {
    unsafe {
        let out = a.dwh.add(j as usize * a.ld as usize + (h * a.dim) as usize);
        let o = j as usize * a.hld as usize + h as usize;
        if a.a_src.is_null() {
            for c in 0..NF {
                if (c as u32) < a.dim {
                    ptx::st_f32(out.add(c), dw[c]);
                }
            }
        } else {
            // The vectors' head columns as row 0 of a 1 x (heads dim) matrix (their address
            // computed here, not hoisted out of the rows' loop: held across it, it spilled
            // under the column pass's register cap).
            let hh = ptx::opaque_u32(h);
            let (a_src, a_dst) = (head_row::<NF>(a, a.a_src, 0, hh), head_row::<NF>(a, a.a_dst, 0, hh));
            for c in 0..NF {
                if (c as u32) < a.dim {
                    ptx::st_f32(out.add(c), ptx::fma_f32(dsrc, a_src[c], ptx::fma_f32(ddst, a_dst[c], dw[c])));
                }
            }
        }
        ptx::st_f32(a.ds_src.add(o), dsrc);
    }
}
