//! The GPU benchmark harness: every implementation on the same inputs in the same process,
//! GPU events after warm-up, median of >= 20, cuSPARSE as the baseline, the memory floor, and
//! reports (JSON, markdown, SVG) in `bench/results/`.

pub mod budget;
pub mod floor;
pub mod report;
pub mod sddmm;
pub mod spmm;
pub mod spmm_reorder;
pub mod suite;
pub mod train;

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
    /// cuSPARSE f16 (best algorithm) time / this time, where cuSPARSE f16 was measured (SpMM).
    pub speedup_vs_cusparse_f16: Option<f64>,
    /// floor time / this time (1.0 = at the memory floor).
    pub floor_fraction: Option<f64>,
    pub rel_error: Option<f64>,
    /// Set when the variant could not run (unsupported, failed): the reason.
    pub error: Option<String>,
    /// One-time host cost this variant's setup paid outside `ms` (reordered SpMM: computing
    /// the permutation and P S Pᵀ), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_ms: Option<f64>,
}

/// The problem a record measures: graph name and size, feature width, and the bytes the memory
/// floor counts for one variant's storage types.
pub struct Problem<'a> {
    pub graph: &'a str,
    pub n: usize,
    pub nnz: usize,
    pub k: usize,
    pub copy_gbs: f64,
}

impl Record {
    /// A row from one variant's outcome: (median ms, relative error), or why it did not run.
    /// `floor_bytes` is what that variant must move at least.
    pub fn new(p: &Problem, variant: String, outcome: Result<(f64, f64), String>, floor_bytes: f64) -> Record {
        let (ms, rel_error, error) = match outcome {
            Ok((ms, err)) => (Some(ms), Some(err), None),
            Err(e) => (None, None, Some(e)),
        };
        Record {
            graph: p.graph.into(),
            n: p.n,
            nnz: p.nnz,
            k: p.k,
            variant,
            ms,
            gflops: ms.map(|t| 2.0 * p.nnz as f64 * p.k as f64 / (t * 1e-3) / 1e9),
            speedup_vs_cusparse: None,
            speedup_vs_cusparse_f16: None,
            floor_fraction: ms.map(|t| floor::floor_ms(floor_bytes, p.copy_gbs) / t),
            rel_error,
            error,
            setup_ms: None,
        }
    }

    /// Fill every row's speedup from the baseline time (cuSPARSE f32, best algorithm).
    pub fn set_speedups(records: &mut [Record], baseline_ms: Option<f64>) {
        if let Some(base) = baseline_ms {
            for r in records {
                r.speedup_vs_cusparse = r.ms.map(|t| base / t);
            }
        }
    }

    /// Fill every row's speedup over cuSPARSE f16 (best algorithm), where that was measured.
    pub fn set_speedups_f16(records: &mut [Record], baseline_f16_ms: Option<f64>) {
        if let Some(base) = baseline_f16_ms {
            for r in records {
                r.speedup_vs_cusparse_f16 = r.ms.map(|t| base / t);
            }
        }
    }

    /// The variant without its cuSPARSE algorithm suffix, for grouping across graphs.
    pub fn variant_group(&self) -> &str {
        self.variant.split(" (").next().unwrap_or(&self.variant)
    }
}
