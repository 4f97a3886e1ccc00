//! Matrix Market parser on arbitrary bytes: must return Ok or Err, never panic, and whatever
//! it accepts must survive translation to every tile format and back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = tcgnn::graph::mtx::parse_mtx(data, Path::new("fuzz.mtx")) {
        // Bound the work per input: the declared sizes are data-backed, but translations of a
        // huge empty matrix would still allocate per row.
        if g.n_rows() <= 1 << 16 {
            let s = tcgnn::format::Sgt::from_csr(&g, 8).unwrap();
            assert_eq!(s.to_csr().unwrap(), g);
            let m = tcgnn::format::MeBcrs::from_csr(&g, 8).unwrap();
            assert_eq!(m.to_csr().unwrap(), g);
        }
    }
});
