//! The one seam between a model and a partitioned graph (`dist` builds on it; nn never imports
//! dist). A part trains on its *extended* graph: its owned rows, with their whole neighbour
//! lists (columns renumbered), and one EMPTY row per halo node (a node another part owns that an
//! owned row reads); the hook knows which rows are which. The model runs unchanged on it except
//! at one point per layer, where neighbour rows are about to be read:
//! - forward, [`HaloHook::fill`]: the halo rows of the matrix the aggregation reads (GCN: X W,
//!   before Â (X W)) are overwritten with their owners' rows;
//! - backward, at the same point, [`HaloHook::give_back`]: the gradient rows this part computed
//!   for its halo are sent to their owners, summed into the owners' rows, and zeroed here; or,
//!   where the whole matrix is symmetric ([`PartContext::symmetric`]: GCN's Â), a `fill` of the
//!   incoming gradient's halo rows, after which the forward's product over the owned rows is
//!   the transposed one's (an owned node's column is its row).
//!
//! Why that is exact: between the fill point and the aggregation everything is row-wise or reads
//! halo rows only through edges of owned rows, halo rows are never in the loss (their gradient is
//! exactly zero before a `give_back`), and every weight gradient is a sum over rows that the
//! caller all-reduces over the parts. The same facts let the row-wise work skip the halo rows
//! ([`crate::nn::live_rows`]): a model that knows its part's owned rows forms only those.

use std::rc::Rc;

use crate::error::Result;
use crate::nn::live_rows::LiveRows;
use crate::ops::backend::Backend;

/// The halo exchange a model calls, one `fill` / `give_back` pair per layer.
pub trait HaloHook<B: Backend> {
    /// The halo rows of `x` := their owners' rows.
    fn fill(&self, b: &B, x: &mut B::Mat) -> Result<()>;
    /// The halo rows of `g` are added into their owners' rows of the same matrix (on the owning
    /// parts), then set to zero here.
    fn give_back(&self, b: &B, g: &mut B::Mat) -> Result<()>;

    /// Where the hook overlaps its exchanges with the products ([`RowSplit`]); `None`: each
    /// exchange runs where `fill` / `give_back` are called and the products stay whole.
    fn split(&self) -> Option<RowSplit> {
        None
    }

    /// The first half of [`HaloHook::fill`]: starts moving the halo rows of `x` (the owned rows
    /// other parts read are final); until [`HaloHook::fill_finish`] the caller may read only
    /// `x`'s owned rows and may write only owned rows no other part reads. By default the whole
    /// fill.
    fn fill_start(&self, b: &B, x: &mut B::Mat) -> Result<()> {
        self.fill(b, x)
    }

    /// Work queued after this sees `x`'s halo rows in place.
    fn fill_finish(&self, _b: &B, _x: &mut B::Mat) -> Result<()> {
        Ok(())
    }

    /// The first half of [`HaloHook::give_back`]: starts sending `g`'s halo rows (final);
    /// until [`HaloHook::give_back_finish`] the caller may write only `g`'s owned rows. By
    /// default nothing (the finish does it all).
    fn give_back_start(&self, _b: &B, _g: &mut B::Mat) -> Result<()> {
        Ok(())
    }

    /// The owners' sums added into `g`'s owned rows, its halo rows zeroed (`g`'s owned rows
    /// final). By default the whole give-back.
    fn give_back_finish(&self, b: &B, g: &mut B::Mat) -> Result<()> {
        self.give_back(b, g)
    }
}

/// How a part's extended rows divide for an overlapped exchange (a layer runs its product in
/// blocks around the exchange):
/// - forward: rows `0..interior` read no halo row (the empty halo rows below the owned ones and
///   the owned rows whose neighbours are all owned: the partition puts them first). GCN / SAGE /
///   GIN form every row's owned-column part while the halo rows travel and add the halo-column
///   part of rows `interior..rows` after, or the interior rows while they travel and the others
///   after ([`OverlapSplit`]); GAT's attention (a softmax over each whole row) runs rows
///   `0..interior` while they travel and rows `interior..rows` after;
/// - backward (the transposed product, GAT's column pass): the halo rows (`0..owned.start`,
///   `owned.end..rows`) are formed first and sent back while the `owned` rows are formed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSplit {
    pub interior: usize,
    pub owned: std::ops::Range<usize>,
    pub rows: usize,
}

/// How an overlapped GCN / SAGE / GIN forward divides its product around the fill of the halo
/// rows (GAT's attention divides by rows always: a row's softmax needs all of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OverlapSplit {
    /// Every owned row's owned columns beside the fill, then the boundary rows' halo columns
    /// into a scratch added on: the most work beside the exchange, and that added work.
    Columns,
    /// The interior rows beside the fill, then the boundary rows whole, written in place: no
    /// added work, only the interior rows beside the exchange. The default: the faster split in
    /// every two-GPU and parts-alone comparison measured (bench/NOTES.md).
    #[default]
    Rows,
}

