//! `tcgnn train --task graph`.

use crate::cli::train_cmd::TrainArgs;
use tcgnn::{Error, Result};

pub fn run(_a: &TrainArgs) -> Result<()> {
    Err(Error::Unsupported("--task graph is not built yet".into()))
}
