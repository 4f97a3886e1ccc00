//! Edge-list parser on arbitrary bytes: Ok or Err, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use tcgnn::graph::edgelist::{EdgeListOptions, parse_edgelist};

fuzz_target!(|data: &[u8]| {
    // First byte: bit 0 gives a node count (the byte itself), bit 1 skips the first line.
    let (opts, body) = match data.split_first() {
        Some((&b, rest)) => {
            let n_nodes = (b & 1 == 1).then_some(b as usize);
            (EdgeListOptions { n_nodes, skip_first_line: b & 2 == 2 }, rest)
        }
        None => (EdgeListOptions::default(), data),
    };
    let _ = parse_edgelist(body, Path::new("fuzz.txt"), opts);
});
