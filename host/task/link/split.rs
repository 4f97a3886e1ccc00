//! The edge split of link prediction, as PyG's `RandomLinkSplit(is_undirected=True)`: every
//! undirected edge of the graph once (stored `u < v`; self-loops are not edges to predict),
//! shuffled with `--split-seed`, cut into validation (5%), test (10%) and training edges
//! (the rest), disjoint. The message-passing graph the encoder runs on holds the training
//! edges only, in both directions. Validation and test negatives (as many as positives) are
//! drawn once here and stored with the split, as RandomLinkSplit does; training negatives are
//! drawn every epoch (`ops::nn::negative_sample`).
//!
//! The split is written to a text file so that the PyG baseline (`bench/pyg/link.py`) trains
//! on the very same edges. Format (version 1), one item a line, `#` lines are comments:
//!
//! ```text
//! tcgnn-link-split 1
//! nodes N
//! edges E            undirected edges of the graph (self-loops excluded)
//! seed S
//! train K            then K lines "u v" (u < v)
//! val_pos K          ...
//! val_neg K
//! test_pos K
//! test_neg K
//! ```
//!
//! Reading checks the file against the graph before it is used: the node count, and that the
//! train, validation and test positives are exactly the graph's undirected edges, each once, and
//! that every negative is a non-edge of two distinct nodes; anything else is refused naming the
//! file, the line and the problem.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::shared::rng::{sample_below, sample_draw, sample_permuted_index, sample_stream_key, sample_substream};
use crate::util::atomic::AtomicFile;

/// Validation and test fractions of the undirected edges (PyG's `RandomLinkSplit` example).
pub const VAL_RATIO: f64 = 0.05;
pub const TEST_RATIO: f64 = 0.10;

/// Attempts per fixed negative before the split gives up (a graph so dense that a uniform pair
/// is almost never a non-edge).
const NEG_TRIES: u64 = 64;

/// Stream lanes under the split seed: the edge permutation and the fixed negatives.
const LANE_PERM: u32 = 0x11C0;
const LANE_NEG: u32 = 0x11C1;

/// A node pair `(u, v)`.
pub type Pair = [u32; 2];

/// An edge split of one graph.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSplit {
    pub nodes: usize,
    pub seed: u64,
    pub train: Vec<Pair>,
    pub val_pos: Vec<Pair>,
    pub val_neg: Vec<Pair>,
    pub test_pos: Vec<Pair>,
    pub test_neg: Vec<Pair>,
}

