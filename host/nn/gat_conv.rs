//! `GatConv` as PyG's `GATConv` (self-loops added, LeakyReLU slope 0.2, attention dropout,
//! heads concatenated or averaged, bias):
//!
//! forward: Wh = X W (a bias-free [`Linear`] to H F columns, one GEMM for all heads); per node
//! and head s_src[j][h] = <Wh_j,h, a_src,h>, s_dst[i][h] = <Wh_i,h, a_dst,h> (`gat_scores`:
//! per node, never per edge); per head e_ij = LeakyReLU(s_dst[i] + s_src[j]) on the edges of
//! A + I (row i = target: softmax over each node's incoming edges), α = edge softmax of e,
//! α' = dropout(α) in training, out_h = α' Wh_h (one SpMM per head on the one pattern, with
//! that head's values and its n x F block of Wh); out = [out_1 | ... | out_H] (concat) or
//! (1/H) Σ out_h (mean), + bias.
//!
//! backward, from dout: db = 1ᵀ dout; per head dout_h = dout's block (or dout / H);
//! dWh_h = α'ᵀ dout_h (SpMM on Sᵀ with α' laid out for it); dα' = dout_h Wh_hᵀ on the edges
//! (SDDMM); dα = dropout'(dα'); de = softmax backward (the edge softmax with β = 1);
//! dz = de LeakyReLU'(z); ds_dst = row sums of dz, ds_src = column sums of dz (row sums on Sᵀ);
//! then through the scores: dWh += ds ⊗ a per head, da = Σ_i ds_i ⊗ Wh_i; finally the Linear's
//! backward of dWh (dW = Xᵀ dWh, dX = dWh Wᵀ).
//!
//! Fused ([`GatConv::new`], the default where up to 32 heads of up to 32 columns are
//! concatenated, or one): the edge logits, softmax, dropout and every head's aggregation plus the
//! bias are one op ([`crate::ops::nn::gat_attention`]), the backward two kernels, with per node
//! and head only the softmax's (max, sum): no per-edge array, three launches a layer instead of
//! ~20 per head; its column pass also adds the scores' part ds ⊗ a to dWh as it writes it. Unfused ([`GatConv::new_unfused`], `--variant`, and the mean of several heads):
//! each head keeps its own edge buffers (logits, α, α'), the pattern is shared, and every product
//! runs on the SpMM / SDDMM kernels as above. The two draw different dropout masks (the fused op
//! keys them by edge and head); at p = 0 they agree.

use std::ops::Range;
use std::rc::Rc;

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::halo_hook::{HaloHook, PartContext, PartSide, RowSplit};
use crate::nn::linear::Linear;
use crate::nn::operand::Operand;
use crate::nn::param::{Param, glorot};
use crate::ops::backend::Side;
use crate::ops::nn::dropout::DropKey;
use crate::ops::nn::edge_softmax::Softmaxed;
use crate::ops::nn::gat_attention::{GatAttention, GradInputs, GradOutputs, Inputs};
use crate::ops::nn::gat_edge_logits::{GAT_SLOPE, HeadLogits};
use crate::ops::nn::op_set;
use crate::ops::nn::row_split::RowRange;
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

op_set!(
    /// What a GAT layer needs: its scores, the fused attention (or the edge-wise ops it replaces) and head columns.
    pub trait GatOps:
    crate::nn::linear::LinearOps,
    crate::nn::dropout::DropoutOps,
    crate::ops::nn::gat_attention::GatAttentionOp,
    crate::ops::nn::gat_scores::GatScoresOp,
    crate::ops::nn::gat_edge_logits::GatEdgeLogitsOp,
    crate::ops::nn::edge_softmax::EdgeSoftmaxOp,
    crate::ops::nn::head_columns::HeadColumnsOp,
    crate::ops::nn::sddmm::SddmmOp,
    crate::ops::nn::transpose_edges::TransposeEdgesOp,
);

