//! The models, one file each, behind one [`Model`] trait, and the registry that maps a name to
//! its defaults and constructor. `tcgnn train --model`, `bench train --models` and `predict` all
//! parse from [`MODELS`]; adding a model is its file plus one line in `registry!` below.
//!
//! A model owns every buffer of its forward and backward passes, allocated once when built, so
//! a training step allocates nothing (and the GPU backend can capture it as a CUDA graph).

pub mod agnn;
pub mod gat;
pub mod gcn;
pub mod gin;
pub mod sage;
pub mod traffic;

// What a model is (its trait and config) sits below the models, in `nn::model`, so the layers
// and the stack that the models are built from can name it without importing the registry.
pub use crate::nn::model::{MAX_HEADS, MAX_LAYERS, MAX_WIDTH, Model, ModelConfig, dropout_seed, widths};

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::gcn_conv::GcnAdjacency;
use crate::nn::halo_hook::PartContext;
use crate::nn::stack::{Conv, Stack};
use crate::ops::backend::cuda::EdgeLayout;
use crate::ops::nn::Ops;

// ModelConfig's methods that depend on which model it is stay with the models (the only place
// a model's name is matched).
impl ModelConfig {
    /// Columns the first layer's products on the input features produce in all (SAGE has two:
    /// the neighbours' and the root's; GAT one per head).
    pub fn first_product_columns(&self) -> usize {
        match self.model {
            "gat" => self.hidden * self.heads.max(1),
            "sage" => 2 * self.hidden,
            _ => self.hidden,
        }
    }

    /// Columns of each of those products (SAGE's two are `hidden` wide each).
    pub fn first_product_width(&self) -> usize {
        match self.model {
            "sage" => self.hidden,
            _ => self.first_product_columns(),
        }
    }
}

/// [`ModelConfig`] as read from a file: the name owned, then looked up in the registry.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelConfigOwned {
    model: String,
    layers: usize,
    hidden: usize,
    heads: usize,
    dropout: f32,
    batch_norm: bool,
    residual: bool,
    variant: bool,
    seed: u64,
}

impl<'de> serde::Deserialize<'de> for ModelConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let c = <ModelConfigOwned as serde::Deserialize>::deserialize(d)?;
        let model = model_info(&c.model).map_err(serde::de::Error::custom)?.name;
        let ModelConfigOwned { layers, hidden, heads, dropout, batch_norm, residual, variant, seed, .. } = c;
        Ok(ModelConfig { model, layers, hidden, heads, dropout, batch_norm, residual, variant, seed })
    }
}

/// What the registry knows of a model before building it.
pub struct ModelInfo {
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// PyG's example settings for it, with the optimiser's.
    pub defaults: ModelConfig,
    pub lr: f32,
    pub weight_decay: f32,
    /// Where the GPU backend keeps its edge values (fixed values: the kernel's layout; values
    /// that change every step: CSR order).
    pub edge_layout: EdgeLayout,
    /// How it aggregates a node's neighbours when its matrix is fixed (`None`: attention, whose
    /// weights depend on the features): what samplers need to normalise a batch as the model
    /// would, and whether a model can be rebound to a batch's matrix ([`build_on_matrix`]).
    pub aggregation: Option<FixedAggregation>,
    /// Device bytes of its buffers for `n` nodes, `nnz` edges, `features` in, `classes` out: to
    /// refuse a model that cannot fit before allocating it. An upper estimate.
    pub estimate_bytes: fn(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64,
    /// The fewest bytes one training step moves on a graph of `shape` (raw edges, before the
    /// model's self-loops): the step floor of `bench train` ([`traffic`]).
    pub step_traffic: fn(cfg: &ModelConfig, shape: &traffic::StepShape) -> traffic::StepTraffic,
    /// Shapes (layers, hidden) `bench train`'s default suite times besides the defaults (the
    /// widths PyG's benchmarks also report for it).
    pub bench_shapes: &'static [(usize, usize)],
}

impl ModelInfo {
    /// The config of this model with its defaults.
    pub fn config(&self) -> ModelConfig {
        self.defaults
    }
}

/// A fixed aggregation (see [`ModelInfo::aggregation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixedAggregation {
    /// GCN's D^-1/2 (A + I) D^-1/2.
    GcnNorm,
    /// The mean over a node's row, no self-loop (SAGE's neighbour term).
    Mean,
    /// The sum over a node's row, no self-loop (GIN's, which adds the node itself apart).
    Sum,
}

