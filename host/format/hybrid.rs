//! The FTC-GNN hybrid split on ME-BCRS (paper 001, §V-A2: "the majority [of the TC blocks] is
//! allocated to TCUs ... the remainder is handled by CUDA Cores"), in the 8x1-vector form this
//! project uses: per ME-BCRS window of 8 rows, a nonzero vector (window, column) with at least
//! `t` nonzeros goes to the tensor cores, a sparser one (on power-law graphs mostly singletons)
//! to the CUDA cores.
//!
//! - [`hybrid_stats`]: for every threshold, the nonzeros and vectors on each side, the
//!   tensor-core blocks and MMAs, the rows the CUDA-core side touches; [`CostModel`] picks `t`.
//! - [`hybrid_partition`]: the two parts for one `t`, S = S_tc + S_cc exactly: S_tc as an
//!   ME-BCRS whose windows keep only their dense vectors, S_cc as a row-sorted COO. A hybrid
//!   kernel launch consumes these. [`hybrid_parts`]: the same split as two CSRs of S's shape,
//!   what `ops::spmm::hybrid` builds its two graph handles from.
//!
//! Both work on distinct positions: a matrix with duplicate (row, column) entries is taken in
//! canonical form (duplicates summed), as ME-BCRS does anyway.

use std::borrow::Cow;
use std::fmt::Write as _;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::format::{Coo, MEBCRS_WINDOW, MeBcrs};
use crate::graph::Csr;
use crate::tensor::Matrix;
use crate::util::split::{default_chunks, split_lengths, window_chunks};

/// The thresholds `tcgnn info` reports and [`CostModel::choose`] picks from.
pub const HYBRID_THRESHOLDS: [usize; 4] = [1, 2, 3, 4];

/// Vectors per tensor-core block the statistics count (ME-BCRS 8x8: m16n8k8, tf32 and f16).
pub const HYBRID_BLOCK_K: usize = 8;

/// Thresholds 1..=MAX_T are tabulated; t > 8 puts every vector on the CUDA cores.
const MAX_T: usize = MEBCRS_WINDOW + 1;

fn canonical(csr: &Csr) -> Cow<'_, Csr> {
    if csr.is_canonical() { Cow::Borrowed(csr) } else { Cow::Owned(csr.canonical()) }
}

/// Edges of window `w` of a canonical CSR grouped by vector: `keys` ends up holding
/// `col << 32 | (edge - e0)` sorted, so each run of equal high halves is one 8x1 vector whose
/// length is its nonzero count (canonical: one edge per row and column). Returns e0.
fn window_keys(csr: &Csr, w: usize, keys: &mut Vec<u64>) -> usize {
    let r0 = w * MEBCRS_WINDOW;
    let r1 = (r0 + MEBCRS_WINDOW).min(csr.n_rows());
    let (e0, e1) = (csr.row_ptr()[r0] as usize, csr.row_ptr()[r1] as usize);
    keys.clear();
    keys.extend((e0..e1).map(|e| ((csr.col_idx()[e] as u64) << 32) | (e - e0) as u64));
    keys.sort_unstable();
    e0
}

/// Runs of equal column in sorted window keys.
fn runs(keys: &[u64]) -> impl Iterator<Item = &[u64]> {
    keys.chunk_by(|a, b| a >> 32 == b >> 32)
}

/// How a matrix splits at one threshold `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HybridSplit {
    pub t: usize,
    /// Distinct nonzero positions and 8x1 vectors of the whole matrix.
    pub nnz: usize,
    pub vectors: usize,
    /// Tensor-core side: vectors with >= t nonzeros and the nonzeros they hold.
    pub tc_nnz: usize,
    pub tc_vectors: usize,
    /// ME-BCRS blocks of [`HYBRID_BLOCK_K`] vectors the tensor-core side needs (per window
    /// ceil(tc vectors / k)).
    pub tc_blocks: usize,
    /// CUDA-core side: the other vectors and their nonzeros.
    pub cc_nnz: usize,
    pub cc_vectors: usize,
    /// Rows with at least one CUDA-core nonzero (the rows a second pass adds into).
    pub cc_rows: usize,
}

