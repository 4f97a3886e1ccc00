//! `tcgnn train --task link`.

use crate::cli::train_cmd::TrainArgs;
use tcgnn::{Error, Result};

pub fn run(_a: &TrainArgs) -> Result<()> {
    Err(Error::Unsupported("--task link is not built yet".into()))
}
