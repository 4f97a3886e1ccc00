// Graph sampling on the device (`sample/`): the scan's, GraphSAINT's, neighbour sampling's and
// the shared bind's argument structs and instances. Shared with the host (`include!`).
use super::*;

/// `SaintDrawArgs::kind`: GraphSAINT's node, edge and random-walk samplers.
pub const SAINT_KIND_NODE: u32 = 0;
pub const SAINT_KIND_EDGE: u32 = 1;
pub const SAINT_KIND_WALK: u32 = 2;

kernel_args! {
    /// Per-tile sums of `n` u32s (tiles of `SCAN_TILE`).
    pub struct ScanSumsArgs {
        pub n: u32,
        pub input: Ptr<u32>,
        /// One per tile.
        pub sums: PtrMut<u32>,
    }

    /// The exclusive scan of `n` u32s from the tile offsets (`n + 1` outputs), and optionally
    /// the positions of the nonzero inputs in order.
    pub struct ScanApplyArgs {
        pub n: u32,
        pub input: Ptr<u32>,
        /// tiles + 1 entries (the window scan of the tile sums).
        pub tile_offsets: Ptr<u32>,
        pub out: PtrMut<u32>,
        /// Null: not wanted.
        pub compact: PtrMut<u32>,
    }

    /// GraphSAINT's draws of one batch, marking the sampled nodes.
    pub struct SaintDrawArgs {
        /// `SAINT_KIND_NODE`, `SAINT_KIND_EDGE` or `SAINT_KIND_WALK`.
        pub kind: u32,
        /// Node draws, edge draws or walks.
        pub draws: u32,
        pub walk_length: u32,
        /// The batch's stream key (`sample_stream_key`).
        pub key: u64,
        pub n_nodes: u32,
        /// The graph (n_nodes + 1 row pointers).
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        /// The edge sampler's alias table (null for the other kinds).
        pub alias_prob: Ptr<f64>,
        pub alias: Ptr<u32>,
        /// One per node, 0 on entry except where this batch marks.
        pub marks: PtrMut<u32>,
    }

    /// The batch's rows: counted (`counts`, `totals`) or filled (`out_*`).
    pub struct SaintRowsArgs {
        /// Rows to write counts for (the batch's node bound).
        pub rows: u32,
        /// The batch's nodes (device: the mark scan's total).
        pub n_batch: Ptr<u32>,
        pub nodes: Ptr<u32>,
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        pub marks: Ptr<u32>,
        /// Local id of every marked node.
        pub local: Ptr<u32>,
        /// Aggregation weight of every graph entry, and the self-loop weight of every node.
        pub entry_w: Ptr<f32>,
        pub self_loop: Ptr<f32>,
        pub mask_bits: Ptr<u8>,
        pub train_bit: u32,
        pub counts: PtrMut<u32>,
        /// Per row, (kept entries before the diagonal) << 1 | (a self-loop is inserted): written
        /// by the count, read by the fill.
        pub loops: PtrMut<u32>,
        /// [kept graph entries, train nodes] (added to).
        pub totals: PtrMut<u32>,
        /// The batch's row pointers (fill).
        pub out_ptr: Ptr<u32>,
        pub out_cols: PtrMut<u32>,
        pub out_values: PtrMut<f32>,
        pub out_rows: PtrMut<u32>,
    }

    /// The transpose of a batch with a symmetric pattern.
    pub struct SaintTransposeArgs {
        /// Row pointers of `rows` rows (the last is the entry count).
        pub rows: u32,
        pub row_ptr: Ptr<u32>,
        pub cols: Ptr<u32>,
        pub entry_rows: Ptr<u32>,
        pub values: Ptr<f32>,
        pub t_values: PtrMut<f32>,
        pub t_of: PtrMut<u32>,
    }

    /// Marks cleared, sizes written.
    pub struct SaintFinishArgs {
        pub n_batch: Ptr<u32>,
        pub nodes: Ptr<u32>,
        pub marks: PtrMut<u32>,
        /// As `SaintTransposeArgs::rows`.
        pub rows: u32,
        pub row_ptr: Ptr<u32>,
        /// The batch's feature row pointers (`rows + 1`; null: dense features).
        pub fx_ptr: Ptr<u32>,
        pub totals: PtrMut<u32>,
    }

    /// A batch of `n` nodes and `nnz` entries padded into a model of `rows` rows and `cap`
    /// entries (GraphSAINT's or neighbour sampling's).
    pub struct BatchBindArgs {
        pub n: u32,
        pub nnz: u32,
        pub n_loss: u32,
        pub rows: u32,
        pub cap: u32,
        pub train_bit: u32,
        /// Neighbour sampling: the targets (the first nodes; the loss is their plain mean).
        /// 0: GraphSAINT (the loss on the batch's train nodes, weighted by `node_norm`).
        pub targets: u32,
        /// n_all / n_train (GraphSAINT).
        pub to_train: f64,
        pub row_ptr: Ptr<u32>,
        pub cols: Ptr<u32>,
        pub entry_rows: Ptr<u32>,
        pub values: Ptr<f32>,
        /// The transpose's pattern (null: the pattern's own, a symmetric batch), values and map.
        pub t_row_ptr_in: Ptr<u32>,
        pub t_cols_in: Ptr<u32>,
        pub t_rows_in: Ptr<u32>,
        pub t_values: Ptr<f32>,
        pub t_of: Ptr<u32>,
        pub nodes: Ptr<u32>,
        pub labels: Ptr<i32>,
        pub mask_bits: Ptr<u8>,
        pub node_norm: Ptr<f32>,
        pub s_row_ptr: PtrMut<u32>,
        pub s_cols: PtrMut<u32>,
        pub s_rows: PtrMut<u32>,
        pub t_row_ptr: PtrMut<u32>,
        pub t_cols: PtrMut<u32>,
        pub t_rows: PtrMut<u32>,
        pub s_values: PtrMut<f32>,
        pub t_values_out: PtrMut<f32>,
        pub t_of_out: PtrMut<u32>,
        pub labels_out: PtrMut<i32>,
        pub mask_out: PtrMut<u8>,
        pub weights_out: PtrMut<f32>,
    }

    /// The batch's sparse features and their transpose, from the whole graph's X and Xᵀ.
    pub struct BatchFeaturesArgs {
        /// Rows to write counts for (the node bound), and feature columns.
        pub rows: u32,
        pub n_features: u32,
        pub n_batch: Ptr<u32>,
        pub nodes: Ptr<u32>,
        /// Per node: GraphSAINT's mark (non-zero: in the batch), or null, where a node is in
        /// the batch when its local id is not u32::MAX (the neighbour sampler).
        pub marks: Ptr<u32>,
        pub local: Ptr<u32>,
        /// X (N x F, sorted rows) and Xᵀ (F x N) with, per entry of Xᵀ, its entry of X.
        pub x_ptr: Ptr<u32>,
        pub x_cols: Ptr<u32>,
        pub x_values: Ptr<f32>,
        pub xt_nodes: Ptr<u32>,
        pub xt_of: Ptr<u32>,
        /// Xᵀ cut into segments of at most 128 entries of one row: `n_segments + 1` starts, the
        /// row of each, and per row (F + 1) its first segment (the next row's for an empty one).
        pub n_segments: u32,
        pub seg_start: Ptr<u32>,
        pub seg_row: Ptr<u32>,
        pub first_seg: Ptr<u32>,
        /// Counts for a scan (per batch row, or per segment of Xᵀ).
        pub counts: PtrMut<u32>,
        pub fx_ptr: Ptr<u32>,
        pub fx_cols: PtrMut<u32>,
        pub fx_values: PtrMut<f32>,
        pub fx_rows: PtrMut<u32>,
        /// The segments' scanned counts (n_segments + 1), and the transpose's row pointers made
        /// from them.
        pub fxt_seg_off: Ptr<u32>,
        pub fxt_ptr: PtrMut<u32>,
        pub fxt_cols: PtrMut<u32>,
        pub fxt_values: PtrMut<f32>,
        pub fxt_of: PtrMut<u32>,
        pub fxt_rows: PtrMut<u32>,
    }

    /// A batch's sparse features (n rows, nnz entries) padded into a model's input of `rows`
    /// rows and `cap` entries.
    pub struct BatchFeaturesBindArgs {
        pub n: u32,
        pub nnz: u32,
        pub rows: u32,
        pub cap: u32,
        pub n_features: u32,
        pub fx_ptr: Ptr<u32>,
        pub fx_cols: Ptr<u32>,
        pub fx_values: Ptr<f32>,
        pub fx_rows: Ptr<u32>,
        pub fxt_ptr: Ptr<u32>,
        pub fxt_cols: Ptr<u32>,
        pub fxt_values: Ptr<f32>,
        pub fxt_of: Ptr<u32>,
        pub fxt_rows: Ptr<u32>,
        pub s_row_ptr: PtrMut<u32>,
        pub s_cols: PtrMut<u32>,
        pub s_rows: PtrMut<u32>,
        pub s_values: PtrMut<f32>,
        pub t_row_ptr: PtrMut<u32>,
        pub t_cols: PtrMut<u32>,
        pub t_rows: PtrMut<u32>,
        pub t_values: PtrMut<f32>,
        pub t_of: PtrMut<u32>,
    }
}