/// The undirected edges of `g` (`u < v`, sorted, each once: `(u, v)` and `(v, u)` are one edge),
/// self-loops dropped.
pub fn undirected_edges(g: &Csr) -> Vec<Pair> {
    let mut out = Vec::with_capacity(g.nnz() / 2 + 1);
    for u in 0..g.n_rows() {
        for (v, _) in g.row(u) {
            let u = u as u32;
            if u != v {
                out.push([u.min(v), u.max(v)]);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The symmetric pattern of `edges` (both directions, sorted rows, values 1) on `n` nodes.
pub fn symmetric_graph(n: usize, edges: &[Pair]) -> Result<Csr> {
    let mut rows = Vec::with_capacity(2 * edges.len());
    let mut cols = Vec::with_capacity(2 * edges.len());
    for &[u, v] in edges {
        rows.extend([u, v]);
        cols.extend([v, u]);
    }
    Ok(Csr::from_coo(n, n, &rows, &cols, None)?.into_canonical())
}

/// Whether `(u, v)` is an entry of the canonical (sorted rows) pattern `g`.
pub fn has_edge(g: &Csr, u: u32, v: u32) -> bool {
    let r = g.row_range(u as usize);
    g.col_idx()[r].binary_search(&v).is_ok()
}

impl LinkSplit {
    /// The split of `g` (square, any direction: an entry in either direction is an undirected
    /// edge) under `seed`. Refuses a graph without edges and one too small for every part to
    /// hold at least one edge.
    pub fn new(g: &Csr, seed: u64) -> Result<Self> {
        if g.n_rows() != g.n_cols() {
            return Err(Error::Unsupported(format!("link prediction needs a square adjacency, got {} x {}", g.n_rows(), g.n_cols())));
        }
        let n = g.n_rows();
        let edges = undirected_edges(g);
        let e = edges.len();
        if e == 0 {
            return Err(Error::Unsupported("link prediction: the graph has no edges (self-loops do not count)".into()));
        }
        let (n_val, n_test) = ((VAL_RATIO * e as f64) as usize, (TEST_RATIO * e as f64) as usize);
        if n_val == 0 || n_test == 0 || n_val + n_test >= e {
            return Err(Error::Unsupported(format!(
                "link prediction: {e} undirected edges leave a split empty ({n_val} validation, {n_test} test, {} training at {VAL_RATIO} / {TEST_RATIO}); the graph needs at least 20 edges",
                e.saturating_sub(n_val + n_test)
            )));
        }
        let key = sample_substream(sample_stream_key(seed, 0, 0), LANE_PERM);
        let take = |range: std::ops::Range<usize>| -> Vec<Pair> {
            let mut v: Vec<Pair> = range.map(|i| edges[sample_permuted_index(key, e as u64, i as u64) as usize]).collect();
            v.sort_unstable();
            v
        };
        let val_pos = take(0..n_val);
        let test_pos = take(n_val..n_val + n_test);
        let train = take(n_val + n_test..e);
        // The fixed negatives avoid every edge of the graph, as RandomLinkSplit's.
        let full = symmetric_graph(n, &edges)?;
        let mut negs = fixed_negatives(&full, seed, n_val + n_test)?;
        let test_neg = negs.split_off(n_val);
        let mut val_neg = negs;
        val_neg.sort_unstable();
        let mut test_neg = test_neg;
        test_neg.sort_unstable();
        Ok(LinkSplit { nodes: n, seed, train, val_pos, val_neg, test_pos, test_neg })
    }

    /// Every undirected edge of the split (train, validation and test positives), sorted.
    pub fn all_edges(&self) -> Vec<Pair> {
        let mut all: Vec<Pair> = self.train.iter().chain(&self.val_pos).chain(&self.test_pos).copied().collect();
        all.sort_unstable();
        all
    }

    /// The graph the encoder runs on: the training edges in both directions.
    pub fn message_passing_graph(&self) -> Result<Csr> {
        symmetric_graph(self.nodes, &self.train)
    }

    /// The whole graph's symmetric pattern (what training negatives must avoid).
    pub fn full_graph(&self) -> Result<Csr> {
        symmetric_graph(self.nodes, &self.all_edges())
    }

    /// Writes the split to `path` (atomically; format in the module doc).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut f = AtomicFile::create(path)?;
        let io = |e| Error::Io { path: path.to_path_buf(), source: e };
        writeln!(f, "tcgnn-link-split 1").map_err(io)?;
        writeln!(f, "# RandomLinkSplit-style edge split written by tcgnn (pairs are 0-based node ids)").map_err(io)?;
        writeln!(f, "nodes {}", self.nodes).map_err(io)?;
        writeln!(f, "edges {}", self.train.len() + self.val_pos.len() + self.test_pos.len()).map_err(io)?;
        writeln!(f, "seed {}", self.seed).map_err(io)?;
        for (name, pairs) in self.sections() {
            writeln!(f, "{name} {}", pairs.len()).map_err(io)?;
            for [u, v] in pairs {
                writeln!(f, "{u} {v}").map_err(io)?;
            }
        }
        f.commit()
    }

    fn sections(&self) -> [(&'static str, &Vec<Pair>); 5] {
        [
            ("train", &self.train),
            ("val_pos", &self.val_pos),
            ("val_neg", &self.val_neg),
            ("test_pos", &self.test_pos),
            ("test_neg", &self.test_neg),
        ]
    }

    /// Reads a split written by [`LinkSplit::write`] and checks it against `g` (see the module
    /// doc): a file of another graph, a truncated or edited file is an error naming the line.
    pub fn read(path: &Path, g: &Csr) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.to_path_buf(), source: e })?;
        let bad = |line: usize, msg: String| Error::Unsupported(format!("{}:{line}: {msg}", path.display()));
        let lines: Vec<(usize, &str)> =
            text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty() && !l.starts_with('#')).collect();
        let last = text.lines().count();
        let mut pos = 0usize;
        let next = |pos: &mut usize, what: &str| -> Result<(usize, &str)> {
            let r = lines.get(*pos).copied().ok_or_else(|| bad(last, format!("the file ends before {what} (truncated?)")))?;
            *pos += 1;
            Ok(r)
        };
        let field = |pos: &mut usize, name: &str| -> Result<(usize, u64)> {
            let (l, s) = next(pos, name)?;
            let rest = s
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix(' '))
                .ok_or_else(|| bad(l, format!("expected '{name} NUMBER', got '{s}'")))?;
            rest.trim().parse::<u64>().map(|v| (l, v)).map_err(|_| bad(l, format!("'{rest}' is not a number")))
        };
        let (l, head) = next(&mut pos, "the header")?;
        if head != "tcgnn-link-split 1" {
            return Err(bad(l, format!("not a tcgnn link split (version 1): starts with '{head}'")));
        }
        let (l_nodes, nodes) = field(&mut pos, "nodes")?;
        if nodes as usize != g.n_rows() {
            return Err(bad(l_nodes, format!("the split is of a graph of {nodes} nodes, this graph has {}", g.n_rows())));
        }
        let (l_edges, edges) = field(&mut pos, "edges")?;
        let (_, seed) = field(&mut pos, "seed")?;
        let n = nodes as usize;
        let mut parts: Vec<Vec<Pair>> = Vec::with_capacity(5);
        let mut pair_lines: Vec<Vec<usize>> = Vec::with_capacity(5);
        for name in ["train", "val_pos", "val_neg", "test_pos", "test_neg"] {
            let (l, count) = field(&mut pos, name)?;
            if count > (lines.len() - pos) as u64 {
                return Err(bad(
                    l,
                    format!("'{name}' announces {count} pairs, the file holds {} more lines (truncated?)", lines.len() - pos),
                ));
            }
            if count == 0 {
                return Err(bad(l, format!("'{name}' is empty: every part of a split needs a pair")));
            }
            let mut v = Vec::with_capacity(count as usize);
            let mut at = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let (l, s) = next(&mut pos, name)?;
                let mut it = s.split_whitespace().map(|t| t.parse::<u32>());
                let (Some(Ok(u)), Some(Ok(w)), None) = (it.next(), it.next(), it.next()) else {
                    return Err(bad(l, format!("expected a pair 'u v' of '{name}', got '{s}'")));
                };
                if u as usize >= n || w as usize >= n {
                    return Err(bad(l, format!("pair ({u}, {w}) is out of range for {n} nodes")));
                }
                if u == w {
                    return Err(bad(l, format!("pair ({u}, {w}) joins a node to itself")));
                }
                v.push([u, w]);
                at.push(l);
            }
            parts.push(v);
            pair_lines.push(at);
        }
        if let Some(&(l, s)) = lines.get(pos) {
            return Err(bad(l, format!("unexpected content after the last section: '{s}'")));
        }
        // The positives must be the graph's undirected edges exactly, each once.
        let graph_edges = undirected_edges(g);
        if graph_edges.len() as u64 != edges {
            return Err(bad(l_edges, format!("the split is of a graph of {edges} undirected edges, this graph has {}", graph_edges.len())));
        }
        let full = symmetric_graph(n, &graph_edges)?;
        let mut seen: Vec<(Pair, usize)> = Vec::with_capacity(graph_edges.len());
        for k in [0, 1, 3] {
            for (&[u, v], &l) in parts[k].iter().zip(&pair_lines[k]) {
                if !has_edge(&full, u, v) {
                    return Err(bad(l, format!("({u}, {v}) is not an edge of this graph: the split is of another graph")));
                }
                seen.push(([u.min(v), u.max(v)], l));
            }
        }
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0].0 == w[1].0) {
            let [u, v] = w[1].0;
            return Err(bad(w[1].1, format!("edge ({u}, {v}) appears twice among the positives (also line {})", w[0].1)));
        }
        if seen.len() != graph_edges.len() {
            return Err(bad(l_edges, format!("the positives cover {} of the graph's {} edges", seen.len(), graph_edges.len())));
        }
        for k in [2, 4] {
            let mut sorted: Vec<(Pair, usize)> = Vec::with_capacity(parts[k].len());
            for (&[u, v], &l) in parts[k].iter().zip(&pair_lines[k]) {
                if has_edge(&full, u, v) {
                    return Err(bad(l, format!("negative ({u}, {v}) is an edge of this graph")));
                }
                sorted.push(([u.min(v), u.max(v)], l));
            }
            sorted.sort_unstable();
            if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
                let [u, v] = w[1].0;
                return Err(bad(w[1].1, format!("negative ({u}, {v}) appears twice (also line {})", w[0].1)));
            }
        }
        let mut it = parts.into_iter();
        let mut take = || it.next().expect("five parts");
        Ok(LinkSplit { nodes: n, seed, train: take(), val_pos: take(), val_neg: take(), test_pos: take(), test_neg: take() })
    }
}

