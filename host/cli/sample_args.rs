//! `tcgnn train --sampler ...`: mini-batch training options, and the sampler they describe.
//!
//! Defaults are one setting per sampler for every graph, as a PyG user would write them
//! (measured on cora and citeseer, `bench/NOTES.md` "Sampled training"); an epoch draws about
//! as many nodes as the graph has (GraphSAINT) or visits every train node once (neighbour).

use std::sync::Arc;

use tcgnn::graph::Csr;
use tcgnn::nn::backend::TRAIN_BIT;
use tcgnn::sample::aggregation::Aggregation;
use tcgnn::sample::batch::{BatchSource, NodeData};
use tcgnn::sample::{NeighborConfig, NeighborSampler, PrefetchConfig, SaintConfig, SaintKind, SaintSampler, SampledTraining};
use tcgnn::task::node::Dataset;
use tcgnn::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
pub enum SamplerKind {
    /// GraphSAINT random walks: --batch-size roots, --walk-length steps each.
    SaintRw,
    /// GraphSAINT nodes: --batch-size draws, P(v) ∝ degree.
    SaintNode,
    /// GraphSAINT edges: --batch-size draws, P(u, v) ∝ 1/deg u + 1/deg v.
    SaintEdge,
    /// Neighbour sampling (GraphSAGE, PyG's NeighborLoader): --batch-size train nodes, --fanout per hop.
    Neighbor,
}

#[derive(clap::Args, Clone, Debug, Default)]
pub struct SampleArgs {
    /// Train on sampled subgraphs instead of the full graph (evaluation stays exact, on the full
    /// graph). --task link takes neighbor: batches of training edges plus negatives, blocks
    /// around their end points (PyG's LinkNeighborLoader).
    #[arg(long, value_enum)]
    pub sampler: Option<SamplerKind>,
    /// Roots (saint-rw), node draws (saint-node), edge draws (saint-edge) or train nodes
    /// (neighbor) per batch; with --task link, seed edges per batch. Default: max(1000, N/20)
    /// roots, 4000, 500, 512 (as bench/pyg/sample.py); --task link 512.
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Steps of each random walk (saint-rw).
    #[arg(long, default_value_t = 2)]
    pub walk_length: usize,
    /// Neighbours per node per hop from the train nodes (--task link: the seed edges' end
    /// points) outwards, -1 = all (neighbor; default 15,10 for two layers, else 10 per layer;
    /// --task link 10 per layer, one hop per layer).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub fanout: Option<Vec<i32>>,
    /// Neighbour sampling: run every layer on the union of the hops' edges, normalised as the
    /// model normalises that subgraph (the only kind before issue 45). Default: layer l on hop l's block alone with the full graph's
    /// normalisation (GCN, SAGE, GIN; the union where --batch-norm or the hops differ from the
    /// layers).
    #[arg(long)]
    pub neighbor_union: bool,
    /// Batches per epoch. Default: GraphSAINT, enough to draw about N nodes (N / the mean
    /// distinct nodes of 5 probe batches, at least 1); neighbor, every train node once.
    #[arg(long)]
    pub steps_per_epoch: Option<usize>,
    /// GraphSAINT normalisation: pre-sample until every node was drawn C times on average
    /// (PyG's sample_coverage); 0 = none (mean loss over the batch, the model's own
    /// normalisation of the subgraph).
    #[arg(long, default_value_t = 50)]
    pub saint_coverage: u32,
    /// CPU threads making batches ahead of the step (default: the cores less two, 2 to 12).
    #[arg(long)]
    pub sample_workers: Option<usize>,
    /// Build a model per batch instead of rebinding one model (GCN, SAGE, GIN without
    /// BatchNorm on the CPU or the GPU's CUDA-core kernels are rebound by default).
    #[arg(long)]
    pub build_per_batch: bool,
    /// Run every step of the rebound model eagerly instead of replaying a recording of it (GPU).
    #[arg(long)]
    pub eager_steps: bool,
    /// Where the rebound model reads a batch's dense feature rows from: `host` copies the rows
    /// the sample workers gathered; `gpu` keeps the whole feature matrix on the GPU and gathers
    /// each batch's rows there by node id (a batch then carries 4 bytes a node, and the workers
    /// gather nothing; sparse features up to 4 GiB dense go there dense, so their input dropout
    /// draws differ from the sparse path's). Default on a GPU: gpu for dense features; sparse
    /// ones stay sparse where the GPU makes the batches and go dense (up to 4 GiB) for neighbour
    /// batches made by the CPU workers; else host.
    #[arg(long, value_enum, default_value = "auto")]
    pub features_on: FeaturesOn,
    /// Where batches are made: `gpu` draws, induces and lays out each batch on the GPU from a
    /// resident copy of the graph (the same batches as the CPU's, bit for bit; GCN / SAGE / GIN
    /// without --batch-norm; GraphSAINT normalised on a symmetric graph, dense features on the
    /// GPU and sparse ones cut with the batch; neighbour sampling likewise); `cpu` on worker
    /// threads overlapped with the step. Default: gpu where it applies
    /// on a GPU, else cpu.
    #[arg(long, value_enum, default_value = "auto")]
    pub sample_on: SampleOn,
    /// How validation and test accuracy are computed: `full` runs the whole model on the whole
    /// graph (fastest where it fits); `layerwise` runs one layer at a time over node batches
    /// (PyG's `inference`: exact, and needs only one layer over the graph; GCN, SAGE and GIN
    /// without --batch-norm, --precision f32). Default: full where the full-graph model fits
    /// the device's memory, else layerwise.
    #[arg(long, value_enum)]
    pub inference: Option<Inference>,
    /// Nonzeros of the model's matrix per layer-wise inference batch (its rows and the rows they
    /// read make one batch; default 2^20).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 40))]
    pub inference_batch_edges: Option<u64>,
}

