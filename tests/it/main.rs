//! The integration tests: one binary, a module per area (each compiled test binary links the
//! whole library, so one binary instead of 43 saves most of the build). Shared helpers in `common`;
//! GPU tests skip ("skipped: no GPU") where there is none.

mod common;

mod bad_inputs;
mod blas;
mod curves;
mod datasets;
mod dist_device_gpu;
mod dist_halo;
mod dist_train;
mod dist_train_gpu;
mod fused_attention;
mod fuzz_regressions;
mod gen_tcg;
mod gin_tf32;
mod gpu_mma;
mod graph_formats;
mod hybrid;
mod layerwise_inference;
mod layout;
mod nn_bias_relu;
mod nn_dropout_gemm;
mod nn_elu_dropout;
mod nn_gat_attention;
mod nn_gat_ops;
mod nn_gpu;
mod nn_grad;
mod nn_ops;
mod nn_train;
mod offsets64;
mod persist;
mod pinned_upload;
mod reorder;
mod sample;
mod sample_bound;
mod sample_device;
mod sample_device_neighbor;
mod sample_train;
mod sddmm;
mod setup_gpu;
mod setup_memory;
mod spmm;
mod spmm_hybrid;
mod spmm_values;
mod tc16;
mod translate_gpu;