fn frac(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl HybridSplit {
    pub fn tc_nnz_fraction(&self) -> f64 {
        frac(self.tc_nnz, self.nnz)
    }
    pub fn cc_nnz_fraction(&self) -> f64 {
        frac(self.cc_nnz, self.nnz)
    }
    pub fn tc_vector_fraction(&self) -> f64 {
        frac(self.tc_vectors, self.vectors)
    }
    pub fn cc_vector_fraction(&self) -> f64 {
        frac(self.cc_vectors, self.vectors)
    }
    /// `mma.sync` instructions of the tensor-core side at feature width `k`: one m16n8k8 per
    /// 8x8 block and 16 feature columns (swap-and-transpose, as in `format::stats`).
    pub fn mma(&self, k: usize) -> usize {
        self.tc_blocks * k.div_ceil(16)
    }
}

/// The vector histogram and the split at every threshold, from one pass over the windows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HybridStats {
    pub n_rows: usize,
    pub nnz: usize,
    pub vectors: usize,
    /// `histogram[c - 1]`: 8x1 vectors holding exactly c nonzeros, c = 1..=8.
    pub histogram: [usize; MEBCRS_WINDOW],
    /// Per threshold t = 1..=9 (index t - 1): tensor-core blocks and CUDA-core rows.
    tc_blocks: [usize; MAX_T],
    cc_rows: [usize; MAX_T],
}

impl HybridStats {
    /// The split at threshold `t` (>= 1; t > 8 puts everything on the CUDA cores).
    pub fn split(&self, t: usize) -> HybridSplit {
        let t_idx = t.clamp(1, MAX_T);
        let (mut tc_nnz, mut tc_vectors) = (0, 0);
        for (c, &n) in (1..=MEBCRS_WINDOW).zip(&self.histogram) {
            if c >= t_idx {
                tc_nnz += c * n;
                tc_vectors += n;
            }
        }
        HybridSplit {
            t,
            nnz: self.nnz,
            vectors: self.vectors,
            tc_nnz,
            tc_vectors,
            tc_blocks: self.tc_blocks[t_idx - 1],
            cc_nnz: self.nnz - tc_nnz,
            cc_vectors: self.vectors - tc_vectors,
            cc_rows: self.cc_rows[t_idx - 1],
        }
    }

    /// The splits at [`HYBRID_THRESHOLDS`].
    pub fn splits(&self) -> Vec<HybridSplit> {
        HYBRID_THRESHOLDS.iter().map(|&t| self.split(t)).collect()
    }
}

#[derive(Clone, Copy, Default)]
struct Acc {
    histogram: [usize; MEBCRS_WINDOW],
    tc_blocks: [usize; MAX_T],
    cc_rows: [usize; MAX_T],
}

impl Acc {
    fn add(mut self, o: Acc) -> Acc {
        for i in 0..MEBCRS_WINDOW {
            self.histogram[i] += o.histogram[i];
        }
        for i in 0..MAX_T {
            self.tc_blocks[i] += o.tc_blocks[i];
            self.cc_rows[i] += o.cc_rows[i];
        }
        self
    }
}

/// Statistics of the hybrid split of `csr` (rayon over windows).
pub fn hybrid_stats(csr: &Csr) -> Result<HybridStats> {
    let g = canonical(csr);
    let g = g.as_ref();
    let n_rows = g.n_rows();
    let chunks = window_chunks(g.row_ptr(), MEBCRS_WINDOW, default_chunks());
    let acc = chunks
        .par_iter()
        .map(|ws| {
            let mut acc = Acc::default();
            let mut keys = Vec::new();
            for w in ws.clone() {
                let e0 = window_keys(g, w, &mut keys);
                let r0 = w * MEBCRS_WINDOW;
                let row_ends = &g.row_ptr()[r0 + 1..=(r0 + MEBCRS_WINDOW).min(n_rows)];
                // Per window: vectors by count, and per row the smallest count of its vectors.
                let mut hist = [0usize; MEBCRS_WINDOW];
                let mut row_min = [u32::MAX; MEBCRS_WINDOW];
                for run in runs(&keys) {
                    let c = run.len();
                    hist[c - 1] += 1;
                    for &key in run {
                        let e = e0 + (key as u32) as usize;
                        let i = row_ends.partition_point(|&end| end as usize <= e);
                        row_min[i] = row_min[i].min(c as u32);
                    }
                }
                for t in 1..=MAX_T {
                    let tc_vec: usize = hist[(t - 1).min(MEBCRS_WINDOW)..].iter().sum();
                    acc.tc_blocks[t - 1] += tc_vec.div_ceil(HYBRID_BLOCK_K);
                    acc.cc_rows[t - 1] += row_min.iter().filter(|&&m| (m as usize) < t).count();
                }
                for (a, h) in acc.histogram.iter_mut().zip(hist) {
                    *a += h;
                }
            }
            acc
        })
        .reduce(Acc::default, Acc::add);
    let vectors = acc.histogram.iter().sum();
    Ok(HybridStats { n_rows, nnz: g.nnz(), vectors, histogram: acc.histogram, tc_blocks: acc.tc_blocks, cc_rows: acc.cc_rows })
}

