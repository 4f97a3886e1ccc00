//! A link epoch in mini-batches (`LinkConfig::batch_edges`), as OGB's baselines train
//! (ogbl-ddi: 64 * 1024 training edges a step): the training positives permuted, each batch of
//! `k` of them one optimiser step with its own negatives, the encoder recomputed per step. OGB's
//! ddi baseline takes 17 such steps an epoch (its 1.07M training edges) for 200 epochs; one
//! full-batch step an epoch would be 17x fewer optimiser steps for the same work (on our split
//! of those edges, 907,725 for training, K = 65536 gives 14 steps).
//!
//! The epoch's negatives are drawn once, as the full-batch epoch draws them (the same pairs
//! under the same (seed, epoch)), and permuted with the positives: batch i takes positives
//! [i k, (i + 1) k) of the permutation and the same share of the negatives, so every batch
//! holds `neg_ratio` negatives per positive (up to rounding). The permutations are drawn from
//! (seed, epoch) on the host: a run is a function of its seeds.

use super::*;
use crate::util::rng::SplitMix64;

/// Fisher-Yates with `rng`.
fn shuffle<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

/// The share of `count` items (the negatives) of batch `i`, whose positives are [i k, (i + 1) k)
/// of `total`: consecutive ranges in proportion to the positives.
fn share(i: usize, k: usize, total: usize, count: usize) -> std::ops::Range<usize> {
    let at = |p: usize| ((p.min(total) as u128 * count as u128) / total.max(1) as u128) as usize;
    at(i * k)..at((i + 1) * k)
}

impl<B: Ops + 'static> LinkTrainer<B> {
    /// Epoch `epoch` (0-based) as ceil(P / k) steps of `k` training positives each; returns the
    /// mean loss over the epoch's pairs and the negatives dropped.
    pub(super) fn train_epoch_batched(&mut self, epoch: usize, k: usize) -> Result<(f64, usize)> {
        let (mut negs, dropped) = self.negatives(epoch)?;
        let mut pos = self.train_pos.clone();
        let mut rng = SplitMix64::new(self.cfg.seed ^ 0xBA7C_4ED0_0000_0000 ^ ((epoch as u64) << 16));
        shuffle(&mut pos, &mut rng);
        shuffle(&mut negs, &mut rng);
        let (mut loss, mut pairs) = (0.0, 0usize);
        for i in 0..pos.len().div_ceil(k) {
            let p = &pos[i * k..((i + 1) * k).min(pos.len())];
            let q = &negs[share(i, k, pos.len(), negs.len())];
            loss += self.step_on(p, q)? * (p.len() + q.len()) as f64;
            pairs += p.len() + q.len();
        }
        Ok((loss / pairs as f64, dropped))
    }

    /// One optimiser step on the positives `pos` and negatives `neg` (the encoder on the whole
    /// message-passing graph, the decoder on these pairs); returns the mean loss over them.
    pub(super) fn step_on(&mut self, pos: &[Pair], neg: &[Pair]) -> Result<f64> {
        let b = self.backend.clone();
        let b = &*b;
        let mut set = PairSet::new(b, self.n, pos, neg)?;
        let mut grad = b.edges(&set.graph, Side::Forward)?;
        let mut grad_t = b.edges(&set.graph, Side::Transposed)?;
        b.begin_step()?;
        let z = self.net.forward(b, &mut self.input, true)?;
        self.decoder.score(b, &mut set, z)?;
        b.bce_logits(&set.scores, &set.targets, 1.0 / set.len() as f32, &mut grad, &mut self.stats)?;
        self.decoder.backward(b, &mut set, z, &grad, &mut grad_t, &mut self.dz)?;
        self.net.backward(b, &mut self.input, &self.dz)?;
        let params = self.net.params().into_iter().chain(self.decoder.params()).chain(self.input.params()).map(|(_, p)| p);
        Param::adam_all(b, params, &self.hyper)?;
        Ok(b.read_stats(&self.stats)?.loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_item_once_in_proportion() {
        for (total, k, count) in [(10usize, 3usize, 10usize), (10, 3, 7), (1000, 64, 1234), (5, 5, 4), (7, 2, 0)] {
            let batches = total.div_ceil(k);
            let ranges: Vec<_> = (0..batches).map(|i| share(i, k, total, count)).collect();
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges.last().unwrap().end, count);
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            for (i, r) in ranges.iter().enumerate() {
                let positives = ((i + 1) * k).min(total) - i * k;
                let want = positives as f64 * count as f64 / total as f64;
                assert!((r.len() as f64 - want).abs() <= 1.0, "batch {i}: {} negatives for {positives} positives", r.len());
            }
        }
    }

    #[test]
    fn shuffle_is_a_seeded_permutation() {
        let mut a: Vec<u32> = (0..1000).collect();
        shuffle(&mut a, &mut SplitMix64::new(3));
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert_ne!(a, s);
        let mut b: Vec<u32> = (0..1000).collect();
        shuffle(&mut b, &mut SplitMix64::new(3));
        assert_eq!(a, b);
    }
}
