//! Graph neural networks on the ops: layers with their backward written out next to their
//! forward (no autograd) and the models of the registry ([`models`]: encoders, graph + features
//! -> node representations). What they are trained for (split, head, loss, metric, the loop) is
//! a task's (`crate::task`), one layer up.
//!
//! Layers are generic over a [`Backend`]: [`cpu::CpuBackend`] (rayon, f32 or f64) and
//! [`cuda::CudaBackend`] (cuBLAS + our sparse kernels, f32 / tf32 / f16).

pub mod agnn_conv;
pub mod batch_norm;
pub mod dropout;
pub mod embedding;
pub mod gat_conv;
pub mod gcn_conv;
pub mod gin_conv;
pub mod grad_ready;
pub mod halo_hook;
pub mod input;
pub mod kept_state;
pub mod linear;
pub mod live_rows;
pub mod model;
pub mod models;
pub mod operand;
pub mod param;
pub mod sage_conv;
pub mod seed_blocks;
pub mod stack;

// The backends live with the ops (each op implements its trait for both); re-exported here
// because a model is built on one.
pub use crate::ops::backend::{self as backend, Backend, Side, Stats, cpu, cuda};
pub use crate::ops::nn::Ops;
pub use cpu::CpuBackend;
pub use cuda::{CudaBackend, EdgeLayout};
pub use models::{MODELS, Model, ModelConfig, ModelInfo, model_info};
