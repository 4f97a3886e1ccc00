//! A stack of graph convolutions as PyG's `BasicGNN`: input dropout, then per layer
//! conv → (BatchNorm) → ReLU → (residual) → dropout, the last conv giving the logits. GCN, SAGE
//! and GIN are this stack over their own [`Conv`]; the model files only build the convs.
//!
//! Hidden layer l (every layer but the last) computes
//!   a_l = relu(bn_l(conv_l(x_l)))   (bn_l only with `--batch-norm`, as BasicGNN's `norm`)
//!   h_l = a_l + h_{l-1}             (with `--residual`, for hidden layers of equal width, l >= 1)
//!         a_l                       (otherwise)
//!   x_{l+1} = dropout(h_l)
//! with x_0 the (dropped-out) node features. Backward, for hidden layer l with
//! g_l = dL/dh_l = dropout'(dL/dx_{l+1}) + (g_{l+1} when layer l+1 is residual):
//!   da = g_l (a copy when layer l is residual: g_l still flows on to layer l-1), da *= a_l > 0,
//!   dz = bn_l'(da), then conv_l's backward of dz.
//! A plain hidden layer (no BatchNorm, no residual here or in the next layer) under an active
//! dropout whose conv can defer its bias ([`Conv::deferred_bias`]) runs its tail fused: x_{l+1} =
//! dropout(max(z_l + b_l, 0)) in one pass from the pre-bias output z_l, and dz = relu'(dropout'(
//! dL/dx_{l+1})) from x_{l+1} alone (`ops::nn::relu_dropout`); a_l and the mask are not stored.
//! Both run in place: x_{l+1} is written over z_l in the conv's output buffer, and dz over
//! dL/dx_{l+1} in `din`, so such a layer holds neither a dropped copy nor a gradient copy
//! (bench/NOTES.md, issue 42 item 4). Same values as the unfused path.

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::batch_norm::BatchNorm;
use crate::nn::dropout::Dropout;
use crate::nn::gcn_conv::GcnAdjacency;
use crate::nn::grad_ready::{GradReady, NoHook, announce};
use crate::nn::halo_hook::PartContext;
use crate::nn::input::InputFeatures;
use crate::nn::live_rows::LiveRows;
use crate::nn::model::{Model, ModelConfig, dropout_seed, widths};
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::ops::nn::{Ops, op_set};

op_set!(
    /// What the stack adds around its convs: input features, dropout, BatchNorm, residual sums.
    pub trait StackOps:
    crate::nn::input::InputOps,
    crate::nn::dropout::DropoutOps,
    crate::nn::batch_norm::BatchNormOps,
    crate::ops::nn::add_assign::AddAssignOp,
    crate::ops::nn::copy::CopyOp,
    crate::ops::nn::relu::ReluOp,
);
use crate::util::rng::SplitMix64;

/// A graph convolution the stack can drive: output buffer (the stack applies its activation in
/// place, so a conv whose backward needs its output keeps its own copy), backward next to the
/// forward, parameters. `Adj` is the fixed graph operand the convs of one model share.
pub trait Conv<B: crate::nn::operand::OperandOps> {
    type Adj;
    /// Whether the backward may overwrite dY's halo rows (a part's rows outside the loss) and
    /// reads none of them but through its graph product: then, on a part of a symmetric
    /// matrix, the product pulls dY's halo rows instead of giving its own back
    /// ([`crate::nn::gcn_conv::GcnAdjacency::backward_product`]).
    const PULL_BACKWARD: bool = false;
    fn forward(&mut self, b: &B, adj: &Self::Adj, x: &Operand<B>) -> Result<()>;
    /// `forward` followed by a ReLU of the output in place where the conv can fuse it into its
    /// last op (a bias add); returns whether it did (if not, the caller applies the ReLU).
    fn forward_relu(&mut self, b: &B, adj: &Self::Adj, x: &Operand<B>) -> Result<bool> {
        self.forward(b, adj, x)?;
        Ok(false)
    }
    /// The bias this conv adds last, where its forward can stop just before it
    /// ([`Conv::forward_pre_bias`]) so that the stack adds it in one pass with the ReLU and
    /// dropout after it; `None` (the default) where it cannot.
    fn deferred_bias(&self) -> Option<&B::Mat> {
        None
    }
    /// `forward` without its last op, the bias add: `out` holds the output before the bias.
    /// Only for convs whose [`Conv::deferred_bias`] is `Some`.
    fn forward_pre_bias(&mut self, _b: &B, _adj: &Self::Adj, _x: &Operand<B>) -> Result<()> {
        Err(Error::Unsupported("this convolution cannot defer its bias".into()))
    }
    /// The output buffer to write the fused tail over, with [`Conv::deferred_bias`]'s bias
    /// (both at once: the tail reads the bias while it rewrites the output). `None` (the
    /// default) where the conv defers no bias; every conv that defers one gives both.
    fn out_mut_with_deferred_bias(&mut self) -> Option<(&mut B::Mat, &B::Mat)> {
        None
    }
    fn out(&self) -> &B::Mat;
    fn out_mut(&mut self) -> &mut B::Mat;
    /// Every parameter's gradient from `dy` = dL/d(out), and dL/dx into `dx` when asked. `dy`'s
    /// rows outside the loss (a part's halo rows) may be overwritten ([`Conv::PULL_BACKWARD`]).
    fn backward(&mut self, b: &B, adj: &Self::Adj, x: &Operand<B>, dy: &mut B::Mat, dx: Option<&mut B::Mat>) -> Result<()>;
    fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)>;
    /// Marks the calls on `adj` that follow as the input layer's (`on`) or not (a part whose
    /// input features hold its halo rows exchanges nothing there: [`GcnAdjacency::set_input_layer`]).
    fn input_layer(_adj: &Self::Adj, _on: bool) {}
}

