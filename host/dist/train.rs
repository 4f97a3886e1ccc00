//! The distributed training step: one part of a partitioned graph per rank, each with its own
//! backend and model, the same loss curve as one device (issue 17).
//!
//! Rank p trains on its extended graph (its owned rows between empty halo rows; [`part_graph`]) with
//! the model built through [`models::build_part`], whose layers call the [`HaloExchange`] at one
//! point each (see [`crate::nn::halo_hook`]). Around the model:
//! - the loss is the mean over the *global* train nodes (each part scales its rows by
//!   1 / global count), its value and the correct counts are all-reduced;
//! - the weight gradients (sums over rows) are all-reduced in one fused buffer after the
//!   backward, or in buckets during it ([`DistOptions::grad_buckets`]: each layer's as soon as
//!   the model's backward says they are final, through [`GradReady`]), and every rank takes the
//!   same Adam step, so the weights stay identical on every rank;
//! - dropout masks are keyed by original node / original edge (the ids before the partition
//!   relabelled the graph), so every partition draws the unpartitioned run's masks.
//!
//! BatchNorm's batch statistics would need an all-reduce too: refused for now.

use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crate::dist::comm::Communicator;
use crate::dist::dist_backend::{CountedHook, DistBackend, HaloPath};
use crate::dist::exchange::ExchangeCounters;
use crate::dist::halo::{ExchangeMethod, Halo};
use crate::dist::part_graph::{ExtendedLayout, extended_rows, feature_ids, halo_ids, local_node_ids, original_edge_ids, part_data};
use crate::dist::partition::Partition;
use crate::error::{Error, Result};
use crate::nn::grad_ready::GradReady;
use crate::nn::halo_hook::{OverlapSplit, PartContext};
use crate::nn::input::InputFeatures;
use crate::nn::kept_state::KeptState;
use crate::nn::live_rows::LiveRows;
use crate::nn::models::{self, Model, ModelConfig};
use crate::nn::param::Param;
use crate::ops::backend::{Backend, TEST_BIT, TRAIN_BIT, VAL_BIT};
use crate::ops::nn::AdamHyper;
use crate::task::node::data::Dataset;
use crate::task::node::train::{EpochRecord, History, MaskSizes, Recorded, TrainConfig};
use crate::util::Real;

/// Where a rank's step time went since the last [`DistTrainer::take_timing`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StepTiming {
    pub steps: u64,
    /// Wall seconds of whole steps (forward, loss, backward, all-reduce, Adam).
    pub step_seconds: f64,
    /// Each step's wall seconds, in order (a step ends when the device is done with it).
    pub step_walls: Vec<f64>,
    /// The halo exchanges inside them.
    pub halo: ExchangeCounters,
    /// The weight-gradient all-reduce.
    pub all_reduce_seconds: f64,
    pub all_reduce_bytes: u64,
    /// All-reduces of weight gradients (one a step when serial, one a bucket in buckets).
    pub all_reduce_calls: u64,
    /// Of `steps`, those that replayed a recorded CUDA graph ([`DistTrainer::record`]): their
    /// bytes and calls are counted, their halo and all-reduce seconds are not measured (zero).
    pub replayed: u64,
}

impl StepTiming {
    /// The median of this rank's steps' wall seconds (0 for none).
    pub fn median_step_seconds(&self) -> f64 {
        median(self.step_walls.clone())
    }

    /// Ranks that stepped together (each step waits for every rank): the median over the steps
    /// of the slowest rank's wall seconds in each; `None` where the ranks timed different step
    /// counts.
    pub fn median_slowest_step_seconds(ranks: &[StepTiming]) -> Option<f64> {
        let steps = ranks.first()?.step_walls.len();
        if ranks.iter().any(|t| t.step_walls.len() != steps) {
            return None;
        }
        Some(median((0..steps).map(|s| ranks.iter().map(|t| t.step_walls[s]).fold(0.0, f64::max)).collect()))
    }
}

