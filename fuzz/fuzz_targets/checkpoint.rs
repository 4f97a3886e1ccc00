//! Checkpoints on arbitrary bytes: Ok or Err, never a panic; an accepted checkpoint's settings
//! pass the same checks as the command line's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = tcgnn::task::node::checkpoint::Checkpoint::parse(data, Path::new("fuzz/checkpoint.safetensors")) {
        assert!(c.train.problem().is_none());
        assert_eq!(c.history.len(), c.meta.epoch);
        assert!(c.steps as usize >= c.meta.epoch);
    }
});