/// What a hidden layer adds around its conv.
struct Hidden<B: StackOps> {
    bn: Option<BatchNorm<B>>,
    /// h_l = a_l + h_{l-1} for a residual layer.
    res: Option<B::Mat>,
    /// dL/da_l for a residual layer (g_l itself must survive for layer l-1).
    da: Option<B::Mat>,
    /// g_l = dL/dh_l (0 rows where the tail runs fused: dz is formed over `din`).
    g: B::Mat,
    /// dL/dx_{l+1} (the next conv's input gradient); dL/dz_l after a fused tail's backward.
    din: B::Mat,
    drop: Dropout<B>,
    /// The tail runs fused whenever training ([`Stack::fuses_tail`] with `train`): in place
    /// over the conv's output forward and over `din` backward.
    fused: bool,
}

/// Conv `l`'s graph operand: its own in `later`, else the shared one.
fn adj_of<'a, A>(adj: &'a A, later: &'a [A], l: usize) -> &'a A {
    if l == 0 || later.is_empty() { adj } else { &later[l - 1] }
}

/// h_l: the residual sum, else a_l (BatchNorm's output or the conv's, after the ReLU).
fn hidden_out<'a, B: StackOps, C: Conv<B>>(conv: &'a C, bn: &'a Option<BatchNorm<B>>, res: &'a Option<B::Mat>) -> &'a B::Mat {
    match (res, bn) {
        (Some(r), _) => r,
        (None, Some(bn)) => bn.out(),
        (None, None) => conv.out(),
    }
}

/// dL/dz_l, the gradient hidden conv l receives, once its layer's chain is done.
fn dz<B: StackOps>(h: &mut Hidden<B>) -> &mut B::Mat {
    if h.fused {
        return &mut h.din;
    }
    match (&mut h.bn, &mut h.da) {
        (Some(bn), _) => bn.dx_mut(),
        (None, Some(da)) => da,
        (None, None) => &mut h.g,
    }
}

pub struct Stack<B: StackOps, C: Conv<B>> {
    /// The graph operand of conv 0, and of every conv when `later` is empty.
    adj: C::Adj,
    /// Per-layer operands of convs 1.. (a neighbour-sampled batch's blocks: layer l aggregates
    /// into its own destination nodes only); empty: every conv shares `adj`.
    later: Vec<C::Adj>,
    convs: Vec<C>,
    hidden: Vec<Hidden<B>>,
    p: f32,
    input_seed: u64,
    /// The rows the fused tails form (a part's owned rows; every row on one device).
    live: LiveRows,
}

/// Refuses options a stack of `widths` (features, hidden..., classes) cannot apply.
pub fn check_options(cfg: &ModelConfig, widths: &[usize]) -> Result<()> {
    let layers = widths.len() - 1;
    if cfg.batch_norm && layers < 2 {
        return Err(Error::Unsupported(format!("{}: --batch-norm normalises hidden layers; {layers} layer has none", cfg.model)));
    }
    if cfg.residual && !(1..layers.saturating_sub(1)).any(|l| widths[l] == widths[l + 1]) {
        return Err(Error::Unsupported(format!(
            "{}: --residual adds h_l + f(h_l) around hidden layers of equal width: needs >= 3 layers (got {layers})",
            cfg.model
        )));
    }
    Ok(())
}