/// The median of `v` (the mean of the middle two for an even count; 0 for none).
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { 0.5 * (v[m - 1] + v[m]) }
}

/// How a rank's step moves rows between the parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DistOptions {
    /// The host path's exchange pattern (the device path is point-to-point).
    pub method: ExchangeMethod,
    /// Where a GPU rank's exchanges run.
    pub path: HaloPath,
    /// Whether each layer's halo exchange runs beside the owned columns' product (GCN, SAGE,
    /// GIN) or the fused attention of the rows that read no halo row (GAT), and its give-back
    /// beside the owned rows' transposed product / column pass (the GPU's device path; the CPU
    /// runs the same blocks with its exchanges in order, which checks them there; AGNN, GAT's
    /// unfused path and the GPU's host path stay serial); and whether the input layer (GCN,
    /// SAGE, GIN, GAT) forms its halo rows from the halo nodes' own features instead of
    /// exchanging them (every path, unless `local_input` says otherwise). `false`: serial, whole
    /// products, every layer's exchanges.
    pub overlap: bool,
    /// Whether the input layer forms its halo rows from the halo nodes' own features (and keeps
    /// their gradient rows for its weight gradient) instead of exchanging them: the input
    /// product over the halo rows too, against moving them twice a step. Set with `overlap` by
    /// [`DistOptions::with_overlap`]; [`DistOptions::with_local_input`] sets it alone.
    pub local_input: bool,
    /// How an overlapped GCN / SAGE / GIN forward divides its product around the fill.
    pub split: OverlapSplit,
    /// The weight-gradient all-reduce: `None`, serial (every gradient in one fused buffer after
    /// the whole backward); `Some(bytes)`, in buckets during the backward as PyTorch DDP's: a
    /// bucket of whole layers (as the backward finishes them, the last layer's first) is
    /// started once it holds at least `bytes` (0: one bucket per layer), on NCCL's stream beside
    /// the earlier layers' backward (the device path over NCCL; elsewhere in order). Every
    /// element is summed as the serial all-reduce sums it.
    pub grad_buckets: Option<usize>,
    /// Whether a GCN on a symmetric graph pulls in its backward: fills dY's halo rows and
    /// multiplies by Â's owned rows, as the forward does (overlapped as it is), instead of
    /// forming Âᵀ's halo rows too and giving them back
    /// ([`crate::nn::gcn_conv::GcnAdjacency::backward_product`]), and forms X W's interior rows
    /// beside the forward's fill (no other part reads them:
    /// [`crate::nn::gcn_conv::GcnAdjacency::boundary_and_interior`]). `false`: neither (the
    /// give-back, as every other model and a directed graph use).
    pub pull_backward: bool,
}

impl DistOptions {
    /// `method` on the device path, overlapped, the gradient all-reduce serial.
    pub fn new(method: ExchangeMethod) -> Self {
        DistOptions {
            method,
            path: HaloPath::Device,
            overlap: true,
            local_input: true,
            split: OverlapSplit::Rows,
            grad_buckets: None,
            pull_backward: true,
        }
    }
    pub fn with_path(self, path: HaloPath) -> Self {
        DistOptions { path, ..self }
    }
    /// Overlapped (with the input layer's halo rows formed locally) or serial (exchanged).
    pub fn with_overlap(self, overlap: bool) -> Self {
        DistOptions { overlap, local_input: overlap, ..self }
    }
    pub fn with_local_input(self, local_input: bool) -> Self {
        DistOptions { local_input, ..self }
    }
    pub fn with_split(self, split: OverlapSplit) -> Self {
        DistOptions { split, ..self }
    }
    pub fn with_grad_buckets(self, grad_buckets: Option<usize>) -> Self {
        DistOptions { grad_buckets, ..self }
    }
    pub fn with_pull_backward(self, pull_backward: bool) -> Self {
        DistOptions { pull_backward, ..self }
    }
}

