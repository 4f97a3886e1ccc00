//! Where a graph comes from, as a user types it: a file path, a dataset name looked up in
//! `$TCGNN_DATASETS` (default `../shared/datasets`), or a generator spec `rmat:SCALE:EDGE_FACTOR`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::rmat::{RmatParams, rmat};
use crate::util::rng::SplitMix64;

/// The datasets folder: `$TCGNN_DATASETS`, else `../shared/datasets` next to the crate.
pub fn datasets_dir() -> PathBuf {
    std::env::var_os("TCGNN_DATASETS").map(PathBuf::from).unwrap_or_else(|| {
        let here = PathBuf::from("../shared/datasets");
        if here.exists() { here } else { PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets") }
    })
}

/// Every `.mtx.gz` / `.mtx` in the datasets folder, sorted by name.
pub fn list_datasets() -> Vec<PathBuf> {
    let dir = datasets_dir();
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.to_string_lossy().ends_with(".mtx.gz") || p.to_string_lossy().ends_with(".mtx"));
    v.sort();
    v
}

/// A short display name: file stem without `.mtx[.gz]`, or the generator spec.
pub fn display_name(spec: &str) -> String {
    let base = Path::new(spec).file_name().map_or(spec.to_string(), |f| f.to_string_lossy().into_owned());
    base.trim_end_matches(".gz").trim_end_matches(".mtx").to_string()
}

/// Load `spec` (see module docs).
pub fn load(spec: &str) -> Result<Csr> {
    if let Some(rest) = spec.strip_prefix("rmat:") {
        let parts: Vec<&str> = rest.split(':').collect();
        let num = |s: &str, what: &str| -> Result<u32> {
            s.parse().map_err(|_| Error::Unsupported(format!("'{spec}': {what} '{s}' is not a number (use rmat:SCALE:EDGE_FACTOR[:SEED])")))
        };
        if parts.len() < 2 || parts.len() > 3 {
            return Err(Error::Unsupported(format!("'{spec}': use rmat:SCALE:EDGE_FACTOR[:SEED], e.g. rmat:18:16")));
        }
        let scale = num(parts[0], "scale")?;
        if !(1..=26).contains(&scale) {
            return Err(Error::Unsupported(format!("'{spec}': R-MAT scale must be in 1..=26")));
        }
        let seed = if parts.len() == 3 { num(parts[2], "seed")? as u64 } else { 1 };
        return Ok(rmat(RmatParams::new(scale, num(parts[1], "edge factor")?, seed)));
    }
    let path = PathBuf::from(spec);
    if path.exists() {
        return crate::graph::mtx::read_mtx(&path);
    }
    for ext in [".mtx.gz", ".mtx"] {
        let p = datasets_dir().join(format!("{spec}{ext}"));
        if p.exists() {
            return crate::graph::mtx::read_mtx(&p);
        }
    }
    Err(Error::Io {
        path,
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "no such file, and no dataset '{spec}' in {} (set TCGNN_DATASETS, or use rmat:SCALE:EDGE_FACTOR)",
                datasets_dir().display()
            ),
        ),
    })
}

/// Same pattern, values uniform in [-1, 1) (benchmarks and tests must not run on all-ones).
pub fn with_random_values(g: Csr, seed: u64) -> Csr {
    let vals = SplitMix64::new(seed).vec_f32(g.nnz());
    g.with_values(vals).expect("same nnz")
}