/// The pattern of A + I (unit values), shared by every `GatConv` of a model.
pub struct GatGraph<B: GatOps> {
    pub graph: B::Graph,
    /// On one part of a partitioned graph: the halo exchange of every conv's Wh and the rows
    /// row-wise work forms (see [`crate::nn::halo_hook`]), and the original index of each of
    /// its edges (attention dropout is keyed by it, so any partition draws the one-device
    /// masks); unpartitioned: none of them.
    pub part: PartSide<B>,
    pub edge_ids: Option<Rc<B::Ids>>,
}

impl<B: GatOps> GatGraph<B> {
    /// From the raw adjacency: one self-loop per node (PyG removes existing ones and adds one
    /// each; in a pattern that is the same as adding the missing ones).
    pub fn new(b: &B, a: &Csr) -> Result<Self> {
        Self::from_pattern(b, crate::nn::agnn_conv::loops_pattern(a)?, None)
    }

    /// The pattern of A + I as it is (whole, or one part's extended rows with `part`).
    pub fn from_pattern(b: &B, s: Csr, part: Option<&PartContext<B>>) -> Result<Self> {
        Ok(GatGraph { graph: b.graph(s)?, part: PartSide::new(part), edge_ids: part.map(|p| p.edge_ids.clone()) })
    }

    fn hook(&self) -> Option<&Rc<dyn HaloHook<B>>> {
        self.part.hook()
    }
}

/// Edge buffers of one head.
struct Head<B: GatOps> {
    logits: B::Edges,
    alpha: B::Edges,
    /// α after attention dropout (what the SpMM read), and its mask.
    alpha_drop: B::Edges,
    mask: B::Mask,
    /// Wh's block of this head (n x F).
    wh: B::Mat,
}

pub struct GatConv<B: GatOps> {
    pub lin: Linear<B>,
    pub att_src: Param<B>,
    pub att_dst: Param<B>,
    pub bias: Param<B>,
    heads: usize,
    dim: usize,
    concat: bool,
    /// Attention dropout probability and the seed its per-head masks derive from.
    p: f32,
    seed: u64,
    /// Whether the last forward dropped attention (the backward reads the same α').
    dropped: bool,
    s_src: B::Mat,
    s_dst: B::Mat,
    ds_src: B::Mat,
    ds_dst: B::Mat,
    /// dL/dWh (n x H F).
    dwh: B::Mat,
    out: B::Mat,
    /// An f16 home for out where the next layer reads it only through ELU-on-load products
    /// ([`GatConv::keep_half_output`]), and whether the last forward wrote it there instead.
    out16: Option<B::Half>,
    wrote_half: bool,
    path: Path<B>,
}

/// How the attention runs.
enum Path<B: GatOps> {
    /// One op each way: per node and head the softmax's (max, sum) (n x 2H), and the
    /// backward's D (n x H).
    Fused {
        stats: B::Mat,
        d_row: B::Mat,
    },
    Unfused(Box<Unfused<B>>),
}

/// The buffers of the unfused path.
struct Unfused<B: GatOps> {
    /// β = 1 for the edge softmax (a plain softmax of the logits) and its unused gradient.
    one: B::Mat,
    dbeta: B::Mat,
    head: Vec<Head<B>>,
    /// One head's output, dout block and dWh block (n x F).
    agg: B::Mat,
    dout_h: B::Mat,
    dwh_h: B::Mat,
    /// Per-head edge scratch of the backward: on S (dα', dα, de, dz) and on Sᵀ (α'ᵀ, dzᵀ).
    dalpha_drop: B::Edges,
    dalpha: B::Edges,
    dlogits: B::Edges,
    dz: B::Edges,
    alpha_t: B::Edges,
    dz_t: B::Edges,
}

/// A GAT layer's shape: `rows` nodes, `fan_in -> heads x dim`, the heads concatenated
/// (`heads * dim` outputs) or averaged (`dim`).
#[derive(Clone, Copy, Debug)]
pub struct GatShape {
    pub rows: usize,
    pub fan_in: usize,
    pub heads: usize,
    pub dim: usize,
    pub concat: bool,
}

