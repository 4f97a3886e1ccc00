//! Inputs the fuzzers (`fuzz/`) once crashed on, replayed through the same entry points as the
//! fuzz targets: each must give Ok or Err, never a panic. Add new artifacts to
//! `fuzz/regressions/<target>/`.

use std::path::{Path, PathBuf};

use tcgnn::graph::edgelist::{parse_edgelist, EdgeListOptions};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions").join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| (e.path(), std::fs::read(e.path()).unwrap())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn mtx_regressions() {
    for (p, data) in inputs("mtx") {
        let _ = tcgnn::graph::mtx::parse_mtx(&data[..], &p);
    }
}

#[test]
fn edgelist_regressions() {
    let all = inputs("edgelist");
    assert!(!all.is_empty());
    for (p, data) in all {
        // Same option decoding as fuzz/fuzz_targets/edgelist.rs.
        let (opts, body) = match data.split_first() {
            Some((&b, rest)) => {
                let n_nodes = (b & 1 == 1).then_some(b as usize);
                (EdgeListOptions { n_nodes, skip_first_line: b & 2 == 2 }, rest)
            }
            None => (EdgeListOptions::default(), &data[..]),
        };
        let _ = parse_edgelist(body, &p, opts);
    }
}

#[test]
fn npz_regressions() {
    let all = inputs("npz");
    assert!(!all.is_empty());
    for (p, data) in all {
        let _ = tcgnn::graph::npz::parse_npz(std::io::Cursor::new(data), &p);
    }
}