/// What a model built on one part of a partitioned graph needs besides its extended graph.
#[derive(Clone)]
pub struct PartContext<B: Backend> {
    pub hook: Rc<dyn HaloHook<B>>,
    /// The original node id of every local row (its id before any partition relabelled the
    /// graph): dropout masks are keyed by it, so any partition draws the one-device masks.
    pub row_ids: Rc<B::Ids>,
    /// The original index of every local edge in the model's own graph (GAT: A + I), for the
    /// attention dropout, keyed the same way.
    pub edge_ids: Rc<B::Ids>,
    /// The part's input features hold its halo rows' own features: the input layer forms its
    /// halo rows' product rows itself (forward) and keeps their gradient rows for its weight
    /// gradient (backward) instead of exchanging them. Every part's weight gradient then holds
    /// the halo rows' terms that the owners held before; their sum over the parts is the same.
    pub local_input: bool,
    /// The part's owned rows (between its halo rows): the rows row-wise work forms
    /// ([`crate::nn::live_rows`]).
    pub owned: std::ops::Range<usize>,
    /// How an overlapped product divides around the fill.
    pub split: OverlapSplit,
    /// The model's matrix of the whole graph is its own transpose, entry for entry
    /// ([`crate::graph::ops::is_symmetric`]), and the part may use it: an owned node's column
    /// holds its row, so a backward may pull dY's halo rows instead of giving its product's
    /// back. `false` where either is not so (`DistOptions::pull_backward` off).
    pub symmetric: bool,
}

impl<B: Backend> PartContext<B> {
    /// The rows row-wise work forms on this part: its owned rows.
    pub fn live_rows(&self) -> LiveRows {
        LiveRows::only(self.owned.clone())
    }
}

/// A model's side of the seam, held by the graph operand its layers share (GCN / SAGE / GIN's
/// adjacency, GAT's pattern): the hook, whether the layer calling now exchanges, and the rows
/// row-wise work forms. Unpartitioned: no hook, every row.
pub struct PartSide<B: Backend> {
    halo: Option<Rc<dyn HaloHook<B>>>,
    /// The part's input features hold its halo rows ([`PartContext::local_input`]), and whether
    /// the calls now are the input layer's (set by the model around them): then no exchange.
    local_input: bool,
    input_layer: std::cell::Cell<bool>,
    live: LiveRows,
}

impl<B: Backend> PartSide<B> {
    /// `part`'s side (`None`: unpartitioned).
    pub fn new(part: Option<&PartContext<B>>) -> Self {
        PartSide {
            halo: part.map(|p| p.hook.clone()),
            local_input: part.is_some_and(|p| p.local_input),
            input_layer: Default::default(),
            live: part.map_or_else(LiveRows::all, |p| p.live_rows()),
        }
    }

    /// Marks the calls that follow as the input layer's (`on`) or not: where the part's input
    /// features hold its halo rows, the input layer exchanges nothing.
    pub fn set_input_layer(&self, on: bool) {
        self.input_layer.set(on);
    }

    /// The hook of the calls now (`None`: unpartitioned, or the input layer of a part whose
    /// input holds its halo rows).
    pub fn hook(&self) -> Option<&Rc<dyn HaloHook<B>>> {
        self.halo.as_ref().filter(|_| !(self.local_input && self.input_layer.get()))
    }

    /// The rows row-wise work forms (every row unpartitioned).
    pub fn live_rows(&self) -> &LiveRows {
        &self.live
    }

    /// The rows a layer's dense product `X W` must form now: a layer that exchanges gets its
    /// product's halo rows from their owners, so its owned rows; every row otherwise.
    pub fn product_rows(&self) -> LiveRows {
        if self.hook().is_some() { self.live.clone() } else { LiveRows::all() }
    }
}

/// `hook.fill(x)` when there is a hook (`None`: the unpartitioned model, nothing to do).
pub fn fill<B: Backend>(hook: &Option<Rc<dyn HaloHook<B>>>, b: &B, x: &mut B::Mat) -> Result<()> {
    match hook {
        Some(h) => h.fill(b, x),
        None => Ok(()),
    }
}

/// `hook.give_back(g)` when there is a hook.
pub fn give_back<B: Backend>(hook: &Option<Rc<dyn HaloHook<B>>>, b: &B, g: &mut B::Mat) -> Result<()> {
    match hook {
        Some(h) => h.give_back(b, g),
        None => Ok(()),
    }
}