kernel_args! {
    /// A neighbour-sampled batch's targets: positions `start..start + n_out` of the epoch's
    /// order of the target list.
    pub struct NeighborTargetsArgs {
        pub n_out: u32,
        pub start: u32,
        pub n_targets: u32,
        /// 1: the epoch's order is the permutation keyed by `key`; 0: the list's order.
        pub shuffle: u32,
        pub key: u64,
        pub targets: Ptr<u32>,
        pub nodes: PtrMut<u32>,
        /// Per graph node: its local id, or u32::MAX.
        pub local: PtrMut<u32>,
        /// Nodes after each hop (`sizes[0]` = the targets).
        pub sizes: PtrMut<u32>,
    }

    /// One hop of neighbour sampling: every node so far draws up to `fanout` neighbours.
    pub struct NeighborHopArgs {
        /// The hop (its rows are the `sizes[hop]` nodes so far).
        pub hop: u32,
        /// Bounds of the hop's rows and drawn entries (the grids' sizes, the scans' lengths).
        pub rows: u32,
        pub entries: u32,
        /// Neighbours per row; -1: all of them.
        pub fanout: i32,
        /// The hop's stream key (the batch's sub-stream `hop`).
        pub key: u64,
        pub row_ptr: Ptr<u32>,
        pub col_idx: Ptr<u32>,
        pub nodes: PtrMut<u32>,
        pub local: PtrMut<u32>,
        /// Per graph node: the first drawn position that reaches it (u32::MAX between uses).
        pub first: PtrMut<u32>,
        pub sizes: PtrMut<u32>,
        /// Per row: its draws (a scan makes `hop_ptr` of them).
        pub counts: PtrMut<u32>,
        pub hop_ptr: Ptr<u32>,
        /// Per drawn entry: the neighbour's graph id.
        pub nbrs: PtrMut<u32>,
        /// Per drawn entry: 1 where it reaches a node first (a scan makes `new_pos` of them).
        pub flags: PtrMut<u32>,
        pub new_pos: Ptr<u32>,
    }

    /// A neighbour-sampled batch's matrix: the union of the hops' draws per row, normalised as
    /// the model normalises a graph, and its transpose.
    pub struct NeighborBatchArgs {
        pub hops: u32,
        /// Bounds of the batch's nodes and entries.
        pub rows: u32,
        pub entries: u32,
        /// `NEIGHBOR_NORM_*`: the model's normalisation.
        pub norm: u32,
        pub sizes: Ptr<u32>,
        /// Every hop's row pointers and neighbours, one buffer each, hop h at `ptr_at[h]` and
        /// `nbr_at[h]`.
        pub hop_ptr: Ptr<u32>,
        pub hop_nbrs: Ptr<u32>,
        pub ptr_at: Ptr<u32>,
        pub nbr_at: Ptr<u32>,
        pub nodes: Ptr<u32>,
        pub local: PtrMut<u32>,
        /// Per row: its union, sorted, from the sum of its hop rows' starts.
        pub scratch: PtrMut<u32>,
        /// Per row: entries (a scan makes `row_ptr`), and distinct neighbours.
        pub counts: PtrMut<u32>,
        pub unique: PtrMut<u32>,
        pub row_ptr: Ptr<u32>,
        pub cols: PtrMut<u32>,
        pub values: PtrMut<f32>,
        pub entry_rows: PtrMut<u32>,
        /// Per column: entries (a scan makes `t_ptr`) and a fill cursor.
        pub t_counts: PtrMut<u32>,
        pub t_cursor: PtrMut<u32>,
        pub t_ptr: Ptr<u32>,
        pub t_cols: PtrMut<u32>,
        pub t_rows: PtrMut<u32>,
        pub t_values: PtrMut<f32>,
        pub t_of: PtrMut<u32>,
        /// The batch's sparse feature row pointers (`rows + 1`; null: dense features).
        pub fx_ptr: Ptr<u32>,
        /// [drawn entries, targets, nodes, entries, feature entries (0 for dense features)],
        /// then each per-layer block's entries (layer l at 5 + l).
        pub totals: PtrMut<u32>,
        /// Per-layer blocks (`block_*`; unused by the union's kernels): the hop whose draws make
        /// the block, the full graph (row pointers: the degrees; columns sorted and unique in
        /// every row), its normalisation per raw entry and per node's self-loop
        /// (`Aggregation::parts`), and where the block's entry count goes (null: nowhere).
        pub block: u32,
        pub graph_ptr: Ptr<u32>,
        pub graph_cols: Ptr<u32>,
        pub entry_values: Ptr<f32>,
        pub self_loops: Ptr<f32>,
        pub block_nnz: PtrMut<u32>,
    }
}

