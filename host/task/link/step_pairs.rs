//! A training step's pairs where the decoder reads them, with no sparse pattern: the step's
//! positives then its negatives as index arrays (`ops::nn::pair_hadamard`'s batch: u, v and a
//! by-node index built by a counting sort, O(P + n) on the host, copied without waiting), the
//! targets implied by position (the first `positives` pairs are positives,
//! `ops::nn::bce_column`). Allocated once at a capacity of pairs and rebound every step; a
//! step with fewer pairs leaves the rows past them as padding the ops skip (zero scores'
//! gradients, so they add nothing to any gradient). `PairSet` (a sorted pattern and a graph
//! handle) stays for the fixed validation and test pairs, built once.

use crate::error::{Error, Result};
use crate::ops::nn::bce_column::BceColumn;
use crate::ops::nn::pair_hadamard::PairIndex;
use crate::task::link::decoder::DecoderOps;
use crate::task::link::split::Pair;

/// The MLP decoder's activations over a step's pairs (capacity rows, the embedding width).
pub struct MlpStep<B: DecoderOps> {
    /// z_u ⊙ z_v; after the backward's weight gradient, the gradient of it.
    pub(crate) h: B::Mat,
    /// ReLU(h W1 + b1).
    pub(crate) h1: B::Mat,
    pub(crate) dh1: B::Mat,
}

pub struct StepPairs<B: DecoderOps> {
    n: usize,
    cap: usize,
    /// The host's index, rebuilt in place every step.
    ix: PairIndex,
    pub(crate) batch: B::PairBatch,
    /// The step's pairs and how many of them lead as positives.
    pub(crate) len: usize,
    pub(crate) positives: usize,
    /// Scores (logits, cap x 1) and their gradient.
    pub(crate) s: B::Mat,
    pub(crate) ds: B::Mat,
    /// `Some` for the MLP decoder.
    pub(crate) mlp: Option<MlpStep<B>>,
}

impl<B: DecoderOps> StepPairs<B> {
    /// Room for `cap` pairs on `n` nodes; `mlp_width`: the MLP decoder's activations of that
    /// width (`None` for the dot decoder, which needs the scores only).
    pub fn new(b: &B, n: usize, cap: usize, mlp_width: Option<usize>) -> Result<Self> {
        let mlp = match mlp_width {
            None => None,
            Some(d) => Some(MlpStep { h: b.matrix(cap, d)?, h1: b.matrix(cap, d)?, dh1: b.matrix(cap, d)? }),
        };
        Ok(StepPairs {
            n,
            cap,
            ix: PairIndex::default(),
            batch: b.pair_batch(n, cap)?,
            len: 0,
            positives: 0,
            s: b.matrix(cap, 1)?,
            ds: b.matrix(cap, 1)?,
            mlp,
        })
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The step's pairs: `pos` then `neg` (at most the capacity; a pair out of range refused).
    pub fn bind(&mut self, b: &B, pos: &[Pair], neg: &[Pair]) -> Result<()> {
        if pos.len() + neg.len() > self.cap {
            return Err(Error::Shape(format!("{} + {} pairs for a step of capacity {}", pos.len(), neg.len(), self.cap)));
        }
        self.ix.build(self.n, &[pos, neg])?;
        b.bind_pair_batch(&mut self.batch, &self.ix)?;
        self.len = self.ix.len();
        self.positives = pos.len();
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Binary cross entropy with logits of the scores, positives first (`ops::nn::bce_column`):
    /// `ds` the gradient of the mean over the step's pairs, the sum of their loss terms times
    /// `loss_scale` into `stats` (added to it if `accumulate`).
    pub fn loss(&mut self, b: &B, loss_scale: f64, accumulate: bool, stats: &mut B::Stats) -> Result<()> {
        let c = BceColumn { pairs: self.len, positives: self.positives, grad_scale: 1.0 / self.len.max(1) as f64, loss_scale, accumulate };
        b.bce_column(&self.s, &c, &mut self.ds, stats)
    }

    /// The step's scores in pair order (downloaded: waits for the stream).
    pub fn scores(&self, b: &B) -> Result<Vec<f32>> {
        let m = b.download(&self.s)?;
        Ok(m.data[..self.len].to_vec())
    }
}
