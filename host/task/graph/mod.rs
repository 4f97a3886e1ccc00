//! Graph classification: a class per graph of a set of small graphs (the TU benchmarks, PyG's
//! `examples/gin.py`, the GIN paper's protocol). Mini-batches of graphs are one block-diagonal
//! graph each ([`batch`]), the encoder is any registry model, the head pools its node rows per
//! graph and classifies ([`head`]); accuracy by k-fold stratified cross-validation ([`folds`],
//! [`train`]). `tcgnn train tu:NAME --task graph`.

pub mod batch;
pub mod bound;
pub mod dataset;
pub mod folds;
pub mod head;
pub mod net;
pub mod train;

pub use batch::GraphBatch;
pub use bound::{BoundGraphNet, GraphCapacity, PaddedGraphBatch};
pub use dataset::{FeatureSource, GraphSet};
pub use folds::Folds;
pub use head::{GraphHead, HeadShape};
pub use net::{GraphModel, GraphNet};
pub use train::{BoundReport, CvSummary, EpochLog, FoldResult, GraphTrainConfig, mean_std, summarize, train_fold};
