//! The decoder: a pair's score (a logit) from its two node representations z (n x d).
//!
//! - Dot product: score(u, v) = z_u · z_v, for every pair at once an SDDMM over the pair pattern
//!   ([`super::pairs::PairSet`]): out_e = z_row(e) · z_col(e). Backward, from g = dL/dscore per
//!   pair: dz_u += g z_v and dz_v += g z_u, i.e. dz = S_g z + S_gᵀ z, two SpMMs with per-call
//!   values (g, and g laid out for the transpose).
//! - MLP: score(u, v) = Linear(d, 1)(ReLU(Linear(d, d)(z_u ⊙ z_v))). The rows z_u and z_v of
//!   the P pairs are gathered by SpMMs with P x n selection patterns U and V (row p: one entry 1
//!   at u_p, resp. v_p), and the backward scatters their gradients back with the transposes
//!   (dz = Uᵀ (dh ⊙ z_v) + Vᵀ (dh ⊙ z_u)); the last layer's P x 1 output moves into the pair
//!   list's edge values by an SDDMM over a P x 1 pattern T (out_p = s_p · 1), and its gradient
//!   back by the SpMM with T.
//!
//! A training step scores its pairs without any pattern ([`Decoder::score_step`] on
//! [`StepPairs`]): `ops::nn::pair_hadamard` reads the pairs' ends by index, giving z_u ⊙ z_v
//! (the MLP's input) or its row sum (the dot product) as a P-row matrix, and scatters the
//! gradient back through a by-node index; the patterns above serve the fixed evaluation sets.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::param::{Param, torch_linear_uniform};
use crate::ops::backend::Side;
use crate::ops::nn::op_set;
use crate::task::link::pairs::PairSet;
use crate::task::link::step_pairs::StepPairs;
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

op_set!(
    /// What pair scoring needs: the pairs' patterns and negative draws, SDDMM (dot) or the
    /// Hadamard MLP.
    pub trait DecoderOps:
    crate::nn::linear::LinearOps,
    crate::ops::nn::sddmm::SddmmOp,
    crate::ops::nn::hadamard::HadamardOp,
    crate::ops::nn::add_assign::AddAssignOp,
    crate::ops::nn::transpose_edges::TransposeEdgesOp,
    crate::ops::nn::negative_sample::NegativeSampleOp,
    crate::ops::nn::pair_hadamard::PairHadamardOp,
    crate::ops::nn::bce_column::BceColumnOp,
    crate::ops::backend::bind::BindOps,
);

/// Which decoder scores the pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
pub enum DecoderKind {
    /// z_u · z_v (an SDDMM over the pairs).
    #[default]
    Dot,
    /// Linear -> ReLU -> Linear on z_u ⊙ z_v (hidden width = the embedding width).
    Mlp,
}

/// The MLP's parameters and its constant 1 x 1 one.
struct MlpParams<B: DecoderOps> {
    w1: Param<B>,
    b1: Param<B>,
    w2: Param<B>,
    b2: Param<B>,
    one: B::Mat,
}

/// What the MLP keeps per pair list: the selection patterns and the P-row activations.
pub struct MlpPairs<B: DecoderOps> {
    gu: B::Graph,
    gv: B::Graph,
    t: B::Graph,
    ones_u: B::Edges,
    ones_ut: B::Edges,
    ones_v: B::Edges,
    ones_vt: B::Edges,
    zu: B::Mat,
    zv: B::Mat,
    h: B::Mat,
    h1: B::Mat,
    s: B::Mat,
    dh: B::Mat,
    dh1: B::Mat,
    ds: B::Mat,
    dzu: B::Mat,
    dzv: B::Mat,
}

impl<B: DecoderOps> MlpPairs<B> {
    fn new(b: &B, n: usize, d: usize, pairs: &[[u32; 2]]) -> Result<Self> {
        let p = pairs.len();
        let ptr: Vec<u32> = (0..=p as u32).collect();
        let select = |end: usize| -> Result<B::Graph> {
            b.graph(Csr::new(p, n, ptr.clone(), pairs.iter().map(|q| q[end]).collect(), vec![1.0; p])?)
        };
        let (gu, gv) = (select(0)?, select(1)?);
        let t = b.graph(Csr::new(p, 1, ptr.clone(), vec![0; p], vec![1.0; p])?)?;
        let m = |cols: usize| b.matrix(p, cols);
        Ok(MlpPairs {
            ones_u: b.graph_values(&gu, Side::Forward)?,
            ones_ut: b.graph_values(&gu, Side::Transposed)?,
            ones_v: b.graph_values(&gv, Side::Forward)?,
            ones_vt: b.graph_values(&gv, Side::Transposed)?,
            gu,
            gv,
            t,
            zu: m(d)?,
            zv: m(d)?,
            h: m(d)?,
            h1: m(d)?,
            s: m(1)?,
            dh: m(d)?,
            dh1: m(d)?,
            ds: m(1)?,
            dzu: m(d)?,
            dzv: m(d)?,
        })
    }
}