/// `--inference`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Inference {
    Full,
    Layerwise,
}

/// GraphSAINT random walks' default roots per batch: at least 1000, and a twentieth of the
/// nodes on larger graphs. The sampled normalisation (C_v, C_{v,u}) is an estimate from the
/// batches; with few roots each node keeps few of its neighbours and GCN's estimate is noisy
/// (measured over 5 seeds in bench/NOTES.md, "sampled vs full-graph accuracy").
pub fn default_walk_roots(n_nodes: usize) -> usize {
    (n_nodes / 20).max(1000)
}

impl SampleArgs {
    fn walk_roots(&self, n_nodes: usize) -> usize {
        self.batch_size.unwrap_or_else(|| default_walk_roots(n_nodes))
    }

    /// Sampler options given without --sampler would be silently ignored: refuse them.
    pub fn check_used(&self) -> Result<()> {
        let given = [
            ("--batch-size", self.batch_size.is_some()),
            ("--fanout", self.fanout.is_some()),
            ("--neighbor-union", self.neighbor_union),
            ("--steps-per-epoch", self.steps_per_epoch.is_some()),
            ("--inference", self.inference.is_some()),
            ("--inference-batch-edges", self.inference_batch_edges.is_some()),
            ("--sample-on", self.sample_on != SampleOn::Auto),
        ];
        if self.neighbor_union && self.sampler.is_some_and(|k| k != SamplerKind::Neighbor) {
            return Err(Error::Unsupported("--neighbor-union applies to --sampler neighbor".into()));
        }
        match given.iter().find(|g| g.1) {
            Some((flag, _)) if self.sampler.is_none() => {
                Err(Error::Unsupported(format!("{flag} applies to sampled training: add --sampler")))
            }
            _ => Ok(()),
        }
    }