/// A bytes-moved model of one hybrid SpMM (Y = S X, feature width `k`), to pick `t`.
///
/// Both sides are limited by gathering X rows (bench/NOTES.md: the kernels, cuSPARSE's included,
/// run at the rate the memory system gives scattered rows), so each side's time is the bytes it
/// moves over the L2 -> L1 rate measured for that kind of kernel:
///
/// - tensor-core side, per 8x1 vector: one X row (`k * feature_bytes`), its 8 values and a
///   4-byte column; rate `tc_bytes_per_s`;
/// - CUDA-core side, per nonzero: one X row, its value, a 4-byte column and a 4-byte row (COO);
///   rate `cc_bytes_per_s`; plus, when that side is not empty, one more launch and a
///   read-modify-write of every output row it touches (`k * 4` bytes each way: the second
///   pass adds into Y, which the tensor-core pass wrote).
///
/// A vector of c nonzeros belongs on the CUDA cores when c CUDA-core gathers cost less than
/// one tensor-core gather; the per-row and launch costs make the choice depend on the graph.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    pub name: &'static str,
    pub k: usize,
    pub feature_bytes: usize,
    pub value_bytes: usize,
    /// Tensor-core side, L2 -> L1 bytes per second.
    pub tc_bytes_per_s: f64,
    /// CUDA-core side, L2 -> L1 bytes per second.
    pub cc_bytes_per_s: f64,
    /// Cost of the second launch (the CUDA-core pass), seconds.
    pub launch_s: f64,
}

/// ncu on the H100 (bench/NOTES.md, session 3, tolokers, K = 128): tc8 (tf32 and f16) moves
/// L2 -> L1 at 3.6 TB/s.
const TC_RATE: f64 = 3.6e12;
/// Same ncu session: cuSPARSE f32 (csrmm_alg2, CUDA cores) at 6.5 TB/s.
const CC_RATE_F32: f64 = 6.5e12;
/// Same ncu session: cuSPARSE's f16 path at 3.6 TB/s (f16 rows gather no faster per byte).
const CC_RATE_F16: f64 = 3.6e12;
/// bench/NOTES.md: "a launch ~3 us".
const LAUNCH_S: f64 = 3e-6;

impl CostModel {
    /// FTC-GNN's precision: tf32 tensor cores, f32 features, f32 CUDA-core remainder, K = 128.
    pub const TF32_K128: CostModel = CostModel {
        name: "tf32",
        k: 128,
        feature_bytes: 4,
        value_bytes: 4,
        tc_bytes_per_s: TC_RATE,
        cc_bytes_per_s: CC_RATE_F32,
        launch_s: LAUNCH_S,
    };
    /// f16 features on both sides, K = 128.
    pub const F16_K128: CostModel = CostModel {
        name: "f16",
        k: 128,
        feature_bytes: 2,
        value_bytes: 2,
        tc_bytes_per_s: TC_RATE,
        cc_bytes_per_s: CC_RATE_F16,
        launch_s: LAUNCH_S,
    };

    /// Bytes the tensor-core side moves per 8x1 vector.
    pub fn tc_vector_bytes(&self) -> usize {
        self.k * self.feature_bytes + MEBCRS_WINDOW * self.value_bytes + 4
    }
    /// Bytes the CUDA-core side moves per nonzero.
    pub fn cc_nonzero_bytes(&self) -> usize {
        self.k * self.feature_bytes + self.value_bytes + 8
    }

