//! Suites: many graphs x several K, with a progress bar, into one report.

use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};

use crate::bench::Record;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::graph::source;
use crate::ops::GraphHandle;

/// The R-MAT graphs of the standard suite: 2^18 x 16 and 2^20 x 8 in the generator's order
/// (hubs first), and 2^19 x 16 and 2^20 x 8 with randomly relabelled nodes (no hub-first
/// locality, as in real graphs of that size).
pub const SUITE_RMAT: [&str; 4] = ["rmat:18:16", "rmat:20:8", "rmat:19:16:1:relabel", "rmat:20:8:1:relabel"];

/// The standard suite: every dataset plus [`SUITE_RMAT`].
pub fn standard_graphs() -> Vec<String> {
    let mut v: Vec<String> = source::list_datasets().iter().map(|p| p.to_string_lossy().into_owned()).collect();
    v.extend(SUITE_RMAT.iter().map(|s| s.to_string()));
    v
}

/// How the suite fills the values of each graph's pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// Uniform in [-1, 1) (SpMM: never all-ones, so wrong indexing shows).
    Random,
    /// All 1 (SDDMM: cuSPARSE samples the pattern without values).
    Unit,
}

/// Run `bench` for every graph and K; a graph that fails to load is reported and skipped.
pub fn run_suite(
    gpu: &Arc<Gpu>,
    graphs: &[String],
    ks: &[usize],
    values: Values,
    mut bench: impl FnMut(&str, &GraphHandle, usize) -> Result<Vec<Record>>,
) -> Vec<Record> {
    let pb = ProgressBar::new((graphs.len() * ks.len()) as u64);
    pb.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}").expect("template"));
    let mut out = Vec::new();
    for spec in graphs {
        let name = source::display_name(spec);
        pb.set_message(format!("loading {name}"));
        let g = match source::load(spec) {
            Ok(g) if values == Values::Random => source::with_random_values(g, 0xbeef),
            Ok(g) => {
                let nnz = g.nnz();
                g.with_values(vec![1.0; nnz]).expect("same nnz")
            }
            Err(e) => {
                pb.println(format!("skipping {name}: {e}"));
                pb.inc(ks.len() as u64);
                continue;
            }
        };
        let handle = GraphHandle::new(g, Some(gpu.clone()));
        for &k in ks {
            pb.set_message(format!("{name} K={k}"));
            match bench(&name, &handle, k) {
                Ok(rs) => out.extend(rs),
                Err(e) => pb.println(format!("{name} K={k}: {e}")),
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    out
}
