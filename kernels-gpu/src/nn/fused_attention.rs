//! Fused AGNN attention on CUDA cores: the SDDMM, the edge softmax and the SpMM of a layer in
//! one pass over each row's edges (forward), and the backward in two passes. No per-edge value
//! is ever stored: the forward keeps per row only the softmax's (max, sum), the backward
//! recomputes alpha from them.
//!
//! Lanes: a slot of `L` lanes (the instance's) takes one edge at a time, each lane one float4 of
//! the feature rows per chunk (chunk k at float4 `h + k L`, `C` chunks), the slot's dot
//! products reduced over its lanes by shuffles within the slot. How the rows are spread over a
//! launch — a slot per short row, a warp per middle one (its slots taking the row's edges in
//! turn, merged by shuffles at the row's end), segments of long rows a block each with a
//! combine launch merging them in order — is `row_split.rs`, shared with GAT's attention.
//!
//! Maths (n_j = h_j inv_norm_j, so only h is gathered, and a step's entries are worked on
//! together, without a branch between them: `walk_steps`): cos_ij = n_i . n_j,
//! alpha = softmax_j(beta cos), out_i = sum_j alpha_ij h_j. Backward with dout:
//! dalpha_ij = dout_i . h_j, D_i = sum_j alpha_ij dalpha_ij = dout_i . out_i (FlashAttention's
//! identity: no first pass over the row), ds = alpha (dalpha - D), dbeta = sum ds cos,
//! dn_i = beta (sum_j ds_ij n_j + sum_k ds_ki n_k) and dh = alphaᵀ dout + the normalisation's
//! backward of dn. The second sum of dn_i and alphaᵀ dout run over the in-edges of i: the
//! column pass walks Sᵀ's CSR, recomputing alpha and ds there from the row statistics and D of
//! the source rows: D and dn's row part come from the row pass, hence two launches (each with
//! its combine launch where there are long rows). No atomics except one per warp for dbeta.

use super::row_split::{Lane, Span, block_sums, long_rows, partial, rows, slot_sum, smem, walk_steps};
use crate::abi::attention::{AttentionColGradArgs, AttentionForwardArgs, AttentionRowGradArgs, AttnRows};
use crate::ptx;

type Chunks<const C: usize> = [[f32; 4]; C];

/// This lane's columns: float4 `h + k L` of a row for chunk k, and its slot's lanes. `L`, the
/// slot's width, is a constant of the instance, so the dot products' shuffles unroll (a loop
/// over a run-time width serialised them, one dependent shuffle loop per entry).
#[derive(Clone, Copy)]
struct Cols<const L: u32> {
    l: u32,
    h: u32,
    ld4: u32,
    mask: u32,
}

impl<const L: u32> Cols<L> {
    #[inline(always)]
    fn new(ln: &Lane, rows: &AttnRows) -> Self {
        Cols { l: L, h: ln.h, ld4: rows.ld4, mask: ln.mask }
    }
    /// Float4 index of chunk k, or None past the row.
    #[inline(always)]
    fn c4(&self, k: usize) -> Option<usize> {
        let c = self.h + k as u32 * self.l;
        (c < self.ld4).then_some(c as usize)
    }
}

/// Chunks of matrix row `row` (zeros past the row).
#[inline(always)]
unsafe fn load<const C: usize, const L: u32>(p: *const f32, row: u32, cl: &Cols<L>) -> Chunks<C> {
    let base = row as usize * 4 * cl.ld4 as usize;
    let mut v = [[0f32; 4]; C];
    for (k, vk) in v.iter_mut().enumerate() {
        if let Some(c) = cl.c4(k) {
            *vk = unsafe { ptx::ld_nc_v4_f32(p.add(base + 4 * c)) };
        }
    }
    v
}

#[inline(always)]
unsafe fn store<const C: usize, const L: u32>(p: *mut f32, row: u32, cl: &Cols<L>, v: &Chunks<C>) {
    let base = row as usize * 4 * cl.ld4 as usize;
    for (k, vk) in v.iter().enumerate() {
        if let Some(c) = cl.c4(k) {
            unsafe { ptx::st_v4_f32(p.add(base + 4 * c), *vk) };
        }
    }
}