pub struct Decoder<B: DecoderOps> {
    kind: DecoderKind,
    n: usize,
    d: usize,
    /// One n x d product (the second half of a backward).
    tmp: B::Mat,
    mlp: Option<MlpParams<B>>,
}

impl<B: DecoderOps> Decoder<B> {
    /// A decoder of `kind` for `n` nodes of width `d`; the MLP's weights as torch's
    /// `nn.Linear` initialises them, from `seed`.
    pub fn new(b: &B, kind: DecoderKind, n: usize, d: usize, seed: u64) -> Result<Self> {
        let mlp = match kind {
            DecoderKind::Dot => None,
            DecoderKind::Mlp => {
                let mut rng = SplitMix64::new(seed ^ 0x11D0_DEC0);
                Some(MlpParams {
                    w1: Param::new(b, &torch_linear_uniform(d, d, d, &mut rng))?,
                    b1: Param::new(b, &torch_linear_uniform(d, 1, d, &mut rng))?,
                    w2: Param::new(b, &torch_linear_uniform(d, d, 1, &mut rng))?,
                    b2: Param::new(b, &torch_linear_uniform(d, 1, 1, &mut rng))?,
                    one: b.upload(&Matrix::from_vec(1, 1, vec![1.0])?)?,
                })
            }
        };
        Ok(Decoder { kind, n, d, tmp: b.matrix(n, d)?, mlp })
    }

    pub fn kind(&self) -> DecoderKind {
        self.kind
    }