/// The leading rows of a part's extended matrix `s` whose columns are all owned (`owned`): the
/// empty halo rows below the owned ones, then the owned rows the partition put first because
/// every neighbour of theirs is owned ([`crate::dist::Partition`]).
pub fn interior_rows(s: &crate::graph::Csr, owned: std::ops::Range<usize>) -> usize {
    (0..s.n_rows()).take_while(|&r| s.col_idx()[s.row_range(r)].iter().all(|&c| owned.contains(&(c as usize)))).count()
}

pub struct DistTrainer<B: DistBackend<C>, C: Communicator + 'static> {
    backend: Arc<B>,
    comm: Rc<C>,
    path: HaloPath,
    /// [`DistOptions::grad_buckets`].
    grad_buckets: Option<usize>,
    exchange: Rc<dyn CountedHook<B>>,
    net: Box<dyn Model<B>>,
    input: InputFeatures<B>,
    /// The owned rows' labels (the loss runs on the `live` rows of the logits).
    labels: B::Labels,
    live: LiveRows,
    dlogits: B::Mat,
    eval_dlogits: B::Mat,
    train_stats: B::Stats,
    eval_stats: B::Stats,
    inv_n_train: f32,
    hyper: AdamHyper,
    sizes: MaskSizes,
    /// The gradient all-reduce's buffers (kept: a step allocates nothing once they have grown).
    fused: B::Fused,
    /// One parameter's rows, for [`DistTrainer::weights`].
    rows: Vec<B::Elem>,
    timing: StepTiming,
    /// The step and the evaluation recorded by [`DistTrainer::record`].
    recorded: Option<Recording<B>>,
    /// Rows this rank owns and the halo rows it receives.
    pub owned: usize,
    pub halo_rows: usize,
    /// Owned rows that read no halo row (multiplied beside the exchange when overlapped).
    pub interior_rows: usize,
}