/// How a kernel reads the rows it gathers (one per edge): f32, or an f16 copy (half the bytes
/// of the op's largest traffic; the row's own data and all sums stay f32).
pub trait Gather {
    /// Four consecutive values at element offset `at` of the gathered matrix.
    unsafe fn load4(p: *const f32, at: usize) -> [f32; 4];
}

/// Gathered rows in f32.
pub struct G32;
/// Gathered rows in f16 (`p` is then the address of an f16 matrix of the same stride).
pub struct G16;

impl Gather for G32 {
    #[inline(always)]
    unsafe fn load4(p: *const f32, at: usize) -> [f32; 4] {
        unsafe { ptx::ld_nc_v4_f32(p.add(at)) }
    }
}

impl Gather for G16 {
    #[inline(always)]
    unsafe fn load4(p: *const f32, at: usize) -> [f32; 4] {
        let [a, b] = unsafe { ptx::ld_nc_v2_u32((p as *const u16).add(at) as *const u32) };
        let h = |w: u32, hi: bool| ptx::f16_to_f32(if hi { (w >> 16) as u16 } else { w as u16 });
        [h(a, false), h(a, true), h(b, false), h(b, true)]
    }
}

/// Chunks of row `row` of a gathered matrix (zeros past the row).
#[inline(always)]
unsafe fn gather<G: Gather, const C: usize, const L: u32>(p: *const f32, row: u32, cl: &Cols<L>) -> Chunks<C> {
    let base = row as usize * 4 * cl.ld4 as usize;
    let mut v = [[0f32; 4]; C];
    for (k, vk) in v.iter_mut().enumerate() {
        if let Some(c) = cl.c4(k) {
            *vk = unsafe { G::load4(p, base + 4 * c) };
        }
    }
    v
}

/// Dot product of two rows over the slot (every lane of the slot gets it; shuffles among the
/// slot's lanes only, so slots may run apart).
#[inline(always)]
fn dot<const C: usize, const L: u32>(a: &Chunks<C>, b: &Chunks<C>, cl: &Cols<L>) -> f32 {
    let mut s = 0f32;
    for k in 0..C {
        for q in 0..4 {
            s = ptx::fma_f32(a[k][q], b[k][q], s);
        }
    }
    let mut m = L >> 1;
    while m > 0 {
        s += ptx::shfl_xor_f32_in(s, m, cl.mask);
        m >>= 1;
    }
    s
}

/// acc = acc * scale + w * v.
#[inline(always)]
fn axpby<const C: usize>(acc: &mut Chunks<C>, scale: f32, w: f32, v: &Chunks<C>) {
    for k in 0..C {
        for q in 0..4 {
            acc[k][q] = ptx::fma_f32(w, v[k][q], acc[k][q] * scale);
        }
    }
}

/// One online-softmax state (running max m, sum l, weighted sum acc) merged into another.
#[inline(always)]
fn merge_softmax<const C: usize>(m: &mut f32, l: &mut f32, acc: &mut Chunks<C>, mo: f32, lo: f32, acco: &Chunks<C>) {
    let mm = m.max(mo);
    // An empty state has m = -inf: its weight is 0 (exp(-inf - -inf) would be NaN).
    let sa = if *m == f32::NEG_INFINITY { 0.0 } else { ptx::exp(*m - mm) };
    let sb = if mo == f32::NEG_INFINITY { 0.0 } else { ptx::exp(mo - mm) };
    *l = *l * sa + lo * sb;
    for k in 0..C {
        for q in 0..4 {
            acc[k][q] = acc[k][q] * sa + acco[k][q] * sb;
        }
    }
    *m = mm;
}

/// Chunks summed over the warp's slots (a slot's own row is its own).
#[inline(always)]
fn slot_sum_chunks<const C: usize>(v: &mut Chunks<C>, ln: &Lane, own: bool, shift: u32) {
    for vk in v.iter_mut() {
        for x in vk.iter_mut() {
            *x = slot_sum(*x, ln, own, shift);
        }
    }
}

/// Chunks summed over a block's warps (slot 0's lanes; every warp gets the totals).
#[inline(always)]
unsafe fn block_sum_chunks<const C: usize>(v: &mut Chunks<C>, ln: &Lane) {
    for vk in v.iter_mut() {
        *vk = unsafe { block_sums::<4>(ln, *vk) };
    }
}