impl<B: StackOps + crate::nn::gcn_conv::GcnOps, C: Conv<B, Adj = GcnAdjacency<B>>> Stack<B, C> {
    /// The stack over the model's matrix `s` (values used as they are: Â, the mean or the sum,
    /// or a sampled batch's weighted one), whole or one part's extended rows with `part`;
    /// `conv(n, fan_in, fan_out, rng)` builds each layer, all from the seed `cfg.seed`.
    pub fn on_matrix(
        b: &B,
        s: Csr,
        features: usize,
        classes: usize,
        cfg: &ModelConfig,
        part: Option<&PartContext<B>>,
        mut conv: impl FnMut(usize, usize, usize, &mut SplitMix64) -> Result<C>,
    ) -> Result<Self> {
        let n = s.n_rows();
        let mut rng = SplitMix64::new(cfg.seed);
        let widths = widths(features, cfg.hidden, cfg.layers, classes);
        let convs = widths.windows(2).map(|w| conv(n, w[0], w[1], &mut rng)).collect::<Result<Vec<_>>>()?;
        let adj = GcnAdjacency::for_part(b, s, part, C::PULL_BACKWARD)?;
        let mut stack = Stack::new(b, n, adj, convs, &widths, cfg)?;
        if let Some(p) = part {
            stack.set_part(p);
        }
        Ok(stack)
    }
}

impl<B: StackOps, C: Conv<B>> Stack<B, C> {
    /// The stack over `convs` (conv l maps widths[l] -> widths[l + 1]) for `n` nodes.
    pub fn new(b: &B, n: usize, adj: C::Adj, convs: Vec<C>, widths: &[usize], cfg: &ModelConfig) -> Result<Self> {
        check_options(cfg, widths)?;
        let mut hidden = Vec::new();
        let n_hidden = convs.len().saturating_sub(1);
        let has_residual = |l: usize| cfg.residual && l >= 1 && widths[l] == widths[l + 1];
        for l in 0..n_hidden {
            let w = widths[l + 1];
            let residual = has_residual(l);
            // The mask is stored and read only by a tail that does not run fused under an active
            // dropout (`fuses_tail`, whose conditions other than `train` are fixed here): the
            // fused tail's backward reads the dropped output alone (issue 42 item 4).
            let fused = !cfg.batch_norm && !residual && !(l + 1 < n_hidden && has_residual(l + 1)) && convs[l].deferred_bias().is_some();
            // `fuses_tail` when training: the tail's output and its gradient are written in
            // place, so the layer keeps neither the dropout's output nor g.
            let fused_active = fused && cfg.dropout > 0.0;
            let seed = dropout_seed(cfg.seed, l as u64 + 1);
            hidden.push(Hidden {
                bn: if cfg.batch_norm { Some(BatchNorm::new(b, n, w)?) } else { None },
                res: if residual { Some(b.matrix(n, w)?) } else { None },
                da: if residual { Some(b.matrix(n, w)?) } else { None },
                g: b.matrix(if fused_active { 0 } else { n }, w)?,
                din: b.matrix(n, w)?,
                // Seeds as the two-layer GCN always had: layer l + 1's input dropout. A dropout
                // that is never active needs no buffer either (its output is its input).
                drop: if fused || cfg.dropout <= 0.0 {
                    Dropout::in_place(b, w, cfg.dropout, seed)?
                } else {
                    Dropout::new(b, n, w, cfg.dropout, seed)?
                },
                fused: fused_active,
            });
        }
        Ok(Stack { adj, later: Vec::new(), convs, hidden, p: cfg.dropout, input_seed: dropout_seed(cfg.seed, 0), live: LiveRows::all() })
    }

    pub fn convs(&self) -> &[C] {
        &self.convs
    }

    /// The graph operand the convs share (conv 0's when they have their own), for a model
    /// rebound to a new graph of the same shape (`sample::bound`: one model per sampled run,
    /// its graph rewritten per batch).
    pub fn adjacency_mut(&mut self) -> &mut C::Adj {
        &mut self.adj
    }

    /// Gives convs 1.. their own operands (`later[l - 1]` for conv l; the shape of the shared
    /// one: every layer's matrix is n x n over the same nodes); an empty list shares one again.
    pub fn set_later_adjacencies(&mut self, later: Vec<C::Adj>) -> Result<()> {
        if !later.is_empty() && later.len() + 1 != self.convs.len() {
            return Err(Error::Shape(format!("{} per-layer graphs for a stack of {} layers", later.len() + 1, self.convs.len())));
        }
        self.later = later;
        Ok(())
    }

    /// Conv `l`'s graph operand.
    pub fn layer_adjacency_mut(&mut self, l: usize) -> &mut C::Adj {
        match l {
            0 => &mut self.adj,
            _ if self.later.is_empty() => &mut self.adj,
            _ => &mut self.later[l - 1],
        }
    }