    /// The decoder's own parameters under stable names (none for the dot product).
    pub fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        match &mut self.mlp {
            None => Vec::new(),
            Some(m) => vec![
                ("decoder.lin1.weight".into(), &mut m.w1),
                ("decoder.lin1.bias".into(), &mut m.b1),
                ("decoder.lin2.weight".into(), &mut m.w2),
                ("decoder.lin2.bias".into(), &mut m.b2),
            ],
        }
    }

    /// A training step's pairs for this decoder: room for `cap` pairs on the decoder's nodes.
    pub fn step_pairs(&self, b: &B, cap: usize) -> Result<StepPairs<B>> {
        StepPairs::new(b, self.n, cap, self.mlp.as_ref().map(|_| self.d))
    }

    /// `sp.s` = the score of every pair of `sp` (its rows past them 0 for the dot product;
    /// whatever the MLP makes of a zero input for the MLP: the loss skips them).
    pub fn score_step(&self, b: &B, sp: &mut StepPairs<B>, z: &B::Mat) -> Result<()> {
        let Some(m) = &self.mlp else {
            return b.pair_hadamard(&sp.batch, z, &mut sp.s);
        };
        let q = sp.mlp.as_mut().ok_or_else(|| crate::error::Error::Unsupported("the MLP decoder on a dot decoder's step pairs".into()))?;
        b.pair_hadamard(&sp.batch, z, &mut q.h)?;
        b.gemm(&q.h, false, &m.w1.value, false, 0.0, &mut q.h1)?;
        b.bias_relu(&mut q.h1, &m.b1.value)?;
        b.gemm(&q.h1, false, &m.w2.value, false, 0.0, &mut sp.s)?;
        b.bias_add(&mut sp.s, &m.b2.value)
    }

    /// dz = dL/dz (overwritten) and the decoder's parameter gradients from `sp.ds` = dL/dscore
    /// (zero past the step's pairs), after [`Decoder::score_step`] on `sp`.
    pub fn backward_step(&mut self, b: &B, sp: &mut StepPairs<B>, z: &B::Mat, dz: &mut B::Mat) -> Result<()> {
        let Some(m) = &mut self.mlp else {
            // The score is the row sum of z_u ⊙ z_v: its gradient broadcast over the row.
            return b.pair_hadamard_backward(&sp.batch, z, &sp.ds, false, dz);
        };
        let q = sp.mlp.as_mut().ok_or_else(|| crate::error::Error::Unsupported("the MLP decoder on a dot decoder's step pairs".into()))?;
        b.col_sums(&sp.ds, &mut m.b2.grad)?;
        b.gemm(&q.h1, true, &sp.ds, false, 0.0, &mut m.w2.grad)?;
        b.gemm(&sp.ds, false, &m.w2.value, true, 0.0, &mut q.dh1)?;
        b.relu_backward(&q.h1, &mut q.dh1)?;
        b.col_sums(&q.dh1, &mut m.b1.grad)?;
        b.gemm(&q.h, true, &q.dh1, false, 0.0, &mut m.w1.grad)?;
        // h is spent (its last reader was the weight gradient above): its buffer takes dL/dh,
        // one P x d buffer fewer.
        b.gemm(&q.dh1, false, &m.w1.value, true, 0.0, &mut q.h)?;
        b.pair_hadamard_backward(&sp.batch, z, &q.h, false, dz)
    }

    /// `set.scores` = the score of every pair of `set` from `z`.
    pub fn score(&self, b: &B, set: &mut PairSet<B>, z: &B::Mat) -> Result<()> {
        let Some(m) = &self.mlp else {
            return b.sddmm(&set.graph, z, z, &mut set.scores);
        };
        if set.mlp.is_none() {
            set.mlp = Some(MlpPairs::new(b, self.n, self.d, &set.pairs)?);
        }
        let q = set.mlp.as_mut().expect("made above");
        b.spmm(&q.gu, Side::Forward, &q.ones_u, z, &mut q.zu)?;
        b.spmm(&q.gv, Side::Forward, &q.ones_v, z, &mut q.zv)?;
        b.hadamard(&q.zu, &q.zv, &mut q.h)?;
        b.gemm(&q.h, false, &m.w1.value, false, 0.0, &mut q.h1)?;
        b.bias_relu(&mut q.h1, &m.b1.value)?;
        b.gemm(&q.h1, false, &m.w2.value, false, 0.0, &mut q.s)?;
        b.bias_add(&mut q.s, &m.b2.value)?;
        b.sddmm(&q.t, &q.s, &m.one, &mut set.scores)
    }

    /// dz = dL/dz (overwritten) and the decoder's parameter gradients from `grad` = dL/dscore
    /// (per pair, in `set`'s edge order), after [`Decoder::score`] on `set`; `grad_t` is scratch
    /// of `set`'s transposed side.
    pub fn backward(
        &mut self,
        b: &B,
        set: &mut PairSet<B>,
        z: &B::Mat,
        grad: &B::Edges,
        grad_t: &mut B::Edges,
        dz: &mut B::Mat,
    ) -> Result<()> {
        let Some(m) = &mut self.mlp else {
            b.spmm(&set.graph, Side::Forward, grad, z, dz)?;
            b.transpose_edges(&set.graph, grad, grad_t)?;
            b.spmm(&set.graph, Side::Transposed, grad_t, z, &mut self.tmp)?;
            return b.add_assign(dz, &self.tmp);
        };
        let q = set.mlp.as_mut().ok_or_else(|| crate::error::Error::Unsupported("MLP decoder backward before its forward".into()))?;
        // The pair list's edge values back into a P x 1 column (T's values are p-ordered, as
        // the pair list's).
        b.spmm(&q.t, Side::Forward, grad, &m.one, &mut q.ds)?;
        b.col_sums(&q.ds, &mut m.b2.grad)?;
        b.gemm(&q.h1, true, &q.ds, false, 0.0, &mut m.w2.grad)?;
        b.gemm(&q.ds, false, &m.w2.value, true, 0.0, &mut q.dh1)?;
        b.relu_backward(&q.h1, &mut q.dh1)?;
        b.col_sums(&q.dh1, &mut m.b1.grad)?;
        b.gemm(&q.h, true, &q.dh1, false, 0.0, &mut m.w1.grad)?;
        b.gemm(&q.dh1, false, &m.w1.value, true, 0.0, &mut q.dh)?;
        b.hadamard(&q.dh, &q.zv, &mut q.dzu)?;
        b.hadamard(&q.dh, &q.zu, &mut q.dzv)?;
        b.spmm(&q.gu, Side::Transposed, &q.ones_ut, &q.dzu, dz)?;
        b.spmm(&q.gv, Side::Transposed, &q.ones_vt, &q.dzv, &mut self.tmp)?;
        b.add_assign(dz, &self.tmp)
    }
}
