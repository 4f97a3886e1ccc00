//! `GcnConv` as PyG's `GCNConv`: Y = Â (X W) + b with Â = D^-1/2 (A + I) D^-1/2; `X W` is a
//! bias-free [`Linear`], the bias is added after aggregation (as PyG's).
//!
//! Backward: db = 1ᵀ dY; G = Âᵀ dY; then the Linear's backward of G: dW = Xᵀ G, dX = G Wᵀ. Âᵀ is
//! a product with the transposed pattern and Â's values laid out for it, both built once: a
//! directed graph has Âᵀ ≠ Â. Where Â is its own transpose array for array
//! ([`crate::graph::ops::is_symmetric`]: an undirected graph's Â, GIN's sum), the transposed
//! product is the forward one and nothing is built or held for the transposed side (bench/NOTES.md,
//! issue 42 item 4).

use std::ops::Range;
use std::rc::Rc;

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::halo_hook::{HaloHook, OverlapSplit, PartContext, PartSide, RowSplit};
use crate::nn::linear::Linear;
use crate::nn::live_rows::LiveRows;
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::ops::backend::Side;
use crate::ops::nn::op_set;
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

op_set!(
    /// What a GCN layer needs: the linear part and the fixed matrix's SpMM.
    pub trait GcnOps:
    crate::nn::linear::LinearOps,
    crate::ops::nn::add_assign::AddAssignOp,
);

/// Â of a graph, translated and uploaded once and shared by every `GcnConv` of a model.
pub struct GcnAdjacency<B: GcnOps> {
    pub graph: B::Graph,
    /// Both sides' values, [forward, transposed].
    values: Values<B>,
    /// On one part of a partitioned graph: the halo exchange around every product and the rows
    /// row-wise work forms (see [`crate::nn::halo_hook`]); unpartitioned: neither.
    part: PartSide<B>,
    /// Where the hook overlaps its exchanges with the products: the products in row blocks.
    overlap: Option<Overlap<B>>,
    /// The part's whole matrix is symmetric ([`PartContext::symmetric`]): every owned row
    /// another part reads is a boundary row ([`GcnAdjacency::boundary_and_interior`]).
    symmetric: bool,
    /// The backward pulls ([`GcnAdjacency::backward_product`]): symmetric, and the convs let
    /// dY's halo rows be filled.
    pull: bool,
}

/// Both sides' values: taken once for products that leave them unchanged (the backend keeps
/// what its products read: an f16 backend their f16 copies, not the f32 ones), or as they are
/// once handed out to be rewritten ([`GcnAdjacency::parts_mut`]), after which each product
/// prepares its own.
enum Values<B: GcnOps> {
    Fixed(Box<[B::Fixed; 2]>),
    /// Â = Âᵀ array for array: one set of fixed values, read by both products (Âᵀ x runs as
    /// Â x: the arrays the transposed side would be translated to are the forward side's).
    Symmetric(Box<B::Fixed>),
    Plain([B::Edges; 2]),
    /// Giving the fixed values back failed ([`GcnAdjacency::parts_mut`]): products refuse.
    Lost,
}

fn lost() -> crate::error::Error {
    crate::error::Error::Unsupported("the adjacency's values were lost when giving them back for rewriting failed".into())
}

/// Rows `rows` of a matrix (Â or Âᵀ) as a product of their own: they write only those rows of
/// the output.
struct RowBlock<B: GcnOps> {
    rows: Range<usize>,
    graph: B::Graph,
    fixed: B::Fixed,
}

impl<B: GcnOps> RowBlock<B> {
    /// Rows `rows` of `s`; `None` for no rows or no entries.
    fn new(b: &B, s: &Csr, rows: Range<usize>) -> Result<Option<Self>> {
        Self::with_columns(b, s, rows, |_| true)
    }