    /// Whether the convs have graph operands of their own.
    pub fn has_layer_adjacencies(&self) -> bool {
        !self.later.is_empty()
    }

    /// On a part of a partitioned graph: every hidden dropout draws its rows' masks by original
    /// node id, and the fused tails run on the owned rows alone ([`crate::nn::live_rows`]).
    pub fn set_part(&mut self, part: &PartContext<B>) {
        self.live = part.live_rows();
        self.hidden.iter_mut().for_each(|h| h.drop.set_row_ids(part.row_ids.clone()));
    }

    /// Whether hidden layer `l` runs its tail fused (see the module note): a plain layer under
    /// an active dropout, the next layer not residual, its conv able to defer its bias.
    fn fuses_tail(convs: &[C], hidden: &[Hidden<B>], l: usize, train: bool) -> bool {
        let Some(h) = hidden.get(l) else { return false };
        h.drop.is_active(train)
            && h.bn.is_none()
            && h.res.is_none()
            && hidden.get(l + 1).is_none_or(|n| n.res.is_none())
            && convs[l].deferred_bias().is_some()
    }

    /// Conv `l`'s forward of `x`: up to its bias when its layer's tail is fused (`fused`), else
    /// with its hidden layer's ReLU when the conv fuses it (no BatchNorm between them); returns
    /// whether the ReLU is done.
    fn conv_forward(conv: &mut C, hidden: Option<&Hidden<B>>, fused: bool, b: &B, adj: &C::Adj, x: &Operand<B>) -> Result<bool> {
        if fused {
            return conv.forward_pre_bias(b, adj, x).map(|_| false);
        }
        match hidden {
            Some(h) if h.bn.is_none() => conv.forward_relu(b, adj, x),
            _ => conv.forward(b, adj, x).map(|_| false),
        }
    }

    /// BatchNorm, ReLU (unless `relu_done`), residual and dropout after hidden conv `l`; the
    /// bias, ReLU and dropout in one pass where the tail is fused.
    fn hidden_forward(&mut self, b: &B, l: usize, train: bool, relu_done: bool) -> Result<()> {
        if Self::fuses_tail(&self.convs, &self.hidden, l, train) {
            let (zy, bias) = self.convs[l]
                .out_mut_with_deferred_bias()
                .ok_or_else(|| Error::Unsupported("a convolution that defers its bias gives no output to write the tail over".into()))?;
            return self.hidden[l].drop.forward_bias_relu_in_place(b, zy, bias, &self.live);
        }
        let (c_lo, c_hi) = self.convs.split_at_mut(l);
        let (h_lo, h_hi) = self.hidden.split_at_mut(l);
        let conv = &mut c_hi[0];
        let Hidden { bn, res, drop, .. } = &mut h_hi[0];
        let act = match bn {
            Some(bn) => {
                bn.forward(b, conv.out(), train)?;
                bn.out_mut()
            }
            None => conv.out_mut(),
        };
        if !relu_done {
            b.relu(act)?;
        }
        if let Some(res) = res {
            let prev = &h_lo[l - 1];
            b.copy(
                match bn {
                    Some(bn) => bn.out(),
                    None => conv.out(),
                },
                res,
            )?;
            b.add_assign(res, hidden_out(&c_lo[l - 1], &prev.bn, &prev.res))?;
        }
        drop.forward(b, hidden_out(&*conv, bn, res), train)
    }

    /// Hidden layer l's chain from dL/dx_{l+1} (in `din`) to dL/dz_l.
    fn hidden_backward(&mut self, b: &B, l: usize) -> Result<()> {
        if Self::fuses_tail(&self.convs, &self.hidden, l, true) {
            let Hidden { din, drop, .. } = &mut self.hidden[l];
            return self.live.read_write(b, self.convs[l].out(), din, |y, d| drop.backward_relu_in_place(b, d, y));
        }
        let (h_lo, h_hi) = self.hidden.split_at_mut(l + 1);
        let Hidden { bn, da, g, din, drop, .. } = &mut h_lo[l];
        drop.backward(b, din, g)?;
        if let Some(next) = h_hi.first().filter(|n| n.res.is_some()) {
            b.add_assign(g, &next.g)?;
        }
        let d = match da {
            Some(da) => {
                b.copy(g, da)?;
                da
            }
            None => g,
        };
        let conv = &self.convs[l];
        match bn {
            Some(bn) => {
                b.relu_backward(bn.out(), d)?;
                bn.backward(b, conv.out(), d)
            }
            None => b.relu_backward(conv.out(), d),
        }
    }
}

