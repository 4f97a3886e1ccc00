//! Mini-batch training: each epoch is `steps` batches made by a sampler on CPU worker threads
//! ([`Prefetch`], ahead of the step, so the step never waits for a batch that could have been
//! made already), each trained with the trainer's parameters swapped into a batch model.
//!
//! Parameters and Adam's moments live in the trainer's full-graph model (which also evaluates,
//! exactly, on the full graph, and is what `--save` and `--checkpoint` write). The batch model
//! is, for GCN, SAGE and GIN without BatchNorm, one model built at a capacity and rebound to
//! every batch ([`BoundModel`]): the worker threads translate the batch (its matrix, the
//! transposes; [`PreparedBatch`]) and the step thread only pads it and copies it into the
//! model's buffers. Other models get a model built per batch, on the batch's subgraph with
//! its own buffers. Either way the batch model's own parameters and BatchNorm buffers are
//! swapped with the persistent ones (`std::mem::swap` of the
//! [`Param`](crate::nn::param::Param)s, no copy) for the step and swapped back after it.

use crate::gpu::timing::Spans;
use crate::nn::input::HostFeatures;
use crate::nn::param::Param;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::batch::{BatchSource, NodeData, TrainBatch};
use super::bound::{BoundModel, Capacity, can_rebind};
use super::device_batch::{DeviceBatches, Pending};
use super::device_neighbor::DeviceNeighbor;
use super::device_saint::DeviceSaint;
use super::prefetch::{Prefetch, PrefetchConfig};
use super::prepared::{PreparedBatch, PreparedFeatures};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::input::InputFeatures;
use crate::nn::models::{self, Model, ModelConfig};
use crate::ops::backend::Side;
use crate::ops::backend::cuda::CudaBackend;
use crate::ops::nn::{AdamHyper, Ops};
use crate::task::node::train::EpochSteps;

/// Where the time of the epochs so far went (seconds, summed over epochs).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct SampleTimes {
    pub epochs: usize,
    pub batches: usize,
    /// Worker time making batches (sampling, gathering node data), summed over the workers:
    /// overlapped with the steps.
    pub sample_s: f64,
    /// Time the step loop waited for a batch the workers had not finished.
    pub wait_s: f64,
    /// Building each batch's model (allocations, the subgraph's translation, the uploads of its
    /// graph and node data), or with a rebound model padding the batch and copying it in (plus
    /// the model's build when a batch outgrows it): the host-to-device transfer on the GPU.
    pub build_s: f64,
    /// Forward, loss, backward and Adam of every batch (on the GPU: enqueueing them, plus the
    /// wait for them when [`SampledTraining::sync_each_step`] is set).
    pub step_s: f64,
    /// Wall time of the training part of the epochs (no evaluation).
    pub wall_s: f64,
    pub sampled_edges: u64,
    pub batch_nodes: u64,
    /// Batches trained on a rebound model, and the builds of that model (the first and one per
    /// batch that outgrew its capacity).
    pub rebound_batches: usize,
    pub rebound_builds: usize,
    /// Rebound batches whose step was a replay of the recorded step.
    pub recorded_batches: usize,
    /// Rebound batches a worker had already padded to the model's capacity.
    pub padded_by_workers: usize,
}

impl SampleTimes {
    /// The share of the training time spent outside steps (waiting for a batch or building its
    /// model): with a step synchronised per batch, the GPU's idle time between steps.
    pub fn idle_fraction(&self) -> f64 {
        if self.wall_s > 0.0 { (1.0 - self.step_s / self.wall_s).max(0.0) } else { 0.0 }
    }
}

