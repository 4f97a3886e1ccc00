// Primitive ops of GNN training (`nn/`), f32 on CUDA cores: argument structs and instances.
// Shared with the host (`include!`). Matrices are row-major with a padded stride; the
// elementwise kernels run over whole padded buffers in float4s.
use super::*;

kernel_args! {
    /// One Adam step over `n4` float4s of four buffers of one shape.
    pub struct AdamArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub param: PtrMut<f32>,
        pub grad: Ptr<f32>,
        /// First moment.
        pub m: PtrMut<f32>,
        /// Second moment.
        pub v: PtrMut<f32>,
        pub lr: f32,
        pub beta1: f32,
        pub beta2: f32,
        pub eps: f32,
        pub weight_decay: f32,
        /// The step t (>= 1), read when the kernel runs.
        pub step: Ptr<u32>,
    }

    /// One Adam step over several tensors in one launch (a model's parameters: most are a few
    /// thousand floats, and a launch each cost more than their updates). `table` holds per
    /// tensor the addresses of its param, grad, m and v (4 `u64`s a tensor), then each tensor's
    /// first float4 in the tensors' concatenation (`tensors + 1` values, the last the total).
    pub struct AdamManyArgs {
        pub tensors: u32,
        pub table: Ptr<u64>,
        pub lr: f32,
        pub beta1: f32,
        pub beta2: f32,
        pub eps: f32,
        pub weight_decay: f32,
        pub step: Ptr<u32>,
    }

    /// step[0] += 1 (one thread).
    pub struct StepIncrementArgs {
        pub step: PtrMut<u32>,
    }

    /// y += x over `n4` float4s.
    pub struct AddAssignArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub y: PtrMut<f32>,
        pub x: Ptr<f32>,
    }

    /// y[r][c] += b[c] over `n4` float4s of y.
    pub struct BiasAddArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        /// float4s per row of y (and of b).
        pub ld4: u32,
        pub y: PtrMut<f32>,
        pub b: Ptr<f32>,
    }

    /// y = max(y + (shift + alpha[0]) x + b, 0) (alpha may be null: shift alone), x of y's shape.
    pub struct SumBiasReluArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        /// float4s per row of y (and of x and b).
        pub ld4: u32,
        pub y: PtrMut<f32>,
        pub x: Ptr<f32>,
        pub alpha: Ptr<f32>,
        pub shift: f32,
        pub b: Ptr<f32>,
    }

    /// out[c] += sum_r x[r][c] (out zeroed by the launcher).
    pub struct ColSumsArgs {
        pub rows: u32,
        pub cols: u32,
        /// float4s per row of x.
        pub ld4: u32,
        pub x: Ptr<f32>,
        pub out: PtrMut<f32>,
    }

    /// Cross-entropy over the train mask fused with its gradient and the accuracy counts.
    pub struct CrossEntropyArgs {
        pub rows: u32,
        /// Classes.
        pub cols: u32,
        /// Padded row stride of logits and dlogits, in elements.
        pub ld: u32,
        /// log2 of the lanes per row (`partition::nn_row_group_shift`).
        pub shift: u32,
        pub logits: Ptr<f32>,
        pub labels: Ptr<i32>,
        /// Per row: bit 0 train, 1 val, 2 test.
        pub mask_bits: Ptr<u8>,
        /// The weight of a train row in the loss and gradient (1 / train rows).
        pub inv_n_train: f32,
        pub dlogits: PtrMut<f32>,
        /// [loss, correct train, correct val, correct test], zeroed by the launcher.
        pub stats: PtrMut<f32>,
    }

    /// Dropout of the first `n` elements with a counter-based mask.
    pub struct DropoutArgs {
        /// Elements (u64: over 2^32 elements, `index.rs`); element i draws with index i.
        pub n: u64,
        pub x: Ptr<f32>,
        pub y: PtrMut<f32>,
        /// One byte per element: 1 kept, 0 dropped (null: not stored).
        pub mask: PtrMut<u8>,
        /// Drop an element whose hash is below this (`rng::dropout_threshold(p)`).
        pub threshold: u32,
        /// 1 / (1 - p).
        pub scale: f32,
        /// The hashed seed (`rng::dropout_seed_key`).
        pub seed_key: u64,
        /// The step, read when the kernel runs (a fresh mask per step).
        pub step: Ptr<u32>,
        /// Added to every element's index before hashing (mask and values stay at `i`).
        pub offset: u64,
        /// Where a part of a partitioned graph draws its rows of the whole graph's mask: element
        /// i = r ld + c is keyed `offset + ids[r] ld + c` (`ids`: the part's rows' original node
        /// ids; `ld` = 1 for a vector of edges, ids then the edges' original indices); null:
        /// keyed `offset + i`.
        pub ids: Ptr<u32>,
        pub ld: u32,
    }

    /// dx = mask ? dy * scale : 0 over the first `n` elements.
    pub struct DropoutBackwardArgs {
        pub n: u64,
        pub dy: Ptr<f32>,
        pub mask: Ptr<u8>,
        /// 1 / (1 - p).
        pub scale: f32,
        pub dx: PtrMut<f32>,
    }

    /// The edges and values of AGNN's edge softmax alpha = softmax_row(beta * cos).
    pub struct SoftmaxScaledEdges {
        pub row_ptr: Ptr<u32>,
        /// Slot of each CSR edge in the value vectors; null: CSR order.
        pub slot_of: Ptr<u32>,
        /// One value, read when the kernel runs.
        pub beta: Ptr<f32>,
        pub cos: Ptr<f32>,
        pub alpha: PtrMut<f32>,
    }

    /// The edge softmax over rows shorter than `long_min` edges, a lane group per row.
    pub struct EdgeSoftmaxScaledArgs {
        pub n_rows: u32,
        /// Rows of at least this many edges are left to the `_long` kernel.
        pub long_min: u32,
        pub edges: SoftmaxScaledEdges,
    }

    /// The edge softmax over the listed long rows, a thread block per row.
    pub struct EdgeSoftmaxScaledLongArgs {
        /// The rows, one per block.
        pub long_rows: Ptr<u32>,
        pub edges: SoftmaxScaledEdges,
    }

    /// The edges and values of the edge softmax's backward.
    pub struct SoftmaxBackwardEdges {
        pub row_ptr: Ptr<u32>,
        /// Slot of each CSR edge in the value vectors; null: CSR order.
        pub slot_of: Ptr<u32>,
        /// One value, read when the kernel runs.
        pub beta: Ptr<f32>,
        pub alpha: Ptr<f32>,
        pub dalpha: Ptr<f32>,
        pub cos: Ptr<f32>,
        pub dcos: PtrMut<f32>,
        /// One value, zeroed by the launcher; each block adds its share.
        pub dbeta: PtrMut<f32>,
    }

    /// The edge softmax's backward over rows shorter than `long_min` edges.
    pub struct EdgeSoftmaxBackwardArgs {
        pub n_rows: u32,
        /// Rows of at least this many edges are left to the `_long` kernel.
        pub long_min: u32,
        pub edges: SoftmaxBackwardEdges,
    }

    /// The edge softmax's backward over the listed long rows, a thread block per row.
    pub struct EdgeSoftmaxBackwardLongArgs {
        /// The rows, one per block.
        pub long_rows: Ptr<u32>,
        pub edges: SoftmaxBackwardEdges,
    }

    /// x = ELU(x) (alpha 1) in place over `n4` float4s.
    pub struct EluArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub x: PtrMut<f32>,
    }

    /// dy *= ELU'(x) over `n4` float4s, from the ELU's output y.
    pub struct EluBackwardArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub y: Ptr<f32>,
        pub dy: PtrMut<f32>,
    }

    /// h = ELU(h) in place and y = dropout(h) (the mask of the dropout kernel, not stored).
    pub struct EluDropoutArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub h: PtrMut<f32>,
        pub y: PtrMut<f32>,
        pub threshold: u32,
        pub scale: f32,
        pub seed_key: u64,
        pub step: Ptr<u32>,
        pub offset: u64,
        /// float4s per row, and the rows' original ids or null (as `DropoutArgs::ids`).
        pub ld4: u32,
        pub ids: Ptr<u32>,
    }

    /// dz = keep ? dy · scale · ELU'(h) : 0, the mask drawn again: the backward of
    /// `EluDropoutArgs`'s dropout and ELU (h its ELU output).
    pub struct EluDropoutBackwardArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub dy: Ptr<f32>,
        pub h: Ptr<f32>,
        pub threshold: u32,
        pub scale: f32,
        pub seed_key: u64,
        pub step: Ptr<u32>,
        pub offset: u64,
        pub dz: PtrMut<f32>,
        /// 1: h holds the ELU's input z (ELU'(z) = e^z for z ≤ 0), else its output.
        pub pre: u32,
        /// 1: h is f16 (same shape and stride), else f32.
        pub h16: u32,
        /// As `EluDropoutArgs::ld4` and `ids`.
        pub ld4: u32,
        pub ids: Ptr<u32>,
    }

    /// `EluDropoutBackwardArgs` with dy = g wᵀ formed per element: g rows x k (k ≤ 8, stride
    /// 8, zeros past k), w cols x k (stride 8); h and dz rows x 4q (stride 4q), `n4` = rows q
    /// float4s (< 2^32).
    pub struct EluDropoutBackwardProductArgs {
        pub n4: u32,
        pub q: u32,
        pub cols: u32,
        pub g: Ptr<f32>,
        pub w: Ptr<f32>,
        pub h: Ptr<f32>,
        pub threshold: u32,
        pub scale: f32,
        pub seed_key: u64,
        pub step: Ptr<u32>,
        pub offset: u64,
        pub dz: PtrMut<f32>,
        /// dz's column sums are added here (1 x cols, zeroed by the launcher), or null.
        pub col_sums: PtrMut<f32>,
        /// As `EluDropoutBackwardArgs::pre` and `h16`.
        pub pre: u32,
        pub h16: u32,
        /// The rows' original ids or null (as `DropoutArgs::ids`; rows of q float4s).
        pub ids: Ptr<u32>,
    }

    /// GAT's per-node scores s[i][h] = sum_f wh[i][h*head_dim + f] a[h*head_dim + f].
    pub struct GatScoresArgs {
        pub rows: u32,
        pub heads: u32,
        pub head_dim: u32,
        pub wh_ld: u32,
        pub s_ld: u32,
        pub wh: Ptr<f32>,
        /// 1 x (heads * head_dim) each: PyG's att_src and att_dst.
        pub a_src: Ptr<f32>,
        pub a_dst: Ptr<f32>,
        pub s_src: PtrMut<f32>,
        pub s_dst: PtrMut<f32>,
    }

    /// The scores' backward, both vectors at once: with h = c / head_dim,
    /// dwh[i][c] += ds_src[i][h] a_src[c] + ds_dst[i][h] a_dst[c] and
    /// da_src[c] += sum_i ds_src[i][h] wh[i][c], da_dst likewise (da zeroed by the launcher;
    /// each block adds its column sums atomically, from shared memory when `smem` is set).
    pub struct GatScoresBackwardArgs {
        pub rows: u32,
        pub heads: u32,
        pub head_dim: u32,
        /// Stride of wh and dwh.
        pub wh_ld: u32,
        pub s_ld: u32,
        /// Whether the block sums its columns in shared memory (2 wh_ld floats) first.
        pub smem: u32,
        pub wh: Ptr<f32>,
        pub a_src: Ptr<f32>,
        pub a_dst: Ptr<f32>,
        pub ds_src: Ptr<f32>,
        pub ds_dst: Ptr<f32>,
        /// Null: dwh is left alone (it has the scores' part already).
        pub dwh: PtrMut<f32>,
        pub da_src: PtrMut<f32>,
        pub da_dst: PtrMut<f32>,
    }

    /// The edges of one GAT head: logits e = LeakyReLU(s_dst[row][head] + s_src[col][head]).
    pub struct GatEdges {
        /// Edges (CSR nonzeros), a thread each.
        pub nnz: u32,
        pub head: u32,
        /// Stride of the n x heads score matrices.
        pub s_ld: u32,
        pub slope: f32,
        pub row_ptr: Ptr<u32>,
        /// Row of each CSR edge (the COO rows).
        pub row_of: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        /// Slot of each CSR edge in the value vectors; null: CSR order.
        pub slot_of: Ptr<u32>,
        pub s_dst: Ptr<f32>,
        pub s_src: Ptr<f32>,
    }

    /// Forward: logits (written at every edge slot).
    pub struct GatEdgeLogitsArgs {
        pub edges: GatEdges,
        pub logits: PtrMut<f32>,
    }

    /// Backward over the rows shorter than `long_min` edges, a lane group per row: dz = de *
    /// LeakyReLU'(z) per edge, ds_dst[row][head] = sum of the row's dz (empty rows written 0).
    pub struct GatEdgeLogitsBackwardArgs {
        pub n_rows: u32,
        /// Rows of at least this many edges are left to the `_long` kernel.
        pub long_min: u32,
        pub edges: GatEdges,
        pub de: Ptr<f32>,
        pub dz: PtrMut<f32>,
        pub ds_dst: PtrMut<f32>,
    }

    /// The backward over the listed long rows, a thread block per row.
    pub struct GatEdgeLogitsBackwardLongArgs {
        /// The rows, one per block.
        pub long_rows: Ptr<u32>,
        pub edges: GatEdges,
        pub de: Ptr<f32>,
        pub dz: PtrMut<f32>,
        pub ds_dst: PtrMut<f32>,
    }

    /// Edge values and where their row sums go: out[row][col] (row stride `ld`).
    pub struct RowSumEdges {
        pub col: u32,
        pub ld: u32,
        pub row_ptr: Ptr<u32>,
        /// Slot of each CSR edge in `values`; null: CSR order.
        pub slot_of: Ptr<u32>,
        pub values: Ptr<f32>,
        pub out: PtrMut<f32>,
    }

    /// Row sums of the rows shorter than `long_min` edges, a lane group per row (empty rows
    /// written 0).
    pub struct EdgeRowSumsArgs {
        pub n_rows: u32,
        /// Rows of at least this many edges are left to the `_long` kernel.
        pub long_min: u32,
        pub sums: RowSumEdges,
    }

    /// Row sums of the listed long rows, a thread block per row.
    pub struct EdgeRowSumsLongArgs {
        /// The rows, one per block.
        pub long_rows: Ptr<u32>,
        pub sums: RowSumEdges,
    }

    /// Column blocks of a wide matrix (GAT's heads): take dst[r][c] = alpha src[r][col0 + c]
    /// (dst's padding written 0), put dst[r][col0 + c] = (accumulate ? dst : 0) + alpha src[r][c].
    pub struct HeadColumnsArgs {
        pub rows: u32,
        /// Columns of the narrow side.
        pub cols: u32,
        pub src_ld: u32,
        pub dst_ld: u32,
        pub col0: u32,
        pub alpha: f32,
        pub accumulate: u32,
        pub src: Ptr<f32>,
        pub dst: PtrMut<f32>,
    }

    /// dst[r][c] = src[ids[r]][c] for r < n_ids, c < cols; the rest of dst's padded rows 0.
    pub struct GatherRowsArgs {
        /// Rows of dst (written whole).
        pub rows: u32,
        pub n_ids: u32,
        pub cols: u32,
        pub src_ld: u32,
        pub dst_ld: u32,
        /// Row ids into src, each < src's rows.
        pub ids: Ptr<u32>,
        pub src: Ptr<f32>,
        pub dst: PtrMut<f32>,
    }

    /// x = max(x, 0) over `n4` float4s.
    pub struct ReluArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub x: PtrMut<f32>,
    }

    /// dy = y > 0 ? dy : 0 over `n4` float4s.
    pub struct ReluBackwardArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        /// The ReLU's output.
        pub y: Ptr<f32>,
        pub dy: PtrMut<f32>,
    }

    /// y = dropout(max(z + b, 0)) (`nn/relu_dropout.rs`), element (r, c) of the padded buffer
    /// keyed `offset + r ld + c` as `DropoutArgs`'s, written over z (z and y are one buffer).
    pub struct BiasReluDropoutArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        /// float4s per row of z, y (and of b).
        pub ld4: u32,
        pub z: Ptr<f32>,
        pub b: Ptr<f32>,
        pub y: PtrMut<f32>,
        pub threshold: u32,
        pub scale: f32,
        pub seed_key: u64,
        pub step: Ptr<u32>,
        pub offset: u64,
        /// The rows' original ids or null (as `DropoutArgs::ids`).
        pub ids: Ptr<u32>,
    }

    /// dz = y > 0 ? dy · scale : 0: the backward of `BiasReluDropoutArgs`'s ReLU and dropout.
    /// Written over dy (dy and dz are one buffer).
    pub struct ReluDropoutBackwardArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub dy: Ptr<f32>,
        /// The forward's output.
        pub y: Ptr<f32>,
        pub scale: f32,
        pub dz: PtrMut<f32>,
    }

    /// Row L2 normalisation n = h / max(||h||, 1e-12).
    pub struct RowNormalizeArgs {
        pub rows: u32,
        /// float4s per row.
        pub ld4: u32,
        /// log2 of the lanes per row (`partition::nn_row_group_shift`).
        pub shift: u32,
        pub h: Ptr<f32>,
        pub n: PtrMut<f32>,
        /// n in f16 (pairs as u32, same stride), or null for none.
        pub n16: PtrMut<u32>,
        /// 1 / max(||h_r||, 1e-12) per row.
        pub inv_norm: PtrMut<f32>,
    }

    /// dh += (dn - n (n . dn)) * inv_norm per row.
    pub struct RowNormalizeBackwardArgs {
        pub rows: u32,
        /// float4s per row.
        pub ld4: u32,
        /// log2 of the lanes per row (`partition::nn_row_group_shift`).
        pub shift: u32,
        pub n: Ptr<f32>,
        pub inv_norm: Ptr<f32>,
        pub dn: Ptr<f32>,
        pub dh: PtrMut<f32>,
    }
    /// y += (shift + alpha[0]) * x over `n4` float4s (alpha read when the kernel runs).
    pub struct ScaledAddArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub y: PtrMut<f32>,
        pub x: Ptr<f32>,
        pub alpha: Ptr<f32>,
        pub shift: f32,
    }

    /// out[g][c] = sum / mean / max over rows offsets[g]..offsets[g + 1] of x[r][c] (out's
    /// padded rows written whole; max also writes the argmax row, u32::MAX for an empty
    /// segment). x and out share the stride `ld`.
    pub struct SegmentPoolArgs {
        pub graphs: u32,
        pub cols: u32,
        pub ld: u32,
        /// graphs + 1 non-decreasing row offsets.
        pub offsets: Ptr<u32>,
        pub x: Ptr<f32>,
        pub out: PtrMut<f32>,
        /// graphs x ld (max only; unused otherwise).
        pub argmax: PtrMut<u32>,
    }

    /// dx[r][c] from dout[g(r)][c] (the pooling's backward; dx's padded rows written whole).
    pub struct SegmentPoolBackwardArgs {
        /// Rows of dx (= offsets[graphs]).
        pub rows: u32,
        pub graphs: u32,
        pub cols: u32,
        pub ld: u32,
        pub offsets: Ptr<u32>,
        pub dout: Ptr<f32>,
        /// The forward's argmax (max only).
        pub argmax: Ptr<u32>,
        pub dx: PtrMut<f32>,
    }

    /// out[0] += sum a * b over `n4` float4s (out zeroed by the launcher).
    pub struct DotArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub a: Ptr<f32>,
        pub b: Ptr<f32>,
        pub out: PtrMut<f32>,
    }

    /// sq[c] += sum_r (x[r][c] - sum[c] / rows)^2 (sq zeroed by the launcher).
    pub struct BatchNormSqArgs {
        pub rows: u32,
        pub cols: u32,
        /// float4s per row of x.
        pub ld4: u32,
        /// Live rows (a device count; null: all `rows`): rows past it are padding, left out of the
        /// statistics, and written 0.
        pub live: Ptr<u32>,
        pub x: Ptr<f32>,
        /// Column sums of x.
        pub sum: Ptr<f32>,
        pub sq: PtrMut<f32>,
    }

    /// sum[c] += sum_r x[r][c] over the live rows (sum zeroed by the launcher).
    pub struct BatchNormSumArgs {
        pub rows: u32,
        pub cols: u32,
        /// float4s per row of x.
        pub ld4: u32,
        /// Live rows (a device count; null: all `rows`): rows past it are padding, left out of the
        /// statistics, and written 0.
        pub live: Ptr<u32>,
        pub x: Ptr<f32>,
        pub sum: PtrMut<f32>,
    }

    /// Per column: mean and 1 / sqrt(var + eps) from the batch (train != 0, running statistics
    /// updated with `momentum`) or from the running statistics.
    pub struct BatchNormFinishArgs {
        pub rows: u32,
        /// Live rows (a device count; null: all `rows`): rows past it are padding, left out of the
        /// statistics, and written 0.
        pub live: Ptr<u32>,
        pub cols: u32,
        pub train: u32,
        pub eps: f32,
        pub momentum: f32,
        pub sum: Ptr<f32>,
        pub sq: Ptr<f32>,
        pub running_mean: PtrMut<f32>,
        pub running_var: PtrMut<f32>,
        pub mean: PtrMut<f32>,
        pub inv_std: PtrMut<f32>,
    }

    /// y = (x - mean) * inv_std * gamma + beta over `n4` float4s.
    pub struct BatchNormApplyArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        /// float4s per row.
        pub ld4: u32,
        /// Live rows (a device count; null: all `rows`): rows past it are padding, left out of the
        /// statistics, and written 0.
        pub live: Ptr<u32>,
        pub x: Ptr<f32>,
        pub y: PtrMut<f32>,
        pub mean: Ptr<f32>,
        pub inv_std: Ptr<f32>,
        pub gamma: Ptr<f32>,
        pub beta: Ptr<f32>,
    }

    /// dgamma[c] += sum_r dy * xhat, dbeta[c] += sum_r dy (both zeroed by the launcher).
    pub struct BatchNormBackwardSumsArgs {
        pub rows: u32,
        pub cols: u32,
        /// float4s per row.
        pub ld4: u32,
        /// Live rows (a device count; null: all `rows`): rows past it are padding, left out of the
        /// statistics, and written 0.
        pub live: Ptr<u32>,
        pub x: Ptr<f32>,
        pub dy: Ptr<f32>,
        pub mean: Ptr<f32>,
        pub inv_std: Ptr<f32>,
        pub dgamma: PtrMut<f32>,
        pub dbeta: PtrMut<f32>,
    }

    /// dx = gamma * inv_std / rows * (rows dy - dbeta - xhat dgamma) over `n4` float4s.
    pub struct BatchNormBackwardArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        /// float4s per row.
        pub ld4: u32,
        pub rows: u32,
        /// Live rows (a device count; null: all `rows`): rows past it are padding, left out of the
        /// statistics, and written 0.
        pub live: Ptr<u32>,
        pub x: Ptr<f32>,
        pub dy: Ptr<f32>,
        pub mean: Ptr<f32>,
        pub inv_std: Ptr<f32>,
        pub gamma: Ptr<f32>,
        pub dgamma: Ptr<f32>,
        pub dbeta: Ptr<f32>,
        pub dx: PtrMut<f32>,
    }
    /// Link prediction's training negatives: slot i of `count` writes `out[2i], out[2i + 1]`,
    /// the first of `NEG_ATTEMPTS` candidate pairs (`rng::negative_candidate`) that is a
    /// non-edge of the canonical CSR `(row_ptr, col_idx)` of `n` nodes with u != v; both
    /// `u32::MAX` when every candidate failed.
    pub struct NegativeSampleArgs {
        pub count: u32,
        pub n: u32,
        /// `rng::negative_stream_key(seed, epoch)`.
        pub key: u64,
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        pub out: PtrMut<u32>,
    }

    /// An epoch's negatives into a symmetric pair pattern (`nn/negative_pattern.rs`); one
    /// struct for its three kernels.
    pub struct NegativePatternArgs {
        /// Slots drawn (pairs in `slots`).
        pub count: u32,
        /// Rows (nodes).
        pub n: u32,
        /// `2 count` u32s: (u, v) a slot, `u32::MAX` twice for an empty one.
        pub slots: Ptr<u32>,
        /// `n` row counters: counted up by `count`, down by `fill`.
        pub counts: PtrMut<u32>,
        /// `n + 1` row offsets (the scan of the counts).
        pub row_ptr: Ptr<u32>,
        /// `2 count` entries: `col << 1 | end`.
        pub keys: PtrMut<u32>,
        /// Per entry: -1 (a negative) or 0 (a repeat).
        pub targets: PtrMut<f32>,
        /// Distinct pairs (one u32, zeroed by the launcher).
        pub distinct: PtrMut<u32>,
    }

    /// scores[e] = z_row . z_col over a symmetric pair pattern (`nn/pair_dot.rs`).
    pub struct PairDotArgs {
        pub n: u32,
        /// Columns of z and its stride.
        pub d: u32,
        pub ld: u32,
        pub row_ptr: Ptr<u32>,
        pub keys: Ptr<u32>,
        pub z: Ptr<f32>,
        pub scores: PtrMut<f32>,
    }

    /// The pair list's loss and its gradient, over the pairs of two lists.
    pub struct PairBceArgs {
        pub n: u32,
        /// `n + 1` offsets: the entries are `row_ptr[n]` (read on the device).
        pub row_ptr: Ptr<u32>,
        pub scores: Ptr<f32>,
        pub targets: Ptr<f32>,
        /// The two lists' distinct pairs (one u32 each): the mean's divisor.
        pub count_a: Ptr<u32>,
        pub count_b: Ptr<u32>,
        pub grad: PtrMut<f32>,
        pub stats: PtrMut<f32>,
    }

    /// dz (= or +=) the gradient of z through a symmetric pair pattern.
    pub struct PairDotBackwardArgs {
        pub n: u32,
        /// z's and dz's stride.
        pub ld: u32,
        pub row_ptr: Ptr<u32>,
        pub keys: Ptr<u32>,
        pub grad: Ptr<f32>,
        pub z: Ptr<f32>,
        /// 0: dz = the sum, else dz += it.
        pub accumulate: u32,
        pub dz: PtrMut<f32>,
    }

    /// A batch of pairs (u_p, v_p) read by index (`nn/pair_hadamard.rs`): out[p] = z[u_p] ⊙
    /// z[v_p] (out of z's stride), or its row sum z[u_p] . z[v_p] (out one column, stride 8).
    pub struct PairHadamardArgs {
        /// Rows of out (the batch's capacity); rows from `pairs` on are written 0.
        pub rows: u32,
        pub pairs: u32,
        /// z's stride (a multiple of 8).
        pub ld: u32,
        /// out's stride: `ld` (the product) or 8 (one column: its row sum).
        pub out_ld: u32,
        /// Each < z's rows (checked on the host).
        pub u: Ptr<u32>,
        pub v: Ptr<u32>,
        pub z: Ptr<f32>,
        pub out: PtrMut<f32>,
    }

    /// dz[x] (= or +=) the sum over the entries of node x (`row_ptr`, `ends`: entry = 2p | end,
    /// end 0 for u_p, 1 for v_p) of dout[p] ⊙ z[the other end]; dout of one column broadcast.
    pub struct PairHadamardBackwardArgs {
        pub n: u32,
        /// z's and dz's stride.
        pub ld: u32,
        /// dout's stride: `ld`, or 8 for one column (`broadcast` != 0).
        pub dout_ld: u32,
        pub broadcast: u32,
        pub u: Ptr<u32>,
        pub v: Ptr<u32>,
        pub row_ptr: Ptr<u32>,
        pub ends: Ptr<u32>,
        pub z: Ptr<f32>,
        pub dout: Ptr<f32>,
        /// 0: dz = the sum, else dz += it.
        pub accumulate: u32,
        pub dz: PtrMut<f32>,
    }

    /// Binary cross entropy with logits of column 0 of a `rows x 1` matrix (stride `ld`): rows
    /// below `positives` target 1, below `pairs` target 0, the rest skipped (gradient 0);
    /// grad = (sigmoid(s) - t) grad_scale (padding columns 0), stats[0] += loss_scale (max(s, 0)
    /// - s t + ln(1 + exp(-|s|))) (stats zeroed by the launcher unless accumulating).
    pub struct BceColumnArgs {
        pub rows: u32,
        pub ld: u32,
        pub pairs: u32,
        pub positives: u32,
        pub grad_scale: f32,
        pub loss_scale: f32,
        pub x: Ptr<f32>,
        pub grad: PtrMut<f32>,
        pub stats: PtrMut<f32>,
    }

    /// y = a ⊙ b over `n4` float4s.
    pub struct HadamardArgs {
        /// float4s of the padded buffer (u64: over 2^32 elements, `index.rs`).
        pub n4: u64,
        pub a: Ptr<f32>,
        pub b: Ptr<f32>,
        pub y: PtrMut<f32>,
    }

    /// Binary cross entropy with logits over `n` entries: target y = +1 / -1 (0: no pair, padding
    /// skipped, gradient 0); grad = (sigmoid(s) - t) inv_n with t = (y + 1) / 2,
    /// stats[0] += inv_n (max(s, 0) - s t + ln(1 + exp(-|s|))) (stats zeroed by the launcher).
    pub struct BceLogitsArgs {
        pub n: u32,
        pub scores: Ptr<f32>,
        pub targets: Ptr<f32>,
        pub inv_n: f32,
        pub grad: PtrMut<f32>,
        pub stats: PtrMut<f32>,
    }
}

