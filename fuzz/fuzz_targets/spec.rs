//! The CLI's generator specs (`rmat:...`, `sbm:...`) on arbitrary text: Ok or Err, never a
//! panic, and an accepted spec always describes a graph within 32-bit ids and nonzero counts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        tcgnn_fuzz_check(s);
    }
});

fn tcgnn_fuzz_check(spec: &str) {
    use tcgnn::graph::spec::{MAX_NNZ, MAX_NODES, parse_rmat, parse_sbm};
    if let Some(rest) = spec.strip_prefix("rmat:") {
        if let Ok(r) = parse_rmat(spec, rest) {
            assert!((1u64 << r.scale) * r.edge_factor as u64 <= MAX_NNZ);
        }
    } else if let Some(rest) = spec.strip_prefix("sbm:") {
        if let Ok(s) = parse_sbm(spec, rest) {
            assert!(s.n as u64 <= MAX_NODES && s.classes >= 1 && s.classes <= s.n);
            assert!(s.avg_degree.is_finite() && s.avg_degree * s.n as f64 <= MAX_NNZ as f64);
        }
    }
}