/// `NeighborBatchArgs::norm`: GCN's D^-1/2 (A + I) D^-1/2, SAGE's row mean, GIN's sum.
pub const NEIGHBOR_NORM_GCN: u32 = 0;
pub const NEIGHBOR_NORM_MEAN: u32 = 1;
pub const NEIGHBOR_NORM_SUM: u32 = 2;

kernels! {
    scan_tile_sums(ScanSumsArgs) = crate::sample::scan::tile_sums;
    scan_tile_apply(ScanApplyArgs) = crate::sample::scan::tile_apply;
    saint_draw(SaintDrawArgs) = crate::sample::saint::draw;
    saint_rows_count(SaintRowsArgs) = crate::sample::saint::rows_count;
    saint_rows_fill(SaintRowsArgs) = crate::sample::saint::rows_fill;
    saint_transpose(SaintTransposeArgs) = crate::sample::saint::transpose;
    saint_finish(SaintFinishArgs) = crate::sample::saint::finish;
    batch_bind(BatchBindArgs) = crate::sample::bind::bind;
    neighbor_targets(NeighborTargetsArgs) = crate::sample::neighbor::targets;
    neighbor_hop_count(NeighborHopArgs) = crate::sample::neighbor::hop_count;
    neighbor_hop_draw(NeighborHopArgs) = crate::sample::neighbor::hop_draw;
    neighbor_hop_first(NeighborHopArgs) = crate::sample::neighbor::hop_first;
    neighbor_hop_flags(NeighborHopArgs) = crate::sample::neighbor::hop_flags;
    neighbor_hop_assign(NeighborHopArgs) = crate::sample::neighbor::hop_assign;
    neighbor_union_count(NeighborBatchArgs) = crate::sample::neighbor::union_count;
    neighbor_union_fill(NeighborBatchArgs) = crate::sample::neighbor::union_fill;
    neighbor_block_count(NeighborBatchArgs) = crate::sample::neighbor::block_count;
    neighbor_block_fill(NeighborBatchArgs) = crate::sample::neighbor::block_fill;
    neighbor_transpose_fill(NeighborBatchArgs) = crate::sample::neighbor::transpose_fill;
    neighbor_transpose_sort(NeighborBatchArgs) = crate::sample::neighbor::transpose_sort;
    neighbor_finish(NeighborBatchArgs) = crate::sample::neighbor::finish;
    batch_features_count(BatchFeaturesArgs) = crate::sample::features::features_count;
    batch_features_fill(BatchFeaturesArgs) = crate::sample::features::features_fill;
    batch_features_t_count(BatchFeaturesArgs) = crate::sample::features::features_t_count;
    batch_features_t_fill(BatchFeaturesArgs) = crate::sample::features::features_t_fill;
    batch_features_bind(BatchFeaturesBindArgs) = crate::sample::features::features_bind;
}
