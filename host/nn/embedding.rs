//! Learnable node embeddings as a model's input, for graphs without node features: OGB's
//! baselines on ogbl-ddi / ogbl-ppa learn `torch.nn.Embedding(n, d)` (xavier-uniform init) and
//! feed its weight to the encoder as x, trained with the model. Here that is an input kind
//! ([`InputFeatures::Learnable`]), so any model of the registry takes it: the table is the
//! first layer's dense operand, the first layer's backward writes dL/dX into the table's
//! gradient (no other input kind computes dX), and the optimiser steps it with the model's
//! parameters.
//!
//! On the command line: `--features learnable:D` (plain `--features D` is the width of fixed
//! random features).

use crate::error::{Error, Result};
use crate::nn::input::{HostFeatures, InputFeatures, InputOps};
use crate::nn::model::{MAX_WIDTH, ModelConfig};
use crate::nn::param::{Param, glorot};
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

/// The table's name among a saved model's tensors (OGB's `emb.weight`).
pub const EMBEDDING_NAME: &str = "emb.weight";

/// Most values a table may hold (n x d; past this an index would not fit in an i32, and its
/// four copies, value, gradient and Adam's two moments, take 32 GiB).
pub const MAX_TABLE: usize = 1 << 31;

/// What a model reads as its input.
#[derive(Clone, Copy)]
pub enum NodeInput<'a> {
    /// The node data's features (or synthetic ones), fixed.
    Features(&'a HostFeatures),
    /// A learnable table of `width` columns, one row per node.
    Learnable { width: usize },
}

impl<'a> From<&'a HostFeatures> for NodeInput<'a> {
    fn from(f: &'a HostFeatures) -> Self {
        NodeInput::Features(f)
    }
}

impl NodeInput<'_> {
    /// The input width (the first layer's fan-in).
    pub fn cols(&self) -> usize {
        match self {
            NodeInput::Features(f) => f.cols(),
            NodeInput::Learnable { width } => *width,
        }
    }

    pub fn is_learnable(&self) -> bool {
        matches!(self, NodeInput::Learnable { .. })
    }

    /// The input of `model` on `n` nodes: features as [`InputFeatures::for_model`] holds them
    /// (with their f16 copy where the backend reads one), or a fresh table initialised from
    /// the model seed ([`initial_table`]).
    pub fn build<B: InputOps>(&self, b: &B, n: usize, model: &ModelConfig) -> Result<InputFeatures<B>> {
        match self {
            NodeInput::Features(f) => {
                if f.rows() != n {
                    return Err(Error::Shape(format!("{} feature rows for {n} nodes", f.rows())));
                }
                InputFeatures::for_model(b, f, model)?.with_half_features(b, model)
            }
            NodeInput::Learnable { width } => InputFeatures::learnable(b, &initial_table(n, *width, model.seed)?),
        }
    }
}

/// Glorot (xavier) uniform U(-a, a), a = sqrt(6 / (n + d)), as OGB's
/// `torch.nn.init.xavier_uniform_(emb.weight)` on an n x d weight, drawn from the model seed
/// (a stream of its own: the layers' weights are drawn from the seed as before).
pub fn initial_table(n: usize, d: usize, seed: u64) -> Result<Matrix> {
    check_table(n, d)?;
    Ok(glorot(n, d, &mut SplitMix64::new(seed ^ 0xE3BE_DD17_0000_0001)))
}

/// Refuses a table that cannot be held, before anything is allocated.
pub fn check_table(n: usize, d: usize) -> Result<()> {
    if d == 0 || d > MAX_WIDTH {
        return Err(Error::Unsupported(format!("a learnable input of width {d}: need 1..={MAX_WIDTH}")));
    }
    if n == 0 || n.checked_mul(d).is_none_or(|v| v > MAX_TABLE) {
        return Err(Error::Unsupported(format!(
            "a learnable input of {n} nodes x {d}: at most {MAX_TABLE} values (and at least one node)"
        )));
    }
    Ok(())
}

impl<B: InputOps> InputFeatures<B> {
    /// A learnable input holding `init` (n x d): a fresh one ([`initial_table`]) or a trained
    /// one read back from a model file.
    pub fn learnable(b: &B, init: &Matrix) -> Result<Self> {
        check_table(init.rows, init.cols)?;
        Ok(InputFeatures::Learnable { table: Param::new(b, init)? })
    }
}

/// `--features`: a width of fixed random features (`64`) or a learnable table (`learnable:256`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureSpec {
    Random(usize),
    Learnable(usize),
}

impl FeatureSpec {
    pub fn width(self) -> usize {
        match self {
            FeatureSpec::Random(w) | FeatureSpec::Learnable(w) => w,
        }
    }

    /// The width of synthetic features it asks for (`None` for a learnable input).
    pub fn random_width(self) -> Option<usize> {
        match self {
            FeatureSpec::Random(w) => Some(w),
            FeatureSpec::Learnable(_) => None,
        }
    }

    pub fn is_learnable(self) -> bool {
        matches!(self, FeatureSpec::Learnable(_))
    }
}

impl From<usize> for FeatureSpec {
    fn from(w: usize) -> Self {
        FeatureSpec::Random(w)
    }
}

impl std::str::FromStr for FeatureSpec {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let width = |t: &str| -> std::result::Result<usize, String> {
            match t.parse::<usize>() {
                Ok(w) if (1..=MAX_WIDTH).contains(&w) => Ok(w),
                _ => Err(format!("'{t}' is not a width in 1..={MAX_WIDTH}")),
            }
        };
        match s.strip_prefix("learnable:") {
            Some(w) => width(w).map(FeatureSpec::Learnable),
            None if s.eq_ignore_ascii_case("learnable") => {
                Err("give the width: learnable:D (OGB's ogbl-ddi baselines: learnable:256)".into())
            }
            None => width(s).map(FeatureSpec::Random).map_err(|e| format!("{e}; or learnable:D for a learnable input")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_spec_parses_widths_and_learnable_tables() {
        assert_eq!("64".parse::<FeatureSpec>(), Ok(FeatureSpec::Random(64)));
        assert_eq!("learnable:256".parse::<FeatureSpec>(), Ok(FeatureSpec::Learnable(256)));
        for bad in ["0", "learnable", "learnable:", "learnable:0", "learnable:x", "-3", "embedding:4"] {
            assert!(bad.parse::<FeatureSpec>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn initial_table_is_xavier_uniform_and_seeded() {
        let (n, d) = (300, 40);
        let a = initial_table(n, d, 7).unwrap();
        let bound = (6.0f64 / (n + d) as f64).sqrt() as f32;
        assert!(a.data.iter().all(|v| v.abs() <= bound));
        // Uniform on (-a, a): variance a^2 / 3.
        let var: f64 = a.data.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / a.data.len() as f64;
        assert!((var / (bound as f64).powi(2) - 1.0 / 3.0).abs() < 0.02, "variance {var}");
        assert_eq!(a.data, initial_table(n, d, 7).unwrap().data);
        assert_ne!(a.data, initial_table(n, d, 8).unwrap().data);
        assert!(initial_table(0, 4, 0).is_err() && initial_table(4, 0, 0).is_err());
    }
}