    /// The mini-batch trainer these options describe for `data` and model `cfg`, or `None`
    /// without --sampler. `seed` seeds the batches.
    pub fn training(&self, data: &Dataset, cfg: &tcgnn::nn::ModelConfig, seed: u64) -> Result<Option<SampledTraining>> {
        let Some(kind) = self.sampler else {
            return Ok(None);
        };
        let n = data.n();
        let graph = Arc::new(data.graph.clone());
        let train: Vec<u32> = (0..n as u32).filter(|&v| data.mask_bits[v as usize] & TRAIN_BIT != 0).collect();
        let bad = |m: String| Err(Error::Unsupported(m));
        if self.batch_size == Some(0) {
            return bad("--batch-size must be at least 1".into());
        }
        if self.steps_per_epoch == Some(0) {
            return bad("--steps-per-epoch must be at least 1".into());
        }
        self.check_limits(kind, &data.graph)?;
        let (source, steps) = match kind {
            SamplerKind::Neighbor => {
                let fanouts = match &self.fanout {
                    Some(f) if f.is_empty() => return bad("--fanout needs at least one hop".into()),
                    // 0 would train every seed on itself alone: a silent degenerate model.
                    Some(f) if f.iter().any(|&k| k == 0 || k < -1) => {
                        return bad(format!("--fanout {f:?}: each hop takes >= 1 neighbours, or -1 for all"));
                    }
                    Some(f) => f.clone(),
                    None if cfg.layers == 2 => vec![15, 10],
                    None => vec![10; cfg.layers],
                };
                // Layer l on block l alone needs a block per layer; BatchNorm would take the
                // outputs of the rows a layer does not aggregate into its statistics.
                let per_layer = fanouts.len() == cfg.layers && !cfg.batch_norm;
                let config = NeighborConfig { fanouts, batch_size: self.batch_size.unwrap_or(512), shuffle: true, seed };
                let s = Arc::new(NeighborSampler::new(graph, train, config)?);
                let steps = self.steps_per_epoch.unwrap_or(s.batches_per_epoch()).min(s.batches_per_epoch());
                let aggregation = if self.neighbor_union { None } else { Aggregation::for_model(cfg.model, &data.graph)? };
                let source = match aggregation {
                    Some(aggregation) => BatchSource::NeighborNormalized { sampler: s, aggregation, per_layer },
                    None => BatchSource::Neighbor(s),
                };
                (source, steps)
            }
            _ => {
                let kind = match kind {
                    SamplerKind::SaintRw => SaintKind::RandomWalk { roots: self.walk_roots(n), walk_length: self.walk_length },
                    SamplerKind::SaintNode => SaintKind::Node { budget: self.batch_size.unwrap_or(4000) },
                    _ => SaintKind::Edge { budget: self.batch_size.unwrap_or(500) },
                };
                let steps = match self.steps_per_epoch {
                    Some(s) => s,
                    None => {
                        // Distinct nodes per batch, from a sampler without normalisation (no pre-sampling).
                        let probe = SaintSampler::new(graph.clone(), SaintConfig { kind, steps_per_epoch: 1, coverage: 0, seed })?;
                        let mean = (0..5).map(|i| probe.presample_batch(0, i).nodes.len()).sum::<usize>() as f64 / 5.0;
                        ((n as f64 / mean.max(1.0)).ceil() as usize).max(1)
                    }
                };
                let steps_u32 = u32::try_from(steps).map_err(|_| Error::Unsupported(format!("--steps-per-epoch {steps} is past 2^32")))?;
                let sampler =
                    SaintSampler::new(graph, SaintConfig { kind, steps_per_epoch: steps_u32, coverage: self.saint_coverage, seed })?;
                let aggregation = if self.saint_coverage > 0 { Aggregation::for_model(cfg.model, &data.graph)? } else { None };
                (BatchSource::Saint { sampler: Arc::new(sampler), aggregation }, steps)
            }
        };
        let node_data = NodeData {
            features: clone_features(data),
            labels: data.labels.clone(),
            mask_bits: data.mask_bits.clone(),
            n_train: count_train(data),
        };
        let prefetch = PrefetchConfig { workers: self.workers(), ahead: 1 };
        let mut training = SampledTraining::new(source, node_data, n, steps, prefetch, *cfg, data.classes)?;
        training.rebind = !self.build_per_batch;
        training.record = !self.eager_steps;
        training.features_on_gpu = self.features_on == FeaturesOn::Gpu;
        Ok(Some(training))
    }