/// What one sampled run needs besides the trainer's model.
pub struct SampledTraining {
    source: Arc<BatchSource>,
    data: Arc<NodeData>,
    n_all: usize,
    steps: usize,
    prefetch: PrefetchConfig,
    cfg: ModelConfig,
    classes: usize,
    /// Wait for every step to finish before taking the next batch (for timing the split only).
    pub sync_each_step: bool,
    /// Train GCN, SAGE and GIN (without BatchNorm) on one model rebound per batch where the
    /// backend's kernels allow it (`false`: a model built per batch, as before).
    pub rebind: bool,
    /// Headroom of a rebound model's capacity over the batch that (re)builds it.
    pub growth: f64,
    /// Record the rebound model's step once and replay it per batch (GPU; `false`: eager).
    pub record: bool,
    /// Keep the whole dense feature matrix on the device and gather each batch's rows there
    /// (`false`, the default: copy the rows the workers gathered).
    pub features_on_gpu: bool,
    /// Epochs whose times (and GPU spans) are forgotten once they end: the first steps build
    /// the model, choose kernels and record the step (benchmarks; 0 in training).
    pub warmup_epochs: usize,
    /// Make the batches on the GPU ([`DeviceSaint`], [`DeviceNeighbor`]) instead of on CPU
    /// threads (the CUDA backend, GCN / SAGE / GIN on a rebound model, GraphSAINT normalised;
    /// dense features resident, sparse ones cut with the batch or made dense with
    /// `features_on_gpu`; fails with the reason otherwise).
    pub sample_on_gpu: bool,
    device: Option<Box<dyn DeviceBatches>>,
    /// Sparse features made dense once for the device (`features_on_gpu` with sparse features
    /// of at most [`DENSE_RESIDENT_MAX`] bytes dense): the batches then gather dense rows there.
    densified: Option<crate::tensor::Matrix>,
    /// Brackets every step on the device's clock (the GPU's idle time between steps: see
    /// [`Spans`]); `None`: not measured.
    pub spans: Option<Box<dyn Spans>>,
    /// The rebound model (a `BoundModel<B>` of the backend that trains).
    bound: Option<Box<dyn std::any::Any>>,
    /// Its capacity, for the workers to pad batches to (off the step's thread).
    capacity: Arc<Mutex<Option<Capacity>>>,
    pub times: SampleTimes,
    /// The batches of this and the following epochs, made ahead across epoch boundaries (the
    /// first batch of an epoch is made while the last one of the previous epoch trains), with
    /// the epoch the next batch belongs to.
    stream: Option<(Batches, usize)>,
}

/// A batch as the workers hand it over: made for a model per batch, or translated for the
/// rebound model.
enum Ready {
    Batch(Box<TrainBatch>),
    Prepared(Box<PreparedBatch>),
}

type Batches = Prefetch<(Result<Ready>, f64)>;

impl SampledTraining {
    /// `steps` batches per epoch from `source` over a graph of `n_all` nodes; models as `cfg`.
    pub fn new(
        source: BatchSource,
        data: NodeData,
        n_all: usize,
        steps: usize,
        prefetch: PrefetchConfig,
        cfg: ModelConfig,
        classes: usize,
    ) -> Result<Self> {
        if steps == 0 {
            return Err(Error::Unsupported("--steps-per-epoch must be at least 1".into()));
        }
        models::check(&cfg)?;
        if data.features.rows() != n_all || data.labels.len() != n_all {
            return Err(Error::Shape(format!(
                "sampled training over {n_all} nodes was given {} feature rows and {} labels (the batches gather them on the host)",
                data.features.rows(),
                data.labels.len()
            )));
        }
        Ok(SampledTraining {
            source: Arc::new(source),
            data: Arc::new(data),
            n_all,
            steps,
            prefetch,
            cfg,
            classes,
            sync_each_step: false,
            rebind: true,
            growth: 1.25,
            record: true,
            features_on_gpu: false,
            warmup_epochs: 0,
            sample_on_gpu: false,
            device: None,
            densified: None,
            spans: None,
            bound: None,
            capacity: Arc::default(),
            times: SampleTimes::default(),
            stream: None,
        })
    }