/// The field of chunk `k`'s float `q` in a lane's partial state (after its scalars).
#[inline(always)]
fn chunk_field(k: usize, q: usize) -> u32 {
    (4 * k + q) as u32
}

/// The lanes and columns of a kernel: slots of `L` lanes (the combine launch uses
/// slot 0's).
#[inline(always)]
fn lanes<const L: u32>(rows: &AttnRows) -> (Lane, Cols<L>) {
    let ln = Lane::new(L.trailing_zeros(), L);
    (ln, Cols::new(&ln, rows))
}

/// Row i's forward outputs from its softmax state: out = acc / l (0 for an empty row) and the
/// statistics ((0, 0) for an empty row).
#[inline(always)]
unsafe fn write_forward<const C: usize, const L: u32>(a: &AttentionForwardArgs, cl: &Cols<L>, i: u32, m: f32, l: f32, acc: &mut Chunks<C>) {
    let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
    let zero = [[0f32; 4]; C];
    axpby(acc, inv, 0.0, &zero);
    unsafe { store(a.out, i, cl, acc) };
    if cl.h == 0 {
        let (sm, sl) = if l > 0.0 { (m, l) } else { (0.0, 0.0) };
        unsafe {
            ptx::st_f32(a.stats.add(2 * i as usize), sm);
            ptx::st_f32(a.stats.add(2 * i as usize + 1), sl);
        }
    }
}

/// [`walk_steps`] over row entries [lo, hi), each entry's neighbour row of h (from `h_gather`)
/// and its inv_norm loaded: the forward's and the row pass's walk.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn walk_neighbours<G: Gather, const C: usize, const L: u32, const U: usize>(
    ln: &Lane,
    cl: &Cols<L>,
    own: bool,
    rows: &AttnRows,
    lo: u32,
    hi: u32,
    h_gather: *const f32,
    inv_norm: *const f32,
    use_step: impl FnMut([(Chunks<C>, f32); U], [bool; U]),
) {
    unsafe {
        walk_steps::<_, U>(
            ln,
            own,
            rows.col_idx,
            core::ptr::null(),
            lo,
            hi,
            |j, _| (gather::<G, C, L>(h_gather, j, cl), ptx::ld_nc_f32(inv_norm.add(j as usize))),
            use_step,
        )
    }
}

