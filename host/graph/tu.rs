//! The TU Dortmund graph-collection text format (Morris et al. 2020): a set of small graphs in
//! four files sharing a prefix, each gzipped or not (`NAME_A.txt[.gz]`, ...):
//! - `NAME_A.txt`: one edge per line, `row, col`, 1-based node ids over the whole set;
//! - `NAME_graph_indicator.txt`: line i = the 1-based graph id of node i (non-decreasing: the
//!   nodes of a graph are contiguous);
//! - `NAME_graph_labels.txt`: line g = the class of graph g (any integers, e.g. -1 / 1);
//! - `NAME_node_labels.txt` (optional): line i = the categorical label of node i.
//!
//! Read as PyG's `read_tu_data` reads them: self-loops dropped and duplicate edges merged (an
//! edge listed twice is one edge), graph labels renumbered 0.. in sorted order, node labels
//! shifted so that the smallest is 0. Anything malformed is an error naming the file and line:
//! ids out of range, an indicator that decreases or skips a graph (a graph with no nodes), an
//! edge between two graphs, a missing or non-integer label. Every buffer grows with the lines
//! read, so a short file cannot make the reader allocate much.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::mtx::open_maybe_gz;
use crate::graph::text::{Lines, Tokens, is_blank, show};

/// A set of graphs in one block-diagonal adjacency.
#[derive(Clone, Debug)]
pub struct TuSet {
    /// The set's name (the file prefix).
    pub name: String,
    /// Graph g holds nodes `offsets[g]..offsets[g + 1]` (0-based); `graphs + 1` entries.
    pub offsets: Vec<u32>,
    /// All nodes' edges (0-based, both directions as listed, no self-loops, no duplicates;
    /// value 1): block-diagonal by construction.
    pub adjacency: Csr,
    /// Each node's label minus the smallest label (None when the set has no node labels).
    pub node_labels: Option<Vec<u32>>,
    /// Each graph's class: the index of its label among the sorted distinct labels.
    pub graph_labels: Vec<u32>,
    /// The label each class stands for (sorted).
    pub classes: Vec<i64>,
}

impl TuSet {
    pub fn graphs(&self) -> usize {
        self.offsets.len() - 1
    }
    pub fn nodes(&self) -> usize {
        self.adjacency.n_rows()
    }
    pub fn num_classes(&self) -> usize {
        self.classes.len()
    }
    /// Nodes of graph `g`.
    pub fn graph_nodes(&self, g: usize) -> std::ops::Range<usize> {
        self.offsets[g] as usize..self.offsets[g + 1] as usize
    }
}

/// Where a set named by the user lives: `tu:NAME` in `$TCGNN_DATASETS/tu`, or a path prefix
/// `DIR/NAME` (the files `DIR/NAME_A.txt[.gz]`, ...). Returns (folder, name).
pub fn resolve(spec: &str) -> Result<(PathBuf, String)> {
    let (dir, name) = match spec.strip_prefix("tu:") {
        Some(name) => (crate::graph::source::datasets_dir().join("tu"), name.to_string()),
        None => {
            let p = Path::new(spec);
            let name = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            (p.parent().map(Path::to_path_buf).unwrap_or_default(), name)
        }
    };
    if name.is_empty() || name.contains('/') {
        return Err(Error::Unsupported(format!("'{spec}' is not a TU set: use tu:NAME or a path prefix DIR/NAME")));
    }
    Ok((dir, name))
}

/// Whether `spec` names a TU set (`tu:NAME`, or a prefix whose `_A.txt[.gz]` exists).
pub fn is_tu(spec: &str) -> bool {
    spec.starts_with("tu:") || resolve(spec).is_ok_and(|(dir, name)| part_path(&dir, &name, "A").is_some())
}

/// `DIR/NAME_PART.txt.gz` or `DIR/NAME_PART.txt`, whichever exists.
fn part_path(dir: &Path, name: &str, part: &str) -> Option<PathBuf> {
    [".txt.gz", ".txt"].iter().map(|ext| dir.join(format!("{name}_{part}{ext}"))).find(|p| p.exists())
}

