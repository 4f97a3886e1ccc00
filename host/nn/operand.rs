//! The left operand of a feature transform `X W`: a dense matrix (hidden layers, dense node
//! features) or sparse node features (multi-hot), whose product is an SpMM with the feature
//! matrix as the sparse side. The layer's backward needs `Xᵀ G` for its weight gradient.
//! Dense node features under input dropout may also be an operand that is never materialised:
//! `dropout(X)` with its mask regenerated in each product (`ops::nn::dropout_gemm`).

use crate::error::Result;
use crate::nn::live_rows::LiveRows;
use crate::ops::backend::{Backend, Side};
use crate::ops::nn::dropout::DropKey;
use crate::ops::nn::op_set;

op_set!(
    /// What the products of an operand need.
    pub trait OperandOps:
    Backend,
    crate::ops::nn::gemm::GemmOp,
    crate::ops::nn::spmm::SpmmOp,
    crate::ops::nn::dropout_gemm::DropoutGemmOp,
);

pub enum Operand<'a, B: crate::ops::nn::dropout_gemm::DropoutGemmOp> {
    Dense(&'a B::Mat),
    /// `X` as a pattern with values in forward order and the same values laid out for `Xᵀ`.
    Sparse {
        x: &'a B::Graph,
        values: &'a B::Edges,
        values_t: &'a B::Edges,
    },
    /// `dropout(x)`, the mask of `key` and the step counter, as [`DropoutOp::dropout_at`](crate::ops::nn::dropout::DropoutOp::dropout_at)
    /// would draw it; regenerated in both products, so forward and backward must run in one
    /// step. `half`: x's f16 copy, read instead where the backend can
    /// ([`DropoutGemmOp::half_features`](crate::ops::nn::dropout_gemm::DropoutGemmOp::half_features)).
    Dropped {
        x: &'a B::Mat,
        half: Option<&'a B::Half>,
        key: DropKey<'a, B::Ids>,
    },
    /// `dropout(x)` of node features held only in f16 (the f32 ones not kept), as `Dropped`
    /// reads them from its f16 copy; p = 0 in evaluation
    /// ([`DropoutGemmOp::half_suffices`](crate::ops::nn::dropout_gemm::DropoutGemmOp::half_suffices)).
    Half {
        x: &'a B::Half,
        key: DropKey<'a, B::Ids>,
    },
    /// `dropout(ELU(x))` (x the layer below's pre-activation), ELU and mask applied inside both
    /// products as for `Dropped` ([`DropoutGemmOp::elu_dropout_gemm`](crate::ops::nn::dropout_gemm::DropoutGemmOp::elu_dropout_gemm)).
    /// `half`: x's values in f16, read instead of x (which the forward then left unwritten).
    EluDropped {
        x: &'a B::Mat,
        half: Option<&'a B::Half>,
        key: DropKey<'a, B::Ids>,
    },
}

impl<B: OperandOps> Operand<'_, B> {
    /// `out = X w`.
    pub fn times(&self, b: &B, w: &B::Mat, out: &mut B::Mat) -> Result<()> {
        self.times_on(b, w, out, &LiveRows::all())
    }

    /// `out = Xᵀ g`.
    pub fn transposed_times(&self, b: &B, g: &B::Mat, out: &mut B::Mat) -> Result<()> {
        self.transposed_times_on(b, g, out, &LiveRows::all())
    }

    /// Whether [`Operand::times_on`] forms only the rows it is given (dense X in f32); sparse X
    /// and X held in f16 are multiplied whole.
    pub fn forms_row_ranges(&self) -> bool {
        matches!(self, Operand::Dense(_) | Operand::Dropped { half: None, .. } | Operand::EluDropped { half: None, .. })
    }

    /// [`Operand::times`] on the rows `rows` of X and `out` (the rest of `out` keeps what it
    /// held; a dropout's mask drawn for those rows as the whole product draws it). Sparse X
    /// and X held in f16 (input features) are multiplied whole.
    pub fn times_on(&self, b: &B, w: &B::Mat, out: &mut B::Mat, rows: &LiveRows) -> Result<()> {
        match *self {
            Operand::Dense(x) => rows.read_write(b, x, out, |x, out| b.gemm(x, false, w, false, 0.0, out)),
            Operand::Dropped { x, half: None, key } => {
                rows.read_write(b, x, out, |x, out| rows.key(b, key, B::shape(x).1, |key| b.dropout_gemm(x, None, w, out, key)))
            }
            Operand::EluDropped { x, half: None, key } => {
                rows.read_write(b, x, out, |x, out| rows.key(b, key, B::shape(x).1, |key| b.elu_dropout_gemm(x, None, w, out, key)))
            }
            Operand::Sparse { x, values, .. } => b.spmm(x, Side::Forward, values, w, out),
            Operand::Dropped { x, half, key } => b.dropout_gemm(x, half, w, out, key),
            Operand::Half { x, key } => b.half_dropout_gemm(x, w, out, key),
            Operand::EluDropped { x, half, key } => b.elu_dropout_gemm(x, half, w, out, key),
        }
    }

    /// [`Operand::transposed_times`] over the rows `rows` of X and `g` (the others' terms left
    /// out: `g` must be zero there). Sparse X and X held in f16 are multiplied whole.
    pub fn transposed_times_on(&self, b: &B, g: &B::Mat, out: &mut B::Mat, rows: &LiveRows) -> Result<()> {
        match *self {
            Operand::Dense(x) => rows.read_both(b, x, g, |x, g| b.gemm(x, true, g, false, 0.0, out)),
            Operand::Dropped { x, half: None, key } => {
                rows.read_both(b, x, g, |x, g| rows.key(b, key, B::shape(x).1, |key| b.dropout_gemm_dw(x, None, g, out, key)))
            }
            Operand::EluDropped { x, half: None, key } => {
                rows.read_both(b, x, g, |x, g| rows.key(b, key, B::shape(x).1, |key| b.elu_dropout_gemm_dw(x, None, g, out, key)))
            }
            Operand::Sparse { x, values_t, .. } => b.spmm(x, Side::Transposed, values_t, g, out),
            Operand::Dropped { x, half, key } => b.dropout_gemm_dw(x, half, g, out, key),
            Operand::Half { x, key } => b.half_dropout_gemm_dw(x, g, out, key),
            Operand::EluDropped { x, half, key } => b.elu_dropout_gemm_dw(x, half, g, out, key),
        }
    }
}