kernels! {
    adam_f32(AdamArgs) = crate::nn::adam::adam;
    adam_many_f32(AdamManyArgs) = crate::nn::adam::adam_many;
    step_increment(StepIncrementArgs) = crate::nn::adam::step_increment;
    add_assign_f32(AddAssignArgs) = crate::nn::add_assign::add_assign;
    bias_add_f32(BiasAddArgs) = crate::nn::bias_add::bias_add;
    bias_relu_f32(BiasAddArgs) = crate::nn::bias_add::bias_relu;
    sum_bias_relu_f32(SumBiasReluArgs) = crate::nn::bias_add::sum_bias_relu;
    col_sums_f32(ColSumsArgs) = crate::nn::col_sums::col_sums;
    cross_entropy_f32(CrossEntropyArgs) = crate::nn::cross_entropy::cross_entropy;
    cross_entropy_rows8_f32(CrossEntropyArgs) = crate::nn::cross_entropy::cross_entropy_rows::<8>;
    cross_entropy_rows16_f32(CrossEntropyArgs) = crate::nn::cross_entropy::cross_entropy_rows::<16>;
    dropout_f32(DropoutArgs) = crate::nn::dropout::dropout;
    dropout_from_f16(DropoutArgs) = crate::nn::dropout::dropout_from_half;
    dropout_backward_f32(DropoutBackwardArgs) = crate::nn::dropout::dropout_backward;
    edge_softmax_scaled_f32(EdgeSoftmaxScaledArgs) = crate::nn::edge_softmax::scaled;
    edge_softmax_scaled_long_f32(EdgeSoftmaxScaledLongArgs) = crate::nn::edge_softmax::scaled_long;
    edge_softmax_backward_f32(EdgeSoftmaxBackwardArgs) = crate::nn::edge_softmax::backward;
    edge_softmax_backward_long_f32(EdgeSoftmaxBackwardLongArgs) = crate::nn::edge_softmax::backward_long;
    elu_f32(EluArgs) = crate::nn::elu::elu;
    elu_backward_f32(EluBackwardArgs) = crate::nn::elu::elu_backward;
    elu_dropout_f32(EluDropoutArgs) = crate::nn::elu_dropout::elu_dropout;
    elu_dropout_backward_f32(EluDropoutBackwardArgs) = crate::nn::elu_dropout::elu_dropout_backward;
    elu_dropout_backward_product_f32(EluDropoutBackwardProductArgs) = crate::nn::elu_dropout::elu_dropout_backward_product;
    gat_scores_f32(GatScoresArgs) = crate::nn::gat_scores::scores;
    gat_scores_backward_f32(GatScoresBackwardArgs) = crate::nn::gat_scores::scores_backward;
    gat_edge_logits_f32(GatEdgeLogitsArgs) = crate::nn::gat_edge_logits::edge_logits;
    gat_edge_logits_backward_f32(GatEdgeLogitsBackwardArgs) = crate::nn::gat_edge_logits::edge_logits_backward;
    gat_edge_logits_backward_long_f32(GatEdgeLogitsBackwardLongArgs) = crate::nn::gat_edge_logits::edge_logits_backward_long;
    edge_row_sums_f32(EdgeRowSumsArgs) = crate::nn::gat_edge_logits::edge_row_sums;
    edge_row_sums_long_f32(EdgeRowSumsLongArgs) = crate::nn::gat_edge_logits::edge_row_sums_long;
    gather_rows_f32(GatherRowsArgs) = crate::nn::gather_rows::gather_rows;
    head_take_f32(HeadColumnsArgs) = crate::nn::head_columns::take;
    head_put_f32(HeadColumnsArgs) = crate::nn::head_columns::put;
    relu_f32(ReluArgs) = crate::nn::relu::relu;
    relu_backward_f32(ReluBackwardArgs) = crate::nn::relu::relu_backward;
    bias_relu_dropout_in_place_f32(BiasReluDropoutArgs) = crate::nn::relu_dropout::bias_relu_dropout_in_place;
    relu_dropout_backward_in_place_f32(ReluDropoutBackwardArgs) = crate::nn::relu_dropout::relu_dropout_backward_in_place;
    row_normalize_f32(RowNormalizeArgs) = crate::nn::row_normalize::row_normalize;
    row_normalize_backward_f32(RowNormalizeBackwardArgs) = crate::nn::row_normalize::row_normalize_backward;
    scaled_add_f32(ScaledAddArgs) = crate::nn::scaled_add::scaled_add;
    dot_f32(DotArgs) = crate::nn::dot::dot;
    segment_sum_f32(SegmentPoolArgs) = crate::nn::segment_pool::segment_pool::<0>;
    segment_mean_f32(SegmentPoolArgs) = crate::nn::segment_pool::segment_pool::<1>;
    segment_max_f32(SegmentPoolArgs) = crate::nn::segment_pool::segment_pool::<2>;
    segment_sum_backward_f32(SegmentPoolBackwardArgs) = crate::nn::segment_pool::segment_pool_backward::<0>;
    segment_mean_backward_f32(SegmentPoolBackwardArgs) = crate::nn::segment_pool::segment_pool_backward::<1>;
    segment_max_backward_f32(SegmentPoolBackwardArgs) = crate::nn::segment_pool::segment_pool_backward::<2>;
    negative_sample(NegativeSampleArgs) = crate::nn::negative_sample::negative_sample;
    negative_pattern_count(NegativePatternArgs) = crate::nn::negative_pattern::count;
    negative_pattern_fill(NegativePatternArgs) = crate::nn::negative_pattern::fill;
    negative_pattern_sort(NegativePatternArgs) = crate::nn::negative_pattern::sort;
    pair_dot_f32(PairDotArgs) = crate::nn::pair_dot::pair_dot;
    pair_bce_f32(PairBceArgs) = crate::nn::pair_dot::pair_bce;
    pair_dot_backward_f32(PairDotBackwardArgs) = crate::nn::pair_dot::pair_dot_backward;
    bce_logits_f32(BceLogitsArgs) = crate::nn::bce_logits::bce_logits;
    hadamard_f32(HadamardArgs) = crate::nn::hadamard::hadamard;
    pair_hadamard_f32(PairHadamardArgs) = crate::nn::pair_hadamard::pair_hadamard;
    pair_hadamard_sum_f32(PairHadamardArgs) = crate::nn::pair_hadamard::pair_hadamard_sum;
    pair_hadamard_backward_f32(PairHadamardBackwardArgs) = crate::nn::pair_hadamard::pair_hadamard_backward;
    bce_column_f32(BceColumnArgs) = crate::nn::bce_column::bce_column;
    batch_norm_sum_f32(BatchNormSumArgs) = crate::nn::batch_norm::batch_norm_sum;
    batch_norm_sq_f32(BatchNormSqArgs) = crate::nn::batch_norm::batch_norm_sq;
    batch_norm_finish_f32(BatchNormFinishArgs) = crate::nn::batch_norm::batch_norm_finish;
    batch_norm_apply_f32(BatchNormApplyArgs) = crate::nn::batch_norm::batch_norm_apply;
    batch_norm_backward_sums_f32(BatchNormBackwardSumsArgs) = crate::nn::batch_norm::batch_norm_backward_sums;
    batch_norm_backward_f32(BatchNormBackwardArgs) = crate::nn::batch_norm::batch_norm_backward;
}

/// Whether GAT's scores kernel takes a thread a row (else a thread a padded score column): one
/// head of at most 8 columns (an output layer), Wh and the scores one padded 8-float row each.
pub fn gat_scores_one_head_rows(heads: u32, wh_ld: u32, s_ld: u32) -> bool {
    heads == 1 && wh_ld == 8 && s_ld == 8
}