impl<B: GatOps> GatConv<B> {
    /// A layer of `shape`, attention dropout `p` with masks derived from `seed`. Glorot
    /// weights and attention vectors (PyG's `glorot` on `att` of shape (1, H, F): bound
    /// sqrt(6 / (H + F))), zero bias. On the fused op where [`GatConv::fuses`] says it can, else
    /// unfused.
    pub fn new(b: &B, g: &GatGraph<B>, shape: GatShape, p: f32, seed: u64, rng: &mut SplitMix64) -> Result<Self> {
        let fused = Self::fuses(shape.heads, shape.dim, shape.concat);
        Self::build(b, g, shape, (p, seed), rng, fused)
    }

    /// [`GatConv::new`] on the unfused per-head ops (the same parameters from the same `rng`).
    pub fn new_unfused(b: &B, g: &GatGraph<B>, shape: GatShape, p: f32, seed: u64, rng: &mut SplitMix64) -> Result<Self> {
        Self::build(b, g, shape, (p, seed), rng, false)
    }

    /// Whether a layer of `heads x dim` runs fused: at most 32 heads of at most 32 columns,
    /// concatenated or one (the mean of several heads runs unfused).
    pub fn fuses(heads: usize, dim: usize, concat: bool) -> bool {
        GatAttention::fits(heads, dim) && (concat || heads == 1)
    }

    /// Whether this layer runs fused.
    pub fn is_fused(&self) -> bool {
        matches!(self.path, Path::Fused { .. })
    }

    fn build(
        b: &B,
        g: &GatGraph<B>,
        GatShape { rows, fan_in, heads, dim, concat }: GatShape,
        (p, seed): (f32, u64),
        rng: &mut SplitMix64,
        fused: bool,
    ) -> Result<Self> {
        let width = heads * dim;
        let lin = Linear::with_bias(b, rows, fan_in, width, false, rng)?;
        let att = |rng: &mut SplitMix64| -> Result<Param<B>> { Param::new(b, &Matrix::from_vec(1, width, glorot(heads, dim, rng).data)?) };
        let att_src = att(rng)?;
        let att_dst = att(rng)?;
        let path = if fused {
            Path::Fused { stats: b.matrix(rows, 2 * heads)?, d_row: b.matrix(rows, heads)? }
        } else {
            Path::Unfused(Box::new(Unfused::new(b, g, rows, heads, dim)?))
        };
        Ok(GatConv {
            lin,
            att_src,
            att_dst,
            bias: Param::new(b, &Matrix::zeros(1, if concat { width } else { dim }))?,
            heads,
            dim,
            concat,
            p,
            seed,
            dropped: false,
            s_src: b.matrix(rows, heads)?,
            s_dst: b.matrix(rows, heads)?,
            ds_src: b.matrix(rows, heads)?,
            ds_dst: b.matrix(rows, heads)?,
            dwh: b.matrix(rows, width)?,
            out: b.matrix(rows, if concat { width } else { dim })?,
            out16: None,
            wrote_half: false,
            path,
        })
    }

    /// Gives out an f16 home where the backend keeps such activations
    /// ([`DropoutGemmOp::half_activation`](crate::ops::nn::dropout_gemm::DropoutGemmOp::half_activation))
    /// and the fused op writes it (heads of 8 columns, concatenated): for a hidden layer whose
    /// next layer takes it through ELU-on-load products `next_width` wide. A training
    /// forward asked to ([`GatConv::forward_half`]) then writes only the f16 values.
    pub fn keep_half_output(&mut self, b: &B, next_width: usize) -> Result<()> {
        if self.is_fused() && self.concat && self.dim == 8 {
            let (rows, cols) = B::shape(&self.out);
            self.out16 = b.half_activation(rows, cols, next_width)?;
        }
        Ok(())
    }