impl<B: DistBackend<C>, C: Communicator + 'static> DistTrainer<B, C> {
    /// Rank `comm.rank()`'s trainer for part `comm.rank()` of `partition` of `data` (the whole
    /// dataset, already relabelled by the partition: [`crate::dist::part_graph::relabel`]), its
    /// exchanges on the device where the backend has one ([`HaloPath::Device`]).
    pub fn new(
        backend: Arc<B>,
        comm: Rc<C>,
        data: &Dataset,
        partition: &Partition,
        method: ExchangeMethod,
        model: &ModelConfig,
        train: &TrainConfig,
    ) -> Result<Self> {
        Self::with_options(backend, comm, data, partition, DistOptions::new(method), model, train)
    }

    /// [`DistTrainer::new`] with the exchanges as `options` say (the GPU's host-staged path is
    /// the reference the device path is tested against; the serial exchange the overlapped
    /// one's).
    pub fn with_options(
        backend: Arc<B>,
        comm: Rc<C>,
        data: &Dataset,
        partition: &Partition,
        options: DistOptions,
        model: &ModelConfig,
        train: &TrainConfig,
    ) -> Result<Self> {
        let DistOptions { method, path, overlap, local_input, split, grad_buckets, pull_backward } = options;
        let rank = comm.rank();
        if comm.world_size() != partition.parts() || partition.nodes() != data.n() {
            return Err(Error::Unsupported(format!(
                "a partition into {} parts of {} nodes for a world of {} and a graph of {} nodes",
                partition.parts(),
                partition.nodes(),
                comm.world_size(),
                data.n()
            )));
        }
        let b = &*backend;
        let count = |bit: u8| data.mask_bits.iter().filter(|&&m| m & bit != 0).count();
        let sizes = MaskSizes { train: count(TRAIN_BIT), val: count(VAL_BIT), test: count(TEST_BIT) };
        if sizes.train == 0 {
            return Err(Error::Unsupported(format!("{}: the train mask is empty", data.name)));
        }
        let blocks = &partition.blocks[rank];
        let (first, owned) = (blocks.first_row, blocks.rows);
        let halo = halo_ids(blocks, &partition.offsets);
        // The model's matrix of the whole graph (GCN: normalised with global degrees), then this
        // part's rows of it.
        let s = models::model_graph(model.model, &data.graph)?;
        // The dropout keys, built once: the original id of every local row, edge and feature
        // nonzero (the halo rows below the owned ones are empty: the part's edges are the
        // owned rows' edges).
        let new_to_old = partition.perm.new_to_old();
        let layout = ExtendedLayout::new(first, owned, &halo);
        let row_ids = local_node_ids(new_to_old, first, layout, &halo);
        let edge_ids = original_edge_ids(&s, new_to_old, first, owned)?;
        let input_ids = feature_ids(&data.features, new_to_old, first, layout, &halo, &row_ids)?;
        let part_graph = extended_rows(&s, first, owned, &halo)?;
        // Checked on the whole matrix: an owned node's column holds entries of rows owned
        // elsewhere.
        let symmetric = pull_backward && crate::graph::ops::is_symmetric(&s);
        drop(s);
        let local = part_data(data, first, layout, &halo)?;
        let interior = interior_rows(&part_graph, layout.owned_rows());
        let exchange =
            b.halo_hook(Halo::from_partition(partition, rank, method)?, comm.clone(), layout, path, overlap.then_some(interior))?;
        let hook: Rc<dyn crate::nn::halo_hook::HaloHook<B>> = exchange.clone();
        // The input layer's exchanges are skipped with a local input (part_data gives the halo
        // rows their features either way).
        let owned_rows = layout.owned_rows();
        let ctx = PartContext {
            hook,
            row_ids: Rc::new(b.ids(&row_ids)?),
            edge_ids: Rc::new(b.ids(&edge_ids)?),
            local_input,
            owned: owned_rows.clone(),
            split,
            symmetric,
        };
        let n = layout.rows();
        let net = models::build_part(b, part_graph, data.features.cols(), data.classes, model, &ctx)?;
        let input = InputFeatures::for_model(b, &local.features, model)?.keyed_by(Some(b.ids(&input_ids)?));
        // The loss reads the owned rows alone (the halo rows have no label here: their owners
        // count them).
        let labels = b.labels(&local.labels[owned_rows.clone()], &local.mask_bits[owned_rows.clone()])?;
        Ok(DistTrainer {
            live: LiveRows::only(owned_rows),
            net,
            input,
            labels,
            dlogits: b.matrix(n, data.classes)?,
            eval_dlogits: b.matrix(n, data.classes)?,
            train_stats: b.stats()?,
            eval_stats: b.stats()?,
            inv_n_train: 1.0 / sizes.train as f32,
            hyper: AdamHyper { lr: train.lr, weight_decay: train.weight_decay, ..AdamHyper::default() },
            sizes,
            fused: B::Fused::default(),
            rows: Vec::new(),
            timing: StepTiming::default(),
            recorded: None,
            owned,
            halo_rows: halo.len(),
            interior_rows: interior.saturating_sub(layout.below),
            exchange,
            comm,
            path,
            grad_buckets,
            backend,
        })
    }

    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }
    pub fn mask_sizes(&self) -> MaskSizes {
        self.sizes
    }

    /// One training step: forward, loss, backward, the gradient all-reduce, Adam; the recorded
    /// one when [`DistTrainer::record`] made one. Waits for it (its wall time is timed).
    pub fn step(&mut self) -> Result<()> {
        let t0 = Instant::now();
        // Only the step's own exchanges count (not an evaluation's before it).
        self.exchange.take_counters()?;
        let backend = self.backend.clone();
        let moved = match &self.recorded {
            Some(r) => {
                backend.replay(&r.step)?;
                self.timing.replayed += 1;
                r.moved
            }
            None => self.step_eager()?,
        };
        backend.synchronize()?;
        let halo = self.exchange.take_counters()?;
        self.timing.all_reduce_seconds += B::take_all_reduce_seconds(&mut self.fused)?;
        self.timing.halo += halo;
        self.timing.halo += moved.halo;
        self.timing.all_reduce_bytes += moved.all_reduce_bytes;
        self.timing.all_reduce_calls += moved.all_reduce_calls;
        let wall = t0.elapsed().as_secs_f64();
        self.timing.steps += 1;
        self.timing.step_seconds += wall;
        self.timing.step_walls.push(wall);
        Ok(())
    }

    /// Queues one training step (nothing waits); returns its all-reduces' bytes and calls (the
    /// halo exchange counts its own).
    fn step_eager(&mut self) -> Result<Moved> {
        let backend = self.backend.clone();
        let b = &*backend;
        b.begin_step()?;
        let logits = self.net.forward(b, &mut self.input, true)?;
        let (labels, inv_n, stats) = (&self.labels, self.inv_n_train, &mut self.train_stats);
        self.live.read_write(b, logits, &mut self.dlogits, |l, d| b.cross_entropy(l, labels, inv_n, d, stats))?;
        let moved = match self.grad_buckets {
            None => {
                self.net.backward(b, &mut self.input, &mut self.dlogits)?;
                Moved { all_reduce_bytes: self.all_reduce_gradients()?, all_reduce_calls: 1, ..Moved::default() }
            }
            Some(bytes) => self.backward_in_buckets(bytes)?,
        };
        Param::adam_all(b, self.net.params().into_iter().map(|(_, p)| p), &self.hyper)?;
        Ok(moved)
    }

    /// Records the training step and the evaluation once (CUDA graphs; every rank calls it),
    /// after one eager run of each so that every lazily built plan and buffer exists. That run
    /// does not train: the parameters, Adam's moments and the step counter are put back
    /// ([`KeptState`]), so the recorded run's first epoch is the eager run's. Each exchange and
    /// all-reduce is recorded as the eager step queues it (NCCL joins the capture through the
    /// events that order its stream with the GPU's). Every rank keeps its recording only if
    /// every rank made one (a rank replaying against a rank stepping eagerly would still pair
    /// their collectives, but the runs would not be alike). Where the step cannot be recorded
    /// (the CPU; the host path or the in-process ranks, which wait on the host) nothing runs
    /// and the trainer stays eager.
    pub fn record(&mut self) -> Result<Recorded> {
        let backend = self.backend.clone();
        let b = &*backend;
        if !b.recordable(&*self.comm, self.path) {
            return Ok(Recorded::NotSupported);
        }
        let kept = KeptState::keep(b, self.net.as_mut())?;
        // The warm-up's own counts are what a replay moves.
        self.exchange.take_counters()?;
        let mut moved = self.step_eager()?;
        b.synchronize()?;
        let halo = self.exchange.take_counters()?;
        moved.halo = ExchangeCounters { seconds: 0.0, ..halo };
        B::take_all_reduce_seconds(&mut self.fused)?;
        self.evaluate()?;
        b.synchronize()?;
        self.exchange.take_counters()?;
        let captured = b.record(&mut || self.step_eager().map(|_| ())).and_then(|step| Ok((step, b.record(&mut || self.evaluate())?)));
        if captured.is_err() {
            // A failed capture leaves nothing queued that the next step must wait for.
            b.synchronize()?;
        }
        kept.put_back(b, self.net.as_mut())?;
        let mut failed = [if matches!(captured, Ok((Some(_), Some(_)))) { 0.0f64 } else { 1.0 }];
        self.comm.all_reduce_sum(&mut failed)?;
        Ok(match captured {
            Ok((Some(step), Some(eval))) if failed[0] == 0.0 => {
                self.recorded = Some(Recording { step, eval, moved });
                Recorded::Yes
            }
            Ok((Some(_), Some(_))) => Recorded::Failed(format!("{} of the ranks could not record their step", failed[0])),
            Ok(_) => Recorded::NotSupported,
            Err(e) => Recorded::Failed(e.to_string()),
        })
    }

    /// Every parameter's gradient summed over the ranks, in one collective; returns its bytes.
    fn all_reduce_gradients(&mut self) -> Result<u64> {
        let b = self.backend.clone();
        let mut params = self.net.params();
        let mut grads: Vec<&mut B::Mat> = params.iter_mut().map(|(_, p)| &mut p.grad).collect();
        b.all_reduce_mats(&*self.comm, &mut grads, &mut self.fused, self.path)
    }

    /// The backward with the gradient all-reduce in buckets of at least `bytes` (whole layers,
    /// as the model's backward announces them: [`Model::backward_by_layer`]); Adam's inputs are
    /// in place (on the GPU's stream) when it returns. Returns the buckets' bytes and count.
    fn backward_in_buckets(&mut self, bytes: usize) -> Result<Moved> {
        let backend = self.backend.clone();
        let b = &*backend;
        {
            let mut params = self.net.params();
            let mats: Vec<&B::Mat> = params.iter_mut().map(|(_, p)| &p.grad).collect();
            b.buckets_begin(&mats, &mut self.fused, self.path)?;
        }
        let mut buckets = Buckets {
            comm: &*self.comm,
            fused: &mut self.fused,
            path: self.path,
            bytes,
            open: 0,
            packed: Vec::new(),
            reduced: 0,
            started: 0,
        };
        let run = self.net.backward_by_layer(b, &mut self.input, &mut self.dlogits, &mut buckets);
        // The last bucket (the input layer's) is started even when the backward failed, so the
        // peers' collectives still match.
        let last = buckets.start(b);
        run?;
        last?;
        let Buckets { packed, reduced, started, .. } = buckets;
        let moved = Moved { all_reduce_bytes: reduced, all_reduce_calls: started, ..Moved::default() };
        // Each parameter's sums back into its gradient: the model announced every one once.
        let mut params = self.net.params();
        let mut targets = Vec::with_capacity(params.len());
        for (name, p) in params.iter_mut() {
            let at = std::ptr::from_ref::<B::Mat>(&p.grad) as usize;
            let range = packed.iter().find(|(a, _)| *a == at).map(|(_, r)| r.clone());
            let range = range.ok_or_else(|| Error::Unsupported(format!("{name}: the model's backward never announced its gradient")))?;
            targets.push((&mut p.grad, range));
        }
        if packed.len() != targets.len() {
            return Err(Error::Unsupported(format!(
                "the model's backward announced {} gradients for {} parameters",
                packed.len(),
                targets.len()
            )));
        }
        b.buckets_finish(&*self.comm, &mut targets, &mut self.fused, self.path)?;
        Ok(moved)
    }

    /// The evaluation forward (every mask's correct count): the recorded one when
    /// [`DistTrainer::record`] made one.
    pub fn evaluate(&mut self) -> Result<()> {
        match &self.recorded {
            Some(r) => self.backend.replay(&r.eval),
            None => self.evaluate_eager(),
        }
    }

    fn evaluate_eager(&mut self) -> Result<()> {
        let b = &*self.backend;
        let logits = self.net.forward(b, &mut self.input, false)?;
        let (labels, inv_n, stats) = (&self.labels, self.inv_n_train, &mut self.eval_stats);
        self.live.read_write(b, logits, &mut self.eval_dlogits, |l, d| b.cross_entropy(l, labels, inv_n, d, stats))
    }

    /// The global loss of the last step and the global accuracies of the last evaluation (an
    /// all-reduce: every rank calls it).
    pub fn read(&self, epoch: usize) -> Result<EpochRecord> {
        let train = self.backend.read_stats(&self.train_stats)?;
        let eval = self.backend.read_stats(&self.eval_stats)?;
        let mut v = [train.loss, eval.correct[0], eval.correct[1], eval.correct[2]];
        self.comm.all_reduce_sum(&mut v)?;
        let acc = |c: f64, n: usize| if n == 0 { 0.0 } else { c / n as f64 };
        Ok(EpochRecord {
            epoch,
            loss: v[0],
            train_acc: acc(v[1], self.sizes.train),
            val_acc: acc(v[2], self.sizes.val),
            test_acc: acc(v[3], self.sizes.test),
        })
    }

    /// `epochs` epochs of step + evaluation; `on_epoch` after each (on every rank).
    pub fn fit(&mut self, epochs: usize, mut on_epoch: impl FnMut(&EpochRecord)) -> Result<History> {
        let t0 = Instant::now();
        let mut out = Vec::with_capacity(epochs);
        for e in 0..epochs {
            self.step()?;
            self.evaluate()?;
            let rec = self.read(e + 1)?;
            if !rec.loss.is_finite() {
                return Err(Error::Unsupported(format!("the loss became {} at epoch {}; try a smaller --lr", rec.loss, e + 1)));
            }
            on_epoch(&rec);
            out.push(rec);
        }
        Ok(History::new(out, t0.elapsed().as_secs_f64()))
    }

    /// The training steps' timing since the last call (their halo exchanges included; an
    /// evaluation's are not), reset to zero.
    pub fn take_timing(&mut self) -> StepTiming {
        std::mem::take(&mut self.timing)
    }

    /// The parameters by name, as f64 host values (the tests compare them across ranks).
    pub fn weights(&mut self) -> Result<Vec<(String, Vec<f64>)>> {
        let b = self.backend.clone();
        let mut out = Vec::new();
        for (name, p) in self.net.params() {
            let rows = B::shape(&p.value).0;
            b.read_rows(&p.value, 0..rows, &mut self.rows)?;
            out.push((name, self.rows.iter().map(|v| v.to_f64()).collect()));
        }
        Ok(out)
    }
}

