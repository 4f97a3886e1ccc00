//! Encoder + head on one batch of graphs: the batch's block-diagonal graph, features and labels
//! on the backend, a registry model (`nn::models::build`, output width = the hidden width) and a
//! [`GraphHead`]. A net is built per batch, sized to it; the trained parameters live in one
//! persistent net and are swapped in for the batch's step (`std::mem::swap` of the `Param`s and
//! BatchNorm buffers, no copy), as `sample::train` does for sampled subgraphs.

use crate::error::{Error, Result};
use crate::nn::input::{HostFeatures, InputFeatures};
use crate::nn::models::{self, Model, ModelConfig};
use crate::nn::param::Param;
use crate::ops::backend::{Stats, TEST_BIT, TRAIN_BIT};
use crate::ops::nn::segment_pool::Pooling;
use crate::ops::nn::{AdamHyper, Ops};

use super::batch::GraphBatch;
use super::head::{GraphHead, HeadShape};

/// The model of the graph task: an encoder config (its `dropout` is the head's; the encoder is
/// built without dropout, as the GIN paper's and PyG's `examples/gin.py` models) and a readout.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct GraphModel {
    pub encoder: ModelConfig,
    pub pooling: Pooling,
    pub classes: usize,
    pub features: usize,
}

impl GraphModel {
    /// The encoder's output width: the hidden width (per head, times the heads).
    pub fn width(&self) -> usize {
        self.encoder.hidden * self.encoder.heads.max(1)
    }
    pub(super) fn encoder_config(&self) -> ModelConfig {
        ModelConfig { dropout: 0.0, ..self.encoder }
    }
}

pub struct GraphNet<B: Ops> {
    pub encoder: Box<dyn Model<B>>,
    pub head: GraphHead<B>,
    input: InputFeatures<B>,
    graphs: usize,
    train_labels: B::Labels,
    test_labels: B::Labels,
    dlogits: B::Mat,
}

impl<B: Ops + 'static> GraphNet<B> {
    pub fn new(b: &B, batch: &GraphBatch, m: &GraphModel) -> Result<Self> {
        if batch.features.cols != m.features {
            return Err(Error::Shape(format!("a batch with {} feature columns for a model of {}", batch.features.cols, m.features)));
        }
        let enc = m.encoder_config();
        let width = m.width();
        let encoder = models::build(b, &batch.adjacency, m.features, width, &enc)?;
        let shape = HeadShape {
            nodes: batch.nodes(),
            graphs: batch.len(),
            width,
            classes: m.classes,
            pooling: m.pooling,
            dropout: m.encoder.dropout,
            norm: m.encoder.batch_norm,
            seed: m.encoder.seed,
        };
        let head = GraphHead::new(b, &shape, &batch.offsets)?;
        let input = InputFeatures::for_model(b, &HostFeatures::Dense(batch.features.clone()), &enc)?;
        let g = batch.len();
        Ok(GraphNet {
            encoder,
            head,
            input,
            graphs: g,
            train_labels: b.labels(&batch.labels, &vec![TRAIN_BIT; g])?,
            test_labels: b.labels(&batch.labels, &vec![TEST_BIT; g])?,
            dlogits: b.matrix(g, m.classes)?,
        })
    }

    /// The logits of the batch's graphs.
    pub fn forward(&mut self, b: &B, train: bool) -> Result<&B::Mat> {
        let h = self.encoder.forward(b, &mut self.input, train)?;
        self.head.forward(b, h, train)
    }

    /// One training step on this net's own parameters: forward, cross entropy (mean over the
    /// batch's graphs), backward, Adam. The loss and the correct count land in `stats`
    /// (`correct[0]`), read later.
    pub fn step(&mut self, b: &B, hyper: &AdamHyper, stats: &mut B::Stats) -> Result<()> {
        b.begin_step()?;
        self.gradients(b, stats)?;
        Param::adam_all(b, self.params().into_iter().map(|(_, p)| p), hyper)
    }

    /// Forward (training), cross entropy and backward: every parameter's gradient, no update
    /// (the step's first part; the gradient checks call it alone).
    pub fn gradients(&mut self, b: &B, stats: &mut B::Stats) -> Result<()> {
        let inv = 1.0 / self.graphs as f32;
        let GraphNet { encoder, head, input, train_labels, dlogits, .. } = self;
        let h = encoder.forward(b, input, true)?;
        let logits = head.forward(b, h, true)?;
        b.cross_entropy(logits, train_labels, inv, dlogits, stats)?;
        let dh = head.backward(b, h, dlogits)?;
        encoder.backward(b, input, dh)
    }

    /// Correctly classified graphs of the batch (evaluation: no dropout, BatchNorm's running
    /// statistics).
    pub fn correct(&mut self, b: &B) -> Result<f64> {
        let mut stats = b.stats()?;
        let GraphNet { encoder, head, input, test_labels, dlogits, .. } = self;
        let h = encoder.forward(b, input, false)?;
        let logits = head.forward(b, h, false)?;
        b.cross_entropy(logits, test_labels, 0.0, dlogits, &mut stats)?;
        let s: Stats = b.read_stats(&stats)?;
        Ok(s.correct[2])
    }

    pub fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut p = self.encoder.params();
        p.extend(self.head.params());
        p
    }

    /// Swaps the parameters and BatchNorm buffers of two nets of one model (names checked).
    pub fn swap_state(&mut self, other: &mut GraphNet<B>) -> Result<()> {
        {
            let (mut pa, mut pb) = (self.params(), other.params());
            if pa.len() != pb.len() || pa.iter().zip(&pb).any(|(x, y)| x.0 != y.0) {
                return Err(Error::Unsupported("a batch's net has other parameters than the trained net".into()));
            }
            for ((_, x), (_, y)) in pa.iter_mut().zip(pb.iter_mut()) {
                std::mem::swap(&mut **x, &mut **y);
            }
        }
        let (mut ba, mut bb) = (self.encoder.buffers(), other.encoder.buffers());
        ba.extend(self.head.buffers());
        bb.extend(other.head.buffers());
        if ba.len() != bb.len() || ba.iter().zip(&bb).any(|(x, y)| x.0 != y.0) {
            return Err(Error::Unsupported("a batch's net has other buffers than the trained net".into()));
        }
        for ((_, x), (_, y)) in ba.iter_mut().zip(bb.iter_mut()) {
            std::mem::swap(&mut **x, &mut **y);
        }
        Ok(())
    }

    /// `f` on this net with `trained`'s state swapped in (and back, even when `f` fails).
    pub fn with_state<T>(&mut self, trained: &mut GraphNet<B>, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.swap_state(trained)?;
        let out = f(self);
        self.swap_state(trained)?;
        out
    }
}