/// A model over a fixed matrix that can be reached: a sampler rebinds it to each batch's matrix
/// and features instead of building a model per batch.
pub trait FixedMatrixModel<B: Ops>: Model<B> {
    /// Itself as a [`Model`].
    fn model(&mut self) -> &mut dyn Model<B>;
    fn adjacency(&mut self) -> &mut GcnAdjacency<B>;
    /// Gives layers 1.. matrices of their own (`later[l - 1]` for layer l, each n x n as the
    /// shared one, which stays layer 0's): a neighbour-sampled batch's per-layer blocks.
    fn set_later_adjacencies(&mut self, later: Vec<GcnAdjacency<B>>) -> Result<()>;
    /// Layer `l`'s matrix (the shared one when the layers share one).
    fn layer_adjacency(&mut self, l: usize) -> &mut GcnAdjacency<B>;
    /// The last conv's output (the logits) of the last forward.
    fn logits(&self) -> &B::Mat;
}

impl<B: Ops + 'static, C: Conv<B, Adj = GcnAdjacency<B>> + 'static> FixedMatrixModel<B> for Stack<B, C> {
    fn model(&mut self) -> &mut dyn Model<B> {
        self
    }
    fn adjacency(&mut self) -> &mut GcnAdjacency<B> {
        self.adjacency_mut()
    }
    fn set_later_adjacencies(&mut self, later: Vec<GcnAdjacency<B>>) -> Result<()> {
        Stack::set_later_adjacencies(self, later)
    }
    fn layer_adjacency(&mut self, l: usize) -> &mut GcnAdjacency<B> {
        self.layer_adjacency_mut(l)
    }
    fn logits(&self) -> &B::Mat {
        self.convs().last().expect("at least one layer").out()
    }
}

/// The registry: each model module exposes `INFO`, `build`, `build_on` and `model_graph`; the
/// models after `fixed:` (those whose `INFO.aggregation` is set) are [`FixedMatrixModel`]s.
macro_rules! registry {
    ($($m:ident),* ; fixed: $($f:ident),* $(,)?) => {
        /// Every model, in the order `--help` lists them.
        pub const MODELS: &[&ModelInfo] = &[$(&$m::INFO),*];

        /// Builds the model `cfg.model` for `graph` (the raw adjacency; each model adds its own
        /// self-loops and normalisation) with `features` inputs and `classes` outputs.
        pub fn build<B: Ops + 'static>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Box<dyn Model<B>>> {
            check(cfg)?;
            $(if cfg.model == $m::INFO.name {
                return Ok(Box::new($m::build(b, graph, features, classes, cfg)?));
            })*
            Err(unknown(cfg.model))
        }

        /// The matrix model `name` multiplies, from the raw adjacency (its self-loops and
        /// normalisation applied): a partitioned run computes it on the whole graph and cuts
        /// each part's rows from it ([`build_part`]).
        pub fn model_graph(name: &str, graph: &Csr) -> Result<Csr> {
            $(if name == $m::INFO.name {
                return $m::model_graph(graph);
            })*
            Err(unknown(name))
        }

        /// Model `cfg.model` on one part of a partitioned graph: `part_graph` is the part's
        /// extended rows of [`model_graph`]'s matrix (owned rows between empty halo rows; see
        /// [`crate::nn::halo_hook`]).
        pub fn build_part<B: Ops + 'static>(
            b: &B,
            part_graph: Csr,
            features: usize,
            classes: usize,
            cfg: &ModelConfig,
            part: &PartContext<B>,
        ) -> Result<Box<dyn Model<B>>> {
            check(cfg)?;
            if cfg.batch_norm {
                return Err(Error::Unsupported(format!(
                    "{}: --batch-norm is not supported with --partitions / --gpus yet (its batch statistics would need an all-reduce across the parts)",
                    cfg.model
                )));
            }
            $(if cfg.model == $m::INFO.name {
                return Ok(Box::new($m::build_on(b, part_graph, features, classes, cfg, Some(part))?));
            })*
            Err(unknown(cfg.model))
        }

        /// Model `cfg.model` on `matrix`, its own matrix already made ([`model_graph`], or a
        /// sampler's weighted aggregation), for a model with a fixed aggregation; refused for
        /// the others.
        pub fn build_on_matrix<B: Ops + 'static>(
            b: &B,
            matrix: Csr,
            features: usize,
            classes: usize,
            cfg: &ModelConfig,
        ) -> Result<Box<dyn FixedMatrixModel<B>>> {
            check(cfg)?;
            $(if cfg.model == $f::INFO.name {
                return Ok(Box::new($f::build_on(b, matrix, features, classes, cfg, None)?));
            })*
            Err(Error::Unsupported(format!("{}: its aggregation is not a fixed matrix (attention): build a model per graph", cfg.model)))
        }
    };
}

