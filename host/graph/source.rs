//! Where a graph comes from, as a user types it: a file path, a dataset name looked up in
//! `$TCGNN_DATASETS` (default `../shared/datasets`), or a generator spec
//! `rmat:SCALE:EDGE_FACTOR[:SEED][:relabel]`.
//!
//! R-MAT puts its hubs at the low ids (the generator's recursion favours quadrant a), so a
//! generated graph arrives hub-first, a locality no real graph of that size has. `:relabel`
//! renames the nodes by a random permutation seeded from the graph's seed (P A P^T): the same
//! graph, with its hubs scattered over the id range.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::graph::rmat::{RmatParams, rmat};
use crate::graph::spec::parse_rmat;
use crate::graph::{Csr, Permutation, tcg};
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
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    v.retain(|p| p.to_string_lossy().ends_with(".mtx.gz") || p.to_string_lossy().ends_with(".mtx"));
    v.sort();
    v
}

/// A short display name: file stem without `.mtx[.gz]`, or the generator spec.
pub fn display_name(spec: &str) -> String {
    let base = Path::new(spec).file_name().map_or(spec.to_string(), |f| f.to_string_lossy().into_owned());
    base.trim_end_matches(".tcg").trim_end_matches(".gz").trim_end_matches(".mtx").to_string()
}

/// Load `spec` (see module docs).
pub fn load(spec: &str) -> Result<Csr> {
    if let Some(rest) = spec.strip_prefix("rmat:") {
        return load_rmat(spec, rest);
    }
    let path = PathBuf::from(spec);
    let read = |p: &Path| if tcg::is_tcg(p) { tcg::read_tcg(p) } else { crate::graph::mtx::read_mtx(p) };
    // `exists` follows symlinks: a symlink loop or a dangling link "does not exist" and would
    // be reported as a missing dataset. Any directory entry of that name is read (and its own
    // error, "too many levels of symbolic links", reported).
    if entry_exists(&path) {
        return read(&path);
    }
    if let Some(p) = dataset_file(spec) {
        return read(&p);
    }
    Err(Error::Io {
        path,
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "no such file, and no dataset '{spec}' in {} (set TCGNN_DATASETS, or use rmat:SCALE:EDGE_FACTOR[:SEED][:relabel])",
                datasets_dir().display()
            ),
        ),
    })
}

/// The file a dataset name stands for in the datasets folder, if any. A binary cache beside the
/// dataset loads at disk speed, so it is preferred.
fn dataset_file(spec: &str) -> Option<PathBuf> {
    [".tcg", ".mtx.gz", ".mtx"].iter().map(|ext| datasets_dir().join(format!("{spec}{ext}"))).find(|p| p.exists())
}

/// The file `spec` reads (a path, or a dataset name's file); `None` for a generator spec or a
/// name that names nothing. Outputs are checked against it so they never overwrite it.
pub fn input_file(spec: &str) -> Option<PathBuf> {
    if spec.starts_with("rmat:") || spec.starts_with("sbm:") {
        return None;
    }
    let path = PathBuf::from(spec);
    if entry_exists(&path) { Some(path) } else { dataset_file(spec) }
}

/// Whether `path` names a directory entry (a file, or a symlink even when it leads nowhere).
pub fn entry_exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Seed of the relabelling permutation, derived from the graph's seed (a different stream).
fn relabel_seed(seed: u64) -> u64 {
    SplitMix64::new(seed ^ 0x7e1a_be11_ed00_0000).next_u64()
}

/// `rmat:` specs: SCALE:EDGE_FACTOR, an optional SEED (default 1), an optional `relabel`.
fn load_rmat(spec: &str, rest: &str) -> Result<Csr> {
    let s = parse_rmat(spec, rest)?;
    let p = RmatParams::new(s.scale, s.edge_factor, s.seed);
    p.check()?;
    let g = rmat(p);
    if !s.relabel {
        return Ok(g);
    }
    Permutation::random(g.n_rows(), relabel_seed(s.seed)).apply_to_csr(&g)
}

/// Same pattern, values uniform in [-1, 1) (benchmarks and tests must not run on all-ones).
pub fn with_random_values(g: Csr, seed: u64) -> Csr {
    let vals = SplitMix64::new(seed).vec_f32(g.nnz());
    g.with_values(vals).expect("same nnz")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmat_specs() {
        let plain = load("rmat:10:4").unwrap();
        assert_eq!(plain, load("rmat:10:4:1").unwrap());
        let re = load("rmat:10:4:relabel").unwrap();
        assert_eq!(re, load("rmat:10:4:1:relabel").unwrap());
        assert_ne!(re, load("rmat:10:4:2:relabel").unwrap());
        // The same graph under new names: size and degree multiset kept, hubs moved.
        assert_eq!((re.n_rows(), re.nnz()), (plain.n_rows(), plain.nnz()));
        let degrees = |g: &Csr| {
            let mut d: Vec<usize> = (0..g.n_rows()).map(|r| g.row_len(r)).collect();
            d.sort_unstable();
            d
        };
        assert_eq!(degrees(&re), degrees(&plain));
        assert!(re.is_canonical());
        let p = Permutation::random(plain.n_rows(), relabel_seed(1));
        assert_eq!(p.inverse().apply_to_csr(&re).unwrap(), plain);
        // Hub-first order is gone: the first 64 rows hold far fewer edges than before.
        let head = |g: &Csr| (0..64).map(|r| g.row_len(r)).sum::<usize>();
        assert!(head(&re) * 4 < head(&plain), "{} vs {}", head(&re), head(&plain));
        for bad in ["rmat:10", "rmat:x:4", "rmat:10:4:1:2", "rmat:10:4:relabel:1", "rmat:0:4", "rmat:relabel"] {
            assert!(load(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn display_names() {
        assert_eq!(display_name("rmat:19:16:1:relabel"), "rmat:19:16:1:relabel");
        assert_eq!(display_name("/a/b/pubmed.mtx.gz"), "pubmed");
    }
}
