//! Link prediction: is there an edge between two nodes. The model of the registry is the
//! encoder (node representations from the message-passing graph, which holds the training
//! edges only); this task owns the rest, as PyG's `examples/link_pred.py`:
//!
//! - [`split`]: the edge split (`RandomLinkSplit` semantics, stored in a file the PyG baseline
//!   reads too);
//! - training negatives drawn every epoch on the backend (`ops::nn::negative_sample`);
//! - [`decoder`]: a pair's score from its two representations (dot product = SDDMM over the pair
//!   list, or an MLP on their Hadamard product);
//! - the loss: binary cross entropy with logits (`ops::nn::bce_logits`);
//! - [`metric`]: ROC AUC and OGB's Hits@K;
//! - [`step_pairs`]: a training step's pairs as index arrays (no pattern per step);
//! - [`train`]: the loop, best-validation weights kept;
//! - [`checkpoint`]: `--checkpoint` / `--resume` of a run.

pub mod checkpoint;
pub mod decoder;
pub mod metric;
pub mod pairs;
pub mod predict;
pub mod sampled;
pub mod split;
pub mod step_pairs;
pub mod train;
