//! Model files (safetensors + tcgnn metadata) on arbitrary bytes: reading gives Ok or Err,
//! never a panic or an allocation the bytes do not back; an accepted file's declared sizes are
//! held by its tensors, so predicting with it on a small graph stays small.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.safetensors");
    if let Ok(m) = tcgnn::task::saved::SavedModel::parse(data, path) {
        let held: usize = m.weights.iter().map(|(_, t)| t.data.len()).sum();
        assert!(m.meta.features.min(m.meta.classes) <= held.max(1));
    }
});