    /// Why the batches cannot be made on the GPU ([`SampledTraining::sample_on_gpu`]), or
    /// `None` if they can (the backend aside: the CUDA one is needed too).
    pub fn gpu_sampling_unsupported(&self) -> Option<String> {
        if !(self.rebind && can_rebind(&self.cfg)) {
            return Some(format!("{} with these options trains a model built per batch", self.cfg.model));
        }
        match &*self.source {
            BatchSource::Saint { sampler, aggregation } => super::device_saint::unsupported(sampler, aggregation.as_ref()),
            BatchSource::Neighbor(sampler) => super::device_neighbor::unsupported(sampler, self.cfg.model),
            // The device sampler makes per-layer blocks with the full graph's normalisation, and
            // the union normalised by itself (`--neighbor-union`); not the union with the full
            // graph's normalisation (fan-outs other than one per layer).
            BatchSource::NeighborNormalized { sampler, per_layer: true, .. } => {
                super::device_neighbor::unsupported_per_layer(sampler, self.cfg.model)
            }
            BatchSource::NeighborNormalized { per_layer: false, .. } => Some(
                "neighbour batches on the union with the full graph's normalisation (fan-outs not one per layer) are made by the CPU workers".into(),
            ),
        }
    }

    /// Batch `i` of `epoch`, made here (what the workers make: for benchmarks of the kernels on
    /// sampled batches).
    pub fn batch(&self, epoch: u32, i: u32) -> Result<TrainBatch> {
        self.source.make(&self.data, self.n_all, epoch, i)
    }

