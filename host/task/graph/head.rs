//! The graph-classification head: the encoder's last layer normalised and activated as its
//! hidden layers are (BatchNorm, ReLU; optional), its node rows pooled per graph (sum, mean or
//! max over the graph's segment), then an MLP to the class logits:
//!   a = relu(bn(h));  p = pool(a);  z = relu(bn_g(p) W1 + b1);  logits = dropout(z) W2 + b2
//! (PyG's `examples/gin.py` readout of the last layer, whose convs all end in BatchNorm and
//! ReLU; then PyG's default `MLP`, BatchNorm first). Without the node BatchNorm, the sum of 5
//! layers' raw outputs over a graph's nodes reached logits of ~100 in the first steps here, and
//! Adam at lr 0.01 then killed every ReLU unit of the head on one fold in two (PROTEINS,
//! IMDB-BINARY: stuck at the majority class); without the graph BatchNorm `bn_g`, sums over
//! IMDB-BINARY's dense graphs kept the training near chance (a fold: 55 % train accuracy after
//! 30 epochs, against 70 % with mean pooling). Both norms go with `norm`. Backward writes
//! dL/dh for the encoder.

use crate::error::Result;
use crate::nn::batch_norm::BatchNorm;
use crate::nn::dropout::Dropout;
use crate::nn::linear::Linear;
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::ops::nn::op_set;
use crate::ops::nn::segment_pool::Pooling;
use crate::util::rng::SplitMix64;

op_set!(
    /// What the graph head needs: BatchNorm, pooling, its MLP and dropout.
    pub trait GraphHeadOps:
    crate::nn::linear::LinearOps,
    crate::nn::batch_norm::BatchNormOps,
    crate::nn::dropout::DropoutOps,
    crate::ops::nn::segment_pool::SegmentPoolOp,
);

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
    /// BatchNorm + ReLU on the node rows before pooling.
    pub norm: bool,
    pub seed: u64,
}

pub struct GraphHead<B: GraphHeadOps> {
    pooling: Pooling,
    norm: Option<BatchNorm<B>>,
    /// dL/da (with the norm).
    d_act: B::Mat,
    seg: B::Segments,
    pooled: B::Mat,
    /// BatchNorm over the graphs' pooled rows (with the norm).
    graph_norm: Option<BatchNorm<B>>,
    lin1: Linear<B>,
    drop: Dropout<B>,
    lin2: Linear<B>,
    /// dL/d(dropout(z)), dL/dz, dL/dp, dL/dh.
    d_drop: B::Mat,
    d_z: B::Mat,
    d_pooled: B::Mat,
    dh: B::Mat,
}

impl<B: GraphHeadOps> GraphHead<B> {
    /// A head for a batch whose graph g owns node rows `offsets[g]..offsets[g + 1]`.
    pub fn new(b: &B, s: &HeadShape, offsets: &[u32]) -> Result<Self> {
        let mut rng = SplitMix64::new(s.seed ^ 0x4EAD_0000_0000);
        let (g, w) = (s.graphs, s.width);
        Ok(GraphHead {
            pooling: s.pooling,
            norm: if s.norm { Some(BatchNorm::new(b, s.nodes, w)?) } else { None },
            d_act: b.matrix(if s.norm { s.nodes } else { 0 }, w)?,
            seg: b.segments(offsets, s.nodes, w, s.pooling)?,
            pooled: b.matrix(g, w)?,
            graph_norm: if s.norm { Some(BatchNorm::new(b, g, w)?) } else { None },
            lin1: Linear::torch_default(b, g, w, w, true, &mut rng)?,
            drop: Dropout::new(b, g, w, s.dropout, crate::nn::models::dropout_seed(s.seed, 0x4EAD))?,
            lin2: Linear::torch_default(b, g, w, s.classes, true, &mut rng)?,
            d_drop: b.matrix(g, w)?,
            d_z: b.matrix(g, w)?,
            d_pooled: b.matrix(g, w)?,
            dh: b.matrix(if s.norm { 0 } else { s.nodes }, w)?,
        })
    }

