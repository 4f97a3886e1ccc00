//! .npz reader on arbitrary bytes: Ok or Err, never a panic or a huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = tcgnn::graph::npz::parse_npz(std::io::Cursor::new(data), Path::new("fuzz.npz"));
});