    /// Rows `rows` of `s` with only their entries in the columns `keep` keeps; `None` for no
    /// rows or no entries.
    fn with_columns(b: &B, s: &Csr, rows: Range<usize>, keep: impl Fn(usize) -> bool) -> Result<Option<Self>> {
        let (mut row_ptr, mut cols, mut vals) = (vec![0u32], Vec::new(), Vec::new());
        for r in rows.clone() {
            for k in s.row_range(r) {
                if keep(s.col_idx()[k] as usize) {
                    cols.push(s.col_idx()[k]);
                    vals.push(s.values()[k]);
                }
            }
            row_ptr.push(cols.len() as u32);
        }
        if cols.is_empty() {
            return Ok(None);
        }
        let block = Csr::new(rows.len(), s.n_cols(), row_ptr, cols, vals)?;
        let graph = b.graph(block)?;
        let values = b.graph_values(&graph, Side::Forward)?;
        let fixed = b.fix(&graph, Side::Forward, values)?;
        Ok(Some(RowBlock { rows, graph, fixed }))
    }

    /// Its rows of `y` := its rows of the matrix times `x`.
    fn product(&self, b: &B, x: &B::Mat, y: &mut B::Mat) -> Result<()> {
        b.on_rows(y, self.rows.clone(), &mut |v| b.spmm_fixed(&self.graph, Side::Forward, &self.fixed, x, v))
    }
}

/// A part's products in the blocks of its [`RowSplit`]:
/// - forward, [`OverlapSplit::Columns`]: Â's entries in owned columns (`local`, every owned row:
///   the interior rows whole, the boundary rows' owned part), multiplied while the halo rows
///   travel, then the boundary rows' entries in halo columns (`remote`, owned rows from
///   `interior`) into `scratch`, added on. [`OverlapSplit::Rows`]: the interior rows (`local`)
///   while they travel, then the boundary rows whole (`remote`, written in place). The output's
///   halo rows are not formed (nothing reads them: [`crate::nn::live_rows`]);
/// - backward, where it pulls, the forward's blocks again (dY's halo rows filled); otherwise
///   Âᵀ's halo rows (below and above the owned ones: the entries of halo columns) formed first
///   and given back while its owned rows are formed (`transposed`).
///
/// A boundary row's sum is its owned columns' then its halo columns' (the whole product's runs
/// in column order): equal to rounding. The rest is summed as in the whole product.
struct Overlap<B: GcnOps> {
    local: RowBlock<B>,
    remote: Option<RowBlock<B>>,
    /// Whether `remote` holds whole rows (written in place) or their halo columns (added on).
    remote_whole: bool,
    /// Âᵀ's blocks for a backward that gives back; `None` where it pulls.
    transposed: Option<TransposedBlocks<B>>,
    /// The remote part of the boundary rows, one matrix per layer width.
    scratch: std::cell::RefCell<Vec<B::Mat>>,
}

/// Âᵀ's halo rows (one block below the owned rows, one above) and its owned rows.
struct TransposedBlocks<B: GcnOps> {
    halo: Vec<RowBlock<B>>,
    owned: RowBlock<B>,
}

impl<B: GcnOps> Overlap<B> {
    /// `None` where a block that must write its rows would hold no entry (a part with no
    /// owned column in any row, say): its kernel might not run at all, so such a part keeps
    /// the whole products. `pull`: no transposed blocks (the backward pulls).
    fn new(b: &B, s: &Csr, split: &RowSplit, how: OverlapSplit, pull: bool) -> Result<Option<Self>> {
        let n = s.n_rows();
        if split.rows != n || split.interior > n || split.owned.end > n || split.owned.start > split.owned.end {
            return Err(crate::error::Error::Shape(format!("a row split {split:?} of a part of {n} rows")));
        }
        let transposed = match pull {
            true => None,
            false => match TransposedBlocks::new(b, s, split)? {
                Some(t) => Some(t),
                None => return Ok(None),
            },
        };
        // The halo rows of `s` are empty and nothing reads their output rows (live rows): the
        // forward blocks cover the owned rows only.
        let owned = split.owned.clone();
        let boundary = split.interior.clamp(owned.start, owned.end)..owned.end;
        let (local, remote) = match how {
            OverlapSplit::Columns => (
                RowBlock::with_columns(b, s, owned.clone(), |c| owned.contains(&c))?,
                RowBlock::with_columns(b, s, boundary, |c| !owned.contains(&c))?,
            ),
            OverlapSplit::Rows => (RowBlock::new(b, s, owned.start..boundary.start)?, RowBlock::new(b, s, boundary)?),
        };
        let Some(local) = local else { return Ok(None) };
        Ok(Some(Overlap { local, remote, remote_whole: how == OverlapSplit::Rows, transposed, scratch: Default::default() }))
    }

