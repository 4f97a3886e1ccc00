//! `.tcg` reader on arbitrary bytes: Ok or Err, never a panic or a huge allocation; whatever it
//! accepts is a valid CSR of finite values that writes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = tcgnn::graph::tcg::parse_tcg(data, data.len() as u64, Path::new("fuzz.tcg")) {
        assert!(g.values().iter().all(|v| v.is_finite()));
        let p = std::env::temp_dir().join(format!("fuzz-tcg-{}.tcg", std::process::id()));
        tcgnn::graph::tcg::write_tcg(&p, &g).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), data);
    }
});