    /// The fused op's view of this layer (attention dropout only in training).
    fn attention<'g>(&self, g: &'g GatGraph<B>) -> GatAttention<'g, B::Ids> {
        GatAttention {
            heads: self.heads,
            dim: self.dim,
            slope: GAT_SLOPE,
            p: if self.dropped { self.p } else { 0.0 },
            seed: self.seed,
            first_edge: 0,
            edge_ids: g.edge_ids.as_deref(),
            rows: None,
            cols: None,
        }
    }

    /// Where the part's exchanges overlap this layer's attention (the fused path only).
    fn split(&self, g: &GatGraph<B>) -> Option<RowSplit> {
        g.hook().and_then(|h| h.split()).filter(|_| self.is_fused())
    }

    /// The fused attention over rows `rows` of S (all: `None`), into out (or its f16 home).
    fn attend(&mut self, b: &B, g: &GatGraph<B>, rows: RowRange, half: bool) -> Result<()> {
        let a = GatAttention { rows, ..self.attention(g) };
        let Path::Fused { stats, .. } = &mut self.path else {
            return Err(crate::error::Error::Unsupported("GAT: row blocks of the unfused attention".into()));
        };
        let x = Inputs { wh: self.lin.out(), s_src: &self.s_src, s_dst: &self.s_dst, bias: &self.bias.value };
        match self.out16.as_mut().filter(|_| half) {
            Some(out16) => {
                b.gat_attention_half(&g.graph, &a, x, out16, stats)?;
                self.wrote_half = true;
            }
            None => b.gat_attention(&g.graph, &a, x, &mut self.out, stats)?,
        }
        Ok(())
    }

    /// The overlapped forward (Wh's owned rows formed): the owned rows' scores, the halo
    /// exchange started, the interior rows' attention beside it, then the halo rows' scores
    /// (their Wh rows in) and the other rows' attention.
    fn forward_overlapped(&mut self, b: &B, g: &GatGraph<B>, split: &RowSplit, half: bool) -> Result<()> {
        let Some(hook) = g.hook() else { return self.attend(b, g, None, half) };
        let att = (&self.att_src.value, &self.att_dst.value);
        scores_on(b, self.lin.out_mut(), att, (&mut self.s_src, &mut self.s_dst), split.owned.clone())?;
        hook.fill_start(b, self.lin.out_mut())?;
        let inner = self.attend(b, g, Some((0, split.interior)), half);
        // Joined even when the attention failed: nothing may be left running on Wh.
        hook.fill_finish(b, self.lin.out_mut())?;
        inner?;
        let att = (&self.att_src.value, &self.att_dst.value);
        for rows in [0..split.owned.start, split.owned.end..split.rows] {
            scores_on(b, self.lin.out_mut(), att, (&mut self.s_src, &mut self.s_dst), rows)?;
        }
        self.attend(b, g, Some((split.interior, split.rows)), half)
    }

    /// Output columns: `heads * dim` concatenated, `dim` averaged.
    pub fn out_width(&self) -> usize {
        if self.concat { self.heads * self.dim } else { self.dim }
    }

    pub fn forward(&mut self, b: &B, g: &GatGraph<B>, x: &Operand<B>, train: bool) -> Result<&B::Mat> {
        self.forward_half(b, g, x, train, false)?;
        Ok(&self.out)
    }

    /// [`GatConv::forward`], writing out only in f16 ([`GatConv::out_half`]) when `half` and
    /// the layer keeps an f16 home (`out` is then left as it was).
    pub fn forward_half(&mut self, b: &B, g: &GatGraph<B>, x: &Operand<B>, train: bool, half: bool) -> Result<()> {
        self.dropped = train && self.p > 0.0;
        self.wrote_half = false;
        self.lin.forward_pre_bias_on(b, x, &g.part.product_rows())?;
        if let Some(split) = self.split(g) {
            return self.forward_overlapped(b, g, &split, half);
        }
        // The scores, logits and aggregation read neighbours' Wh rows: a part fills its halo.
        if let Some(h) = g.hook() {
            h.fill(b, self.lin.out_mut())?;
        }
        let wh = self.lin.out();
        b.gat_scores(wh, (&self.att_src.value, &self.att_dst.value), (&mut self.s_src, &mut self.s_dst))?;
        let a = self.attention(g);
        let u = match &mut self.path {
            Path::Fused { stats, .. } => {
                let x = Inputs { wh: self.lin.out(), s_src: &self.s_src, s_dst: &self.s_dst, bias: &self.bias.value };
                match self.out16.as_mut().filter(|_| half) {
                    Some(out16) => {
                        b.gat_attention_half(&g.graph, &a, x, out16, stats)?;
                        self.wrote_half = true;
                    }
                    None => b.gat_attention(&g.graph, &a, x, &mut self.out, stats)?,
                }
                return Ok(());
            }
            Path::Unfused(u) => u,
        };
        for h in 0..self.heads {
            let (col0, weight) = if self.concat { (h * self.dim, 1.0) } else { (0, 1.0 / self.heads as f32) };
            let seed = head_seed(self.seed, h);
            let hd = &mut u.head[h];
            b.head_take(self.lin.out(), h * self.dim, 1.0, &mut hd.wh)?;
            let x = HeadLogits { s_dst: &self.s_dst, s_src: &self.s_src, head: h, slope: GAT_SLOPE };
            b.gat_edge_logits(&g.graph, x, &mut hd.logits)?;
            b.edge_softmax(&g.graph, &u.one, &hd.logits, &mut hd.alpha)?;
            let used = if self.dropped {
                b.dropout_edges_at(
                    &hd.alpha,
                    &mut hd.alpha_drop,
                    &mut hd.mask,
                    DropKey::new(self.p, seed).with_ids(g.edge_ids.as_deref()),
                )?;
                &hd.alpha_drop
            } else {
                &hd.alpha
            };
            b.spmm(&g.graph, Side::Forward, used, &hd.wh, &mut u.agg)?;
            b.head_put(&u.agg, col0, weight, !self.concat && h > 0, &mut self.out)?;
        }
        b.bias_add(&mut self.out, &self.bias.value)?;
        Ok(())
    }

    pub fn out(&self) -> &B::Mat {
        &self.out
    }
    /// out's f16 values where the last forward wrote only those ([`GatConv::forward_half`]).
    pub fn out_half(&self) -> Option<&B::Half> {
        self.out16.as_ref().filter(|_| self.wrote_half)
    }
    pub fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }

    /// dL/d(X W) after `backward`: with [`GatConv::weight`], what dX = dWh Wᵀ is formed from
    /// (a caller that fuses dX into what follows passes no `dx`).
    pub fn d_wh(&self) -> &B::Mat {
        &self.dwh
    }
    pub fn weight(&self) -> &B::Mat {
        &self.lin.weight.value
    }

    /// The output (as the model left it: its ELU applied in place, or still to come inside the
    /// next layer's products; its f16 values where only those were written) and the bias
    /// gradient, for a caller that sums dout's columns where it forms dout (`bias_summed` in
    /// `backward`).
    pub fn out_and_bias_grad(&mut self) -> (&B::Mat, Option<&B::Half>, &mut B::Mat) {
        (&self.out, self.out16.as_ref().filter(|_| self.wrote_half), &mut self.bias.grad)
    }

    /// Fills every parameter's gradient from `dout` (after a training `forward` of `x`), and dX
    /// into `dx` when asked. `bias_summed`: the bias gradient (dout's column sums) is already
    /// there, summed where dout was formed.
    pub fn backward(
        &mut self,
        b: &B,
        g: &GatGraph<B>,
        x: &Operand<B>,
        dout: &B::Mat,
        dx: Option<&mut B::Mat>,
        bias_summed: bool,
    ) -> Result<()> {
        if !bias_summed {
            // dout's halo rows are zero (never in the loss).
            g.part.live_rows().read(b, dout, |dout| b.col_sums(dout, &mut self.bias.grad))?;
        }
        let a = self.attention(g);
        let split = self.split(g);
        // Whether dWh's halo rows are on their way (overlapped): finished below.
        let mut started = false;
        match &mut self.path {
            Path::Fused { stats, d_row } => {
                // The column pass adds the per-node scores' part to dWh as it writes it.
                let att = Some((&self.att_src.value, &self.att_dst.value));
                let inputs = GradInputs { wh: self.lin.out(), s_src: &self.s_src, s_dst: &self.s_dst, stats: &*stats, dout, att };
                let (ds_dst, ds_src, dwh) = (&mut self.ds_dst, &mut self.ds_src, &mut self.dwh);
                match (split, g.hook()) {
                    (Some(sp), Some(hook)) => {
                        // The row pass and the halo rows' column pass (dWh's rows for the owners)
                        // first; they travel while the owned rows' column pass runs.
                        let n = sp.rows;
                        let halo_lo = GatAttention { cols: Some((0, sp.owned.start)), ..a };
                        let grads = GradOutputs { d_row: &mut *d_row, ds_dst: &mut *ds_dst, ds_src: &mut *ds_src, dwh: &mut *dwh };
                        b.gat_attention_backward(&g.graph, &halo_lo, inputs, grads)?;
                        let halo_hi = GatAttention { rows: Some((0, 0)), cols: Some((sp.owned.end, n)), ..a };
                        let grads = GradOutputs { d_row: &mut *d_row, ds_dst: &mut *ds_dst, ds_src: &mut *ds_src, dwh: &mut *dwh };
                        b.gat_attention_backward(&g.graph, &halo_hi, inputs, grads)?;
                        hook.give_back_start(b, dwh)?;
                        started = true;
                        let owned = GatAttention { rows: Some((0, 0)), cols: Some((sp.owned.start, sp.owned.end)), ..a };
                        let grads = GradOutputs { d_row: &mut *d_row, ds_dst: &mut *ds_dst, ds_src: &mut *ds_src, dwh: &mut *dwh };
                        if let Err(e) = b.gat_attention_backward(&g.graph, &owned, inputs, grads) {
                            // Nothing may be left running on dWh.
                            let _ = hook.give_back_finish(b, dwh);
                            return Err(e);
                        }
                    }
                    _ => b.gat_attention_backward(&g.graph, &a, inputs, GradOutputs { d_row, ds_dst, ds_src, dwh })?,
                }
            }
            Path::Unfused(u) => {
                let shape = (self.heads, self.dim, self.concat, self.dropped, self.p);
                u.backward(b, g, shape, dout, (&self.s_dst, &self.s_src), (&mut self.ds_dst, &mut self.ds_src, &mut self.dwh))?
            }
        }
        // Through the per-node scores: the vectors' gradients, and (unfused) their part of dWh
        // accumulated onto the aggregation's.
        let fused = self.is_fused();
        let wh = self.lin.out();
        let (att_src, att_dst) = (&mut self.att_src, &mut self.att_dst);
        let dwh = if fused { None } else { Some(&mut self.dwh) };
        b.gat_scores_backward(
            wh,
            (&att_src.value, &att_dst.value),
            (&self.ds_src, &self.ds_dst),
            dwh,
            (&mut att_src.grad, &mut att_dst.grad),
        )?;
        // The halo rows of dWh (from the edges and the source scores) belong to their owners.
        match (g.hook(), started) {
            (Some(hook), true) => hook.give_back_finish(b, &mut self.dwh)?,
            (Some(hook), false) => hook.give_back(b, &mut self.dwh)?,
            (None, _) => {}
        }
        self.lin.backward_on(b, x, &self.dwh, dx, &g.part.product_rows())
    }

    pub fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        vec![("lin.weight", &mut self.lin.weight), ("att_src", &mut self.att_src), ("att_dst", &mut self.att_dst), ("bias", &mut self.bias)]
    }
}