    /// `y`'s boundary rows: their halo columns' part added on, or the whole rows (after the
    /// fill).
    fn add_remote(&self, b: &B, x: &B::Mat, y: &mut B::Mat) -> Result<()> {
        let Some(r) = &self.remote else { return Ok(()) };
        if self.remote_whole {
            return r.product(b, x, y);
        }
        let cols = B::shape(x).1;
        let mut scratch = self.scratch.borrow_mut();
        let at = match scratch.iter().position(|m| B::shape(m) == (r.rows.len(), cols)) {
            Some(at) => at,
            None => {
                scratch.push(b.matrix(r.rows.len(), cols)?);
                scratch.len() - 1
            }
        };
        let part = &mut scratch[at];
        b.spmm_fixed(&r.graph, Side::Forward, &r.fixed, x, part)?;
        b.on_rows(y, r.rows.clone(), &mut |v| b.add_assign(v, part))
    }
}

impl<B: GcnOps> TransposedBlocks<B> {
    /// `None` where a block would hold no entry ([`Overlap::new`]).
    fn new(b: &B, s: &Csr, split: &RowSplit) -> Result<Option<Self>> {
        let t = crate::graph::ops::transpose(s);
        let mut halo = Vec::new();
        for rows in [0..split.owned.start, split.owned.end..s.n_rows()].into_iter().filter(|r| !r.is_empty()) {
            match RowBlock::new(b, &t, rows)? {
                Some(r) => halo.push(r),
                None => return Ok(None),
            }
        }
        Ok(RowBlock::new(b, &t, split.owned.clone())?.map(|owned| TransposedBlocks { halo, owned }))
    }
}

impl<B: GcnOps> GcnAdjacency<B> {
    /// Â from the raw adjacency `a` (self-loops added where missing, symmetric normalisation by
    /// the degrees of A + I, as PyG's `gcn_norm`).
    pub fn new(b: &B, a: &Csr) -> Result<Self> {
        Self::from_normalized(b, crate::graph::ops::gcn_normalize(a)?)
    }

    /// A pattern with values used as they are (a sampled block with its own normalisation).
    pub fn from_normalized(b: &B, s: Csr) -> Result<Self> {
        let symmetric = crate::graph::ops::is_symmetric(&s);
        let graph = b.graph(s)?;
        let values = b.graph_values(&graph, Side::Forward)?;
        let values = if symmetric {
            Values::Symmetric(Box::new(b.fix(&graph, Side::Forward, values)?))
        } else {
            let values_t = b.graph_values(&graph, Side::Transposed)?;
            Values::Fixed(Box::new([b.fix(&graph, Side::Forward, values)?, b.fix(&graph, Side::Transposed, values_t)?]))
        };
        Ok(GcnAdjacency { graph, values, part: PartSide::new(None), overlap: None, symmetric: false, pull: false })
    }

    /// [`GcnAdjacency::from_normalized`] on one part's extended rows `s` exchanging through
    /// `hook`; where the hook overlaps ([`HaloHook::split`]) the products are also built in its
    /// row blocks ([`GcnAdjacency::fill_forward`], [`GcnAdjacency::backward_product`]).
    /// `pull_backward`: the convs reading it let dY's halo rows be filled
    /// ([`crate::nn::stack::Conv::PULL_BACKWARD`]); the backward then pulls where the part's
    /// whole matrix is symmetric ([`PartContext::symmetric`]).
    pub fn for_part(b: &B, s: Csr, part: Option<&PartContext<B>>, pull_backward: bool) -> Result<Self> {
        let symmetric = part.is_some_and(|p| p.symmetric);
        let pull = pull_backward && symmetric;
        let overlap = match part.and_then(|p| Some((p.hook.split()?, p.split))) {
            Some((split, how)) => Overlap::new(b, &s, &split, how, pull)?,
            None => None,
        };
        Ok(GcnAdjacency { part: PartSide::new(part), overlap, symmetric, pull, ..Self::from_normalized(b, s)? })
    }

