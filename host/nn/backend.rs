//! What a layer asks of the hardware: the handful of dense, sparse and elementwise ops a GCN or
//! an AGNN step is made of. Layers are written once against this trait; [`super::cpu`] runs
//! them with rayon (in f32, or f64 for gradient checks) and [`super::cuda`] on the GPU.
//!
//! Every buffer a step touches is allocated when the model is built; the ops only enqueue work,
//! so that the GPU backend can capture a whole step as a CUDA graph.

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
    fn download(&self, m: &Self::Mat) -> Result<Matrix>;
    fn shape(m: &Self::Mat) -> (usize, usize);
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
    fn stats(&self) -> Result<Self::Stats>;
    /// Waits for the queued work and reads the statistics.
    fn read_stats(&self, s: &Self::Stats) -> Result<Stats>;

    // -- the step counter that seeds dropout and drives Adam's bias correction --
    /// Starts a training step: the counter read by `dropout` and `adam` advances by one.
    fn begin_step(&self) -> Result<()>;

    // -- dense --
    /// `c = op(a) op(b) + beta c`, `op` transposing when asked.
    fn gemm(&self, a: &Self::Mat, trans_a: bool, b: &Self::Mat, trans_b: bool, beta: f32, c: &mut Self::Mat) -> Result<()>;
    /// `y[r] += b` for every row (`b` is `1 x cols`).
    fn bias_add(&self, y: &mut Self::Mat, b: &Self::Mat) -> Result<()>;
    /// `out = 1ᵀ x` (`out` is `1 x cols`).
    fn col_sums(&self, x: &Self::Mat, out: &mut Self::Mat) -> Result<()>;
    fn add_assign(&self, y: &mut Self::Mat, x: &Self::Mat) -> Result<()>;
    fn copy(&self, src: &Self::Mat, dst: &mut Self::Mat) -> Result<()>;
    fn relu(&self, x: &mut Self::Mat) -> Result<()>;
    /// `dy *= (y > 0)` with `y` the ReLU's output.
    fn relu_backward(&self, y: &Self::Mat, dy: &mut Self::Mat) -> Result<()>;
    /// Inverted dropout with probability `p`; the mask is drawn from (`seed`, step counter).
    fn dropout(&self, x: &Self::Mat, y: &mut Self::Mat, mask: &mut Self::Mask, p: f32, seed: u64) -> Result<()>;
    fn dropout_backward(&self, dy: &Self::Mat, mask: &Self::Mask, p: f32, dx: &mut Self::Mat) -> Result<()>;
    /// Dropout over edge values (the nonzeros of sparse input features).
    fn dropout_edges(&self, x: &Self::Edges, y: &mut Self::Edges, mask: &mut Self::Mask, p: f32, seed: u64) -> Result<()>;
    /// `n = h / max(||h||, eps)` per row, keeping `1 / max(||h||, eps)`.
    fn row_normalize(&self, h: &Self::Mat, n: &mut Self::Mat, inv_norm: &mut Self::Mat) -> Result<()>;
    /// `dh += (dn - n (n . dn)) * inv_norm` per row.
    fn row_normalize_backward(&self, n: &Self::Mat, inv_norm: &Self::Mat, dn: &Self::Mat, dh: &mut Self::Mat) -> Result<()>;

    // -- sparse --
    /// `y = S x` (or `Sᵀ x`) with `values` laid out for that side.
    fn spmm(&self, g: &Self::Graph, side: Side, values: &Self::Edges, x: &Self::Mat, y: &mut Self::Mat) -> Result<()>;
    /// `out_e = a_row(e) . b_col(e)` on the edges of `S` (the pattern only).
    fn sddmm(&self, g: &Self::Graph, a: &Self::Mat, b: &Self::Mat, out: &mut Self::Edges) -> Result<()>;
    /// `S`'s edge values laid out for `Sᵀ`.
    fn transpose_edges(&self, g: &Self::Graph, src: &Self::Edges, dst: &mut Self::Edges) -> Result<()>;
    /// `alpha = softmax over each row of beta * cos` (`beta` a `1 x 1` matrix).
    fn edge_softmax(&self, g: &Self::Graph, beta: &Self::Mat, cos: &Self::Edges, alpha: &mut Self::Edges) -> Result<()>;
    /// The backward of [`Backend::edge_softmax`]: `dcos`, and `dbeta` (overwritten).
    #[allow(clippy::too_many_arguments)]
    fn edge_softmax_backward(
        &self,
        g: &Self::Graph,
        beta: &Self::Mat,
        alpha: &Self::Edges,
        dalpha: &Self::Edges,
        cos: &Self::Edges,
        dcos: &mut Self::Edges,
        dbeta: &mut Self::Mat,
    ) -> Result<()>;

    // -- loss and optimiser --
    /// Log-softmax + NLL over the train nodes (mean), its gradient, and correct counts per mask.
    fn cross_entropy(&self, logits: &Self::Mat, labels: &Self::Labels, inv_n_train: f32, dlogits: &mut Self::Mat, stats: &mut Self::Stats) -> Result<()>;
    /// One Adam update of `param` from `grad` (moments `m`, `v`), at the current step count.
    fn adam(&self, param: &mut Self::Mat, grad: &Self::Mat, m: &mut Self::Mat, v: &mut Self::Mat, hyper: &AdamHyper) -> Result<()>;
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

pub use crate::ops::nn::adam::AdamHyper;
