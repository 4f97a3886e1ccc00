//! The graph-classification head: the encoder's node rows pooled per graph (sum, mean or max
//! over the graph's segment), then an MLP to the class logits:
//!   p = pool(h);  z = relu(p W1 + b1);  logits = dropout(z) W2 + b2
//! (PyG's `examples/gin.py` readout of the last layer; its MLP without the norm). Backward
//! writes dL/dh for the encoder.

use crate::error::Result;
use crate::nn::dropout::Dropout;
use crate::nn::linear::Linear;
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::ops::backend::Ops;
use crate::ops::nn::segment_pool::Pooling;
use crate::util::rng::SplitMix64;

/// What a head is built for.
#[derive(Clone, Copy, Debug)]
pub struct HeadShape {
    /// Node rows of the batch and the segment offsets' graphs.
    pub nodes: usize,
    pub graphs: usize,
    /// The encoder's output width.
    pub width: usize,
    pub classes: usize,
    pub pooling: Pooling,
    pub dropout: f32,
    pub seed: u64,
}

pub struct GraphHead<B: Ops> {
    pooling: Pooling,
    seg: B::Segments,
    pooled: B::Mat,
    lin1: Linear<B>,
    drop: Dropout<B>,
    lin2: Linear<B>,
    /// dL/d(dropout(z)), dL/dz, dL/dp, dL/dh.
    d_drop: B::Mat,
    d_z: B::Mat,
    d_pooled: B::Mat,
    dh: B::Mat,
}

impl<B: Ops> GraphHead<B> {
    /// A head for a batch whose graph g owns node rows `offsets[g]..offsets[g + 1]`.
    pub fn new(b: &B, s: &HeadShape, offsets: &[u32]) -> Result<Self> {
        let mut rng = SplitMix64::new(s.seed ^ 0x4EAD_0000_0000);
        let (g, w) = (s.graphs, s.width);
        Ok(GraphHead {
            pooling: s.pooling,
            seg: b.segments(offsets, s.nodes, w, s.pooling)?,
            pooled: b.matrix(g, w)?,
            lin1: Linear::torch_default(b, g, w, w, true, &mut rng)?,
            drop: Dropout::new(b, g, w, s.dropout, crate::nn::models::dropout_seed(s.seed, 0x4EAD))?,
            lin2: Linear::torch_default(b, g, w, s.classes, true, &mut rng)?,
            d_drop: b.matrix(g, w)?,
            d_z: b.matrix(g, w)?,
            d_pooled: b.matrix(g, w)?,
            dh: b.matrix(s.nodes, w)?,
        })
    }

    /// The logits of every graph from the encoder's node rows `h`.
    pub fn forward(&mut self, b: &B, h: &B::Mat, train: bool) -> Result<&B::Mat> {
        b.segment_pool(self.pooling, h, &mut self.seg, &mut self.pooled)?;
        self.lin1.forward_relu(b, &Operand::Dense(&self.pooled))?;
        self.drop.forward(b, self.lin1.out(), train)?;
        self.lin2.forward(b, &Operand::Dense(self.drop.output(self.lin1.out(), train)))
    }

    /// Every parameter's gradient from `dlogits` after a training `forward`; returns dL/dh.
    pub fn backward(&mut self, b: &B, dlogits: &B::Mat) -> Result<&B::Mat> {
        self.lin2.backward(b, &Operand::Dense(self.drop.output(self.lin1.out(), true)), dlogits, Some(&mut self.d_drop))?;
        self.drop.backward(b, &self.d_drop, &mut self.d_z)?;
        b.relu_backward(self.lin1.out(), &mut self.d_z)?;
        self.lin1.backward(b, &Operand::Dense(&self.pooled), &self.d_z, Some(&mut self.d_pooled))?;
        b.segment_pool_backward(self.pooling, &self.seg, &self.d_pooled, &mut self.dh)?;
        Ok(&self.dh)
    }

    pub fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut out: Vec<(String, &mut Param<B>)> = Vec::new();
        out.extend(self.lin1.params().into_iter().map(|(n, p)| (format!("head.lin1.{n}"), p)));
        out.extend(self.lin2.params().into_iter().map(|(n, p)| (format!("head.lin2.{n}"), p)));
        out
    }
}
