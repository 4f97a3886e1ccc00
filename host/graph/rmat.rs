//! R-MAT (recursive matrix) power-law graph generator.

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::util::rng::SplitMix64;

/// R-MAT parameters: quadrant probabilities a, b, c (d = 1 - a - b - c), 2^scale nodes,
/// `edge_factor * 2^scale` sampled edges (duplicates merged, so nnz is a little lower).
#[derive(Clone, Copy, Debug)]
pub struct RmatParams {
    pub scale: u32,
    pub edge_factor: u32,
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub seed: u64,
}

impl RmatParams {
    /// Graph500's probabilities (0.57, 0.19, 0.19).
    pub fn new(scale: u32, edge_factor: u32, seed: u64) -> Self {
        RmatParams { scale, edge_factor, a: 0.57, b: 0.19, c: 0.19, seed }
    }
}

impl RmatParams {
    /// Probabilities in range, 2^scale nodes and the sampled edges within 32-bit ids and
    /// nonzero counts, and the host memory generation takes (the edge triplets, then the CSR
    /// built from them: about 32 bytes per edge) available. Call before [`rmat`].
    pub fn check(&self) -> Result<()> {
        let (a, b, c) = (self.a, self.b, self.c);
        let probs_ok = [a, b, c].iter().all(|p| p.is_finite() && *p >= 0.0) && a + b + c <= 1.0;
        let edges = (1u64 << self.scale.min(40)) * self.edge_factor as u64;
        if !probs_ok || self.scale == 0 || self.scale > 30 || edges > crate::graph::spec::MAX_NNZ {
            return Err(Error::Unsupported(format!(
                "R-MAT a={a} b={b} c={c}, 2^{} nodes x {} edges each: need probabilities >= 0 with a + b + c <= 1, scale 1..=30 and at most 2^31 - 1 edges",
                self.scale, self.edge_factor
            )));
        }
        crate::util::memory::check_host_alloc(edges * 32, &format!("R-MAT 2^{} x {} ({edges} edges)", self.scale, self.edge_factor))
    }
}

/// Generate an R-MAT graph with unit values (directed, duplicates merged, sorted columns).
pub fn rmat(p: RmatParams) -> Csr {
    use rayon::prelude::*;
    let n = 1usize << p.scale;
    let edges = n * p.edge_factor as usize;
    let chunk = 1 << 16;
    let triplets: Vec<(u32, u32, f32)> = (0..edges.div_ceil(chunk))
        .into_par_iter()
        .flat_map_iter(|ci| {
            // Hash (seed, chunk) into the chunk's starting state: SplitMix64 streams are one
            // sequence walked in steps of the golden gamma, so seeds spaced by a multiple of it
            // (as `seed ^ ci * gamma` nearly is) would replay each other's edges.
            let mut rng = SplitMix64::new(SplitMix64::new(p.seed ^ ((ci as u64) << 32 | ci as u64)).next_u64());
            let count = chunk.min(edges - ci * chunk);
            (0..count).map(move |_| {
                let (mut r, mut c) = (0u32, 0u32);
                for _ in 0..p.scale {
                    let x = rng.next_f64();
                    let (dr, dc) = if x < p.a {
                        (0, 0)
                    } else if x < p.a + p.b {
                        (0, 1)
                    } else if x < p.a + p.b + p.c {
                        (1, 0)
                    } else {
                        (1, 1)
                    };
                    r = (r << 1) | dr;
                    c = (c << 1) | dc;
                }
                (r, c, 1.0f32)
            })
        })
        .collect();
    let m = Csr::from_triplets(n, n, &triplets).expect("R-MAT indices are in range by construction");
    // Duplicates were summed; R-MAT is a pattern, so reset the values to 1.
    let nnz = m.nnz();
    m.with_values(vec![1.0; nnz]).expect("same length")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmat_is_deterministic_and_skewed() {
        let g = rmat(RmatParams::new(10, 8, 7));
        assert_eq!(g, rmat(RmatParams::new(10, 8, 7)));
        assert_eq!(g.n_rows(), 1024);
        assert!(g.nnz() > 6000 && g.nnz() <= 8192, "{} nnz", g.nnz());
        let max = (0..g.n_rows()).map(|r| g.row_len(r)).max().unwrap();
        assert!(max > 8 * 8, "power law: the heaviest row ({max}) is far above the mean (8)");
        assert!(g.is_canonical());
    }

    #[test]
    fn chunks_do_not_replay_each_other() {
        // 2^16 nodes, 2^20 sampled edges (16 chunks): duplicates must be a small fraction.
        let g = rmat(RmatParams::new(16, 16, 1));
        assert!(g.nnz() > (1 << 20) * 8 / 10, "{} nnz of 2^20 sampled", g.nnz());
    }
}
