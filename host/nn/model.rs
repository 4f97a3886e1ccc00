//! What a model is, below the models themselves (`nn::models`, the registry and one file per
//! model): the [`Model`] trait every encoder implements and the [`ModelConfig`] it is built
//! from, with the bounds and seeds the layers share. The layers, the input and the [`Stack`]
//! the models are built from name these, never the registry; what depends on which model a
//! config names (its first product's width, reading it from a file) is implemented beside the
//! registry, the one place that matches model names.
//!
//! [`Stack`]: crate::nn::stack::Stack

use crate::error::Result;
use crate::nn::grad_ready::GradReady;
use crate::nn::input::InputFeatures;
use crate::nn::param::Param;
use crate::ops::nn::Ops;
use crate::util::rng::SplitMix64;

/// A whole model: logits from node features, gradients of every parameter from dL/dlogits.
pub trait Model<B: Ops> {
    /// The logits of every node (train: dropout active, buffers kept for the backward).
    fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat>;
    /// Every parameter's gradient from dL/dlogits, after a training `forward`; a learnable
    /// input's too (the first layer's dL/dX, written into it: [`InputFeatures::backward_operand`]).
    /// `dlogits`'s rows outside the loss (a part's halo rows) may be overwritten.
    fn backward(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat) -> Result<()>;
    /// [`Model::backward`] that tells `ready` each layer's parameters as soon as their gradients
    /// are final, the last layer's first (a distributed step sums them over the ranks while the
    /// earlier layers' backward runs). By default every parameter at the end, in one list.
    fn backward_by_layer(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat, ready: &mut dyn GradReady<B>) -> Result<()> {
        self.backward(b, input, dlogits)?;
        let mut params: Vec<&mut Param<B>> = self.params().into_iter().map(|(_, p)| p).collect();
        ready.ready(b, &mut params)
    }
    /// Every trainable tensor under a stable name (the keys of a saved model), in a fixed order.
    fn params(&mut self) -> Vec<(String, &mut Param<B>)>;
    /// The node representations after hidden layer `layer` (0-based) of the last `forward`, for
    /// `predict --embeddings`; `None` past the last hidden layer.
    fn embedding(&self, layer: usize) -> Option<&B::Mat>;
    /// State that is saved with the model but not trained (BatchNorm's running statistics),
    /// under stable names, in a fixed order.
    fn buffers(&mut self) -> Vec<(String, &mut B::Mat)> {
        Vec::new()
    }
    /// Its BatchNorm layers, for a model rebound to batches padded to a capacity (each is told
    /// its live rows: [`crate::nn::batch_norm::BatchNorm::set_live_rows`]); none by default.
    fn batch_norms(&mut self) -> Vec<&mut crate::nn::batch_norm::BatchNorm<B>> {
        Vec::new()
    }
}

/// Shape, regularisation and options of a model. Every model reads the fields it has and
/// ignores the others (GCN has no heads); the registry's defaults
/// ([`crate::nn::models::ModelInfo::defaults`]) fill them per model.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ModelConfig {
    /// The registry name (`nn::models`: gcn, gat, ...).
    pub model: &'static str,
    /// Graph layers (the hidden ones plus the output one, as PyG's `num_layers`).
    pub layers: usize,
    /// Hidden width (per head for GAT).
    pub hidden: usize,
    /// Attention heads of the hidden layers (GAT).
    pub heads: usize,
    /// Dropout on features (and attention, for GAT).
    pub dropout: f32,
    /// BatchNorm1d after every hidden layer.
    pub batch_norm: bool,
    /// Residual connections around hidden layers of equal width.
    pub residual: bool,
    /// GIN: eps learnable (else fixed 0); SAGE: L2-normalise the outputs.
    pub variant: bool,
    /// Seeds the weights and the dropout masks.
    pub seed: u64,
}

/// Most graph layers of a model (deep GCNs in the literature stop near a thousand).
pub const MAX_LAYERS: usize = 1024;
/// Widest hidden layer, and most features or classes.
pub const MAX_WIDTH: usize = 1 << 24;
/// Most attention heads.
pub const MAX_HEADS: usize = 1024;

/// Seeds of the dropout layers: distinct per layer, all derived from the model seed.
pub fn dropout_seed(model_seed: u64, layer: u64) -> u64 {
    SplitMix64::new(model_seed ^ 0xD80F_0000 ^ (layer << 32)).next_u64()
}

/// The widths of a stack of `layers` layers from `features` to `classes` through `hidden`.
pub fn widths(features: usize, hidden: usize, layers: usize, classes: usize) -> Vec<usize> {
    std::iter::once(features).chain(std::iter::repeat_n(hidden, layers - 1)).chain([classes]).collect()
}