fn required(dir: &Path, name: &str, part: &str) -> Result<PathBuf> {
    part_path(dir, name, part).ok_or_else(|| Error::Io {
        path: dir.join(format!("{name}_{part}.txt[.gz]")),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file (a TU set needs _A, _graph_indicator and _graph_labels)"),
    })
}

/// Reads the set `spec` names (see [`resolve`]).
pub fn load(spec: &str) -> Result<TuSet> {
    let (dir, name) = resolve(spec)?;
    read_tu(&dir, &name)
}

/// Reads set `name` from folder `dir`.
pub fn read_tu(dir: &Path, name: &str) -> Result<TuSet> {
    let indicator_path = required(dir, name, "graph_indicator")?;
    let (offsets, node_graph) = read_indicator(&indicator_path)?;
    let n = node_graph.len();
    let graphs = offsets.len() - 1;

    let labels_path = required(dir, name, "graph_labels")?;
    let raw = read_ints(&labels_path, graphs, "graph label")?;
    if raw.len() != graphs {
        return Err(Error::parse(
            &labels_path,
            raw.len() + 1,
            format!("{} graph labels for {graphs} graphs (the indicator's; a graph with no nodes has no indicator line)", raw.len()),
        ));
    }
    let mut classes = raw.clone();
    classes.sort_unstable();
    classes.dedup();
    let graph_labels = raw.iter().map(|v| classes.binary_search(v).expect("listed above") as u32).collect();

    let node_labels = match part_path(dir, name, "node_labels") {
        Some(p) => {
            let raw = read_ints(&p, n, "node label")?;
            if raw.len() != n {
                return Err(Error::parse(&p, raw.len() + 1, format!("{} node labels for {n} nodes (the graph indicator's)", raw.len())));
            }
            let lo = raw.iter().copied().min().unwrap_or(0);
            let hi = raw.iter().copied().max().unwrap_or(0);
            // One-hot features are `nodes x (hi - lo + 1)`: a label range far beyond the node
            // count is no categorical label.
            let width = hi as i128 - lo as i128 + 1;
            if width > (n as i128).max(1 << 16) {
                return Err(Error::parse(&p, 1, format!("node labels span {lo}..={hi}: {width} categories for {n} nodes")));
            }
            Some(raw.iter().map(|&v| (v - lo) as u32).collect())
        }
        None => None,
    };

    let a_path = required(dir, name, "A")?;
    let adjacency = read_edges(&a_path, &node_graph)?;
    Ok(TuSet { name: name.to_string(), offsets, adjacency, node_labels, graph_labels, classes })
}

/// The graph offsets and each node's (0-based) graph from the indicator file.
fn read_indicator(path: &Path) -> Result<(Vec<u32>, Vec<u32>)> {
    let mut lines = Lines::new(open_maybe_gz(path)?, path);
    let mut node_graph: Vec<u32> = Vec::new();
    let mut offsets = vec![0u32];
    while let Some(line) = lines.next_line()? {
        if is_blank(line.text) {
            continue;
        }
        let v = one_int(line.text).ok_or_else(|| line.error(format!("expected one graph id, found '{}'", show(line.text))))?;
        let prev = offsets.len() as i64 - 1; // the current graph's 1-based id (0 before the first)
        if node_graph.len() >= u32::MAX as usize / 2 {
            return Err(line.error("more than 2^31 nodes (32-bit node ids)"));
        }
        if v == prev + 1 {
            offsets.push(node_graph.len() as u32);
        } else if v != prev || prev == 0 {
            let what = if prev == 0 {
                format!("the first graph id is {v}: ids start at 1")
            } else if v < prev {
                format!("graph id {v} after {prev}: the indicator must be non-decreasing (a graph's nodes contiguous)")
            } else {
                format!("graph id {v} after {prev}: graphs {}..={} would have no nodes", prev + 1, v - 1)
            };
            return Err(line.error(what));
        }
        node_graph.push(offsets.len() as u32 - 2);
    }
    if node_graph.is_empty() {
        return Err(Error::parse(path, 1, "no nodes"));
    }
    // offsets holds each graph's first node; close the last graph.
    offsets.remove(0);
    offsets.push(node_graph.len() as u32);
    Ok((offsets, node_graph))
}