/// `count` distinct non-edges `(u, v)` of `full` (`u < v`), uniform: the validation and test
/// negatives, a deterministic function of `seed`.
fn fixed_negatives(full: &Csr, seed: u64, count: usize) -> Result<Vec<Pair>> {
    let n = full.n_rows() as u64;
    let non_edges = (n * n.saturating_sub(1) / 2).saturating_sub(full.nnz() as u64 / 2);
    if (count as u64) > non_edges {
        return Err(Error::Unsupported(format!(
            "link prediction: the graph has {non_edges} non-edges, fewer than the {count} validation and test negatives"
        )));
    }
    let key = sample_substream(sample_stream_key(seed, 0, 0), LANE_NEG);
    let mut seen = std::collections::HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    let mut counter = 0u64;
    let max_draws = (count as u64 + 16) * NEG_TRIES;
    while out.len() < count {
        if counter >= 2 * max_draws {
            return Err(Error::Unsupported(format!(
                "link prediction: found only {} of {count} validation / test negatives in {max_draws} draws (the graph is nearly complete)",
                out.len()
            )));
        }
        let u = sample_below(sample_draw(key, counter), n) as u32;
        let v = sample_below(sample_draw(key, counter + 1), n) as u32;
        counter += 2;
        if u == v || has_edge(full, u, v) {
            continue;
        }
        let p = [u.min(v), u.max(v)];
        if seen.insert(p) {
            out.push(p);
        }
    }
    Ok(out)
}