    /// Batches per epoch.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// One step on `batch` with `net`'s parameters, on a model built for it; returns the
    /// batch's statistics (read later, so the GPU is not waited for per batch).
    fn step<B: Ops + 'static>(&mut self, b: &B, net: &mut dyn Model<B>, hyper: &AdamHyper, batch: &TrainBatch) -> Result<B::Stats> {
        let t0 = Instant::now();
        let n = batch.nodes.len();
        let mut model = build_batch_model(b, batch, self.classes, &self.cfg)?;
        let mut input = InputFeatures::for_model(b, &batch.features, &self.cfg)?;
        let labels = b.labels(&batch.labels, &batch.mask_bits)?;
        let mut dlogits = b.matrix(n, self.classes)?;
        let mut stats = b.stats()?;
        let mut scale = match &batch.loss_scale {
            Some(w) => {
                let diag = Csr::new(n, n, (0..=n as u32).collect(), (0..n as u32).collect(), w.clone())?;
                let g = b.graph(diag)?;
                let v = b.graph_values(&g, Side::Forward)?;
                Some((g, v, b.matrix(n, self.classes)?))
            }
            None => None,
        };
        let t1 = Instant::now();
        let scale = scale.as_mut().map(|(g, v, m)| (&*g, &*v, m));
        let step =
            Step { input: &mut input, labels: &labels, dlogits: &mut dlogits, scale, loss_nodes: batch.loss_nodes(), stats: &mut stats };
        self.span(|s| s.begin())?;
        train_step(b, net, model.as_mut(), hyper, step, self.sync_each_step)?;
        self.span(|s| s.end())?;
        self.count(t0, t1, batch.sampled_edges, n);
        Ok(stats)
    }

    /// [`SampledTraining::step`] on the rebound model: `p` is padded and copied into it (the
    /// model is built, or rebuilt larger, when `p` does not fit).
    fn step_bound<B: Ops + 'static>(&mut self, b: &B, net: &mut dyn Model<B>, hyper: &AdamHyper, p: &PreparedBatch) -> Result<B::Stats> {
        let t0 = Instant::now();
        let fits = self.bound.as_ref().and_then(|m| m.downcast_ref::<BoundModel<B>>()).is_some_and(|m| m.capacity().holds(p));
        if !fits {
            let (old, rebuilds) = match self.bound.take().and_then(|m| m.downcast::<BoundModel<B>>().ok()) {
                Some(m) => (m.capacity(), m.rebuilds + 1),
                None => (Capacity::default(), 0),
            };
            let resident = self.resident();
            let sparse = resident.is_none() && matches!(p.features, PreparedFeatures::Sparse(_));
            // With resident features the batch carries node ids only (no feature columns).
            let cols = resident.map_or(p.features.cols(), |m| m.cols);
            let mut m = BoundModel::<B>::with_resident(b, old.grown_for(p, self.growth), cols, sparse, resident, self.classes, &self.cfg)?;
            m.rebuilds = rebuilds;
            *self.capacity.lock().expect("capacity lock poisoned") = Some(m.capacity());
            self.bound = Some(Box::new(m));
            self.times.rebound_builds += 1;
        }
        let m = self.bound.as_mut().and_then(|m| m.downcast_mut::<BoundModel<B>>()).expect("built above");
        self.times.padded_by_workers += usize::from(p.padded.as_ref().is_some_and(|x| x.capacity == m.capacity()));
        m.bind(b, p)?;
        let mut stats = b.stats()?;
        let t1 = Instant::now();
        m.record = self.record;
        // The bracket holds the step's kernels only: the batch's copies, queued above, count
        // as idle (the stricter measure).
        let spans = self.spans.as_deref();
        spans.map_or(Ok(()), |s| s.begin())?;
        m.step(b, net, hyper, &mut stats, self.sync_each_step)?;
        spans.map_or(Ok(()), |s| s.end())?;
        if let Some(e) = m.record_error.take() {
            eprintln!("the sampled step could not be recorded ({e}); it runs eagerly");
        }
        self.times.recorded_batches += usize::from(m.is_recorded());
        self.count(t0, t1, p.sampled_edges, p.n);
        self.times.rebound_batches += 1;
        Ok(stats)
    }

    /// The dense features a rebound model keeps on the device (`features_on_gpu`): the dataset's
    /// own, or the sparse ones made dense; `None`: batches bring their rows.
    fn resident(&self) -> Option<&crate::tensor::Matrix> {
        match (&self.data.features, self.features_on_gpu) {
            (HostFeatures::Dense(m), true) => Some(m),
            (HostFeatures::Sparse(_), true) => self.densified.as_ref(),
            _ => None,
        }
    }

    fn span(&self, f: impl FnOnce(&dyn Spans) -> Result<()>) -> Result<()> {
        self.spans.as_deref().map_or(Ok(()), f)
    }

    fn count(&mut self, t0: Instant, t1: Instant, sampled_edges: usize, nodes: usize) {
        self.times.build_s += (t1 - t0).as_secs_f64();
        self.times.step_s += t1.elapsed().as_secs_f64();
        self.times.sampled_edges += sampled_edges as u64;
        self.times.batch_nodes += nodes as u64;
        self.times.batches += 1;
    }
}

/// The largest sparse feature matrix made dense for the device (bytes dense): musae_facebook's
/// 22 k x 4714 is 0.4 GB.
pub const DENSE_RESIDENT_MAX: u64 = 4 << 30;

/// What one step reads and writes besides the model.
pub struct Step<'a, B: Ops> {
    pub input: &'a mut InputFeatures<B>,
    pub labels: &'a B::Labels,
    pub dlogits: &'a mut B::Mat,
    /// GraphSAINT's weighted loss: diag(w) with its values, and the weighted gradient.
    pub scale: Option<(&'a B::Graph, &'a B::Edges, &'a mut B::Mat)>,
    pub loss_nodes: usize,
    pub stats: &'a mut B::Stats,
}

