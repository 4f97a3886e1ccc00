//! Every op at once: [`Ops`], the bound a model asks for, and [`op_set!`](crate::op_set), with
//! which a layer names the ops it uses. It lives with the ops (not the backends) so that the
//! backends name no op: the ops import the backends, never the reverse.

use crate::ops::backend::Backend;
use crate::ops::backend::bind::BindOps;
use crate::ops::nn::batch_norm::BatchNormOp;
use crate::ops::nn::dot::DotOp;
use crate::ops::nn::gather_rows::GatherRowsOp;
use crate::ops::nn::scaled_add::ScaledAddOp;
use crate::ops::nn::{
    adam::AdamOp, add_assign::AddAssignOp, bias_add::BiasAddOp, col_sums::ColSumsOp, copy::CopyOp, cross_entropy::CrossEntropyOp,
    dropout::DropoutOp, edge_softmax::EdgeSoftmaxOp, gemm::GemmOp, relu::ReluOp, row_normalize::RowNormalizeOp, sddmm::SddmmOp,
    spmm::SpmmOp, transpose_edges::TransposeEdgesOp,
};

/// Declares a trait that names a set of ops and implements it for every backend that has them,
/// so the list is written once: `op_set!(pub trait LinearOps: ParamOps, GemmOp, BiasAddOp);`.
/// A layer asks for the set it uses (`impl<B: LinearOps> Linear<B>`); a model, which composes
/// layers chosen at run time, asks for [`Ops`].
#[macro_export]
macro_rules! op_set {
    ($(#[$meta:meta])* $vis:vis trait $name:ident: $($op:path),+ $(,)?) => {
        $(#[$meta])*
        $vis trait $name: $($op +)+ {}
        impl<T: $($op +)+ ?Sized> $name for T {}
    };
}
pub use crate::op_set;

op_set!(
    /// Every op on one backend: what a model asks for (`B: Ops`), since the registry builds any
    /// layer behind one type. A layer names only the ops it uses (`nn/*.rs`, each an `op_set!`);
    /// a new op is its file in `ops/nn/` and one line here.
    pub trait Ops:
    Backend,
    GemmOp,
    BiasAddOp,
    ColSumsOp,
    AddAssignOp,
    CopyOp,
    ReluOp,
    DropoutOp,
    crate::ops::nn::dropout_gemm::DropoutGemmOp,
    crate::ops::nn::relu_dropout::ReluDropoutOp,
    crate::ops::nn::elu_dropout::EluDropoutOp,
    RowNormalizeOp,
    SpmmOp,
    SddmmOp,
    TransposeEdgesOp,
    EdgeSoftmaxOp,
    crate::ops::nn::fused_attention::FusedAttentionOp,
    crate::ops::nn::elu::EluOp,
    crate::ops::nn::gat_attention::GatAttentionOp,
    crate::ops::nn::gat_scores::GatScoresOp,
    crate::ops::nn::gat_edge_logits::GatEdgeLogitsOp,
    crate::ops::nn::head_columns::HeadColumnsOp,
    CrossEntropyOp,
    AdamOp,
    ScaledAddOp,
    DotOp,
    BatchNormOp,
    crate::ops::nn::segment_pool::SegmentPoolOp,
    crate::ops::nn::bce_logits::BceLogitsOp,
    crate::ops::nn::hadamard::HadamardOp,
    crate::ops::nn::negative_sample::NegativeSampleOp,
    crate::ops::nn::pair_dot::PairDotOp,
    crate::ops::nn::pair_hadamard::PairHadamardOp,
    crate::ops::nn::bce_column::BceColumnOp,
    crate::ops::nn::negative_pattern::NegativePatternOp,
    GatherRowsOp,
    BindOps,
);
