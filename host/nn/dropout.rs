//! Inverted dropout on a hidden activation, its mask kept for the backward pass. The mask is
//! drawn on the device from (seed, step counter), so a replayed CUDA graph draws a fresh one.

use std::rc::Rc;

use crate::error::Result;
use crate::nn::live_rows::LiveRows;
use crate::nn::operand::Operand;
use crate::ops::backend::Backend;
use crate::ops::nn::dropout::DropKey;
use crate::ops::nn::op_set;

op_set!(
    /// What a dropout layer needs: the mask draws and the fused backward passes.
    pub trait DropoutOps:
    crate::nn::operand::OperandOps,
    crate::ops::nn::dropout::DropoutOp,
    crate::ops::nn::relu_dropout::ReluDropoutOp,
    crate::ops::nn::elu_dropout::EluDropoutOp,
    crate::ops::nn::copy::CopyOp,
);

pub struct Dropout<B: Backend> {
    p: f32,
    seed: u64,
    /// On a part of a partitioned graph, its local rows' original node ids (shared by the
    /// part's dropouts): row r draws the whole graph's row `ids[r]`. `None` on one device.
    ids: Option<Rc<B::Ids>>,
    out: B::Mat,
    mask: B::Mask,
    /// The fused tail writes its output over its input ([`Dropout::in_place`]): `output` is the
    /// input buffer itself.
    in_place: bool,
}

impl<B: DropoutOps> Dropout<B> {
    pub fn new(b: &B, rows: usize, cols: usize, p: f32, seed: u64) -> Result<Self> {
        Ok(Dropout { p, seed, ids: None, out: b.matrix(rows, cols)?, mask: b.mask(rows, cols)?, in_place: false })
    }

    /// A dropout only ever drawn inside products ([`Dropout::operand`]) and backward passes that
    /// draw the mask again ([`Dropout::backward_elu_product`]): no output or mask buffer (its
    /// `forward`, `output` and `backward` have nothing to work on).
    pub fn redrawn_only(b: &B, cols: usize, p: f32, seed: u64) -> Result<Self> {
        Ok(Dropout { p, seed, ids: None, out: b.matrix(0, cols)?, mask: b.mask(0, cols)?, in_place: false })
    }

    /// A dropout whose output is written over its input ([`Dropout::forward_bias_relu_in_place`],
    /// [`Dropout::backward_relu_in_place`]), or that is never active: no output or mask buffer;
    /// [`Dropout::output`] is the input buffer itself. A hidden layer's fused tail then holds
    /// no dropped copy beside its pre-activation (bench/NOTES.md, issue 42 item 4).
    pub fn in_place(b: &B, cols: usize, p: f32, seed: u64) -> Result<Self> {
        Ok(Dropout { p, seed, ids: None, out: b.matrix(0, cols)?, mask: b.mask(0, cols)?, in_place: true })
    }

    /// Draws row r's mask as row `ids[r]` of the whole graph's (a part of a partitioned graph:
    /// its local rows' original node ids), so every partition draws the one-device mask.
    pub fn set_row_ids(&mut self, ids: Rc<B::Ids>) {
        self.ids = Some(ids);
    }

