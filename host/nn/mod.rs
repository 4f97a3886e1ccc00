//! Graph neural networks on the ops: layers with their backward written out next to their
//! forward (no autograd), the GCN and AGNN models, Adam, and the training loop.
//!
//! Layers are generic over a [`Backend`]: [`cpu::CpuBackend`] (rayon, f32 or f64) and
//! [`cuda::CudaBackend`] (cuBLAS + our sparse kernels, f32 / tf32 / f16).

pub mod agnn_conv;
pub mod backend;
pub mod cpu;
pub mod cuda;
pub mod data;
pub mod dropout;
pub mod gcn_conv;
pub mod input;
pub mod linear;
pub mod model;
pub mod operand;
pub mod param;
pub mod train;

pub use backend::{Backend, Side, Stats};
pub use cpu::CpuBackend;
pub use cuda::{CudaBackend, EdgeLayout};
pub use data::{Dataset, FeatureStorage, SyntheticNodeData};
pub use model::{ModelConfig, ModelKind, Net};
pub use train::{History, TrainConfig, Trainer};
