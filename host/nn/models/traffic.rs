//! The fewest bytes a training step must move: the step floor of `bench train`.
//!
//! Counted as an ideal implementation would move them, not as ours does: every input feature
//! and weight read once per pass, every activation written once and read back once, the edge
//! arrays read once per pass over the pattern, and each gathered neighbour row read once per
//! nonzero from L2 (the rows a product gathers are reused across rows, so they stream from L2,
//! not DRAM). Dropout masks are regenerated from the counter RNG (0 bytes); element-wise ops
//! (bias, ReLU, normalisation) are fused into their neighbours (0 bytes); attention values are
//! never stored per edge (the fused forward keeps per-row softmax statistics only). A product
//! `Â X W` gathers the narrower of X and XW (it commutes with W), so GCN, SAGE and GIN gather
//! `min(in, out)` columns per nonzero.
//!
//! The floor time is `dram / copy bandwidth + l2 / L2 bandwidth`, both measured
//! (`bench::step_floor`); a step's fraction of its floor is floor time / step time.

use serde::Serialize;

/// Bytes of one step by where they come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepTraffic {
    /// From and to DRAM (HBM).
    pub dram_bytes: f64,
    /// Neighbour-row gathers, served by L2.
    pub l2_bytes: f64,
}

impl std::ops::Add for StepTraffic {
    type Output = StepTraffic;
    fn add(self, o: StepTraffic) -> StepTraffic {
        StepTraffic { dram_bytes: self.dram_bytes + o.dram_bytes, l2_bytes: self.l2_bytes + o.l2_bytes }
    }
}

impl std::iter::Sum for StepTraffic {
    fn sum<I: Iterator<Item = StepTraffic>>(it: I) -> StepTraffic {
        it.fold(StepTraffic::default(), |a, b| a + b)
    }
}

/// The sizes a step's traffic depends on.
#[derive(Clone, Copy, Debug)]
pub struct StepShape {
    pub n: usize,
    /// Edges the products read (self-loops included).
    pub nnz: usize,
    pub features: usize,
    pub classes: usize,
    /// Bytes of one activation element (2 in f16, else 4).
    pub act_bytes: usize,
}

/// How a graph layer touches the graph.
#[derive(Clone, Copy, Debug)]
pub struct Aggregation {
    /// Columns gathered per nonzero.
    pub width: usize,
    /// Bytes of a stored value per edge (GCN's Â: 4; unit or mean weights and attention: 0).
    pub value_bytes: usize,
    /// Passes over the pattern gathering `width` columns: forward, backward. A plain product is
    /// (1, 1); attention is (1, 2): scores and sum share the forward's gathers, the backward
    /// gathers once for dα (⟨dY_i, Z_j⟩) and once for dZ through α and through the scores.
    pub passes: (usize, usize),
}

/// One graph layer of a model: dense weights `weights` (elements, 0 for none), input width
/// `input`, output width `output`, the gathers of `agg`; `first`: no input gradient is needed.
pub fn layer(s: &StepShape, input: usize, output: usize, weights: usize, agg: Aggregation, first: bool) -> StepTraffic {
    let (n, nnz, a) = (s.n as f64, s.nnz as f64, s.act_bytes as f64);
    let (i, o, g) = (input as f64, output as f64, agg.width as f64);
    let pattern = nnz * (4.0 + agg.value_bytes as f64) + 4.0 * (n + 1.0);
    // The gathered matrix is written once (unless it is the input itself) and read once.
    let gathered = if agg.width == input { n * g * a } else { 2.0 * n * g * a };
    let forward = n * i * a + gathered + n * o * a + pattern * agg.passes.0 as f64;
    // dY read; dW from X and the gathered gradient; dX written unless first.
    let backward = n * o * a + n * i * a + gathered + if first { 0.0 } else { n * i * a } + pattern * agg.passes.1 as f64;
    let w = weights as f64; // read forward and backward; dW is Adam's gradient read
    StepTraffic { dram_bytes: forward + backward + 2.0 * 4.0 * w + adam(w), l2_bytes: nnz * g * a * (agg.passes.0 + agg.passes.1) as f64 }
}

/// A dense layer without a graph (AGNN's input and output Linear, GIN's second MLP Linear).
pub fn dense(s: &StepShape, input: usize, output: usize, first: bool) -> StepTraffic {
    let (n, a) = (s.n as f64, s.act_bytes as f64);
    let (i, o) = (input as f64, output as f64);
    let w = i * o;
    let moved = n * i * a + n * o * a // forward: X read, Y written
        + n * o * a + n * i * a + if first { 0.0 } else { n * i * a }; // backward: dY, X, dX
    StepTraffic { dram_bytes: moved + 2.0 * 4.0 * w + adam(w), l2_bytes: 0.0 }
}

/// The loss: logits read, their gradient written.
pub fn loss(s: &StepShape) -> StepTraffic {
    StepTraffic { dram_bytes: 2.0 * (s.n * s.classes) as f64 * 4.0, l2_bytes: 0.0 }
}

/// Adam over `params` f32 elements: value, gradient and both moments read, three written.
fn adam(params: f64) -> f64 {
    7.0 * 4.0 * params
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> StepShape {
        StepShape { n: 100, nnz: 1000, features: 50, classes: 7, act_bytes: 4 }
    }

    #[test]
    fn a_plain_product_counts_each_piece_once() {
        // Gathering the input itself (width == input): X read fwd + bwd, written never.
        let t = layer(&shape(), 8, 16, 0, Aggregation { width: 8, value_bytes: 4, passes: (1, 1) }, true);
        let pattern = 1000.0 * 8.0 + 4.0 * 101.0;
        let fwd = 100.0 * 8.0 * 4.0 + 100.0 * 8.0 * 4.0 + 100.0 * 16.0 * 4.0 + pattern;
        let bwd = 100.0 * 16.0 * 4.0 + 100.0 * 8.0 * 4.0 + 100.0 * 8.0 * 4.0 + pattern;
        assert_eq!(t.dram_bytes, fwd + bwd);
        assert_eq!(t.l2_bytes, 2.0 * 1000.0 * 8.0 * 4.0);
    }

    #[test]
    fn attention_gathers_three_times_and_f16_halves_activations() {
        let agg = Aggregation { width: 32, value_bytes: 0, passes: (1, 2) };
        let f32 = layer(&shape(), 32, 32, 0, agg, false);
        let f16 = layer(&StepShape { act_bytes: 2, ..shape() }, 32, 32, 0, agg, false);
        assert_eq!(f32.l2_bytes, 3.0 * 1000.0 * 32.0 * 4.0);
        assert_eq!(f16.l2_bytes * 2.0, f32.l2_bytes);
        assert!(f16.dram_bytes < f32.dram_bytes);
    }

    #[test]
    fn weights_cost_reads_and_adam() {
        let agg = Aggregation { width: 4, value_bytes: 0, passes: (1, 1) };
        let without = layer(&shape(), 4, 4, 0, agg, true);
        let with = layer(&shape(), 4, 4, 16, agg, true);
        assert_eq!(with.dram_bytes - without.dram_bytes, 16.0 * 4.0 * (2.0 + 7.0));
    }
}