/// What one step moves between the ranks (counted by the eager step; a replay moves what the
/// recorded step moved).
#[derive(Clone, Copy, Debug, Default)]
struct Moved {
    /// Bytes and calls (no seconds).
    halo: ExchangeCounters,
    all_reduce_bytes: u64,
    all_reduce_calls: u64,
}

/// [`DistTrainer::record`]'s graphs and what the step moves.
struct Recording<B: Backend> {
    step: B::Recording,
    eval: B::Recording,
    moved: Moved,
}

/// The step's [`GradReady`] hook: packs each announced gradient and starts a bucket once the
/// gradients packed since the last one hold at least `bytes`.
struct Buckets<'a, B: DistBackend<C>, C: Communicator + 'static> {
    comm: &'a C,
    fused: &'a mut B::Fused,
    path: HaloPath,
    bytes: usize,
    /// Where the bucket being filled starts in the bucket buffer.
    open: usize,
    /// Every gradient packed this step (identified by its address: the model stays in place
    /// during its backward) and where its values lie.
    packed: Vec<(usize, Range<usize>)>,
    /// Bytes reduced so far, in how many buckets.
    reduced: u64,
    started: u64,
}

impl<B: DistBackend<C>, C: Communicator + 'static> Buckets<'_, B, C> {
    /// Starts the bucket of everything packed since the last one (nothing when empty).
    fn start(&mut self, b: &B) -> Result<()> {
        let end = self.packed.last().map_or(0, |(_, r)| r.end);
        if end > self.open {
            self.reduced += b.bucket_start(self.comm, self.open..end, self.fused, self.path)?;
            self.started += 1;
            self.open = end;
        }
        Ok(())
    }
}