    /// Modelled seconds of one hybrid SpMM with this split.
    pub fn seconds(&self, s: &HybridSplit) -> f64 {
        let tc = s.tc_vectors as f64 * self.tc_vector_bytes() as f64 / self.tc_bytes_per_s;
        let cc = if s.cc_nnz == 0 {
            0.0
        } else {
            (s.cc_nnz as f64 * self.cc_nonzero_bytes() as f64 + s.cc_rows as f64 * (2 * 4 * self.k) as f64) / self.cc_bytes_per_s
                + self.launch_s
        };
        tc + cc
    }

    /// The threshold of [`HYBRID_THRESHOLDS`] with the least modelled time (ties: the smaller t).
    pub fn choose(&self, stats: &HybridStats) -> HybridSplit {
        stats.splits().into_iter().min_by(|a, b| self.seconds(a).total_cmp(&self.seconds(b))).expect("thresholds are not empty")
    }
}

/// The split table `tcgnn info` prints, then the threshold each cost model picks.
pub fn render_hybrid(stats: &HybridStats, models: &[CostModel]) -> String {
    let mut s = String::new();
    let hist: Vec<String> =
        stats.histogram.iter().enumerate().map(|(c, &n)| format!("{}: {:.1}%", c + 1, 100.0 * frac(n, stats.vectors))).collect();
    let _ = writeln!(s, "\nhybrid split (FTC-GNN): 8x1 vectors with >= t nonzeros on tensor cores, the rest on CUDA cores");
    let _ = writeln!(s, "8x1 vectors by nonzeros  {}", hist.join("  "));
    let _ = write!(
        s,
        "{:>3} {:>8} {:>11} {:>8} {:>11} {:>10} {:>12} {:>9}",
        "t", "TC nnz", "TC vectors", "CC nnz", "CC vectors", "TC blocks", "MMAs (K=16)", "CC rows"
    );
    for m in models {
        let _ = write!(s, " {:>14}", format!("{} K={} us", m.name, m.k));
    }
    s.push('\n');
    for sp in stats.splits() {
        let _ = write!(
            s,
            "{:>3} {:>7.1}% {:>10.1}% {:>7.1}% {:>10.1}% {:>10} {:>12} {:>9}",
            sp.t,
            100.0 * sp.tc_nnz_fraction(),
            100.0 * sp.tc_vector_fraction(),
            100.0 * sp.cc_nnz_fraction(),
            100.0 * sp.cc_vector_fraction(),
            sp.tc_blocks,
            sp.mma(16),
            sp.cc_rows
        );
        for m in models {
            let _ = write!(s, " {:>14.1}", 1e6 * m.seconds(&sp));
        }
        s.push('\n');
    }
    for m in models {
        let c = m.choose(stats);
        let _ = writeln!(
            s,
            "chosen t ({} model, K = {}): t = {}: {:.1}% of nonzeros in {:.1}% of vectors on tensor cores, {:.1}% of nonzeros on CUDA cores",
            m.name,
            m.k,
            c.t,
            100.0 * c.tc_nnz_fraction(),
            100.0 * c.tc_vector_fraction(),
            100.0 * c.cc_nnz_fraction()
        );
    }
    s
}

/// The two parts of a hybrid SpMM at threshold `t`: S = S_tc + S_cc.
#[derive(Clone, Debug, PartialEq)]
pub struct HybridPartition {
    pub t: usize,
    /// Tensor-core part: ME-BCRS of the vectors with >= t nonzeros (every window keeps only its
    /// dense vectors; a window without any has no blocks).
    pub tc: MeBcrs,
    /// CUDA-core remainder: the nonzeros of sparser vectors, row-sorted COO (columns sorted
    /// within a row).
    pub cc: Coo,
    /// Edge i of the CSR `tc` was translated from is edge `tc_edges[i]` of the canonical S
    /// (S itself when canonical): `tc.values[tc.csr_to_slot[i]]` holds S's value of that edge,
    /// so per-call values in CSR order scatter through these two maps.
    pub tc_edges: Vec<u32>,
    /// Entry i of `cc` is edge `cc_edges[i]` of the canonical S.
    pub cc_edges: Vec<u32>,
}

/// The two parts of S at threshold `t` as CSRs of S's shape (the form the hybrid SpMM's graph
/// handles take; [`hybrid_partition`] translates them further). Both are canonical.
#[derive(Clone, Debug, PartialEq)]
pub struct HybridParts {
    pub t: usize,
    /// Nonzeros of the vectors with >= t nonzeros.
    pub tc: Csr,
    /// The other nonzeros.
    pub cc: Csr,
    /// Nonzero i of `tc` (CSR order) is edge `tc_edges[i]` of the canonical S.
    pub tc_edges: Vec<u32>,
    /// Nonzero i of `cc` is edge `cc_edges[i]` of the canonical S.
    pub cc_edges: Vec<u32>,
}

