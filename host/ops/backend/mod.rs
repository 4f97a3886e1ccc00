//! Where a layer's ops run: the infrastructure every op shares (memory, graphs, masks, labels,
//! record / replay, timing, the step counter). [`cpu::CpuBackend`] runs on the host with rayon
//! (f32, or f64 for gradient checks), [`cuda::CudaBackend`] on the GPU.
//!
//! The ops themselves are not here: each is one file in `ops/nn/` holding a small trait (e.g.
//! [`crate::ops::nn::relu::ReluOp`]), its CPU reference and its GPU launcher, and implementing the
//! trait for both backends; [`crate::ops::nn::Ops`] names them all. The backend names no op:
//! what an op keeps between calls (scratch buffers, tables, its settings) is a type of the
//! op's file, held in the backend's [`op_state::OpState`]. So the arrows point one way: the ops
//! import the backend, never the reverse.
//!
//! Every buffer a step touches is allocated when the model is built; the ops only enqueue work,
//! so that the GPU backend can capture a whole step as a CUDA graph.

pub mod bind;
pub mod cpu;
pub mod cuda;
pub mod op_state;

use crate::error::Result;
use crate::gpu::timing::Timing;
use crate::graph::Csr;
use crate::tensor::Matrix;

/// Which way a sparse product reads the pattern: `S` as built, or its transpose `Sᵀ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Forward,
    Transposed,
}

pub trait Backend {
    /// A dense row-major matrix.
    type Mat;
    /// One value per edge of a sparse pattern, in whatever order the backend's sparse kernels
    /// read (the layers never index it).
    type Edges;
    /// A sparse pattern, its transpose and whatever was translated from them.
    type Graph;
    /// A dropout mask.
    type Mask;
    /// u32 ids, one per row or edge: the original ids a part of a partitioned graph keys its
    /// dropout masks by ([`crate::ops::nn::dropout::DropKey`]).
    type Ids;
    /// Labels and the train / validation / test membership of every node.
    type Labels;
    /// The loss and the correct counts of one `cross_entropy` (see [`Stats`]).
    type Stats;
    /// A recorded sequence of work (see [`Backend::record`]).
    type Recording;

    /// A short description for reports ("cpu f64", "NVIDIA H100 tf32 tc8").
    fn describe(&self) -> String;