registry!(gcn, agnn, gat, sage, gin; fixed: gcn, sage, gin);

/// [`build_on_matrix`] with a matrix per layer (`matrices[l]` for layer l, all n x n over the
/// same nodes; one matrix: shared by every layer).
pub fn build_on_matrices<B: Ops + 'static>(
    b: &B,
    matrices: Vec<Csr>,
    features: usize,
    classes: usize,
    cfg: &ModelConfig,
) -> Result<Box<dyn FixedMatrixModel<B>>> {
    let mut it = matrices.into_iter();
    let first = it.next().ok_or_else(|| Error::Shape("a model on no matrix".into()))?;
    let mut model = build_on_matrix(b, first, features, classes, cfg)?;
    let later = it.map(|m| GcnAdjacency::from_normalized(b, m)).collect::<Result<Vec<_>>>()?;
    if !later.is_empty() {
        model.set_later_adjacencies(later)?;
    }
    Ok(model)
}

fn unknown(name: &str) -> Error {
    let names: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
    Error::Unsupported(format!("unknown model '{}'; models: {}", crate::graph::text::show(name.as_bytes()), names.join(", ")))
}

/// The model `train` and the benchmarks take when none is named (PyG's first example's).
pub const DEFAULT_MODEL: &str = "gcn";

/// The registry entry named `name` (case-insensitive).
pub fn model_info(name: &str) -> Result<&'static ModelInfo> {
    MODELS.iter().copied().find(|m| m.name.eq_ignore_ascii_case(name)).ok_or_else(|| unknown(name))
}

/// `--model NAME` for clap: the registry's name.
pub fn parse_model_name(s: &str) -> std::result::Result<&'static str, String> {
    model_info(s).map(|m| m.name).map_err(|e| e.to_string())
}

/// The config of model `name` with its defaults.
pub fn default_config(name: &str) -> Result<ModelConfig> {
    Ok(model_info(name)?.config())
}

/// Whether model `name` has attention heads: the models whose defaults use more than one.
fn takes_heads(name: &str) -> bool {
    model_info(name).is_ok_and(|m| m.defaults.heads > 1)
}

/// Sizes a model can be built with.
pub fn check(cfg: &ModelConfig) -> Result<()> {
    model_info(cfg.model)?;
    if cfg.layers == 0 || cfg.hidden == 0 || cfg.heads == 0 {
        return Err(Error::Unsupported(format!(
            "a model needs >= 1 layer, hidden width >= 1 and >= 1 head (got {} x {} x {})",
            cfg.layers, cfg.hidden, cfg.heads
        )));
    }
    // Past these no model trains on any machine: refused here so that a size from a file's
    // metadata or the command line never reaches an allocation or a loop of a million layers,
    // and the byte estimates below stay in u64.
    if cfg.layers > MAX_LAYERS || cfg.hidden > MAX_WIDTH || cfg.heads > MAX_HEADS {
        return Err(Error::Unsupported(format!(
            "a model of {} layers x {} hidden x {} heads: at most {MAX_LAYERS} layers, {MAX_WIDTH} hidden and {MAX_HEADS} heads",
            cfg.layers, cfg.hidden, cfg.heads
        )));
    }
    // Options a model does not have are refused, not ignored (the README says so).
    if cfg.heads != 1 && !takes_heads(cfg.model) {
        return Err(Error::Unsupported(format!("{} has no attention heads: leave out --heads {}", cfg.model, cfg.heads)));
    }
    if !(0.0..1.0).contains(&cfg.dropout) {
        return Err(Error::Unsupported(format!("dropout must be in [0, 1), got {}", cfg.dropout)));
    }
    Ok(())
}