/// The fused forward (see the module comment).
#[inline(always)]
pub unsafe fn forward<G: Gather, const C: usize, const L: u32, const U: usize>(a: AttentionForwardArgs) {
    let (ln, cl) = lanes::<L>(&a.rows);
    let split = &a.rows.split;
    let fields = 2 + 4 * C as u32;
    if split.combine != 0 {
        unsafe {
            long_rows(split, cl.l, |i, h, s0, s1| {
                let (mut m, mut l, mut acc) = (f32::NEG_INFINITY, 0f32, [[0f32; 4]; C]);
                for seg in s0..s1 {
                    let p = partial(split, seg, h, fields);
                    let mut acc2 = [[0f32; 4]; C];
                    for k in 0..C {
                        for q in 0..4 {
                            acc2[k][q] = ptx::ld_f32(p.add(2 + chunk_field(k, q) as usize));
                        }
                    }
                    merge_softmax(&mut m, &mut l, &mut acc, ptx::ld_f32(p), ptx::ld_f32(p.add(1)), &acc2);
                }
                write_forward(&a, &cl, i, m, l, &mut acc);
            })
        };
        return;
    }
    let beta = unsafe { ptx::ld_nc_f32(a.beta) };
    unsafe {
        rows(split, &ln, a.rows.row_ptr, |i, lo, hi, span, seg| {
            let (own, block) = (span == Span::Slot, span == Span::Block);
            let ni = load::<C, L>(a.n, i, &cl);
            let (mut m, mut l, mut acc) = (f32::NEG_INFINITY, 0f32, [[0f32; 4]; C]);
            walk_neighbours::<G, C, L, U>(&ln, &cl, own, &a.rows, lo, hi, a.h_gather, a.inv_norm, |hj, ok| {
                // The step's scores (independent: their shuffles overlap), then one rescale of
                // the running state for the whole step.
                let mut s = [0f32; U];
                let mut m_new = m;
                crate::unroll4!(u => {
                    if u < U {
                        s[u] = beta * dot(&ni, &hj[u].0, &cl) * hj[u].1;
                        if ok[u] {
                            m_new = m_new.max(s[u]);
                        }
                    }
                });
                // (m_new = -inf only when the step has no entry of the row: nothing to add.)
                let scale = if m_new == f32::NEG_INFINITY { 1.0 } else { ptx::exp(m - m_new) };
                let zero = [[0f32; 4]; C];
                axpby(&mut acc, scale, 0.0, &zero);
                l *= scale;
                crate::unroll4!(u => {
                    if u < U {
                        let e = ptx::exp(s[u] - m_new);
                        let p = if ok[u] { e } else { 0.0 };
                        l += p;
                        axpby(&mut acc, 1.0, p, &hj[u].0);
                    }
                });
                m = m_new;
            });
            // The slots' states merged (butterfly: every lane ends with its row's).
            let mut d = if own { 0 } else { ln.slots >> 1 };
            while d > 0 {
                let off = d * L;
                let (m2, l2) = (ptx::shfl_xor_f32(m, off), ptx::shfl_xor_f32(l, off));
                let mut acc2 = [[0f32; 4]; C];
                for k in 0..C {
                    for q in 0..4 {
                        acc2[k][q] = ptx::shfl_xor_f32(acc[k][q], off);
                    }
                }
                merge_softmax(&mut m, &mut l, &mut acc, m2, l2, &acc2);
                d >>= 1;
            }
            if block {
                // Every warp's state parked in shared memory, merged in warp order by warp 0.
                let w = ptx::warp_id();
                let f = fields as usize;
                if ln.slot == 0 {
                    ptx::st_shared_f32(smem(w, ln.h, 0, f), m);
                    ptx::st_shared_f32(smem(w, ln.h, 1, f), l);
                    for k in 0..C {
                        for q in 0..4 {
                            ptx::st_shared_f32(smem(w, ln.h, 2 + chunk_field(k, q) as usize, f), acc[k][q]);
                        }
                    }
                }
                ptx::sync_threads();
                if w == 0 && ln.slot == 0 {
                    for src in 1..ptx::ntid_x() / 32 {
                        let (m2, l2) = (ptx::ld_shared_f32(smem(src, ln.h, 0, f)), ptx::ld_shared_f32(smem(src, ln.h, 1, f)));
                        let mut acc2 = [[0f32; 4]; C];
                        for k in 0..C {
                            for q in 0..4 {
                                acc2[k][q] = ptx::ld_shared_f32(smem(src, ln.h, 2 + chunk_field(k, q) as usize, f));
                            }
                        }
                        merge_softmax(&mut m, &mut l, &mut acc, m2, l2, &acc2);
                    }
                    // The segment's state, for the combine launch.
                    let p = partial(split, seg, ln.h, fields);
                    ptx::st_f32(p, m);
                    ptx::st_f32(p.add(1), l);
                    for k in 0..C {
                        for q in 0..4 {
                            ptx::st_f32(p.add(2 + chunk_field(k, q) as usize), acc[k][q]);
                        }
                    }
                }
                return;
            }
            if own || ln.slot == 0 {
                write_forward(&a, &cl, i, m, l, &mut acc);
            }
        })
    }
}

/// Row i's row-pass outputs: dn's row part beta acc and D_i = dout_i . out_i.
#[inline(always)]
unsafe fn write_row<const C: usize, const L: u32>(a: &AttentionRowGradArgs, cl: &Cols<L>, i: u32, beta: f32, acc: &mut Chunks<C>, d: f32) {
    let zero = [[0f32; 4]; C];
    axpby(acc, beta, 0.0, &zero);
    unsafe { store(a.dn, i, cl, acc) };
    if cl.h == 0 {
        unsafe { ptx::st_f32(a.d_row.add(i as usize), d) };
    }
}

