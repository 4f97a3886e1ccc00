//! Link prediction's metrics on scores of positive and negative pairs.
//!
//! - ROC AUC: the probability that a random positive scores above a random negative, ties
//!   counted half (scikit-learn's `roc_auc_score`), from average ranks in O((P + N) log(P + N)).
//! - Hits@K as OGB's `Evaluator` for ogbl-* computes it: every positive is ranked against one
//!   shared set of negatives; the K-th highest negative score is the threshold and a positive
//!   counts only if it scores strictly above it. With fewer than K negatives every positive
//!   counts (OGB returns 1).

use crate::error::{Error, Result};

/// The K of Hits@K reported (OGB's ogbl-ddi reports 20; PyG / OGB examples print all three).
pub const HITS_K: [usize; 3] = [20, 50, 100];

/// ROC AUC of `pos` against `neg`, ties counted half. Refuses empty sides and NaN scores.
pub fn roc_auc(pos: &[f32], neg: &[f32]) -> Result<f64> {
    check(pos, neg)?;
    let mut all: Vec<(f32, bool)> = pos.iter().map(|&s| (s, true)).chain(neg.iter().map(|&s| (s, false))).collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Sum of the positives' ranks (1-based), tied scores sharing the average rank of their run.
    let mut rank_sum = 0f64;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j < all.len() && all[j].0 == all[i].0 {
            j += 1;
        }
        let avg = (i + 1 + j) as f64 / 2.0;
        rank_sum += avg * all[i..j].iter().filter(|x| x.1).count() as f64;
        i = j;
    }
    let (p, n) = (pos.len() as f64, neg.len() as f64);
    Ok((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// Hits@K (OGB): the fraction of `pos` strictly above the K-th highest score of `neg`.
pub fn hits_at_k(pos: &[f32], neg: &[f32], k: usize) -> Result<f64> {
    check(pos, neg)?;
    if k == 0 {
        return Err(Error::Unsupported("Hits@K needs K >= 1".into()));
    }
    if neg.len() < k {
        return Ok(1.0);
    }
    let mut sorted = neg.to_vec();
    // The K-th largest: select_nth on the descending order.
    let (_, kth, _) = sorted.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    let threshold = *kth;
    Ok(pos.iter().filter(|&&s| s > threshold).count() as f64 / pos.len() as f64)
}

fn check(pos: &[f32], neg: &[f32]) -> Result<()> {
    if pos.is_empty() || neg.is_empty() {
        return Err(Error::Unsupported(format!("link metrics need positives and negatives ({} and {})", pos.len(), neg.len())));
    }
    if pos.iter().chain(neg).any(|s| s.is_nan()) {
        return Err(Error::Unsupported("a link score is NaN (the model diverged; try a smaller --lr)".into()));
    }
    Ok(())
}

/// AUC and Hits@[`HITS_K`] of one part of a split.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkMetrics {
    pub auc: f64,
    pub hits: [f64; 3],
}

impl LinkMetrics {
    pub fn of(pos: &[f32], neg: &[f32]) -> Result<Self> {
        let mut hits = [0.0; 3];
        for (h, &k) in hits.iter_mut().zip(&HITS_K) {
            *h = hits_at_k(pos, neg, k)?;
        }
        Ok(LinkMetrics { auc: roc_auc(pos, neg)?, hits })
    }
}