    // -- memory (model build time only) --
    /// A zeroed `rows x cols` matrix.
    fn matrix(&self, rows: usize, cols: usize) -> Result<Self::Mat>;
    fn upload(&self, m: &Matrix) -> Result<Self::Mat>;
    /// [`Backend::upload`] of a matrix the caller gives up: a backend that can keep its storage
    /// (the CPU one in f32) does, so the data is held once; the others free it after the upload.
    fn upload_owned(&self, m: Matrix) -> Result<Self::Mat> {
        self.upload(&m)
    }
    fn download(&self, m: &Self::Mat) -> Result<Matrix>;
    /// The first `len` values of an edge buffer, in the backend's order (a link predictor's
    /// scores, read for its metrics).
    fn download_edges(&self, e: &Self::Edges, len: usize) -> Result<Vec<f32>>;
    /// The first `rows` rows of `m` into `dst` (`rows x cols` values): a layer-wise inference
    /// reads back only a batch's output nodes, which lead its rows.
    fn download_head_into(&self, m: &Self::Mat, rows: usize, dst: &mut [f32]) -> Result<()> {
        let all = self.download(m)?;
        if rows > all.rows || dst.len() != rows * all.cols {
            return Err(crate::error::Error::Shape(format!(
                "download_head_into: {rows} rows of a {} x {} matrix into {} values",
                all.rows,
                all.cols,
                dst.len()
            )));
        }
        dst.copy_from_slice(&all.data[..rows * all.cols]);
        Ok(())
    }
    fn shape(m: &Self::Mat) -> (usize, usize);
    /// Runs `f` on rows `rows` of `m` as a matrix of their own: a product over a range of rows
    /// (a part's interior rows while its halo exchange runs) writes straight into them. The
    /// GPU's is a view of the same memory; the CPU's a copy written back.
    fn on_rows(&self, m: &mut Self::Mat, rows: std::ops::Range<usize>, f: &mut dyn FnMut(&mut Self::Mat) -> Result<()>) -> Result<()>;
    /// [`Backend::on_rows`] for reading only: `f` sees rows `rows` of `m` as a matrix of their
    /// own (the GPU's a view, the CPU's a copy).
    fn on_rows_ref(&self, m: &Self::Mat, rows: std::ops::Range<usize>, f: &mut dyn FnMut(&Self::Mat) -> Result<()>) -> Result<()>;
    /// `f` on elements `range` of `ids` as ids of their own (the GPU's a view, the CPU's a copy).
    fn on_ids_ref(&self, ids: &Self::Ids, range: std::ops::Range<usize>, f: &mut dyn FnMut(&Self::Ids) -> Result<()>) -> Result<()>;
    /// The pattern of `csr` with its transpose; `csr`'s values become [`Backend::graph_values`].
    fn graph(&self, csr: Csr) -> Result<Self::Graph>;
    /// Rows and columns of the pattern as built.
    fn graph_shape(g: &Self::Graph) -> (usize, usize);
    /// A zeroed edge buffer for `side`.
    fn edges(&self, g: &Self::Graph, side: Side) -> Result<Self::Edges>;
    /// A one-time record of `f`'s work that [`Backend::replay`] re-runs cheaply (a CUDA graph);
    /// `None` where the backend has nothing cheaper than running `f` again.
    fn record(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<Option<Self::Recording>>;
    fn replay(&self, r: &Self::Recording) -> Result<()>;
    /// Runs `f` `warmup + reps` times and times each of the last `reps` runs (device events on
    /// the GPU, so only the work `f` enqueues is timed).
    fn time(&self, warmup: usize, reps: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<Timing>;
    /// Waits for all queued work.
    fn synchronize(&self) -> Result<()>;
    /// Runs `f` with every op timed; per op name: total milliseconds and calls, slowest first
    /// (empty where the backend does not time ops).
    fn time_ops(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<Vec<(String, f64, usize)>> {
        f()?;
        Ok(Vec::new())
    }

    /// The values the graph was built with, laid out for `side`.
    fn graph_values(&self, g: &Self::Graph, side: Side) -> Result<Self::Edges>;
    /// A mask for dropout over a `rows x cols` matrix.
    fn mask(&self, rows: usize, cols: usize) -> Result<Self::Mask>;
    /// A mask for dropout over the values of `edges`.
    fn edge_mask(&self, edges: &Self::Edges) -> Result<Self::Mask>;
    fn labels(&self, labels: &[i32], mask_bits: &[u8]) -> Result<Self::Labels>;
    /// `ids` where the ops read them (model build time).
    fn ids(&self, ids: &[u32]) -> Result<Self::Ids>;
    fn stats(&self) -> Result<Self::Stats>;
    /// Waits for the queued work and reads the statistics.
    fn read_stats(&self, s: &Self::Stats) -> Result<Stats>;

    // -- the step counter that seeds dropout and drives Adam's bias correction --
    /// Starts a training step: the counter read by `dropout` and `adam` advances by one.
    fn begin_step(&self) -> Result<()>;
    /// The steps begun so far (waits for queued work), for a checkpoint.
    fn steps(&self) -> Result<u32>;
    /// Sets the step counter (resuming from a checkpoint: dropout masks and Adam's bias
    /// correction continue where they stopped).
    fn set_steps(&self, steps: u32) -> Result<()>;
}

/// What `cross_entropy` counts: the mean train loss and the correctly classified nodes of each mask.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    pub loss: f64,
    pub correct: [f64; 3],
}

/// Membership bits of a node (one byte per node).
pub const TRAIN_BIT: u8 = 1;
pub const VAL_BIT: u8 = 2;
pub const TEST_BIT: u8 = 4;