    /// Which mask this dropout draws.
    pub fn key(&self) -> DropKey<'_, B::Ids> {
        DropKey::new(self.p, self.seed).with_ids(self.ids.as_deref())
    }

    /// Whether `forward` drops anything (training with p > 0).
    pub fn is_active(&self, train: bool) -> bool {
        train && self.p > 0.0
    }

    pub fn forward(&mut self, b: &B, x: &B::Mat, train: bool) -> Result<()> {
        if self.is_active(train) {
            let key = DropKey::new(self.p, self.seed).with_ids(self.ids.as_deref());
            b.dropout_at(x, &mut self.out, &mut self.mask, key)?;
        }
        Ok(())
    }

    /// What the last `forward` of `x` produced: `x` itself when inactive (no copy) or when the
    /// output was written over it ([`Dropout::in_place`]).
    pub fn output<'a>(&'a self, x: &'a B::Mat, train: bool) -> &'a B::Mat {
        if self.is_active(train) && !self.in_place { &self.out } else { x }
    }

    /// This dropout of `x` as the left operand of the product that follows it, the mask drawn
    /// inside the product ([`Operand::Dropped`]: no dropped copy written; `x` itself when
    /// inactive): for [`Dropout::backward_redrawn`], not [`Dropout::backward`].
    pub fn operand<'a>(&'a self, x: &'a B::Mat, train: bool) -> Operand<'a, B> {
        if self.is_active(train) { Operand::Dropped { x, half: None, key: self.key() } } else { Operand::Dense(x) }
    }

    /// dx = dropout'(dy) after a product of [`Dropout::operand`] in this step: the mask drawn
    /// again (the same draw: same seed, step and offset), into the mask scratch.
    pub fn backward_redrawn(&mut self, b: &B, dy: &B::Mat, dx: &mut B::Mat) -> Result<()> {
        if self.p == 0.0 {
            return b.copy(dy, dx);
        }
        let key = DropKey::new(self.p, self.seed).with_ids(self.ids.as_deref());
        b.dropout_at(dy, dx, &mut self.mask, key)
    }

    /// `dropout(max(z + bias, 0))` in one pass written over `zy`'s rows `rows` (z before, the
    /// output after: a hidden layer's bias, ReLU and this dropout fused, the mask not stored),
    /// for a dropout made [`Dropout::in_place`]. Only while active.
    pub fn forward_bias_relu_in_place(&self, b: &B, zy: &mut B::Mat, bias: &B::Mat, rows: &LiveRows) -> Result<()> {
        let cols = B::shape(zy).1;
        rows.write(b, zy, |zy| rows.key(b, self.key(), cols, |key| b.bias_relu_dropout_in_place(zy, bias, key)))
    }

    /// dz = relu'(dropout'(dy)) after [`Dropout::forward_bias_relu_in_place`] from its output
    /// `y` alone (the input buffer), written over dy (`d`).
    pub fn backward_relu_in_place(&self, b: &B, d: &mut B::Mat, y: &B::Mat) -> Result<()> {
        b.relu_dropout_backward_in_place(d, y, self.p)
    }

    /// dz = ELU'(dropout'(dy)) with dy = g wᵀ (the next layer's dX from its output gradient g
    /// and weight w) formed inside the pass where the backend can, the mask drawn again as the
    /// products of [`Dropout::operand`] / [`Dropout::elu_operand`] drew it (GAT's hidden tail);
    /// `h` the ELU's output, or its input with `h_is_input` (after `elu_operand`), its values
    /// read from `h16` where the forward wrote them only in f16; with `dz_col_sums`, dz's
    /// column sums too (the bias gradient of the layer whose output h is). On the rows `rows`
    /// of g, h and dz (the column sums over those rows; g must be zero on the others); with
    /// `h16`, every row.
    pub fn backward_elu_product(
        &self,
        b: &B,
        (g, w): (&B::Mat, &B::Mat),
        ((h, h_is_input), h16): ((&B::Mat, bool), Option<&B::Half>),
        dz: &mut B::Mat,
        mut dz_col_sums: Option<&mut B::Mat>,
        rows: &LiveRows,
    ) -> Result<()> {
        if h16.is_some() {
            return b.elu_dropout_backward_product((g, w), (h, h_is_input), h16, self.key(), dz, dz_col_sums);
        }
        let cols = B::shape(h).1;
        rows.read_write(b, h, dz, |h, dz| {
            rows.read(b, g, |g| {
                rows.key(b, self.key(), cols, |key| {
                    b.elu_dropout_backward_product((g, w), (h, h_is_input), None, key, dz, dz_col_sums.as_deref_mut())
                })
            })
        })
    }

    /// `dropout(ELU(x))` as the left operand of the product that follows (x the ELU's input;
    /// both applied inside the product: [`Operand::EluDropped`]). Only while active.
    /// `half`: x's values in f16, read instead of x.
    pub fn elu_operand<'a>(&'a self, x: &'a B::Mat, half: Option<&'a B::Half>) -> Operand<'a, B> {
        Operand::EluDropped { x, half, key: self.key() }
    }

    /// dx = dropout'(dy) (a copy when p = 0).
    pub fn backward(&self, b: &B, dy: &B::Mat, dx: &mut B::Mat) -> Result<()> {
        if self.p == 0.0 {
            return b.copy(dy, dx);
        }
        b.dropout_backward(dy, &self.mask, self.p, dx)
    }
}
