//! Fused AGNN attention on CUDA cores: the SDDMM, the edge softmax and the SpMM of a layer in
//! one pass over each row's edges (forward), and the backward in two passes. No per-edge value
//! is ever stored: the forward keeps per row only the softmax's (max, sum), the backward
//! recomputes alpha from them.
//!
//! Lanes: a warp takes one row (or, for rows of at least `long_min` edges, a block takes one
//! listed row); the lanes split into groups of `L = 1 << shift` lanes that each hold one
//! float4 of a feature row per chunk (chunk k at float4 `sub + k L`, `C` chunks), and the
//! `32 / L` groups of a warp take the row's edges in turn (`EdgeSteps`: `U` edges per group
//! and step, column ids fetched 32 at a time), so all lanes are busy even at d = 32. Each group keeps its own partial state; the states meet at
//! the row's end through shuffles across groups, then (block) through shared memory.
//! Loop bounds are uniform over the warp (block), so every lane reaches every shuffle.
//!
//! Maths (h_j = n_j / inv_norm_j, so only n is gathered): cos_ij = n_i . n_j,
//! alpha = softmax_j(beta cos), out_i = sum_j alpha_ij h_j. Backward with dout:
//! dalpha_ij = dout_i . h_j, D_i = sum_j alpha_ij dalpha_ij = dout_i . out_i (FlashAttention's
//! identity: no first pass over the row), ds = alpha (dalpha - D), dbeta = sum ds cos,
//! dn_i = beta (sum_j ds_ij n_j + sum_k ds_ki n_k) and dh = alphaᵀ dout + the normalisation's
//! backward of dn. The second sum of dn_i and alphaᵀ dout run over the in-edges of i: the
//! column pass walks Sᵀ's CSR, recomputing alpha and ds there from the row statistics and D of
//! the source rows: D and dn's row part come from the row pass, hence two launches. No atomics
//! except one per block for dbeta.

use super::{BlockSums, block_reduce, global_warp, group_sum};
use crate::abi::attention::{AttentionColGradArgs, AttentionForwardArgs, AttentionRowGradArgs, AttnRows};
use crate::ptx;

type Chunks<const C: usize> = [[f32; 4]; C];

/// Bytes at the start of dynamic shared memory left to `block_reduce` / `BlockSums`.
const REDUCE_BYTES: u32 = 128;

/// This lane's place in the row split.
#[derive(Clone, Copy)]
struct Lanes {
    /// Lanes per group (L).
    l: u32,
    /// This lane's index in its group.
    sub: u32,
    /// This lane's group in the warp.
    grp: u32,
    ld4: u32,
}

impl Lanes {
    fn new(rows: &AttnRows) -> Self {
        let lane = ptx::lane_id();
        Lanes { l: 1 << rows.shift, sub: lane & ((1 << rows.shift) - 1), grp: lane >> rows.shift, ld4: rows.ld4 }
    }
    /// Float4 index of chunk k, or None past the row.
    #[inline(always)]
    fn c4(&self, k: usize) -> Option<usize> {
        let c = self.sub + k as u32 * self.l;
        (c < self.ld4).then_some(c as usize)
    }
}

/// Chunks of matrix row `row` (zeros past the row).
#[inline(always)]
unsafe fn load<const C: usize>(p: *const f32, row: u32, ln: &Lanes) -> Chunks<C> {
    let base = row as usize * 4 * ln.ld4 as usize;
    let mut v = [[0f32; 4]; C];
    for (k, vk) in v.iter_mut().enumerate() {
        if let Some(c) = ln.c4(k) {
            *vk = unsafe { ptx::ld_nc_v4_f32(p.add(base + 4 * c)) };
        }
    }
    v
}