/// The per-node scores of rows `rows` only (the halo rows', once their Wh rows arrived).
fn scores_on<B: GatOps>(b: &B, wh: &mut B::Mat, att: (&B::Mat, &B::Mat), s: (&mut B::Mat, &mut B::Mat), rows: Range<usize>) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let (s_src, s_dst) = s;
    b.on_rows(wh, rows.clone(), &mut |wh| {
        b.on_rows(s_src, rows.clone(), &mut |s_src| b.on_rows(s_dst, rows.clone(), &mut |s_dst| b.gat_scores(wh, att, (s_src, s_dst))))
    })
}

/// The seed of head `h`'s attention-dropout masks (unfused path).
fn head_seed(seed: u64, h: usize) -> u64 {
    SplitMix64::new(seed ^ ((h as u64 + 1) << 48)).next_u64()
}

impl<B: GatOps> Unfused<B> {
    fn new(b: &B, g: &GatGraph<B>, rows: usize, heads: usize, dim: usize) -> Result<Self> {
        let fwd = || b.edges(&g.graph, Side::Forward);
        let bwd = || b.edges(&g.graph, Side::Transposed);
        let head = (0..heads)
            .map(|_| {
                let alpha = fwd()?;
                let mask = b.edge_mask(&alpha)?;
                Ok(Head { logits: fwd()?, alpha_drop: fwd()?, alpha, mask, wh: b.matrix(rows, dim)? })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Unfused {
            one: b.upload(&Matrix::from_vec(1, 1, vec![1.0])?)?,
            dbeta: b.matrix(1, 1)?,
            head,
            agg: b.matrix(rows, dim)?,
            dout_h: b.matrix(rows, dim)?,
            dwh_h: b.matrix(rows, dim)?,
            dalpha_drop: fwd()?,
            dalpha: fwd()?,
            dlogits: fwd()?,
            dz: fwd()?,
            alpha_t: bwd()?,
            dz_t: bwd()?,
        })
    }

    /// Per head, from dout: dWh's aggregation part and both score gradients.
    #[allow(clippy::type_complexity)]
    fn backward(
        &mut self,
        b: &B,
        g: &GatGraph<B>,
        (heads, dim, concat, dropped, p): (usize, usize, bool, bool, f32),
        dout: &B::Mat,
        (s_dst, s_src): (&B::Mat, &B::Mat),
        (ds_dst, ds_src, dwh): (&mut B::Mat, &mut B::Mat, &mut B::Mat),
    ) -> Result<()> {
        for h in 0..heads {
            let (col0, weight) = if concat { (h * dim, 1.0) } else { (0, 1.0 / heads as f32) };
            let hd = &self.head[h];
            let used = if dropped { &hd.alpha_drop } else { &hd.alpha };
            b.head_take(dout, col0, weight, &mut self.dout_h)?;
            // Through the aggregation out_h = α' Wh_h: dWh_h = α'ᵀ dout_h, dα' = dout_h Wh_hᵀ.
            b.transpose_edges(&g.graph, used, &mut self.alpha_t)?;
            b.spmm(&g.graph, Side::Transposed, &self.alpha_t, &self.dout_h, &mut self.dwh_h)?;
            b.head_put(&self.dwh_h, h * dim, 1.0, false, dwh)?;
            let dalpha = if dropped {
                b.sddmm(&g.graph, &self.dout_h, &hd.wh, &mut self.dalpha_drop)?;
                b.dropout_edges_backward(&self.dalpha_drop, &hd.mask, p, &mut self.dalpha)?;
                &self.dalpha
            } else {
                b.sddmm(&g.graph, &self.dout_h, &hd.wh, &mut self.dalpha)?;
                &self.dalpha
            };
            // Through the softmax (β = 1) and the LeakyReLU, to both ends of every edge.
            let fwd = Softmaxed { beta: &self.one, cos: &hd.logits, alpha: &hd.alpha };
            b.edge_softmax_backward(&g.graph, fwd, dalpha, &mut self.dlogits, &mut self.dbeta)?;
            let x = HeadLogits { s_dst, s_src, head: h, slope: GAT_SLOPE };
            b.gat_edge_logits_backward(&g.graph, x, &self.dlogits, &mut self.dz, ds_dst)?;
            b.transpose_edges(&g.graph, &self.dz, &mut self.dz_t)?;
            b.edge_row_sums(&g.graph, Side::Transposed, &self.dz_t, h, ds_src)?;
        }
        Ok(())
    }
}