/// Split `csr` at threshold `t` (>= 1; t = 1 puts every vector on the tensor cores, t > 8 none)
/// into the CSRs of its tensor-core and CUDA-core parts.
pub fn hybrid_parts(csr: &Csr, t: usize) -> Result<HybridParts> {
    if t == 0 {
        return Err(Error::Unsupported("hybrid threshold t = 0: use t >= 1".into()));
    }
    let g = canonical(csr);
    let g = g.as_ref();
    let (n_rows, nnz) = (g.n_rows(), g.nnz());
    // Per edge: does its vector hold >= t nonzeros? (rayon over window chunks.)
    let chunks = window_chunks(g.row_ptr(), MEBCRS_WINDOW, default_chunks());
    let edge_range = |ws: &std::ops::Range<usize>| {
        g.row_ptr()[ws.start * MEBCRS_WINDOW] as usize..g.row_ptr()[(ws.end * MEBCRS_WINDOW).min(n_rows)] as usize
    };
    let mut on_tc = vec![false; nnz];
    let lens: Vec<usize> = chunks.iter().map(|ws| edge_range(ws).len()).collect();
    chunks.par_iter().zip(split_lengths(&mut on_tc, lens)).for_each(|(ws, flags)| {
        let base = edge_range(ws).start;
        let mut keys = Vec::new();
        for w in ws.clone() {
            let e0 = window_keys(g, w, &mut keys);
            for run in runs(&keys) {
                let dense = run.len() >= t;
                for &key in run {
                    flags[e0 - base + (key as u32) as usize] = dense;
                }
            }
        }
    });
    // Both parts in CSR order (rows ascending, columns sorted): filter the edges.
    let mut parts = [(vec![0u32], Vec::new(), Vec::new(), Vec::new()), (vec![0u32], Vec::new(), Vec::new(), Vec::new())];
    for r in 0..n_rows {
        for e in g.row_range(r) {
            let p = &mut parts[usize::from(!on_tc[e])];
            p.1.push(g.col_idx()[e]);
            p.2.push(g.values()[e]);
            p.3.push(e as u32);
        }
        for p in &mut parts {
            p.0.push(p.1.len() as u32);
        }
    }
    let [(tc_ptr, tc_cols, tc_vals, tc_edges), (cc_ptr, cc_cols, cc_vals, cc_edges)] = parts;
    let tc = Csr::new(n_rows, g.n_cols(), tc_ptr, tc_cols, tc_vals)?;
    let cc = Csr::new(n_rows, g.n_cols(), cc_ptr, cc_cols, cc_vals)?;
    Ok(HybridParts { t, tc, cc, tc_edges, cc_edges })
}

/// Split `csr` at threshold `t` (>= 1; t = 1 puts every vector on the tensor cores, t > 8 none)
/// into a tensor-core ME-BCRS with `k` (4, 8 or 16) vectors per block and a CUDA-core COO.
pub fn hybrid_partition(csr: &Csr, t: usize, k: usize) -> Result<HybridPartition> {
    let p = hybrid_parts(csr, t)?;
    Ok(HybridPartition { t, tc: MeBcrs::from_csr(&p.tc, k)?, cc: Coo::from_csr(&p.cc), tc_edges: p.tc_edges, cc_edges: p.cc_edges })
}

impl HybridPartition {
    pub fn nnz(&self) -> usize {
        self.tc_edges.len() + self.cc_edges.len()
    }