/// The backward's pass over the rows of S (see the module comment).
#[inline(always)]
pub unsafe fn row_grad<G: Gather, const C: usize, const L: u32, const U: usize>(a: AttentionRowGradArgs) {
    let (ln, cl) = lanes::<L>(&a.rows);
    let split = &a.rows.split;
    let fields = 4 * C as u32;
    let beta = unsafe { ptx::ld_nc_f32(a.beta) };
    if split.combine != 0 {
        unsafe {
            long_rows(split, cl.l, |i, h, s0, s1| {
                let mut acc = [[0f32; 4]; C];
                for seg in s0..s1 {
                    let p = partial(split, seg, h, fields);
                    for k in 0..C {
                        for q in 0..4 {
                            acc[k][q] += ptx::ld_f32(p.add(chunk_field(k, q) as usize));
                        }
                    }
                }
                let d = dot(&load::<C, L>(a.dout, i, &cl), &load::<C, L>(a.out, i, &cl), &cl);
                write_row(&a, &cl, i, beta, &mut acc, d);
            })
        };
        return;
    }
    // dbeta's part of this lane (a slot's first lane carries its slot's edges).
    let mut dbeta_part = 0f32;
    unsafe {
        rows(split, &ln, a.rows.row_ptr, |i, lo, hi, span, seg| {
            let (own, block) = (span == Span::Slot, span == Span::Block);
            let ni = load::<C, L>(a.n, i, &cl);
            let gi = load::<C, L>(a.dout, i, &cl);
            let d = dot(&gi, &load::<C, L>(a.out, i, &cl), &cl);
            let (m, l) = (ptx::ld_nc_f32(a.stats.add(2 * i as usize)), ptx::ld_nc_f32(a.stats.add(2 * i as usize + 1)));
            let rl = if l > 0.0 { 1.0 / l } else { 0.0 };
            let mut acc = [[0f32; 4]; C];
            let mut part = 0f32;
            walk_neighbours::<G, C, L, U>(&ln, &cl, own, &a.rows, lo, hi, a.h_gather, a.inv_norm, |hj, ok| {
                crate::unroll4!(u => {
                    if u < U {
                        let (x, inv) = hj[u];
                        // cos = n_i . n_j, q = dalpha = dout_i . h_j.
                        let cos = dot(&ni, &x, &cl) * inv;
                        let q = dot(&gi, &x, &cl);
                        let e = ptx::exp(beta * cos - m) * rl * (q - d);
                        let ds = if ok[u] { e } else { 0.0 };
                        // ds n_j = ds inv_j h_j.
                        axpby(&mut acc, 1.0, ds * inv, &x);
                        part += ds * cos;
                    }
                });
            });
            if ln.h == 0 {
                dbeta_part += part;
            }
            slot_sum_chunks(&mut acc, &ln, own, L.trailing_zeros());
            if block {
                block_sum_chunks(&mut acc, &ln);
                if ptx::warp_id() == 0 && ln.slot == 0 {
                    let p = partial(split, seg, ln.h, fields);
                    for k in 0..C {
                        for q in 0..4 {
                            ptx::st_f32(p.add(chunk_field(k, q) as usize), acc[k][q]);
                        }
                    }
                }
                return;
            }
            if own || ln.slot == 0 {
                write_row(&a, &cl, i, beta, &mut acc, d);
            }
        })
    };
    // One atomic a warp (a block reduction held every warp of a block at its barrier until the
    // block's last row was done).
    let total = ptx::warp_sum(dbeta_part);
    if ptx::lane_id() == 0 {
        unsafe { ptx::red_add_f32(a.dbeta, total) };
    }
}

/// Node j's gradient from its in-edges' sums: dn_j in full (beta acc_dn + the row part), then
/// dh_j = alphaᵀ dout + (dn_j - n_j (n_j . dn_j)) inv_norm_j.
#[inline(always)]
unsafe fn write_col<const C: usize, const L: u32>(
    a: &AttentionColGradArgs,
    cl: &Cols<L>,
    j: u32,
    beta: f32,
    acc_dn: &mut Chunks<C>,
    acc_dh: &mut Chunks<C>,
) {
    let nj = unsafe { load::<C, L>(a.n, j, cl) };
    let inv_j = unsafe { ptx::ld_nc_f32(a.inv_norm.add(j as usize)) };
    let row_part = unsafe { load::<C, L>(a.dn, j, cl) };
    axpby(acc_dn, beta, 1.0, &row_part);
    let nd = dot(&nj, acc_dn, cl);
    for k in 0..C {
        for q in 0..4 {
            acc_dh[k][q] += (acc_dn[k][q] - nj[k][q] * nd) * inv_j;
        }
    }
    unsafe { store(a.dh, j, cl, acc_dh) };
}

