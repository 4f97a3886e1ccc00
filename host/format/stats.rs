//! Statistics of each translation (TC-GNN Fig. 7, FlashSparse Table 2): tensor-core blocks,
//! MMA instructions for feature width K = 16, fraction of zeros the tensor cores multiply,
//! bytes of the format, translation time; and zeros inside 16x1 versus 8x1 nonzero vectors.

use std::time::Instant;

use crate::error::Result;
use crate::format::{Coo, MEBCRS_WINDOW, MeBcrs, SGT_WINDOW, Sgt};
use crate::graph::Csr;

/// Feature width the MMA counts are given for.
pub const STATS_K: usize = 16;

/// One row of the statistics table.
#[derive(Clone, Debug, PartialEq)]
pub struct FormatStats {
    /// e.g. "SGT 16x8 (SpMM)".
    pub format: String,
    /// Tensor-core blocks (0 for the CUDA-core formats).
    pub blocks: usize,
    /// `mma.sync` instructions one SpMM (or SDDMM for SGT 16x16) issues at K = 16.
    pub mma_k16: usize,
    /// Fraction of the block elements the MMAs multiply that are zero.
    pub zero_fraction: f64,
    pub bytes: usize,
    pub translate_ms: f64,
}

/// Zeros inside nonzero vectors (FlashSparse Table 2): a 16x1 vector is a (16-row window,
/// column) pair holding a nonzero, an 8x1 vector the same with 8-row windows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VectorZeros {
    pub nnz: usize,
    pub vectors16: usize,
    pub zeros16: usize,
    pub vectors8: usize,
    pub zeros8: usize,
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let t = Instant::now();
    let v = f()?;
    Ok((v, t.elapsed().as_secs_f64() * 1e3))
}

/// Distinct (row, col) positions: what fills block elements (duplicates share one).
fn positions(csr: &Csr) -> usize {
    if csr.is_canonical() { csr.nnz() } else { csr.canonical().nnz() }
}

/// Statistics of SGT 16x8, SGT 16x16, ME-BCRS k = 4, 8, 16, COO and CSR for `csr`.
pub fn format_stats(csr: &Csr) -> Result<Vec<FormatStats>> {
    let nnz_pos = positions(csr);
    let zero_frac = |area: usize| if area == 0 { 0.0 } else { 1.0 - nnz_pos as f64 / area as f64 };
    let mut out = Vec::new();
    for (bw, name, mma_per_block) in [
        // 16x8 A operand times 8 x K features: K/8 m16n8k8 MMAs.
        (8, "SGT 16x8 (SpMM)", STATS_K / 8),
        // 16x16 output tile = (16 x K)(K x 16): 2 n-tiles x K/8 k-steps of m16n8k8.
        (16, "SGT 16x16 (SDDMM)", 2 * (STATS_K / 8)),
    ] {
        let (s, ms) = timed(|| Sgt::from_csr(csr, bw))?;
        out.push(FormatStats {
            format: name.into(),
            blocks: s.n_blocks(),
            mma_k16: s.n_blocks() * mma_per_block,
            zero_fraction: zero_frac(s.n_blocks() * SGT_WINDOW * bw),
            bytes: s.bytes(),
            translate_ms: ms,
        });
    }
    for (k, name) in [(4, "ME-BCRS 8x4 (tf32)"), (8, "ME-BCRS 8x8 (tf32/f16)"), (16, "ME-BCRS 8x16 (f16)")] {
        let (m, ms) = timed(|| MeBcrs::from_csr(csr, k))?;
        // Swap-and-transpose: one m16n8k{k} covers 16 feature columns of an 8 x k block; the
        // residue block is computed at full width k.
        out.push(FormatStats {
            format: name.into(),
            blocks: m.n_blocks(),
            mma_k16: m.n_blocks() * STATS_K.div_ceil(16),
            zero_fraction: zero_frac(m.n_blocks() * MEBCRS_WINDOW * k),
            bytes: m.bytes(),
            translate_ms: ms,
        });
    }
    let (coo, ms) = timed(|| Ok(Coo::from_csr(csr)))?;
    out.push(FormatStats {
        format: "COO (CUDA cores)".into(),
        blocks: 0,
        mma_k16: 0,
        zero_fraction: 0.0,
        bytes: coo.bytes(),
        translate_ms: ms,
    });
    out.push(FormatStats {
        format: "CSR (CUDA cores)".into(),
        blocks: 0,
        mma_k16: 0,
        zero_fraction: 0.0,
        bytes: csr.bytes(),
        translate_ms: 0.0,
    });
    Ok(out)
}

