//! The GPU benchmark harness: every implementation on the same inputs in the same process,
//! GPU events after warm-up, median of >= 20, cuSPARSE as the baseline, the memory floor, and
//! reports (JSON, markdown, SVG) in `bench/results/`.

pub mod floor;
pub mod report;
pub mod sddmm;
pub mod spmm;
pub mod suite;

pub use floor::copy_bandwidth_gbs;

use serde::Serialize;

/// One measured row of a report (SpMM or SDDMM).
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    pub graph: String,
    pub n: usize,
    pub nnz: usize,
    pub k: usize,
    /// e.g. "tc8 f16", "cusparse f32 (CsrAlg2)".
    pub variant: String,
    pub ms: Option<f64>,
    pub gflops: Option<f64>,
    /// cuSPARSE f32 (best algorithm) time / this time, same process, same inputs.
    pub speedup_vs_cusparse: Option<f64>,
    /// floor time / this time (1.0 = at the memory floor).
    pub floor_fraction: Option<f64>,
    pub rel_error: Option<f64>,
    /// Set when the variant could not run (unsupported, failed): the reason.
    pub error: Option<String>,
}

impl Record {
    /// The variant without its cuSPARSE algorithm suffix, for grouping across graphs.
    pub fn variant_group(&self) -> &str {
        self.variant.split(" (").next().unwrap_or(&self.variant)
    }
}