impl<B: DistBackend<C>, C: Communicator + 'static> GradReady<B> for Buckets<'_, B, C> {
    fn ready(&mut self, b: &B, params: &mut [&mut Param<B>]) -> Result<()> {
        for p in params.iter() {
            let range = b.bucket_pack(&p.grad, self.fused, self.path)?;
            self.packed.push((std::ptr::from_ref::<B::Mat>(&p.grad) as usize, range));
        }
        let end = self.packed.last().map_or(0, |(_, r)| r.end);
        if (end - self.open) * std::mem::size_of::<B::Elem>() >= self.bytes {
            self.start(b)?;
        }
        Ok(())
    }
}

/// One in-process run ([`train_in_process`]): `parts` ranks as threads of this process.
pub struct InProcessRun<'a> {
    /// The whole dataset, relabelled by the partition.
    pub data: &'a Dataset,
    pub partition: &'a Partition,
    pub options: DistOptions,
    pub model: &'a ModelConfig,
    pub train: &'a TrainConfig,
    /// How long a rank waits for a peer.
    pub timeout: std::time::Duration,
}

impl<'a> InProcessRun<'a> {
    /// `method` on the device path, overlapped ([`DistOptions::new`]).
    pub fn new(
        data: &'a Dataset,
        partition: &'a Partition,
        method: ExchangeMethod,
        model: &'a ModelConfig,
        train: &'a TrainConfig,
        timeout: std::time::Duration,
    ) -> Self {
        InProcessRun { data, partition, options: DistOptions::new(method), model, train, timeout }
    }
}