/// Forward, loss, backward and Adam of `model` with `net`'s parameters swapped in (and back,
/// even if the step fails: the trainer must not keep the batch model's).
pub fn train_step<B: Ops>(
    b: &B,
    net: &mut dyn Model<B>,
    model: &mut dyn Model<B>,
    hyper: &AdamHyper,
    s: Step<'_, B>,
    sync: bool,
) -> Result<()> {
    swap_state(net, model)?;
    let stepped = enqueue_step(b, model, hyper, s).and_then(|()| if sync { b.synchronize() } else { Ok(()) });
    swap_state(net, model)?;
    stepped
}

/// The work of one step on `model`'s own parameters (queued only: recordable).
pub fn enqueue_step<B: Ops>(b: &B, model: &mut dyn Model<B>, hyper: &AdamHyper, s: Step<'_, B>) -> Result<()> {
    b.begin_step()?;
    let logits = model.forward(b, s.input, true)?;
    let inv = 1.0 / s.loss_nodes.max(1) as f32;
    b.cross_entropy(logits, s.labels, inv, s.dlogits, s.stats)?;
    let d = match s.scale {
        // Weighted loss: its gradient is diag(w) times the mean's (one SpMM, no new op).
        Some((g, v, weighted)) => {
            b.spmm(g, Side::Forward, v, s.dlogits, weighted)?;
            weighted
        }
        None => s.dlogits,
    };
    model.backward(b, s.input, d)?;
    Param::adam_all(b, model.params().into_iter().map(|(_, p)| p), hyper)
}

impl SampledTraining {
    /// Sparse features made dense for the device, where they fit [`DENSE_RESIDENT_MAX`].
    fn densify(&mut self) {
        if let (HostFeatures::Sparse(_), None) = (&self.data.features, &self.densified) {
            let bytes = 4 * self.data.features.rows() as u64 * self.data.features.cols() as u64;
            if bytes <= DENSE_RESIDENT_MAX {
                self.densified = Some(self.data.features.to_dense());
            }
        }
    }

    /// Queues device batch `i` of `epoch`, bracketed as GPU work.
    fn enqueue_device(&mut self, epoch: u32, i: u32) -> Result<Pending> {
        let spans = self.spans.as_deref();
        spans.map_or(Ok(()), |s| s.begin())?;
        let p = self.device.as_mut().expect("made before").enqueue(epoch, i)?;
        spans.map_or(Ok(()), |s| s.end())?;
        Ok(p)
    }

