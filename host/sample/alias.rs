//! Walker's alias method (Vose's construction): O(1) draws from a fixed discrete distribution,
//! for the edge sampler's per-edge probabilities (one table per graph, built once).

use crate::error::{Error, Result};

/// `prob[i]`: chance of keeping slot i once it is drawn; otherwise the draw is `alias[i]`.
#[derive(Clone, Debug)]
pub struct AliasTable {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl AliasTable {
    /// From non-negative finite weights, not all zero (`what` names them in errors).
    pub fn new(weights: &[f64], what: &str) -> Result<Self> {
        let n = weights.len();
        if n == 0 || n > u32::MAX as usize {
            return Err(Error::Unsupported(format!("{what}: {n} weights (need 1 ..= 2^32 - 1)")));
        }
        if let Some(i) = weights.iter().position(|w| !w.is_finite() || *w < 0.0) {
            return Err(Error::Unsupported(format!("{what}: weight {i} is {} (need finite, >= 0)", weights[i])));
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Err(Error::Unsupported(format!("{what}: every weight is zero")));
        }
        // Scaled so the mean is 1: slots below 1 take their remainder from one slot above 1.
        let mut prob: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) = (0..n as u32).partition(|&i| prob[i as usize] < 1.0);
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            alias[s as usize] = l;
            prob[l as usize] -= 1.0 - prob[s as usize];
            if prob[l as usize] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What is left is 1 up to rounding.
        for i in small.into_iter().chain(large) {
            prob[i as usize] = 1.0;
        }
        Ok(AliasTable { prob, alias })
    }

    pub fn len(&self) -> usize {
        self.prob.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prob.is_empty()
    }

    /// (keep probability, alias) of every slot: the table as a device sampler reads it.
    pub fn parts(&self) -> (&[f64], &[u32]) {
        (&self.prob, &self.alias)
    }

    /// The draw for slot `slot` (uniform in [0, len)) and `coin` (uniform in [0, 1)).
    #[inline]
    pub fn pick(&self, slot: usize, coin: f64) -> u32 {
        if coin < self.prob[slot] { slot as u32 } else { self.alias[slot] }
    }

    /// The probability the table gives outcome `i` (for tests: it must equal the weight's share).
    pub fn probability(&self, i: usize) -> f64 {
        let n = self.prob.len() as f64;
        let own = self.prob[i];
        let from_others: f64 = (0..self.prob.len()).filter(|&j| j != i && self.alias[j] as usize == i).map(|j| 1.0 - self.prob[j]).sum();
        (own + from_others) / n
    }
}