    /// Y = S_tc X + S_cc X in f64, read the way a hybrid kernel reads the parts: the ME-BCRS
    /// block by block (8 x kb row-major values, unpadded residue block), then the COO entries.
    pub fn spmm_reference_f64(&self, x: &Matrix) -> Result<Vec<f64>> {
        let m = &self.tc;
        if x.rows != m.n_cols {
            return Err(Error::Shape(format!("X has {} rows, S has {} columns", x.rows, m.n_cols)));
        }
        m.validate()?;
        let k = x.cols;
        let mut y = vec![0f64; m.n_rows * k];
        if k == 0 {
            return Ok(y);
        }
        y.par_chunks_mut(MEBCRS_WINDOW * k).enumerate().for_each(|(w, out)| {
            let (v_start, v_end) = (m.win_ptr[w] as usize, m.win_ptr[w + 1] as usize);
            let rows = out.len() / k;
            for v0 in (v_start..v_end).step_by(m.k) {
                let kb = m.k.min(v_end - v0);
                for i in 0..rows {
                    for j in 0..kb {
                        let val = m.values[8 * v0 + i * kb + j] as f64;
                        let xr = x.row(m.vec_col[v0 + j] as usize);
                        for (o, &xv) in out[i * k..(i + 1) * k].iter_mut().zip(xr) {
                            *o += val * xv as f64;
                        }
                    }
                }
            }
        });
        let c = &self.cc;
        for ((&r, &col), &v) in c.row.iter().zip(&c.col).zip(&c.values) {
            let out = &mut y[r as usize * k..(r as usize + 1) * k];
            for (o, &xv) in out.iter_mut().zip(x.row(col as usize)) {
                *o += v as f64 * xv as f64;
            }
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Window 0 (rows 0-7): column 0 in rows 0..4 (4 nonzeros), column 1 in rows 0, 1 (2),
    /// column 2 in row 3 (1), column 5 in row 7 (1). Window 1 (rows 8, 9): column 0 in both
    /// (2), column 9 in row 9 (1).
    fn hand() -> Csr {
        let mut trip = vec![(0, 0, 1.0), (1, 0, 2.0), (2, 0, 3.0), (3, 0, 4.0), (0, 1, 5.0), (1, 1, 6.0)];
        trip.extend([(3, 2, 7.0), (7, 5, 8.0), (8, 0, 9.0), (9, 0, 10.0), (9, 9, 11.0)]);
        Csr::from_triplets(10, 10, &trip).unwrap()
    }

    #[test]
    fn hand_made_counts() {
        let st = hybrid_stats(&hand()).unwrap();
        assert_eq!((st.nnz, st.vectors), (11, 6));
        assert_eq!(st.histogram, [3, 2, 0, 1, 0, 0, 0, 0]);
        let s: Vec<_> = st.splits().iter().map(|s| (s.tc_nnz, s.tc_vectors, s.cc_nnz, s.cc_vectors, s.tc_blocks, s.cc_rows)).collect();
        assert_eq!(
            s,
            vec![
                (11, 6, 0, 0, 2, 0), // everything on tensor cores: 1 block per window
                (8, 3, 3, 3, 2, 3),  // singletons (rows 3, 7, 9) on CUDA cores
                (4, 1, 7, 5, 1, 6),  // rows 0, 1, 3, 7, 8, 9: every row with a 1- or 2-vector
                (4, 1, 7, 5, 1, 6),
            ]
        );
        let s2 = st.split(2);
        assert!((s2.tc_nnz_fraction() - 8.0 / 11.0).abs() < 1e-12 && (s2.cc_vector_fraction() - 0.5).abs() < 1e-12);
        assert_eq!(s2.mma(16), 2);
        assert_eq!(s2.mma(128), 16);
        let none = st.split(9);
        assert_eq!((none.tc_nnz, none.tc_blocks, none.cc_nnz, none.cc_rows), (0, 0, 11, 7));
        // t = 1 is plain ME-BCRS.
        assert_eq!(st.split(1).tc_blocks, MeBcrs::from_csr(&hand(), 8).unwrap().n_blocks());
        assert_eq!(st.split(1).tc_vectors, MeBcrs::from_csr(&hand(), 8).unwrap().n_vectors());
    }

    #[test]
    fn blocks_count_per_window() {
        // One row of 20 columns: 20 singleton vectors in one window = 3 blocks of 8 at t = 1;
        // plus a dense 8x1 vector (column 30 in rows 0..8): 21 vectors, 3 blocks; t = 2: 1 block.
        let mut trip: Vec<_> = (0..20u32).map(|c| (0, c, 1.0)).collect();
        trip.extend((0..8u32).map(|r| (r, 30, 1.0)));
        let st = hybrid_stats(&Csr::from_triplets(8, 31, &trip).unwrap()).unwrap();
        assert_eq!(st.histogram, [20, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!((st.split(1).tc_blocks, st.split(2).tc_blocks, st.split(2).tc_nnz), (3, 1, 8));
        assert_eq!(st.split(2).cc_rows, 1);
    }

    #[test]
    fn duplicates_count_once_and_empty_graphs_work() {
        let dup = Csr::new(8, 4, vec![0, 2, 2, 2, 2, 2, 2, 2, 2], vec![1, 1], vec![1.0, 2.0]).unwrap();
        let st = hybrid_stats(&dup).unwrap();
        assert_eq!((st.nnz, st.vectors, st.histogram[0]), (1, 1, 1));
        let p = hybrid_partition(&dup, 2, 8).unwrap();
        assert_eq!((p.cc.nnz(), p.cc.values[0], p.tc.n_vectors()), (1, 3.0, 0));
        let empty = Csr::new(5, 5, vec![0; 6], vec![], vec![]).unwrap();
        let st = hybrid_stats(&empty).unwrap();
        assert_eq!((st.nnz, st.vectors, st.split(2).tc_blocks), (0, 0, 0));
        assert_eq!(CostModel::TF32_K128.choose(&st).t, 1);
        assert_eq!(hybrid_partition(&empty, 1, 8).unwrap().nnz(), 0);
        assert!(hybrid_partition(&empty, 0, 8).is_err());
        assert!(hybrid_partition(&hand(), 2, 5).is_err());
    }

    #[test]
    fn partition_by_hand() {
        let p = hybrid_partition(&hand(), 2, 4).unwrap();
        // Tensor cores: window 0 vectors {0, 1}, window 1 vector {0}.
        assert_eq!(p.tc.win_ptr, vec![0, 2, 3]);
        assert_eq!(p.tc.vec_col, vec![0, 1, 0]);
        assert_eq!(p.cc.row, vec![3, 7, 9]);
        assert_eq!(p.cc.col, vec![2, 5, 9]);
        assert_eq!(p.cc.values, vec![7.0, 8.0, 11.0]);
        // Canonical edge order: row 3 = (0, 4.0), (2, 7.0): edge 6 is (3, 2).
        assert_eq!(p.cc_edges, vec![6, 7, 10]);
        assert_eq!(p.tc_edges, vec![0, 1, 2, 3, 4, 5, 8, 9]);
        let tc = p.tc.to_csr().unwrap();
        for (i, &e) in p.tc_edges.iter().enumerate() {
            assert_eq!(tc.values()[i], hand().values()[e as usize]);
        }
    }

    #[test]
    fn cost_model_constants_and_choice() {
        let m = CostModel::TF32_K128;
        assert_eq!((m.tc_vector_bytes(), m.cc_nonzero_bytes()), (548, 524));
        assert_eq!((CostModel::F16_K128.tc_vector_bytes(), CostModel::F16_K128.cc_nonzero_bytes()), (276, 266));
        // Many rows each with one dense vector and singletons: with tf32 rates, singletons
        // (about 81 ps on CUDA cores vs 152 ps on tensor cores) move off once there are enough
        // of them to pay the second launch.
        let mut trip = Vec::new();
        for r in 0..80_000u32 {
            let w = r / 8;
            trip.push((r, w % 1000, 1.0)); // dense column of the window (8 nonzeros)
            for j in 0..6u32 {
                trip.push((r, 1000 + (r * 7 + j * 131) % 60_000, 1.0)); // mostly singletons
            }
        }
        let st = hybrid_stats(&Csr::from_triplets(80_000, 80_000, &trip).unwrap()).unwrap();
        assert!(st.histogram[0] > st.histogram[7]);
        let tf32 = m.choose(&st);
        assert!(tf32.t >= 2, "{tf32:?}");
        assert!(m.seconds(&st.split(tf32.t)) <= m.seconds(&st.split(1)));
        // f16: the same gather rate on both sides, the second pass never pays.
        assert_eq!(CostModel::F16_K128.choose(&st).t, 1);
        // A tiny graph: the launch dominates, everything stays on tensor cores.
        assert_eq!(m.choose(&hybrid_stats(&hand()).unwrap()).t, 1);
        let text = render_hybrid(&st, &[CostModel::TF32_K128, CostModel::F16_K128]);
        assert!(text.contains("chosen t (tf32 model") && text.contains("MMAs (K=16)"), "{text}");
    }
}