    /// The logits of every graph from the encoder's node rows `h`.
    pub fn forward(&mut self, b: &B, h: &B::Mat, train: bool) -> Result<&B::Mat> {
        let a = match &mut self.norm {
            Some(bn) => {
                bn.forward(b, h, train)?;
                b.relu(bn.out_mut())?;
                bn.out()
            }
            None => h,
        };
        b.segment_pool(self.pooling, a, &mut self.seg, &mut self.pooled)?;
        let p = match &mut self.graph_norm {
            Some(bn) => {
                bn.forward(b, &self.pooled, train)?;
                bn.out()
            }
            None => &self.pooled,
        };
        self.lin1.forward_relu(b, &Operand::Dense(p))?;
        self.drop.forward(b, self.lin1.out(), train)?;
        self.lin2.forward(b, &Operand::Dense(self.drop.output(self.lin1.out(), train)))
    }

    /// Every parameter's gradient from `dlogits` after a training `forward` of `h`; returns
    /// dL/dh.
    pub fn backward(&mut self, b: &B, h: &B::Mat, dlogits: &B::Mat) -> Result<&mut B::Mat> {
        self.lin2.backward(b, &Operand::Dense(self.drop.output(self.lin1.out(), true)), dlogits, Some(&mut self.d_drop))?;
        self.drop.backward(b, &self.d_drop, &mut self.d_z)?;
        b.relu_backward(self.lin1.out(), &mut self.d_z)?;
        let d_pooled = match &mut self.graph_norm {
            Some(bn) => {
                self.lin1.backward(b, &Operand::Dense(bn.out()), &self.d_z, Some(&mut self.d_pooled))?;
                bn.backward(b, &self.pooled, &self.d_pooled)?;
                bn.dx()
            }
            None => {
                self.lin1.backward(b, &Operand::Dense(&self.pooled), &self.d_z, Some(&mut self.d_pooled))?;
                &self.d_pooled
            }
        };
        match &mut self.norm {
            Some(bn) => {
                b.segment_pool_backward(self.pooling, &self.seg, d_pooled, &mut self.d_act)?;
                b.relu_backward(bn.out(), &mut self.d_act)?;
                bn.backward(b, h, &self.d_act)?;
                Ok(bn.dx_mut())
            }
            None => {
                b.segment_pool_backward(self.pooling, &self.seg, d_pooled, &mut self.dh)?;
                Ok(&mut self.dh)
            }
        }
    }

    /// Rebinds a head built at a capacity to a padded batch: the segments `offsets` (as many
    /// as it was built with), of which the first `graphs` are the batch's, over node rows of
    /// which the first `nodes` are (both norms then see only those).
    pub fn bind(&mut self, b: &B, offsets: &[u32], nodes: usize, graphs: usize) -> Result<()> {
        b.bind_segments(&mut self.seg, offsets)?;
        if let Some(bn) = &mut self.norm {
            bn.set_live_rows(b, nodes)?;
        }
        if let Some(bn) = &mut self.graph_norm {
            bn.set_live_rows(b, graphs)?;
        }
        Ok(())
    }

    pub fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut out: Vec<(String, &mut Param<B>)> = Vec::new();
        if let Some(bn) = &mut self.norm {
            out.extend(bn.params().into_iter().map(|(n, p)| (format!("head.norm.{n}"), p)));
        }
        if let Some(bn) = &mut self.graph_norm {
            out.extend(bn.params().into_iter().map(|(n, p)| (format!("head.graph_norm.{n}"), p)));
        }
        out.extend(self.lin1.params().into_iter().map(|(n, p)| (format!("head.lin1.{n}"), p)));
        out.extend(self.lin2.params().into_iter().map(|(n, p)| (format!("head.lin2.{n}"), p)));
        out
    }

    /// BatchNorm's running statistics (with the norm).
    pub fn buffers(&mut self) -> Vec<(String, &mut B::Mat)> {
        let mut out: Vec<(String, &mut B::Mat)> = Vec::new();
        if let Some(bn) = &mut self.norm {
            out.extend(bn.buffers().into_iter().map(|(n, m)| (format!("head.norm.{n}"), m)));
        }
        if let Some(bn) = &mut self.graph_norm {
            out.extend(bn.buffers().into_iter().map(|(n, m)| (format!("head.graph_norm.{n}"), m)));
        }
        out
    }
}