    /// Both sides' values as taken for unchanged products ([forward, transposed]), or the one
    /// set both read where Â = Âᵀ; `None` once handed out to be rewritten.
    pub fn fixed(&self) -> Option<&[B::Fixed]> {
        match &self.values {
            Values::Fixed(f) => Some(&f[..]),
            Values::Symmetric(f) => Some(std::slice::from_ref(&**f)),
            _ => None,
        }
    }

    /// The part's side of the seam (hook, input layer, live rows).
    pub fn part(&self) -> &PartSide<B> {
        &self.part
    }

    /// [`PartSide::set_input_layer`].
    pub fn set_input_layer(&self, on: bool) {
        self.part.set_input_layer(on);
    }

    fn hook(&self) -> Option<&Rc<dyn HaloHook<B>>> {
        self.part.hook()
    }

    /// Before a product reads `x`'s neighbour rows: its halo rows := their owners' (no-op
    /// unpartitioned).
    pub fn fill(&self, b: &B, x: &mut B::Mat) -> Result<()> {
        self.hook().map_or(Ok(()), |h| h.fill(b, x))
    }

    /// After a transposed product wrote `g`: its halo rows go to their owners (no-op
    /// unpartitioned).
    pub fn give_back(&self, b: &B, g: &mut B::Mat) -> Result<()> {
        self.hook().map_or(Ok(()), |h| h.give_back(b, g))
    }

    /// The pattern and both value layouts, to be rewritten in place by a model rebound per
    /// sampled batch (same shape and nonzero count: see `sample::bound`). The values taken once
    /// are given back (made again on the device where the backend kept only its copies): from
    /// here on every product reads the values as they are then.
    pub fn parts_mut(&mut self) -> Result<(&mut B::Graph, &mut B::Edges, &mut B::Edges)> {
        self.overlap = None;
        match std::mem::replace(&mut self.values, Values::Lost) {
            Values::Fixed(f) => {
                let [fw, tr] = *f;
                self.values = Values::Plain([B::unfix(&self.graph, Side::Forward, fw)?, B::unfix(&self.graph, Side::Transposed, tr)?]);
            }
            // The rewritten graph need not be symmetric: both layouts from here on (the
            // transposed one is the forward one's copy: the same arrays).
            Values::Symmetric(f) => self.values = Values::Plain(B::unfix_symmetric(&self.graph, *f)?),
            other => self.values = other,
        }
        match &mut self.values {
            Values::Plain([values, values_t]) => Ok((&mut self.graph, values, values_t)),
            _ => Err(lost()),
        }
    }

    /// `y = Â x` after `x`'s halo rows are filled. Where the hook overlaps, the fill runs
    /// beside the product of the owned columns (every row), and the boundary rows' halo
    /// columns are added after it.
    pub fn fill_forward(&self, b: &B, x: &mut B::Mat, y: &mut B::Mat) -> Result<()> {
        self.fill_forward_after(b, x, y, |_| Ok(()))
    }

    /// Where the fill overlaps and Â is symmetric, a part's owned rows as (boundary, interior):
    /// every owned row another part reads has a halo neighbour (its reader, by symmetry), so
    /// the interior rows (all neighbours owned, first in the part) are read by no other part
    /// and may be formed while the fill is under way ([`GcnAdjacency::fill_forward_after`]).
    /// `None` otherwise (one device, an input layer exchanging nothing, a directed graph).
    pub fn boundary_and_interior(&self) -> Option<(Range<usize>, Range<usize>)> {
        let split = self.overlap.as_ref().filter(|_| self.symmetric).and(self.hook())?.split()?;
        let owned = split.owned.clone();
        let first_boundary = split.interior.clamp(owned.start, owned.end);
        Some((first_boundary..owned.end, owned.start..first_boundary))
    }

