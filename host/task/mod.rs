//! Tasks: what a model's node representations are trained for. A task owns its data split, its
//! head (the layers after the encoder), its loss, its metric and its evaluation; the model is
//! only the encoder (graph + features -> node representations, `nn::models`), so any model of the
//! registry serves any task.
//!
//! - [`node`] classification: a class per node (the encoder's last layer is the head, one logit
//!   per class), trained by `tcgnn train --task node` (the default);
//! - [`link`] prediction: pairs of nodes scored from their two representations;
//! - [`graph`] classification: many small graphs batched, node representations pooled per graph.

pub mod checkpoint;
pub mod graph;
pub mod link;
pub mod node;
pub mod saved;

/// Whether a task's loop goes on after an epoch (what its `on_epoch` callback returns: keep the
/// best weights, write a checkpoint, stop early).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// The task `tcgnn train --task` trains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, clap::ValueEnum)]
pub enum TaskKind {
    /// Node classification: a class per node, accuracy over the masks (PyG's Planetoid examples).
    #[default]
    Node,
    /// Link prediction: is there an edge between two nodes; ROC AUC and Hits@K (PyG's
    /// `RandomLinkSplit`, OGB's ogbl-* metrics).
    Link,
    /// Graph classification: a class per graph of a set of small graphs (TU benchmarks), accuracy
    /// over stratified folds.
    Graph,
}
