//! GPU event timing: warm-up, then each repetition bracketed by its own pair of events, so a
//! median (not a mean that one hiccup can move) is reported. The events are recorded on the
//! GPU's stream ([`Gpu::stream`]), where all the work being timed is queued.

use cudarc::driver::sys::CUevent_flags;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::Gpu;

#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub reps: usize,
}

/// Time `f` (which only enqueues work on the GPU's stream) `reps` times after `warmup` runs.
pub fn time_gpu(gpu: &Gpu, warmup: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Timing> {
    let reps = reps.max(1);
    for _ in 0..warmup {
        f()?;
    }
    let ev = || gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| Error::cuda("cuEventCreate", e));
    let mut pairs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (start, end) = (ev()?, ev()?);
        start.record(&gpu.stream).map_err(|e| Error::cuda("cuEventRecord", e))?;
        f()?;
        end.record(&gpu.stream).map_err(|e| Error::cuda("cuEventRecord", e))?;
        pairs.push((start, end));
    }
    gpu.synchronize()?;
    let mut ms: Vec<f64> = pairs
        .iter()
        .map(|(s, e)| s.elapsed_ms(e).map(f64::from).map_err(|e| Error::cuda("cuEventElapsedTime", e)))
        .collect::<Result<_>>()?;
    ms.sort_by(f64::total_cmp);
    Ok(Timing { median_ms: ms[ms.len() / 2], min_ms: ms[0], max_ms: ms[ms.len() - 1], reps })
}