/// Runs the partition's ranks as threads of this process ([`crate::dist::InProcess`]), each
/// with the backend `make(rank)` returns, and returns rank 0's history (every rank's is the
/// same: its records are all-reduced) and every rank's timing. `on_epoch` sees rank 0's
/// records.
pub fn train_in_process<B: DistBackend<crate::dist::InProcess>>(
    run: &InProcessRun<'_>,
    make: impl Fn(usize) -> Result<B> + Sync,
    on_epoch: impl Fn(&EpochRecord) + Sync,
) -> Result<(History, Vec<StepTiming>)> {
    let InProcessRun { data, partition, options, model, train, timeout } = *run;
    let runs = crate::dist::InProcess::run(partition.parts(), timeout, |comm| {
        let rank = comm.rank();
        let mut t = DistTrainer::with_options(Arc::new(make(rank)?), Rc::new(comm), data, partition, options, model, train)?;
        let h = t.fit(train.epochs, |e| {
            if rank == 0 {
                on_epoch(e)
            }
        })?;
        Ok((h, t.take_timing()))
    })?;
    let timing = runs.iter().map(|r| r.1.clone()).collect();
    let first = runs.into_iter().next().expect("a world has a rank 0").0;
    Ok((first, timing))
}

#[cfg(test)]
mod tests {
    use super::StepTiming;

    fn walls(w: &[f64]) -> StepTiming {
        StepTiming { steps: w.len() as u64, step_seconds: w.iter().sum(), step_walls: w.to_vec(), ..StepTiming::default() }
    }

    #[test]
    fn medians_of_steps() {
        assert_eq!(walls(&[3.0, 1.0, 2.0]).median_step_seconds(), 2.0);
        assert_eq!(walls(&[4.0, 1.0, 2.0, 3.0]).median_step_seconds(), 2.5);
        assert_eq!(walls(&[]).median_step_seconds(), 0.0);
        // The slowest rank differs per step: maxima 5, 2, 6, median 5 (neither rank's median).
        let ranks = [walls(&[5.0, 1.0, 1.0]), walls(&[1.0, 2.0, 6.0])];
        assert_eq!(StepTiming::median_slowest_step_seconds(&ranks), Some(5.0));
        assert_eq!(StepTiming::median_slowest_step_seconds(&[walls(&[1.0]), walls(&[1.0, 2.0])]), None);
    }
}