/// The backward's pass over the rows of Sᵀ: row j here is node j, its entries its in-edges
/// (i, j) (see the module comment).
#[inline(always)]
pub unsafe fn col_grad<G: Gather, const C: usize, const L: u32, const U: usize>(a: AttentionColGradArgs) {
    let (ln, cl) = lanes::<L>(&a.rows);
    let split = &a.rows.split;
    let fields = 8 * C as u32;
    let beta = unsafe { ptx::ld_nc_f32(a.beta) };
    if split.combine != 0 {
        unsafe {
            long_rows(split, cl.l, |j, h, s0, s1| {
                let (mut acc_dn, mut acc_dh) = ([[0f32; 4]; C], [[0f32; 4]; C]);
                for seg in s0..s1 {
                    let p = partial(split, seg, h, fields);
                    for k in 0..C {
                        for q in 0..4 {
                            acc_dn[k][q] += ptx::ld_f32(p.add(chunk_field(k, q) as usize));
                            acc_dh[k][q] += ptx::ld_f32(p.add(4 * C + chunk_field(k, q) as usize));
                        }
                    }
                }
                write_col(&a, &cl, j, beta, &mut acc_dn, &mut acc_dh);
            })
        };
        return;
    }
    unsafe {
        rows(split, &ln, a.rows.row_ptr, |j, lo, hi, span, seg| {
            let (own, block) = (span == Span::Slot, span == Span::Block);
            let nj = load::<C, L>(a.n, j, &cl);
            let hj = load::<C, L>(a.h, j, &cl);
            let (mut acc_dn, mut acc_dh) = ([[0f32; 4]; C], [[0f32; 4]; C]);
            walk_steps::<_, U>(
                &ln,
                own,
                a.rows.col_idx,
                core::ptr::null(),
                lo,
                hi,
                // Row i's h, inv_norm and dout, its softmax (max, sum) and D.
                |i, _| {
                    (
                        gather::<G, C, L>(a.h_gather, i, &cl),
                        ptx::ld_nc_f32(a.inv_norm.add(i as usize)),
                        gather::<G, C, L>(a.dout_gather, i, &cl),
                        ptx::ld_nc_v2_f32(a.stats.add(2 * i as usize)),
                        ptx::ld_nc_f32(a.d_row.add(i as usize)),
                    )
                },
                |src, ok| {
                    crate::unroll4!(u => {
                        if u < U {
                            let (hi_, inv_i, gi, ml, di) = src[u];
                            let cos = dot(&hi_, &nj, &cl) * inv_i;
                            let q = dot(&gi, &hj, &cl);
                            let e = ptx::exp(beta * cos - ml[0]) * ptx::rcp_approx(ml[1]);
                            let al = if ok[u] { e } else { 0.0 };
                            let ds = al * (q - di);
                            // ds n_i = ds inv_i h_i.
                            axpby(&mut acc_dn, 1.0, ds * inv_i, &hi_);
                            axpby(&mut acc_dh, 1.0, al, &gi);
                        }
                    });
                },
            );
            slot_sum_chunks(&mut acc_dn, &ln, own, L.trailing_zeros());
            slot_sum_chunks(&mut acc_dh, &ln, own, L.trailing_zeros());
            if block {
                block_sum_chunks(&mut acc_dn, &ln);
                block_sum_chunks(&mut acc_dh, &ln);
                if ptx::warp_id() == 0 && ln.slot == 0 {
                    let p = partial(split, seg, ln.h, fields);
                    for k in 0..C {
                        for q in 0..4 {
                            ptx::st_f32(p.add(chunk_field(k, q) as usize), acc_dn[k][q]);
                            ptx::st_f32(p.add(4 * C + chunk_field(k, q) as usize), acc_dh[k][q]);
                        }
                    }
                }
                return;
            }
            if own || ln.slot == 0 {
                write_col(&a, &cl, j, beta, &mut acc_dn, &mut acc_dh);
            }
        })
    }
}