    /// [`SampleArgs::training`] for a run on the GPU (`gpu`) or the CPU: `--features-on auto`
    /// resolved (the GPU gathers dense rows where it trains).
    pub fn training_on(&self, data: &Dataset, cfg: &tcgnn::nn::ModelConfig, seed: u64, gpu: bool) -> Result<Option<SampledTraining>> {
        let mut t = self.training(data, cfg, seed)?;
        let kind_is_neighbor = self.sampler == Some(SamplerKind::Neighbor);
        if let Some(t) = &mut t {
            let dense = matches!(data.features, tcgnn::nn::input::HostFeatures::Dense(_));
            let fits_dense = 4 * data.n() as u64 * data.features.cols() as u64 <= tcgnn::sample::train::DENSE_RESIDENT_MAX;
            // Sparse features stay sparse for the GPU samplers (they cut each batch's sparse rows
            // and transpose; dense 4714-deep products cost more, bench/NOTES.md).
            t.features_on_gpu = match self.features_on {
                FeaturesOn::Auto => gpu && dense,
                on => on == FeaturesOn::Gpu,
            };
            let why_not = t.gpu_sampling_unsupported();
            t.sample_on_gpu = match (self.sample_on, why_not) {
                (SampleOn::Cpu, _) => false,
                (SampleOn::Auto, why) => gpu && why.is_none() && self.features_on != FeaturesOn::Host,
                (SampleOn::Gpu, Some(why)) => return Err(Error::Unsupported(format!("--sample-on gpu: {why}; use --sample-on cpu"))),
                (SampleOn::Gpu, None) if !gpu => return Err(Error::Unsupported("--sample-on gpu needs a GPU".into())),
                (SampleOn::Gpu, None) => true,
            };
            // Neighbour batches made by the CPU workers (about half the graph's nodes each):
            // gathering and transposing their sparse rows on the CPU costs more than a dense
            // gather on the GPU (musae_facebook 57 -> 33 ms an epoch, bench/NOTES.md).
            if self.features_on == FeaturesOn::Auto && gpu && !t.sample_on_gpu && kind_is_neighbor && fits_dense {
                t.features_on_gpu = true;
            }
            if t.sample_on_gpu && self.features_on == FeaturesOn::Host {
                return Err(Error::Unsupported(
                    "sampling on the GPU gathers the features there: --features-on host needs --sample-on cpu".into(),
                ));
            }
        }
        Ok(t)
    }