#[inline(always)]
unsafe fn store<const C: usize>(p: *mut f32, row: u32, ln: &Lanes, v: &Chunks<C>) {
    let base = row as usize * 4 * ln.ld4 as usize;
    for (k, vk) in v.iter().enumerate() {
        if let Some(c) = ln.c4(k) {
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
unsafe fn gather<G: Gather, const C: usize>(p: *const f32, row: u32, ln: &Lanes) -> Chunks<C> {
    let base = row as usize * 4 * ln.ld4 as usize;
    let mut v = [[0f32; 4]; C];
    for (k, vk) in v.iter_mut().enumerate() {
        if let Some(c) = ln.c4(k) {
            *vk = unsafe { G::load4(p, base + 4 * c) };
        }
    }
    v
}

/// Dot product of two rows over the group (every lane of the group gets it).
#[inline(always)]
fn dot<const C: usize>(a: &Chunks<C>, b: &Chunks<C>, ln: &Lanes) -> f32 {
    let mut s = 0f32;
    for k in 0..C {
        for q in 0..4 {
            s += a[k][q] * b[k][q];
        }
    }
    group_sum(s, ln.l)
}

/// acc = acc * scale + w * v.
#[inline(always)]
fn axpby<const C: usize>(acc: &mut Chunks<C>, scale: f32, w: f32, v: &Chunks<C>) {
    for k in 0..C {
        for q in 0..4 {
            acc[k][q] = acc[k][q] * scale + w * v[k][q];
        }
    }
}

/// Shuffle `v` from the lane `off` lanes away (xor).
#[inline(always)]
fn shfl_chunks<const C: usize>(v: &Chunks<C>, off: u32) -> Chunks<C> {
    let mut o = [[0f32; 4]; C];
    for k in 0..C {
        for q in 0..4 {
            o[k][q] = ptx::shfl_xor_f32(v[k][q], off);
        }
    }
    o
}

/// Where a kernel is: a warp on one row at a time, or a block on one listed row.
#[derive(Clone, Copy)]
struct Unit {
    block: bool,
}

/// The edges of one row that this lane group takes, `U` per step. The warp fetches the column
/// ids of 32 consecutive edges at once (one per lane) and hands them out by shuffles, so no
/// gather waits on an index load and the `U` gathers of a step are in flight together (one
/// dependent load chain per edge made the first version latency-bound: 0.7 ms forward on
/// R-MAT 2^18 x 16 at d = 32). In a block, warp w takes the batches w, w + warps, ...
struct EdgeSteps {
    col_idx: *const u32,
    end: u32,
    /// First edge of the current batch of 32, and the batch step (32 x warps on the row).
    base: u32,
    step: u32,
    /// This lane's column id of the current batch.
    ids: u32,
    /// Next batch position of group 0.
    t0: u32,
    groups: u32,
    grp: u32,
    /// Read for edges past the row (a row in bounds; the result is dropped).
    fallback: u32,
}

impl EdgeSteps {
    #[inline(always)]
    fn new(col_idx: *const u32, start: u32, end: u32, unit: Unit, ln: &Lanes, fallback: u32) -> Self {
        let (w, warps) = if unit.block { (ptx::warp_id(), ptx::ntid_x() / 32) } else { (0, 1) };
        let mut s = EdgeSteps { col_idx, end, base: start + 32 * w, step: 32 * warps, ids: fallback, t0: 0, groups: 32 / ln.l, grp: ln.grp, fallback };
        s.fetch();
        s
    }

    #[inline(always)]
    fn fetch(&mut self) {
        let e = self.base + ptx::lane_id();
        self.ids = if e < self.end { unsafe { ptx::ld_nc_u32(self.col_idx.add(e as usize)) } } else { self.fallback };
    }

    /// This group's next `U` edges: (column, is an edge) each; None once the warp's share of
    /// the row is done (warp-uniform: every lane reaches the same shuffles).
    #[inline(always)]
    fn next<const U: usize>(&mut self) -> Option<([u32; U], [bool; U])> {
        if self.t0 >= 32 || self.base + self.t0 >= self.end {
            self.base += self.step;
            self.t0 = 0;
            if self.base >= self.end {
                return None;
            }
            self.fetch();
        }
        let (mut js, mut ok) = ([self.fallback; U], [false; U]);
        for u in 0..U {
            let t = self.t0 + u as u32 * self.groups + self.grp;
            let j = ptx::shfl_idx_u32(self.ids, t & 31);
            ok[u] = t < 32 && self.base + t < self.end;
            if ok[u] {
                js[u] = j;
            }
        }
        self.t0 += U as u32 * self.groups;
        Some((js, ok))
    }
}

/// The rows this warp (block) takes, one at a time: `while let Some((row, start, end)) =
/// walk.next()` (a loop, not a closure: LLVM left a large closure un-inlined, with its
/// register arrays in local memory).
struct RowWalk {
    row_ptr: *const u32,
    long_min: u32,
    n_rows: u32,
    /// Warp mode: the next row and the step; block mode: the row, then `n_rows` (done).
    next: u32,
    step: u32,
    unit: Unit,
}

impl RowWalk {
    #[inline(always)]
    fn new(rows: &AttnRows, _ln: &Lanes) -> Self {
        if rows.long_rows.is_null() {
            let (w, n_warps) = global_warp();
            let unit = Unit { block: false };
            RowWalk { row_ptr: rows.row_ptr, long_min: rows.long_min, n_rows: rows.n_rows, next: w, step: n_warps, unit }
        } else {
            let row = unsafe { ptx::ld_nc_u32(rows.long_rows.add(ptx::ctaid_x() as usize)) };
            let unit = Unit { block: true };
            RowWalk { row_ptr: rows.row_ptr, long_min: u32::MAX, n_rows: rows.n_rows, next: row, step: rows.n_rows, unit }
        }
    }

    /// The next row and its edge range; warp mode skips rows of `long_min` edges or more.
    #[inline(always)]
    fn next(&mut self) -> Option<(u32, u32, u32)> {
        while self.next < self.n_rows {
            let row = self.next;
            self.next = self.next.saturating_add(self.step);
            let (start, end) = unsafe { (ptx::ld_nc_u32(self.row_ptr.add(row as usize)), ptx::ld_nc_u32(self.row_ptr.add(row as usize + 1))) };
            if end - start < self.long_min {
                return Some((row, start, end));
            }
        }
        None
    }
}

/// Floats of one warp's slot in the block merge: a row's chunks plus 4 scalars.
#[inline(always)]
fn slot_floats<const C: usize>(ln: &Lanes) -> u32 {
    4 * C as u32 * ln.l + 4
}

/// Block mode, after the warp merge: group 0 of every warp parks its chunks `v` and scalars `s`
/// in its shared slot; returns the slots' base. Starts with a barrier (warp 0 may still be
/// reading the slots of an earlier merge) and ends with one.
#[inline(always)]
unsafe fn park<const C: usize>(v: &Chunks<C>, s: [f32; 4], ln: &Lanes) -> u32 {
    ptx::sync_threads();
    let base = ptx::dyn_smem_base() + REDUCE_BYTES;
    let slot = base + 4 * slot_floats::<C>(ln) * ptx::warp_id();
    if ln.grp == 0 {
        for (k, vk) in v.iter().enumerate() {
            for (q, &x) in vk.iter().enumerate() {
                unsafe { ptx::st_shared_f32(slot + 4 * (4 * (ln.sub + k as u32 * ln.l) + q as u32), x) };
            }
        }
        if ln.sub == 0 {
            for (q, &x) in s.iter().enumerate() {
                unsafe { ptx::st_shared_f32(slot + 4 * (4 * C as u32 * ln.l + q as u32), x) };
            }
        }
    }
    ptx::sync_threads();
    base
}

/// Warp `w`'s parked chunks and scalars.
#[inline(always)]
unsafe fn unpark<const C: usize>(base: u32, w: u32, ln: &Lanes) -> (Chunks<C>, [f32; 4]) {
    let slot = base + 4 * slot_floats::<C>(ln) * w;
    let mut v = [[0f32; 4]; C];
    for (k, vk) in v.iter_mut().enumerate() {
        for (q, x) in vk.iter_mut().enumerate() {
            *x = unsafe { ptx::ld_shared_f32(slot + 4 * (4 * (ln.sub + k as u32 * ln.l) + q as u32)) };
        }
    }
    let mut s = [0f32; 4];
    for (q, x) in s.iter_mut().enumerate() {
        *x = unsafe { ptx::ld_shared_f32(slot + 4 * (4 * C as u32 * ln.l + q as u32)) };
    }
    (v, s)
}

/// Sums of chunks over the whole row: across groups, then (block) across warps. Afterwards
/// every group of the warp (of warp 0, in a block) holds the totals.
#[inline(always)]
unsafe fn sum_row<const C: usize>(v: &mut Chunks<C>, ln: &Lanes, unit: Unit) {
    let mut off = ln.l;
    while off < 32 {
        let o = shfl_chunks(v, off);
        axpby(v, 1.0, 1.0, &o);
        off <<= 1;
    }
    if unit.block {
        let base = unsafe { park(v, [0.0; 4], ln) };
        if ptx::warp_id() == 0 {
            *v = [[0f32; 4]; C];
            for w in 0..ptx::ntid_x() / 32 {
                let (pv, _) = unsafe { unpark::<C>(base, w, ln) };
                axpby(v, 1.0, 1.0, &pv);
            }
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

/// Whether this lane writes the row's results: group 0 (of warp 0, in a block).
#[inline(always)]
fn writer(ln: &Lanes, unit: Unit) -> bool {
    ln.grp == 0 && (!unit.block || ptx::warp_id() == 0)
}

/// The fused forward (see the module comment).
#[inline(always)]
pub unsafe fn forward<G: Gather, const C: usize, const U: usize>(args: AttentionForwardArgs) {
    let AttentionForwardArgs { rows, beta, n, n_gather, inv_norm, out, stats } = args;
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let ln = Lanes::new(&rows);
    let mut walk = RowWalk::new(&rows, &ln);
    let unit = walk.unit;
    while let Some((row, start, end)) = walk.next() {
        let ni = unsafe { load::<C>(n, row, &ln) };
        let (mut m, mut l, mut acc) = (f32::NEG_INFINITY, 0f32, [[0f32; 4]; C]);
        let mut edges = EdgeSteps::new(rows.col_idx, start, end, unit, &ln, row);
        while let Some((js, ok)) = edges.next::<U>() {
            // All loads of the step first, then the arithmetic.
            let nj: [Chunks<C>; U] = core::array::from_fn(|u| unsafe { gather::<G, C>(n_gather, js[u], &ln) });
            let inv: [f32; U] = core::array::from_fn(|u| unsafe { ptx::ld_nc_f32(inv_norm.add(js[u] as usize)) });
            // Unrolled by hand (U <= 4): a rolled loop indexes the register arrays at run time,
            // which moves them to local memory.
            crate::unroll4!(u => {
                if u < U {
                    let s = beta * dot(&ni, &nj[u], &ln);
                    if ok[u] {
                        let m_new = m.max(s);
                        let scale = ptx::exp(m - m_new);
                        let p = ptx::exp(s - m_new);
                        l = l * scale + p;
                        // h_j = n_j * ||h_j||.
                        axpby(&mut acc, scale, p / inv[u], &nj[u]);
                        m = m_new;
                    }
                }
            });
        }
        let mut off = ln.l;
        while off < 32 {
            let (mo, lo, acco) = (ptx::shfl_xor_f32(m, off), ptx::shfl_xor_f32(l, off), shfl_chunks(&acc, off));
            merge_softmax(&mut m, &mut l, &mut acc, mo, lo, &acco);
            off <<= 1;
        }
        if unit.block {
            let base = unsafe { park(&acc, [m, l, 0.0, 0.0], &ln) };
            if ptx::warp_id() == 0 {
                (m, l, acc) = (f32::NEG_INFINITY, 0.0, [[0f32; 4]; C]);
                for w in 0..ptx::ntid_x() / 32 {
                    let (pv, ps) = unsafe { unpark::<C>(base, w, &ln) };
                    merge_softmax(&mut m, &mut l, &mut acc, ps[0], ps[1], &pv);
                }
            }
        }
        if writer(&ln, unit) {
            let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
            axpby(&mut acc, inv, 0.0, &ni);
            unsafe { store(out, row, &ln, &acc) };
            if ln.sub == 0 {
                let (sm, sl) = if l > 0.0 { (m, l) } else { (0.0, 0.0) };
                unsafe {
                    ptx::st_f32(stats.add(2 * row as usize), sm);
                    ptx::st_f32(stats.add(2 * row as usize + 1), sl);
                }
            }
        }
    }
}

/// The backward's pass over the rows of S (see the module comment).
#[inline(always)]
pub unsafe fn row_grad<G: Gather, const C: usize, const U: usize>(args: AttentionRowGradArgs) {
    let AttentionRowGradArgs { rows, beta, n, n_gather, inv_norm, stats, out, dout, dn, d_row, dbeta } = args;
    // Warp mode: dbeta through BlockSums (4 bytes at offset 0; every thread calls new/flush).
    let sums = if rows.long_rows.is_null() { Some(BlockSums::<1>::new()) } else { None };
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let ln = Lanes::new(&rows);
    let mut dbeta_part = 0f32;
    let mut block_part = 0f32;
    let mut walk = RowWalk::new(&rows, &ln);
    let unit = walk.unit;
    while let Some((row, start, end)) = walk.next() {
        let ni = unsafe { load::<C>(n, row, &ln) };
        let gi = unsafe { load::<C>(dout, row, &ln) };
        let oi = unsafe { load::<C>(out, row, &ln) };
        let d = dot(&gi, &oi, &ln);
        let (m, l) = unsafe { (ptx::ld_nc_f32(stats.add(2 * row as usize)), ptx::ld_nc_f32(stats.add(2 * row as usize + 1))) };
        let mut acc = [[0f32; 4]; C];
        let mut part = 0f32;
        let mut edges = EdgeSteps::new(rows.col_idx, start, end, unit, &ln, row);
        while let Some((js, ok)) = edges.next::<U>() {
            let nj: [Chunks<C>; U] = core::array::from_fn(|u| unsafe { gather::<G, C>(n_gather, js[u], &ln) });
            let inv: [f32; U] = core::array::from_fn(|u| unsafe { ptx::ld_nc_f32(inv_norm.add(js[u] as usize)) });
            crate::unroll4!(u => {
                if u < U {
                    let cos = dot(&ni, &nj[u], &ln);
                    let q = dot(&gi, &nj[u], &ln);
                    if ok[u] {
                        let ds = ptx::exp(beta * cos - m) / l * (q / inv[u] - d);
                        axpby(&mut acc, 1.0, ds, &nj[u]);
                        part += ds * cos;
                    }
                }
            });
        }
        // `part` is group-uniform: one lane per group carries it.
        if ln.sub == 0 {
            if unit.block {
                block_part += part;
            } else {
                dbeta_part += part;
            }
        }
        unsafe { sum_row(&mut acc, &ln, unit) };
        if writer(&ln, unit) {
            axpby(&mut acc, beta, 0.0, &ni);
            unsafe { store(dn, row, &ln, &acc) };
            if ln.sub == 0 {
                unsafe { ptx::st_f32(d_row.add(row as usize), d) };
            }
        }
    }
    match sums {
        Some(sums) => unsafe { sums.flush([dbeta_part], dbeta) },
        None => {
            let total = block_reduce(block_part, ptx::warp_sum, 0.0);
            if ptx::tid_x() == 0 {
                unsafe { ptx::red_add_f32(dbeta, total) };
            }
        }
    }
}

/// The backward's pass over the rows of Sᵀ: row j here is node j, its edges its in-edges
/// (i, j) (see the module comment).
#[inline(always)]
pub unsafe fn col_grad<G: Gather, const C: usize, const U: usize>(args: AttentionColGradArgs) {
    let AttentionColGradArgs { rows, beta, n, n_gather, inv_norm, stats, dout: _, dout_gather, d_row, dn, dh } = args;
    let beta = unsafe { ptx::ld_nc_f32(beta) };
    let ln = Lanes::new(&rows);
    let mut walk = RowWalk::new(&rows, &ln);
    let unit = walk.unit;
    while let Some((j, start, end)) = walk.next() {
        let nj = unsafe { load::<C>(n, j, &ln) };
        let inv_j = unsafe { ptx::ld_nc_f32(inv_norm.add(j as usize)) };
        let (mut acc_dn, mut acc_dh) = ([[0f32; 4]; C], [[0f32; 4]; C]);
        let mut edges = EdgeSteps::new(rows.col_idx, start, end, unit, &ln, j);
        while let Some((is, ok)) = edges.next::<U>() {
            let ni: [Chunks<C>; U] = core::array::from_fn(|u| unsafe { gather::<G, C>(n_gather, is[u], &ln) });
            let gi: [Chunks<C>; U] = core::array::from_fn(|u| unsafe { gather::<G, C>(dout_gather, is[u], &ln) });
            // Row i's softmax max, sum and D.
            let ml: [[f32; 2]; U] = core::array::from_fn(|u| unsafe { ptx::ld_nc_v2_f32(stats.add(2 * is[u] as usize)) });
            let di: [f32; U] = core::array::from_fn(|u| unsafe { ptx::ld_nc_f32(d_row.add(is[u] as usize)) });
            crate::unroll4!(u => {
                if u < U {
                    let cos = dot(&ni[u], &nj, &ln);
                    let q = dot(&gi[u], &nj, &ln);
                    if ok[u] {
                        let a = ptx::exp(beta * cos - ml[u][0]) / ml[u][1];
                        let ds = a * (q / inv_j - di[u]);
                        axpby(&mut acc_dn, 1.0, ds, &ni[u]);
                        axpby(&mut acc_dh, 1.0, a, &gi[u]);
                    }
                }
            });
        }
        unsafe { sum_row(&mut acc_dn, &ln, unit) };
        unsafe { sum_row(&mut acc_dh, &ln, unit) };
        // dn_j in full, then dh_j = alphaᵀ dout + (dn_j - n_j (n_j . dn_j)) inv_norm_j.
        let row_part = unsafe { load::<C>(dn, j, &ln) };
        axpby(&mut acc_dn, beta, 1.0, &row_part);
        let nd = dot(&nj, &acc_dn, &ln);
        if writer(&ln, unit) {
            for k in 0..C {
                for q in 0..4 {
                    acc_dh[k][q] += (acc_dn[k][q] - nj[k][q] * nd) * inv_j;
                }
            }
            unsafe { store(dh, j, &ln, &acc_dh) };
        }
    }
}