/// Device bytes model `cfg` takes (see [`ModelInfo::estimate_bytes`]).
pub fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> Result<u64> {
    Ok((model_info(cfg.model)?.estimate_bytes)(cfg, n, nnz, features, classes))
}

/// Bytes of an `n x cols` f32 device matrix (rows padded to 8 columns).
pub fn mat_bytes(n: u64, cols: u64) -> u64 {
    n * cols.div_ceil(8) * 8 * 4
}

/// Bytes of a `fan_in x fan_out` parameter with its gradient and Adam moments.
pub fn param_bytes(fan_in: u64, fan_out: u64) -> u64 {
    4 * fan_in * fan_out * 4
}

/// Bytes of one edge-value buffer (ME-BCRS pads vectors: counted at twice the edges).
pub fn edge_bytes(n: u64, nnz: u64) -> u64 {
    2 * (nnz + n) * 4
}

/// Bytes of a fixed adjacency ([`crate::nn::gcn_conv::GcnAdjacency`]): both sides' values, in
/// f16 their f16 copies, and under `Impl::Auto` their CSR-ordered copies for the CSR kernel
/// (`SpmmOp::fix`; one f32 per edge and side: half an `edge_bytes`, counted at one). Counted in
/// every precision and implementation: an over-estimate where some are not made.
pub fn adjacency_bytes(n: u64, nnz: u64) -> u64 {
    4 * edge_bytes(n, nnz)
}

/// Bytes the [`crate::nn::stack::Stack`] adds around the hidden layers of `widths` for `n`
/// nodes: BatchNorm's output and input gradient, the residual sum and its gradient copy.
pub fn hidden_bytes(cfg: &ModelConfig, n: u64, widths: &[usize]) -> u64 {
    let hidden = &widths[1..widths.len() - 1];
    let per_layer = 2 * cfg.batch_norm as u64 + 2 * cfg.residual as u64;
    hidden.iter().map(|&w| per_layer * mat_bytes(n, w as u64) + if cfg.batch_norm { 8 * param_bytes(1, w as u64) } else { 0 }).sum()
}

/// Refuses the options `cfg` sets that its model does not have: `stack` for `--batch-norm` and
/// `--residual`, `variant` for `--variant`.
pub fn refuse_options(cfg: &ModelConfig, stack: bool, variant: bool) -> Result<()> {
    let set = [("--batch-norm", cfg.batch_norm && !stack), ("--residual", cfg.residual && !stack), ("--variant", cfg.variant && !variant)];
    let bad: Vec<&str> = set.iter().filter(|s| s.1).map(|s| s.0).collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::Unsupported(format!("model {} does not support {}", cfg.model, bad.join(", "))))
}

/// The readout graph classification pools model `name`'s node rows with by default: sum for
/// GIN (its paper's: a sum keeps the size of the multiset of node rows, which mean and max
/// lose), mean for the others (PyG's graph-classification examples).
pub fn default_graph_pooling(name: &str) -> crate::ops::nn::segment_pool::Pooling {
    use crate::ops::nn::segment_pool::Pooling;
    if name == gin::INFO.name { Pooling::Sum } else { Pooling::Mean }
}

/// Swaps the parameters and buffers of two models of one config (names checked: a mismatch is
/// a bug, reported rather than trained on).
pub fn swap_state<B: Ops>(a: &mut dyn Model<B>, b: &mut dyn Model<B>) -> Result<()> {
    let (mut pa, mut pb) = (a.params(), b.params());
    if pa.len() != pb.len() || pa.iter().zip(&pb).any(|(x, y)| x.0 != y.0) {
        return Err(Error::Unsupported("a batch's model has other parameters than the trained model".into()));
    }
    for ((_, x), (_, y)) in pa.iter_mut().zip(pb.iter_mut()) {
        std::mem::swap(&mut **x, &mut **y);
    }
    drop((pa, pb));
    let (mut ba, mut bb) = (a.buffers(), b.buffers());
    if ba.len() != bb.len() || ba.iter().zip(&bb).any(|(x, y)| x.0 != y.0) {
        return Err(Error::Unsupported("a batch's model has other buffers than the trained model".into()));
    }
    for ((_, x), (_, y)) in ba.iter_mut().zip(bb.iter_mut()) {
        std::mem::swap(&mut **x, &mut **y);
    }
    Ok(())
}