/// The one integer of a line (surrounding spaces allowed).
fn one_int(text: &[u8]) -> Option<i64> {
    let mut toks = Tokens::new(text, true);
    let t = toks.next()?;
    if toks.next().is_some() {
        return None;
    }
    std::str::from_utf8(t).ok()?.parse().ok()
}

/// One integer per non-blank line; at most `max` lines are kept (more is an error naming the
/// first extra line).
fn read_ints(path: &Path, max: usize, what: &str) -> Result<Vec<i64>> {
    let mut lines = Lines::new(open_maybe_gz(path)?, path);
    let mut out = Vec::new();
    while let Some(line) = lines.next_line()? {
        if is_blank(line.text) {
            continue;
        }
        let v = one_int(line.text).ok_or_else(|| line.error(format!("expected one integer {what}, found '{}'", show(line.text))))?;
        if out.len() == max {
            return Err(line.error(format!("more {what}s than the {max} the graph indicator implies")));
        }
        out.push(v);
    }
    Ok(out)
}

/// The edges of `path` as one block-diagonal pattern over the indicator's nodes.
fn read_edges(path: &Path, node_graph: &[u32]) -> Result<Csr> {
    let n = node_graph.len();
    let mut lines = Lines::new(open_maybe_gz(path)?, path);
    let (mut rows, mut cols) = (Vec::new(), Vec::new());
    while let Some(line) = lines.next_line()? {
        if is_blank(line.text) {
            continue;
        }
        let toks: Vec<&[u8]> = Tokens::new(line.text, true).take(3).collect();
        let id = |t: &[u8]| -> Result<u32> {
            let v: i64 = std::str::from_utf8(t)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| line.error(format!("node id '{}' is not an integer", show(t))))?;
            if v < 1 || v as u64 > n as u64 {
                return Err(line.error(format!("node id {v} out of range 1..={n} (the graph indicator's nodes)")));
            }
            Ok(v as u32 - 1)
        };
        if toks.len() != 2 {
            return Err(line.error(format!("expected 'row, col', found '{}'", show(line.text))));
        }
        let (r, c) = (id(toks[0])?, id(toks[1])?);
        let (gr, gc) = (node_graph[r as usize], node_graph[c as usize]);
        if gr != gc {
            return Err(line.error(format!("edge {} -> {} joins graph {} and graph {}", r + 1, c + 1, gr + 1, gc + 1)));
        }
        if r != c {
            rows.push(r);
            cols.push(c);
        }
    }
    let a = Csr::from_coo(n, n, &rows, &cols, None)?;
    // Duplicates were summed: every listed edge counts once (PyG's coalesce).
    let ones = vec![1f32; a.nnz()];
    a.with_values(ones)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_set(dir: &Path, name: &str, a: &str, ind: &str, gl: &str, nl: Option<&str>) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(format!("{name}_A.txt")), a).unwrap();
        std::fs::write(dir.join(format!("{name}_graph_indicator.txt")), ind).unwrap();
        std::fs::write(dir.join(format!("{name}_graph_labels.txt")), gl).unwrap();
        if let Some(nl) = nl {
            std::fs::write(dir.join(format!("{name}_node_labels.txt")), nl).unwrap();
        }
    }

    #[test]
    fn reads_a_small_set() {
        let dir = std::env::temp_dir().join(format!("tcgnn-tu-unit-{}", std::process::id()));
        // Two graphs: 1-2-3 (with a duplicate and a self-loop) and 4-5.
        write_set(&dir, "S", "1, 2\n2, 1\n2, 3\n3, 2\n1, 2\n3, 3\n4, 5\n5, 4\n", "1\n1\n1\n2\n2\n", "-1\n1\n", Some("3\n4\n3\n5\n3\n"));
        let s = read_tu(&dir, "S").unwrap();
        assert_eq!(s.offsets, vec![0, 3, 5]);
        assert_eq!(s.adjacency.nnz(), 6);
        assert!(s.adjacency.values().iter().all(|&v| v == 1.0));
        assert_eq!(s.graph_labels, vec![0, 1]);
        assert_eq!(s.classes, vec![-1, 1]);
        assert_eq!(s.node_labels, Some(vec![0, 1, 0, 2, 0]));
        std::fs::remove_dir_all(&dir).ok();
    }
}