    /// One epoch with the batches made on the GPU ([`DeviceBatches`]): sample, bind into the
    /// rebound model, step; nothing of a batch crosses the bus but its four sizes, which the
    /// host reads while the GPU makes the next batch.
    fn train_epoch_device<B: Ops + 'static>(&mut self, b: &Arc<B>, net: &mut dyn Model<B>, hyper: &AdamHyper, epoch: usize) -> Result<f64> {
        let t0 = Instant::now();
        let cuda = (&**b as &dyn std::any::Any)
            .downcast_ref::<CudaBackend>()
            .ok_or_else(|| Error::Unsupported("sampling on the GPU needs the GPU backend (--sample-on cpu)".into()))?;
        if !can_rebind(&self.cfg) {
            return Err(Error::Unsupported(format!(
                "sampling on the GPU trains a rebound model: {} with these options is built per batch (--sample-on cpu)",
                self.cfg.model
            )));
        }
        if self.device.is_none() {
            // Sparse features stay sparse (the device cuts each batch's rows and transpose)
            // unless they were asked for dense on the device.
            let sparse = match (&self.data.features, self.features_on_gpu) {
                (HostFeatures::Sparse(x), false) => Some(x),
                _ => None,
            };
            let device = match &*self.source {
                BatchSource::Saint { sampler, aggregation } => {
                    Box::new(DeviceSaint::new(cuda.gpu(), sampler, aggregation.as_ref(), &self.data, sparse.is_some())?)
                        as Box<dyn DeviceBatches>
                }
                BatchSource::Neighbor(sampler) => {
                    Box::new(DeviceNeighbor::new(cuda.gpu(), sampler, self.cfg.model, &self.data.labels, sparse, None)?)
                }
                BatchSource::NeighborNormalized { sampler, aggregation, per_layer: true } => {
                    Box::new(DeviceNeighbor::new(cuda.gpu(), sampler, self.cfg.model, &self.data.labels, sparse, Some(aggregation))?)
                }
                BatchSource::NeighborNormalized { per_layer: false, .. } => {
                    return Err(Error::Unsupported(self.gpu_sampling_unsupported().unwrap_or_default()));
                }
            };
            self.features_on_gpu = sparse.is_none();
            if self.features_on_gpu {
                self.densify();
                if self.resident().is_none() {
                    return Err(Error::Unsupported(
                        "sampling on the GPU: the sparse features are too large to keep dense on the device (--features-on host)".into(),
                    ));
                }
            }
            self.device = Some(device);
        }
        let epoch_u32 = u32::try_from(epoch).map_err(|_| Error::Unsupported(format!("epoch {epoch} is past 2^32")))?;
        self.span(|s| s.new_epoch())?;
        let mut stats = Vec::with_capacity(self.steps);
        // Batch i + 1's kernels are queued before batch i is bound and stepped on, so the GPU
        // has work while the host reads batch i + 1's sizes (the only wait of the loop).
        let mut next = Some(self.enqueue_device(epoch_u32, 0)?);
        for i in 0..self.steps {
            let t = Instant::now();
            let device = self.device.as_mut().expect("made above");
            let batch = device.wait(next.take().expect("queued"))?;
            let later = device.later_matrices();
            if i + 1 < self.steps {
                next = Some(self.enqueue_device(epoch_u32, i as u32 + 1)?);
            }
            self.times.sample_s += t.elapsed().as_secs_f64();
            let t0 = Instant::now();
            let fits = self
                .bound
                .as_ref()
                .and_then(|m| m.downcast_ref::<BoundModel<B>>())
                .is_some_and(|m| m.capacity().later == later && m.capacity().holds_sizes(batch.n, batch.nnz, batch.feature_nnz));
            if !fits {
                let (old, rebuilds) = match self.bound.take().and_then(|m| m.downcast::<BoundModel<B>>().ok()) {
                    Some(m) => (m.capacity(), m.rebuilds + 1),
                    None => (Capacity::default(), 0),
                };
                let resident = self.resident();
                let sparse = resident.is_none();
                let cols = resident.map_or(self.data.features.cols(), |m| m.cols);
                let capacity = Capacity { later, ..old.grown_to(batch.n, batch.nnz, batch.feature_nnz, self.growth) };
                let mut m = BoundModel::<B>::with_resident(&**b, capacity, cols, sparse, resident, self.classes, &self.cfg)?;
                m.rebuilds = rebuilds;
                self.bound = Some(Box::new(m));
                self.times.rebound_builds += 1;
            }
            let m = self.bound.as_mut().and_then(|m| m.downcast_mut::<BoundModel<B>>()).expect("built above");
            let mut out = b.stats()?;
            m.record = self.record;
            let spans = self.spans.as_deref();
            spans.map_or(Ok(()), |s| s.begin())?;
            let on_cuda =
                (m as &mut dyn std::any::Any).downcast_mut::<BoundModel<CudaBackend>>().expect("the backend is CUDA (checked above)");
            self.device.as_ref().expect("made above").bind(on_cuda, &batch)?;
            let t1 = Instant::now();
            m.step(&**b, net, hyper, &mut out, self.sync_each_step)?;
            spans.map_or(Ok(()), |s| s.end())?;
            if let Some(e) = m.record_error.take() {
                eprintln!("the sampled step could not be recorded ({e}); it runs eagerly");
            }
            self.times.recorded_batches += usize::from(m.is_recorded());
            self.times.rebound_batches += 1;
            self.count(t0, t1, batch.sampled_edges, batch.n);
            stats.push((out, batch.loss_nodes.max(1) as f64));
        }
        self.end_epoch(&**b, t0, &stats)
    }
}