    /// [`GcnAdjacency::fill_forward`] of an `x` whose interior rows
    /// ([`GcnAdjacency::boundary_and_interior`]) `form_interior` writes once the fill has
    /// started (the rest of `x`'s owned rows final before): the interior rows' own work runs
    /// beside the exchange too. Without an overlapped fill, `form_interior` runs first.
    pub fn fill_forward_after(
        &self,
        b: &B,
        x: &mut B::Mat,
        y: &mut B::Mat,
        form_interior: impl FnOnce(&mut B::Mat) -> Result<()>,
    ) -> Result<()> {
        let (Some(o), Some(h)) = (&self.overlap, self.hook()) else {
            form_interior(x)?;
            self.fill(b, x)?;
            return self.forward(b, x, y);
        };
        h.fill_start(b, x)?;
        let local = form_interior(x).and_then(|()| o.local.product(b, x, y));
        // Joined even when the product failed: nothing may be left running on x.
        h.fill_finish(b, x)?;
        local?;
        o.add_remote(b, x, y)
    }

    /// `g = Âᵀ dy`, then g's halo rows given back to their owners. Where the hook overlaps,
    /// the halo rows are formed first and travel while the owned rows are formed.
    pub fn transposed_give_back(&self, b: &B, dy: &B::Mat, g: &mut B::Mat) -> Result<()> {
        let (Some(t), Some(h)) = (self.overlap.as_ref().and_then(|o| o.transposed.as_ref()), self.hook()) else {
            self.transposed(b, dy, g)?;
            return self.give_back(b, g);
        };
        for r in &t.halo {
            r.product(b, dy, g)?;
        }
        h.give_back_start(b, g)?;
        let owned = t.owned.product(b, dy, g);
        h.give_back_finish(b, g)?;
        owned
    }

    /// The backward's product `g = Âᵀ dy` (on a part: its owned rows, the ones its weight
    /// gradient reads) and its exchange. Where it pulls, Âᵀ's owned rows are Â's (an owned
    /// node's column of a symmetric Â is its row, every neighbour in it): dy's halo rows are
    /// filled from their owners and Â's owned rows multiply dy, as the forward does and
    /// overlapped as it is ([`GcnAdjacency::fill_forward`]); nothing is given back, added or
    /// zeroed, and no transposed block is held. Otherwise
    /// [`GcnAdjacency::transposed_give_back`] (`dy` unchanged).
    pub fn backward_product(&self, b: &B, dy: &mut B::Mat, g: &mut B::Mat) -> Result<()> {
        match self.pull && self.hook().is_some() {
            true => self.fill_forward(b, dy, g),
            false => self.transposed_give_back(b, dy, g),
        }
    }

    /// `y = Â x`.
    pub fn forward(&self, b: &B, x: &B::Mat, y: &mut B::Mat) -> Result<()> {
        match &self.values {
            Values::Fixed(f) => b.spmm_fixed(&self.graph, Side::Forward, &f[0], x, y),
            Values::Symmetric(f) => b.spmm_fixed(&self.graph, Side::Forward, f, x, y),
            Values::Plain([v, _]) => b.spmm(&self.graph, Side::Forward, v, x, y),
            Values::Lost => Err(lost()),
        }
    }

    /// `y = Âᵀ x`.
    pub fn transposed(&self, b: &B, x: &B::Mat, y: &mut B::Mat) -> Result<()> {
        match &self.values {
            Values::Fixed(f) => b.spmm_fixed(&self.graph, Side::Transposed, &f[1], x, y),
            Values::Symmetric(f) => b.spmm_fixed(&self.graph, Side::Forward, f, x, y),
            Values::Plain([_, v]) => b.spmm(&self.graph, Side::Transposed, v, x, y),
            Values::Lost => Err(lost()),
        }
    }
}

