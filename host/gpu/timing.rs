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

/// Device time of bracketed work against the time the brackets span, per epoch: the GPU's idle
/// time between training steps, measured on the GPU's own clock with the host running ahead
/// (no wait per step). Each step is bracketed by two events; an epoch spans its first step's
/// start to its last step's end, and what the brackets do not cover is idle.
pub trait Spans {
    /// The steps bracketed from here on belong to a new epoch.
    fn new_epoch(&self) -> Result<()>;
    /// Before a step's first copy or launch.
    fn begin(&self) -> Result<()>;
    /// After its last.
    fn end(&self) -> Result<()>;
    /// Milliseconds the steps took and the epochs spanned, summed over epochs (waits for the
    /// GPU).
    fn totals(&self) -> Result<(f64, f64)>;
    /// Forgets the brackets so far (warm-up epochs).
    fn clear(&self) -> Result<()>;
}

type Bracket = (cudarc::driver::CudaEvent, cudarc::driver::CudaEvent);

/// [`Spans`] on the GPU's stream.
pub struct StepSpans {
    gpu: std::sync::Arc<Gpu>,
    epochs: std::sync::Mutex<(Vec<Vec<Bracket>>, Option<cudarc::driver::CudaEvent>)>,
}

impl StepSpans {
    pub fn new(gpu: std::sync::Arc<Gpu>) -> Self {
        StepSpans { gpu, epochs: std::sync::Mutex::default() }
    }

    fn event(&self) -> Result<cudarc::driver::CudaEvent> {
        let e = self.gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| Error::cuda("cuEventCreate", e))?;
        e.record(&self.gpu.stream).map_err(|e| Error::cuda("cuEventRecord", e))?;
        Ok(e)
    }
}

impl Spans for StepSpans {
    fn new_epoch(&self) -> Result<()> {
        self.epochs.lock().expect("spans poisoned").0.push(Vec::new());
        Ok(())
    }
    fn begin(&self) -> Result<()> {
        let e = self.event()?;
        self.epochs.lock().expect("spans poisoned").1 = Some(e);
        Ok(())
    }
    fn end(&self) -> Result<()> {
        let e = self.event()?;
        let mut g = self.epochs.lock().expect("spans poisoned");
        let start = g.1.take().ok_or_else(|| Error::Unsupported("a step span ended that did not begin".into()))?;
        if g.0.is_empty() {
            g.0.push(Vec::new());
        }
        g.0.last_mut().expect("pushed above").push((start, e));
        Ok(())
    }
    fn clear(&self) -> Result<()> {
        self.epochs.lock().expect("spans poisoned").0.clear();
        Ok(())
    }
    fn totals(&self) -> Result<(f64, f64)> {
        self.gpu.synchronize()?;
        let g = self.epochs.lock().expect("spans poisoned");
        let ms = |a: &cudarc::driver::CudaEvent, b: &cudarc::driver::CudaEvent| {
            a.elapsed_ms(b).map(f64::from).map_err(|e| Error::cuda("cuEventElapsedTime", e))
        };
        let (mut busy, mut span) = (0.0, 0.0);
        for steps in g.0.iter().filter(|s| !s.is_empty()) {
            for (a, b) in steps {
                busy += ms(a, b)?;
            }
            span += ms(&steps[0].0, &steps[steps.len() - 1].1)?;
        }
        Ok((busy, span))
    }
}
