//! Node classification: a class per node (PyG's Planetoid examples). The model of the registry
//! is the encoder, and its last layer is the head (one logit per class); this task owns the rest:
//!
//! - [`data`]: the problem, graph + node features + labels, and the split (Planetoid masks from
//!   the `.npz`, or a seeded 60/20/20 random split), as mask bits per node;
//! - the loss: softmax cross entropy over the train mask, and the metric, accuracy per mask,
//!   both counted by one op (`ops` `cross_entropy`, its mask bits `TRAIN_BIT` ...);
//! - [`train`]: the loop (full-graph steps, or the mini-batch [`EpochSteps`] and the
//!   [`Evaluate`] a sampler plugs in), with CUDA-graph recording, profiling and the weights;
//! - [`predict`]: inference with a saved model, the accuracy counted as in training;
//! - [`checkpoint`]: `--checkpoint` / `--resume` of a run.
//!
//! Samplers (`crate::sample`) and partitioning (`crate::dist`) run this task their own ways:
//! they sit one rank above `task` and implement its [`EpochSteps`] / [`Evaluate`], or read its
//! [`Dataset`] and records; the CLI composes model x task x sampler x partitioning.

pub mod checkpoint;
pub mod data;
pub mod predict;
pub mod train;

pub use data::{Dataset, FeatureStorage, SyntheticNodeData};
pub use train::{EpochRecord, EpochSteps, Evaluate, History, MaskSizes, TrainConfig, Trainer};