/// 16x1 versus 8x1 nonzero vectors and the zeros they hold.
pub fn vector_zeros(csr: &Csr) -> Result<VectorZeros> {
    let nnz = positions(csr);
    let v16 = Sgt::from_csr(csr, 16)?.win_cols.len();
    let v8 = MeBcrs::from_csr(csr, 8)?.n_vectors();
    Ok(VectorZeros { nnz, vectors16: v16, zeros16: 16 * v16 - nnz, vectors8: v8, zeros8: 8 * v8 - nnz })
}

/// The statistics as an aligned text table.
pub fn render_table(rows: &[FormatStats]) -> String {
    let mut s = format!("{:<24} {:>12} {:>14} {:>8} {:>14} {:>10}\n", "format", "blocks", "MMAs (K=16)", "zeros", "bytes", "time ms");
    for r in rows {
        s += &format!(
            "{:<24} {:>12} {:>14} {:>7.1}% {:>14} {:>10.2}\n",
            r.format,
            r.blocks,
            r.mma_k16,
            100.0 * r.zero_fraction,
            r.bytes,
            r.translate_ms
        );
    }
    s
}

/// The vector comparison as text (FlashSparse Table 2 columns).
pub fn render_vector_zeros(v: &VectorZeros) -> String {
    let ratio = |z: usize| if v.nnz == 0 { 0.0 } else { z as f64 / v.nnz as f64 };
    format!(
        "nonzero vectors   16x1: {} ({} zeros, {:.2} per nonzero)   8x1: {} ({} zeros, {:.2} per nonzero)   8x1/16x1 zeros: {:.3}\n",
        v.vectors16,
        v.zeros16,
        ratio(v.zeros16),
        v.vectors8,
        v.zeros8,
        ratio(v.zeros8),
        if v.zeros16 == 0 { 0.0 } else { v.zeros8 as f64 / v.zeros16 as f64 }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_16x16_block_has_no_zeros() {
        let trip: Vec<_> = (0..16u32).flat_map(|r| (0..16u32).map(move |c| (r, c, 1.0))).collect();
        let g = Csr::from_triplets(16, 16, &trip).unwrap();
        let st = format_stats(&g).unwrap();
        assert_eq!((st[0].blocks, st[0].mma_k16, st[0].zero_fraction), (2, 4, 0.0));
        assert_eq!((st[1].blocks, st[1].mma_k16), (1, 4));
        assert_eq!((st[3].blocks, st[3].mma_k16, st[3].zero_fraction), (4, 4, 0.0));
        let v = vector_zeros(&g).unwrap();
        assert_eq!((v.vectors16, v.zeros16, v.vectors8, v.zeros8), (16, 0, 32, 0));
        assert!(render_table(&st).contains("SGT 16x8"));
    }

    #[test]
    fn diagonal_shows_the_8x1_saving() {
        let trip: Vec<_> = (0..64u32).map(|i| (i, i, 1.0)).collect();
        let g = Csr::from_triplets(64, 64, &trip).unwrap();
        let v = vector_zeros(&g).unwrap();
        assert_eq!((v.zeros16, v.zeros8), (64 * 15, 64 * 7));
        let st = format_stats(&g).unwrap();
        assert!((st[0].zero_fraction - (1.0 - 64.0 / (8.0 * 128.0))).abs() < 1e-12);
    }
}
