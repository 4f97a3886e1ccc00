//! Inputs the fuzzers (`fuzz/`) once crashed on, replayed through the same entry points as the
//! fuzz targets: each must give Ok or Err, never a panic. Add new artifacts to
//! `fuzz/regressions/<target>/`.

use std::path::{Path, PathBuf};

use tcgnn::graph::edgelist::{EdgeListOptions, parse_edgelist};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions").join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> =
        std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| (e.path(), std::fs::read(e.path()).unwrap())).collect()).unwrap_or_default();
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

#[test]
fn spec_regressions() {
    use tcgnn::graph::spec::{MAX_NNZ, MAX_NODES, parse_rmat, parse_sbm};
    let all = inputs("spec");
    assert!(!all.is_empty());
    for (p, data) in all {
        // Same checks as fuzz/fuzz_targets/spec.rs; every stored input is one the CLI must refuse.
        let spec = String::from_utf8_lossy(&data).into_owned();
        let refused = if let Some(rest) = spec.strip_prefix("rmat:") {
            parse_rmat(&spec, rest).map(|r| assert!((1u64 << r.scale) * r.edge_factor as u64 <= MAX_NNZ)).is_err()
        } else if let Some(rest) = spec.strip_prefix("sbm:") {
            parse_sbm(&spec, rest).map(|s| assert!(s.n as u64 <= MAX_NODES && s.avg_degree.is_finite())).is_err()
        } else {
            true
        };
        let accepted_ok = spec == "rmat:20:1000"; // valid spec, refused later for host memory
        assert!(refused || accepted_ok, "{}: '{spec}' was accepted", p.display());
    }
}

/// Each stored `.tcg`, model and checkpoint input is a corrupt or hostile file: refused, naming
/// it, without a panic (same entry points as fuzz/fuzz_targets/{tcg,model,checkpoint}.rs).
#[test]
fn tcg_model_checkpoint_regressions() {
    type Parse = fn(&[u8], &Path) -> Result<(), String>;
    let targets: [(&str, Parse); 3] = [
        ("tcg", |d, p| tcgnn::graph::tcg::parse_tcg(d, d.len() as u64, p).map(drop).map_err(|e| e.to_string())),
        ("model", |d, p| tcgnn::task::saved::SavedModel::parse(d, p).map(drop).map_err(|e| e.to_string())),
        ("checkpoint", |d, p| tcgnn::task::node::checkpoint::Checkpoint::parse(d, p).map(drop).map_err(|e| e.to_string())),
    ];
    for (target, parse) in targets {
        let all = inputs(target);
        assert!(!all.is_empty(), "{target}");
        for (p, data) in all {
            let e = parse(&data, &p).expect_err(&format!("{} accepted", p.display()));
            assert!(e.contains(&*p.file_name().unwrap().to_string_lossy()), "{e}");
        }
    }
}