    /// Options far beyond what `graph` can use, refused before any batch is drawn: each would
    /// otherwise allocate for (batch size x walk length), or loop for (steps x batch) or
    /// (coverage x N) draws, long past anything that trains the graph better.
    fn check_limits(&self, kind: SamplerKind, graph: &Csr) -> Result<()> {
        let bad = |m: String| Err(Error::Unsupported(m));
        if let Some(w) = self.sample_workers
            && !(1..=MAX_SAMPLE_WORKERS).contains(&w)
        {
            return bad(format!("--sample-workers {w}: give 1..={MAX_SAMPLE_WORKERS}"));
        }
        if self.saint_coverage > MAX_SAINT_COVERAGE {
            return bad(format!(
                "--saint-coverage {}: at most {MAX_SAINT_COVERAGE} (PyG's examples use 100 to 1000; each unit pre-samples N more nodes)",
                self.saint_coverage
            ));
        }
        // Draws a batch or an epoch may make: a few times the graph's nodes and edges, and at
        // least a fixed floor so the defaults work on tiny graphs.
        let budget = sample_budget(graph);
        let per_batch: u128 = match kind {
            SamplerKind::SaintRw => self.walk_roots(graph.n_rows()) as u128 * (self.walk_length as u128 + 1),
            SamplerKind::SaintNode => self.batch_size.unwrap_or(4000) as u128,
            SamplerKind::SaintEdge => 2 * self.batch_size.unwrap_or(500) as u128,
            // At most the train nodes are seeds: a larger batch is one batch of all of them.
            SamplerKind::Neighbor => 0,
        };
        if per_batch > budget as u128 {
            let what = match kind {
                SamplerKind::SaintRw => format!("--batch-size {} x --walk-length {}", self.walk_roots(graph.n_rows()), self.walk_length),
                _ => format!("--batch-size {}", self.batch_size.unwrap_or(0)),
            };
            return bad(format!(
                "{what} draws {per_batch} nodes a batch, far beyond this graph of {} nodes and {} edges (at most {budget})",
                graph.n_rows(),
                graph.nnz()
            ));
        }
        if let Some(steps) = self.steps_per_epoch
            && kind != SamplerKind::Neighbor
            && steps as u128 * per_batch.max(1) > budget as u128
        {
            return bad(format!(
                "--steps-per-epoch {steps} draws {} nodes an epoch, far beyond this graph of {} nodes and {} edges (at most {budget})",
                steps as u128 * per_batch.max(1),
                graph.n_rows(),
                graph.nnz()
            ));
        }
        Ok(())
    }

    /// `--inference-batch-edges`, or the default.
    pub fn inference_batch_edges(&self) -> usize {
        self.inference_batch_edges.map_or(tcgnn::sample::layerwise::DEFAULT_BATCH_EDGES, |e| usize::try_from(e).unwrap_or(usize::MAX))
    }

    /// `--sample-workers`, or the cores less two (the step's thread and one for the system),
    /// at least 2 and at most 12.
    pub fn workers(&self) -> usize {
        match self.sample_workers {
            Some(w) => w.max(1),
            None => std::thread::available_parallelism().map_or(2, |n| n.get()).saturating_sub(2).clamp(2, 12),
        }
    }
}

/// Most sampling worker threads (each holds a batch in flight).
pub const MAX_SAMPLE_WORKERS: usize = 256;
/// Most GraphSAINT coverage (pre-sampling rounds of about N nodes each).
pub const MAX_SAINT_COVERAGE: u32 = 10_000;

/// Nodes a batch or an epoch may draw on `graph`: 64 times its nodes and edges, at least 2^24.
pub fn sample_budget(graph: &Csr) -> u64 {
    (64 * (graph.n_rows() as u64 + graph.nnz() as u64)).max(1 << 24)
}

fn count_train(data: &Dataset) -> usize {
    data.mask_bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count()
}

/// The workers gather rows from their own copy (the trainer's full-graph model keeps the
/// dataset's for evaluation).
fn clone_features(data: &Dataset) -> tcgnn::nn::input::HostFeatures {
    match &data.features {
        tcgnn::nn::input::HostFeatures::Dense(m) => tcgnn::nn::input::HostFeatures::Dense(m.clone()),
        tcgnn::nn::input::HostFeatures::Sparse(c) => tcgnn::nn::input::HostFeatures::Sparse(Csr::clone(c)),
    }
}

/// `--sample-on`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SampleOn {
    /// gpu where it applies on a GPU, else cpu.
    #[default]
    Auto,
    Cpu,
    Gpu,
}

/// `--features-on`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum FeaturesOn {
    /// The default (as the CLI's), also for `SampleArgs::default()`: on a GPU, gpu for dense
    /// features, and for sparse ones (up to 4 GiB dense) where the CPU workers make neighbour
    /// batches; sparse features stay sparse for the GPU samplers; host without a GPU.
    #[default]
    Auto,
    Host,
    Gpu,
}