impl<B: Ops + 'static> EpochSteps<B> for SampledTraining {
    fn train_epoch(&mut self, b: &Arc<B>, net: &mut dyn Model<B>, hyper: &AdamHyper, epoch: usize) -> Result<f64> {
        let loss = match self.sample_on_gpu {
            true => self.train_epoch_device(b, net, hyper, epoch)?,
            false => self.train_epoch_host(b, net, hyper, epoch)?,
        };
        if self.warmup_epochs > 0 {
            self.warmup_epochs -= 1;
            self.times = SampleTimes::default();
            self.span(|s| s.clear())?;
        }
        Ok(loss)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn summary(&self) -> String {
        self.summary_text()
    }
}

impl SampledTraining {
    /// One epoch with the batches made by the CPU workers.
    fn train_epoch_host<B: Ops + 'static>(&mut self, b: &Arc<B>, net: &mut dyn Model<B>, hyper: &AdamHyper, epoch: usize) -> Result<f64> {
        let t0 = Instant::now();
        if self.stream.as_ref().is_none_or(|(_, next)| *next != epoch) {
            // A new run (or one resumed elsewhere): batches from this epoch on, as far as u32 epochs go.
            let (source, n_all, steps) = (Arc::clone(&self.source), self.n_all, self.steps);
            // The workers translate batches for the rebound model where it applies.
            let prepare = (self.rebind && can_rebind(&self.cfg) && b.can_bind()).then_some(self.cfg.model);
            // Sparse features small enough go to the device dense (a batch's dense rows are
            // gathered there; no sparse gather, transpose and copy of them per batch).
            if self.features_on_gpu && prepare.is_some() {
                self.densify();
            }
            // A rebound model with the features resident gathers the rows itself: the workers
            // hand over node ids only (their copy of the node data has no feature columns).
            let data = match prepare.is_some() && self.resident().is_some() {
                true => Arc::new(NodeData {
                    features: HostFeatures::Dense(crate::tensor::Matrix::zeros(n_all, 0)),
                    labels: self.data.labels.clone(),
                    mask_bits: self.data.mask_bits.clone(),
                    n_train: self.data.n_train,
                }),
                false => Arc::clone(&self.data),
            };
            let capacity = Arc::clone(&self.capacity);
            let first = u32::try_from(epoch).map_err(|_| Error::Unsupported(format!("epoch {epoch} is past 2^32")))? as usize;
            let total = (u32::MAX as usize - first).saturating_mul(steps);
            let batches = Prefetch::new(total, self.prefetch, move |k| {
                let t = Instant::now();
                let batch = source.make(&data, n_all, (first + k / steps) as u32, (k % steps) as u32);
                let ready = batch.and_then(|batch| match prepare {
                    Some(model) => {
                        let mut p = PreparedBatch::new(batch, model)?;
                        let known = *capacity.lock().expect("capacity lock poisoned");
                        if let Some(c) = known {
                            p.pad_for(c)?;
                        }
                        Ok(Ready::Prepared(Box::new(p)))
                    }
                    None => Ok(Ready::Batch(Box::new(batch))),
                });
                (ready, t.elapsed().as_secs_f64())
            })?;
            self.stream = Some((batches, epoch));
        }
        let (mut batches, _) = self.stream.take().expect("made above");
        self.span(|s| s.new_epoch())?;
        let waited_before = batches.waited();
        let mut stats = Vec::with_capacity(self.steps);
        for _ in 0..self.steps {
            let (batch, seconds) = batches.next().expect("batches for every epoch up to 2^32");
            self.times.sample_s += seconds;
            // With the divisor of the loss read back (the rebound step writes the sum).
            stats.push(match batch? {
                Ready::Batch(batch) => (self.step(&**b, net, hyper, &batch)?, 1.0),
                Ready::Prepared(p) => (self.step_bound(&**b, net, hyper, &p)?, p.loss_nodes.max(1) as f64),
            });
        }
        self.times.wait_s += (batches.waited() - waited_before).as_secs_f64();
        self.stream = Some((batches, epoch + 1));
        self.end_epoch(&**b, t0, &stats)
    }

    /// Counts the epoch begun at `t0` and returns its mean loss over the batches (each batch's
    /// statistics with the divisor of its loss).
    fn end_epoch<B: Ops>(&mut self, b: &B, t0: Instant, stats: &[(B::Stats, f64)]) -> Result<f64> {
        // The statistics are read before the clock stops: reading them waits for the epoch's
        // last step, so an epoch whose GPU work runs behind the host is timed to its end.
        let mut loss = 0.0;
        for (s, n) in stats {
            loss += b.read_stats(s)?.loss / n;
        }
        self.times.wall_s += t0.elapsed().as_secs_f64();
        self.times.epochs += 1;
        Ok(loss / stats.len().max(1) as f64)
    }

    fn summary_text(&self) -> String {
        let t = &self.times;
        let per = |s: f64| 1e3 * s / t.epochs.max(1) as f64;
        let sampling = match self.sample_on_gpu {
            true => format!("sampling on the GPU {:.1} ms, the host waiting for each batch's sizes", per(t.sample_s)),
            false => format!("sampling {:.1} ms of worker time, overlapped", per(t.sample_s)),
        };
        format!(
            "sampled training: per epoch {:.1} ms ({} batches: step {:.1} ms, model build + {} {:.1} ms, waiting for the sampler {:.1} ms; \
             {sampling}); {:.0} nodes and {:.0} sampled edges per batch, {:.2} M sampled edges/s",
            per(t.wall_s),
            t.batches / t.epochs.max(1),
            per(t.step_s),
            if self.sample_on_gpu { "bind" } else { "upload" },
            per(t.build_s),
            per(t.wait_s),
            t.batch_nodes as f64 / t.batches.max(1) as f64,
            t.sampled_edges as f64 / t.batches.max(1) as f64,
            t.sampled_edges as f64 / t.wall_s.max(1e-12) / 1e6,
        ) + &match self.spans.as_deref().map(|s| s.totals()) {
            Some(Ok((busy, span))) if span > 0.0 => {
                format!("; GPU idle between steps {:.1}% of the epochs (events)", 100.0 * (1.0 - busy / span).max(0.0))
            }
            _ => String::new(),
        } + &if t.rebound_batches > 0 {
            format!(
                "; {} of {} batches on one rebound model ({} builds, {} steps replayed, {} padded by the workers)",
                t.rebound_batches, t.batches, t.rebound_builds, t.recorded_batches, t.padded_by_workers
            )
        } else {
            String::new()
        }
    }
}

/// The model of `batch`: on its aggregation with the GraphSAINT weights when it has one (GCN,
/// SAGE, GIN), else on its subgraph, normalised by the model as on a full graph.
pub fn build_batch_model<B: Ops + 'static>(b: &B, batch: &TrainBatch, classes: usize, cfg: &ModelConfig) -> Result<Box<dyn Model<B>>> {
    let (n, f) = (batch.nodes.len(), batch.features.cols());
    if let Some(adj) = &batch.adjacency {
        // The weighted aggregation is the model's matrix, used as it is (`build_on`); per-layer
        // blocks give each layer its own.
        debug_assert_eq!(adj.n_rows(), n);
        if models::model_info(cfg.model)?.aggregation.is_some() {
            let mats = std::iter::once(adj).chain(&batch.later).cloned().collect();
            return Ok(models::build_on_matrices(b, mats, f, classes, cfg)?);
        }
    }
    models::build(b, &batch.graph, f, classes, cfg)
}

// Moved to nn (the link task's sampled loop swaps too); the old path stays.
pub use crate::nn::models::swap_state;