impl<B: Ops, C: Conv<B>> Stack<B, C> {
    /// The backward; `ready` is told conv l's parameters (and BatchNorm l's, computed before
    /// it) as soon as conv l's backward is done.
    fn backward_with<R: GradReady<B> + ?Sized>(
        &mut self,
        b: &B,
        input: &mut InputFeatures<B>,
        dlogits: &mut B::Mat,
        ready: &mut R,
    ) -> Result<()> {
        let last = self.convs.len() - 1;
        for l in (0..=last).rev() {
            if l < last {
                self.hidden_backward(b, l)?;
            }
            let (done, rest) = self.convs.split_at_mut(l);
            let (h_lo, h_hi) = self.hidden.split_at_mut(l);
            let dy = if l == last { &mut *dlogits } else { dz(&mut h_hi[0]) };
            if l == 0 {
                C::input_layer(&self.adj, true);
                // dX only for a learnable input (features need no gradient).
                let (x0, dx0) = input.backward_operand(self.p);
                let done = rest[0].backward(b, &self.adj, &x0, dy, dx0);
                C::input_layer(&self.adj, false);
                done?;
            } else {
                let Hidden { bn, res, drop, din, .. } = &mut h_lo[l - 1];
                let x = drop.output(hidden_out(&done[l - 1], bn, res), true);
                rest[0].backward(b, adj_of(&self.adj, &self.later, l), &Operand::Dense(x), dy, Some(din))?;
            }
            announce(ready, b, || {
                let mut ps = rest[0].params();
                if let Some(bn) = h_hi.first_mut().and_then(|h| h.bn.as_mut()) {
                    ps.extend(bn.params());
                }
                ps
            })?;
        }
        Ok(())
    }
}

impl<B: Ops, C: Conv<B>> Model<B> for Stack<B, C> {
    fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat> {
        let mut relu_done = {
            let fused = Self::fuses_tail(&self.convs, &self.hidden, 0, train);
            let x0 = input.forward(b, train, self.p, self.input_seed)?;
            C::input_layer(&self.adj, true);
            let done = Self::conv_forward(&mut self.convs[0], self.hidden.first(), fused, b, &self.adj, &x0);
            C::input_layer(&self.adj, false);
            done?
        };
        for l in 0..self.convs.len() {
            if l > 0 {
                let fused = Self::fuses_tail(&self.convs, &self.hidden, l, train);
                let (done, rest) = self.convs.split_at_mut(l);
                let Hidden { bn, res, drop, .. } = &self.hidden[l - 1];
                let x = drop.output(hidden_out(&done[l - 1], bn, res), train);
                let adj = adj_of(&self.adj, &self.later, l);
                relu_done = Self::conv_forward(&mut rest[0], self.hidden.get(l), fused, b, adj, &Operand::Dense(x))?;
            }
            if l + 1 < self.convs.len() {
                self.hidden_forward(b, l, train, relu_done)?;
            }
        }
        Ok(self.convs.last().expect("at least one layer").out())
    }

    fn backward(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat) -> Result<()> {
        self.backward_with(b, input, dlogits, &mut NoHook)
    }

    fn backward_by_layer(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat, ready: &mut dyn GradReady<B>) -> Result<()> {
        self.backward_with(b, input, dlogits, ready)
    }

    fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut out = Vec::new();
        for (l, c) in self.convs.iter_mut().enumerate() {
            out.extend(c.params().into_iter().map(|(name, p)| (format!("convs.{l}.{name}"), p)));
        }
        for (l, h) in self.hidden.iter_mut().enumerate() {
            if let Some(bn) = &mut h.bn {
                out.extend(bn.params().into_iter().map(|(name, p)| (format!("norms.{l}.{name}"), p)));
            }
        }
        out
    }

    fn buffers(&mut self) -> Vec<(String, &mut B::Mat)> {
        let mut out = Vec::new();
        for (l, h) in self.hidden.iter_mut().enumerate() {
            if let Some(bn) = &mut h.bn {
                out.extend(bn.buffers().into_iter().map(|(name, m)| (format!("norms.{l}.{name}"), m)));
            }
        }
        out
    }

    fn batch_norms(&mut self) -> Vec<&mut BatchNorm<B>> {
        self.hidden.iter_mut().filter_map(|h| h.bn.as_mut()).collect()
    }

    fn embedding(&self, layer: usize) -> Option<&B::Mat> {
        // h_l: the hidden layer's output after ReLU (and the residual sum), before dropout.
        let h = self.hidden.get(layer)?;
        Some(hidden_out(&self.convs[layer], &h.bn, &h.res))
    }
}
