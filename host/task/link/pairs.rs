//! A list of node pairs to score, as a sparse pattern on the backend: pair (u, v) is entry
//! (u, v) of an n x n pattern, so scoring every pair is one SDDMM and the decoder's backward
//! two SpMMs with per-call values (`decoder`). The pattern's own values are 1: the GPU's SDDMM
//! kernels scale each dot product by them (the CPU's reads the pattern only), and with the
//! targets there the GPU scored t * (z_u . z_v), which a model fits at once (AUC 100% at epoch
//! 1 on the H200). The targets, +1 for a positive and -1 for a negative (what
//! `ops::nn::bce_logits` reads; 0 marks no pair), are edge values of their own.

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::ops::backend::Side;
use crate::task::link::split::Pair;

pub struct PairSet<B: crate::task::link::decoder::DecoderOps> {
    pub graph: B::Graph,
    /// The pairs in pattern (CSR) order, and whether each is a positive.
    pub pairs: Vec<Pair>,
    pub positive: Vec<bool>,
    /// +1 / -1 per pair, in the backend's edge order.
    pub targets: B::Edges,
    /// The decoder's scores (logits) of the last `decoder::score`.
    pub scores: B::Edges,
    /// The MLP decoder's per-list state (made on its first use of this list).
    pub mlp: Option<crate::task::link::decoder::MlpPairs<B>>,
}

impl<B: crate::task::link::decoder::DecoderOps> PairSet<B> {
    /// The pattern of `pos` and `neg` on `n` nodes. A pair given twice (within or across the
    /// lists) or out of range is refused: a score would be counted twice.
    pub fn new(b: &B, n: usize, pos: &[Pair], neg: &[Pair]) -> Result<Self> {
        let mut items: Vec<(Pair, bool)> = pos.iter().map(|&p| (p, true)).chain(neg.iter().map(|&p| (p, false))).collect();
        if let Some((p, _)) = items.iter().find(|(p, _)| p[0] as usize >= n || p[1] as usize >= n) {
            return Err(Error::Unsupported(format!("pair ({}, {}) is out of range for {n} nodes", p[0], p[1])));
        }
        if items.len() >= (1usize << 31) {
            return Err(Error::Unsupported(format!("{} pairs (at most 2^31 - 1)", items.len())));
        }
        items.sort_unstable_by_key(|x| x.0);
        if let Some(w) = items.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error::Unsupported(format!("pair ({}, {}) is given twice", w[0].0[0], w[0].0[1])));
        }
        let sorted: Vec<Pair> = items.iter().map(|x| x.0).collect();
        let (row_ptr, col_idx) = pattern(n, &sorted);
        let target_values: Vec<f32> = items.iter().map(|&(_, pos)| if pos { 1.0 } else { -1.0 }).collect();
        let csr = Csr::new(n, n, row_ptr, col_idx, vec![1.0; items.len()])?;
        let graph = b.graph(csr)?;
        let mut targets = b.edges(&graph, Side::Forward)?;
        b.bind_edges(&mut targets, &target_values)?;
        let scores = b.edges(&graph, Side::Forward)?;
        let (pairs, positive) = items.into_iter().unzip();
        Ok(PairSet { graph, pairs, positive, targets, scores, mlp: None })
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Checks that the backend keeps this pattern's edge values in pattern order (the scores
    /// are read back per pair): a GPU backend with values in a kernel layout is refused.
    pub fn check_order(&self, b: &B) -> Result<()> {
        // A probe of the same pattern whose values are their own positions (exact in f32 below
        // 2^24; longer lists are checked on their first 2^24): the backend's order of them.
        let len = self.len().min(1 << 24);
        let (n, _) = B::graph_shape(&self.graph);
        let (row_ptr, col_idx) = pattern(n, &self.pairs[..len]);
        let probe = b.graph(Csr::new(n, n, row_ptr, col_idx, (0..len).map(|i| i as f32).collect())?)?;
        let got = b.download_edges(&b.graph_values(&probe, Side::Forward)?, len)?;
        if got.iter().enumerate().any(|(i, &v)| v != i as f32) {
            return Err(Error::Unsupported(
                "link prediction reads its scores in pair order: the backend keeps edge values in a kernel layout (use --edge-layout csr)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The last scores, split into positives' and negatives' (downloaded).
    pub fn split_scores(&self, b: &B) -> Result<(Vec<f32>, Vec<f32>)> {
        let s = b.download_edges(&self.scores, self.len())?;
        let (mut pos, mut neg) = (Vec::new(), Vec::new());
        for (&s, &p) in s.iter().zip(&self.positive) {
            if p { pos.push(s) } else { neg.push(s) }
        }
        Ok((pos, neg))
    }
}

/// The CSR pattern (row pointers, columns) of `pairs`, sorted, on `n` rows.
fn pattern(n: usize, pairs: &[Pair]) -> (Vec<u32>, Vec<u32>) {
    let mut row_ptr = vec![0u32; n + 1];
    for p in pairs {
        row_ptr[p[0] as usize + 1] += 1;
    }
    for i in 0..n {
        row_ptr[i + 1] += row_ptr[i];
    }
    (row_ptr, pairs.iter().map(|p| p[1]).collect())
}
