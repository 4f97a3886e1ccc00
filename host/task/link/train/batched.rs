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
//! (seed, epoch) on the host: a run is a function of its seeds. They are drawn batch by batch
//! (Fisher-Yates from the front: batch i's items are final once its swaps are done), so the
//! host permutes and indexes batch i + 1 while the device runs step i: a step reads its pairs
//! by index (`step_pairs`) and nothing in it waits for the device, so an epoch of the ddi
//! protocol is its device work plus the negatives' draw.

use super::*;
use crate::util::rng::SplitMix64;

/// Fisher-Yates from the front, positions `from..to` of it: after the calls for `0..a`,
/// `a..b`, ... every prefix `v[..b]` is final, and all of them together are one uniformly
/// random permutation of `v` drawn from `rng`.
fn shuffle_range<T>(v: &mut [T], range: std::ops::Range<usize>, rng: &mut SplitMix64) {
    let n = v.len();
    for i in range.start..range.end.min(n.saturating_sub(1)) {
        v.swap(i, i + rng.below((n - i) as u64) as usize);
    }
}

/// The share of `count` items (the negatives) of batch `i`, whose positives are [i k, (i + 1) k)
/// of `total`: consecutive ranges in proportion to the positives.
fn share(i: usize, k: usize, total: usize, count: usize) -> std::ops::Range<usize> {
    let at = |p: usize| ((p.min(total) as u128 * count as u128) / total.max(1) as u128) as usize;
    at(i * k)..at((i + 1) * k)
}

/// The largest batch of an epoch of `total` positives in batches of `k` with `count`
/// negatives: the positives' share and the negatives' (`share` rounds each up by at most one).
pub(super) fn batch_capacity(k: usize, total: usize, count: usize) -> usize {
    let k = k.min(total);
    k + (k as u128 * count as u128).div_ceil(total.max(1) as u128) as usize + 1
}

impl<B: Ops + 'static> LinkTrainer<B> {
    /// Epoch `epoch` (0-based) as ceil(P / k) steps of `k` training positives each; returns the
    /// mean loss over the epoch's pairs and the negatives dropped.
    pub(super) fn train_epoch_batched(&mut self, epoch: usize, k: usize) -> Result<(f64, usize)> {
        let (mut negs, dropped) = self.negatives(epoch)?;
        let mut pos = self.train_pos.clone();
        let seed = self.cfg.seed ^ 0xBA7C_4ED0_0000_0000 ^ ((epoch as u64) << 16);
        // One stream for each list: batch by batch, their draws interleave.
        let (mut rp, mut rn) = (SplitMix64::new(seed), SplitMix64::new(seed ^ 0x4E47_0000_0000_0001));
        let pairs = pos.len() + negs.len();
        if pos.is_empty() {
            return Err(Error::Unsupported("link training: the split holds no training edges".into()));
        }
        // Sized for every epoch (the negatives' count before repeats are dropped).
        self.reserve_step_pairs(batch_capacity(k, pos.len(), self.negative_count().max(negs.len())))?;
        for i in 0..pos.len().div_ceil(k) {
            let (pr, nr) = (i * k..((i + 1) * k).min(pos.len()), share(i, k, pos.len(), negs.len()));
            shuffle_range(&mut pos, pr.clone(), &mut rp);
            shuffle_range(&mut negs, nr.clone(), &mut rn);
            // The loss summed over the epoch's pairs on the device, read once below.
            self.step_on(&pos[pr], &negs[nr], 1.0 / pairs as f64, i > 0)?;
        }
        Ok((self.backend.read_stats(&self.stats)?.loss, dropped))
    }

    /// Step pairs with room for at least `cap` pairs (kept across steps and epochs).
    pub(super) fn reserve_step_pairs(&mut self, cap: usize) -> Result<()> {
        if self.step_pairs.as_ref().is_none_or(|s| s.capacity() < cap) {
            // The old buffers go first: both at once may not fit.
            self.step_pairs = None;
            self.step_pairs = Some(self.decoder.step_pairs(&*self.backend, cap)?);
        }
        Ok(())
    }

    /// One optimiser step on the positives `pos` and negatives `neg` (the encoder on the whole
    /// message-passing graph, the decoder on these pairs, read by index: no pattern, no sort;
    /// the gradient of the mean loss over these pairs); the sum of the pairs' loss terms times
    /// `loss_scale` into the stats, added to them if `accumulate`. Enqueued only: nothing is
    /// read back, so the host builds the next step's index while the device runs this one.
    pub(super) fn step_on(&mut self, pos: &[Pair], neg: &[Pair], loss_scale: f64, accumulate: bool) -> Result<()> {
        let b = self.backend.clone();
        let b = &*b;
        self.reserve_step_pairs(pos.len() + neg.len())?;
        let sp = self.step_pairs.as_mut().expect("reserved above");
        sp.bind(b, pos, neg)?;
        b.begin_step()?;
        let z = self.net.forward(b, &mut self.input, true)?;
        self.decoder.score_step(b, sp, z)?;
        sp.loss(b, loss_scale, accumulate, &mut self.stats)?;
        self.decoder.backward_step(b, sp, z, &mut self.dz)?;
        self.net.backward(b, &mut self.input, &mut self.dz)?;
        let params = self.net.params().into_iter().chain(self.decoder.params()).chain(self.input.params()).map(|(_, p)| p);
        Param::adam_all(b, params, &self.hyper)
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
    fn shuffle_by_ranges_is_one_seeded_permutation() {
        let whole = |seed| {
            let mut a: Vec<u32> = (0..1000).collect();
            shuffle_range(&mut a, 0..1000, &mut SplitMix64::new(seed));
            a
        };
        let a = whole(3);
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert_ne!(a, s);
        assert_eq!(whole(3), a);
        assert_ne!(whole(4), a);
        // In uneven ranges (as batches take them): the same permutation, each prefix final.
        let mut b: Vec<u32> = (0..1000).collect();
        let mut rng = SplitMix64::new(3);
        for r in [0..7, 7..7, 7..500, 500..999, 999..1000] {
            shuffle_range(&mut b, r.clone(), &mut rng);
            assert_eq!(b[..r.end], a[..r.end]);
        }
        assert_eq!(b, a);
        // One item, none: nothing to do.
        let mut one = [5u32];
        shuffle_range(&mut one, 0..1, &mut rng);
        assert_eq!(one, [5]);
        shuffle_range::<u32>(&mut [], 0..0, &mut rng);
    }

    #[test]
    fn batch_capacity_holds_every_batch() {
        for (total, k, count) in
            [(10usize, 3usize, 10usize), (10, 3, 7), (1000, 64, 1234), (5, 5, 4), (7, 2, 0), (907_725, 65_536, 907_725), (3, 10, 3)]
        {
            let cap = batch_capacity(k, total, count);
            for i in 0..total.div_ceil(k) {
                let len = ((i + 1) * k).min(total) - i * k + share(i, k, total, count).len();
                assert!(len <= cap, "batch {i} of {len} pairs, capacity {cap}");
            }
        }
    }
}