pub struct GcnConv<B: GcnOps> {
    /// X W in its output until Â has read it; in the backward Âᵀ dY (X W is read by nothing
    /// after the forward: one `rows x fan_out` buffer for both, bench/NOTES.md, issue 42 item 4).
    pub lin: Linear<B>,
    pub bias: Param<B>,
    out: B::Mat,
}

impl<B: GcnOps> GcnConv<B> {
    pub fn new(b: &B, rows: usize, fan_in: usize, fan_out: usize, rng: &mut SplitMix64) -> Result<Self> {
        Ok(GcnConv {
            lin: Linear::with_bias(b, rows, fan_in, fan_out, false, rng)?,
            bias: Param::new(b, &Matrix::zeros(1, fan_out))?,
            out: b.matrix(rows, fan_out)?,
        })
    }

    pub fn forward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<&B::Mat> {
        self.forward_act(b, adj, x, false)
    }

    /// `forward`, then a ReLU fused into the bias add when `relu`.
    pub fn forward_act(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, relu: bool) -> Result<&B::Mat> {
        crate::nn::stack::Conv::forward_pre_bias(self, b, adj, x)?;
        let bias = &self.bias.value;
        adj.part().live_rows().write(b, &mut self.out, |y| if relu { b.bias_relu(y, bias) } else { b.bias_add(y, bias) })?;
        Ok(&self.out)
    }

    pub fn out(&self) -> &B::Mat {
        &self.out
    }
    pub fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }

    /// Fills the weight and bias gradients, and dX into `dx` when asked.
    pub fn backward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, dy: &mut B::Mat, dx: Option<&mut B::Mat>) -> Result<()> {
        // Only dy's owned rows are summed: its halo rows are zero (never in the loss) or, once
        // the product pulled, their owners' rows.
        adj.part().live_rows().read(b, dy, |dy| b.col_sums(dy, &mut self.bias.grad))?;
        adj.backward_product(b, dy, self.lin.out_mut())?;
        self.lin.backward_from_out_on(b, x, dx, &adj.part().product_rows())
    }

    pub fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        vec![("weight", &mut self.lin.weight), ("bias", &mut self.bias)]
    }
}

impl<B: GcnOps> crate::nn::stack::Conv<B> for GcnConv<B> {
    type Adj = GcnAdjacency<B>;
    const PULL_BACKWARD: bool = true;
    fn forward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        GcnConv::forward(self, b, adj, x).map(|_| ())
    }
    fn forward_relu(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<bool> {
        self.forward_act(b, adj, x, true).map(|_| true)
    }
    fn deferred_bias(&self) -> Option<&B::Mat> {
        Some(&self.bias.value)
    }
    fn out_mut_with_deferred_bias(&mut self) -> Option<(&mut B::Mat, &B::Mat)> {
        Some((&mut self.out, &self.bias.value))
    }
    fn forward_pre_bias(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        match adj.boundary_and_interior().filter(|_| x.forms_row_ranges()) {
            // X W's boundary rows (the ones other parts read) first; its interior rows beside
            // their exchange.
            Some((boundary, interior)) => {
                let form = |rows: Range<usize>, w: &B::Mat, xw: &mut B::Mat| match rows.is_empty() {
                    true => Ok(()),
                    false => x.times_on(b, w, xw, &LiveRows::only(rows)),
                };
                let (w, xw) = self.lin.weight_and_out_mut();
                form(boundary, w, xw)?;
                adj.fill_forward_after(b, xw, &mut self.out, |xw| form(interior, w, xw))
            }
            None => {
                self.lin.forward_pre_bias_on(b, x, &adj.part().product_rows())?;
                adj.fill_forward(b, self.lin.out_mut(), &mut self.out)
            }
        }
    }
    fn out(&self) -> &B::Mat {
        &self.out
    }
    fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }
    fn backward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, dy: &mut B::Mat, dx: Option<&mut B::Mat>) -> Result<()> {
        GcnConv::backward(self, b, adj, x, dy, dx)
    }
    fn input_layer(adj: &GcnAdjacency<B>, on: bool) {
        adj.set_input_layer(on)
    }
    fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        GcnConv::params(self)
    }
}
