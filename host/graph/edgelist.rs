//! SNAP / CSV edge lists: one `src dst [weight]` per line, separated by spaces, tabs or commas,
//! 0-based node ids, `#` / `%` comment lines, an optional header line (`id_1,id_2`), gzip when the
//! name ends in `.gz`. The graph is read as directed, exactly as listed (see
//! [`crate::graph::ops::symmetrize`] for undirected use).

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::mtx::open_maybe_gz;
use crate::graph::text::{FREE_EMPTY_LINES, Lines, Tokens, implausible_dimension, is_blank, parse_f64, parse_u64, show};
use crate::util::memory::host_alloc_problem;

/// How to read an edge list.
#[derive(Clone, Copy, Debug, Default)]
pub struct EdgeListOptions {
    /// Number of nodes; `None`: the largest id + 1. Ids at or past a given count are an error.
    pub n_nodes: Option<usize>,
    /// The first non-comment line is a header even if it is numeric (e.g. `nodes edges`, as
    /// some re-saved SNAP files have). A non-numeric first line is skipped either way.
    pub skip_first_line: bool,
}

/// Read an edge list file (see the module doc for the accepted format).
///
/// Without a weight column, duplicate edges merge into one edge of value 1; with weights,
/// duplicate weights are summed.
pub fn read_edgelist(path: impl AsRef<Path>, opts: EdgeListOptions) -> Result<Csr> {
    let path = path.as_ref();
    parse_edgelist(open_maybe_gz(path)?, path, opts)
}

/// Parse an edge list from any reader; `path` is only used in error messages.
pub fn parse_edgelist(reader: impl Read, path: &Path, opts: EdgeListOptions) -> Result<Csr> {
    const MAX_ID: u64 = (1 << 31) - 2;
    let mut lines = Lines::new(reader, path);
    let mut src: Vec<u32> = Vec::new();
    let mut dst: Vec<u32> = Vec::new();
    let mut weights: Vec<f32> = Vec::new();
    // Columns per edge line, fixed by the first edge line (2: pattern, 3: weighted).
    let mut columns: Option<usize> = None;
    let mut header_allowed = true;
    // The line taken as a header, for the error when nothing else follows.
    let mut header_line: Option<(usize, String)> = None;
    let mut max_id: u64 = 0;
    let limit = opts.n_nodes.map(|n| n as u64);
    let mut next_check: u64 = 1 << 22;
    if let Some(n) = opts.n_nodes
        && n as u64 > MAX_ID + 1
    {
        return Err(Error::InvalidGraph(format!("{n} nodes exceed 32-bit node ids")));
    }
    if let Some(n) = opts.n_nodes {
        crate::util::memory::check_host_alloc(8 * (n as u64 + 1), &format!("{n} nodes (--nodes)"))?;
    }
    // Lines without an edge: a few megabytes of gzip inflate into gigabytes of blank lines, so
    // past FREE_EMPTY_LINES they must not outnumber the edges 64 to 1 (the work stays bounded
    // by the edges the file holds).
    let mut empty: u64 = 0;
    while let Some(line_at) = lines.next_line()? {
        let line = line_at.text;
        if line_at.no == 1 && line.len() >= 14 && line[..14].eq_ignore_ascii_case(b"%%MatrixMarket") {
            // Read as an edge list its size line would become an edge: say what it is.
            return Err(line_at.error("a Matrix Market file, not an edge list: read it as one (--input-format mtx, or a .mtx name)"));
        }
        if is_blank(line) || line.first().is_some_and(|b| *b == b'#' || *b == b'%') {
            empty += 1;
            if empty > FREE_EMPTY_LINES && empty > 64 * (src.len() as u64 + 1) {
                return Err(line_at.error(format!(
                    "{empty} blank or comment lines and only {} edges so far: not an edge list (endless blank lines?)",
                    src.len()
                )));
            }
            continue;
        }
        let toks: Vec<&[u8]> = Tokens::new(line, true).take(4).collect();
        if toks.is_empty() {
            continue; // only separators (an empty CSV row)
        }
        // In CSV an empty field is missing data: `0,,1` is not the edge 0 -> 1.
        if line.contains(&b',') && line.split(|&b| b == b',').any(is_blank) {
            return Err(line_at.error(format!("empty field in '{}'", show(line))));
        }
        // A first non-comment line whose first field is not a number is a column header.
        if header_allowed && (opts.skip_first_line || (parse_u64(toks[0]).is_none() && parse_f64(toks[0]).is_none())) {
            header_allowed = false;
            header_line = Some((line_at.no, show(line)));
            continue;
        }
        header_allowed = false;
        let n_cols = *columns.get_or_insert(toks.len());
        if toks.len() != n_cols || !(2..=3).contains(&toks.len()) {
            let msg = if (2..=3).contains(&n_cols) {
                format!("expected {n_cols} fields like the first edge line, found {}", toks.len())
            } else {
                format!("expected 'src dst' or 'src dst weight', found {} fields", toks.len())
            };
            return Err(line_at.error(msg));
        }
        let mut id = |t: &[u8], what: &str| -> Result<u32> {
            let v = parse_u64(t).ok_or_else(|| line_at.error(format!("{what} id '{}' is not a non-negative integer", show(t))))?;
            if let Some(n) = limit {
                if v >= n {
                    return Err(line_at.error(format!("{what} id {v} is out of range for {n} nodes")));
                }
            } else if v > MAX_ID {
                return Err(line_at.error(format!("{what} id {v} exceeds 32-bit node ids")));
            }
            if v > max_id {
                max_id = v;
                // The CSR needs row pointers up to the largest id (8 bytes a node): ask as the
                // ids grow (doubling), so a huge id on line 1 fails there, not 34M lines later.
                if max_id >= next_check {
                    if let Some(msg) = host_alloc_problem(8 * (max_id + 2), &format!("node id {max_id}")) {
                        return Err(line_at.error(msg));
                    }
                    next_check = max_id.saturating_mul(2);
                }
            }
            Ok(v as u32)
        };
        let s = id(toks[0], "source")?;
        let d = id(toks[1], "target")?;
        if n_cols == 3 {
            let w = parse_f64(toks[2]).ok_or_else(|| line_at.error(format!("weight '{}' is not a finite number", show(toks[2]))))?;
            if !(w as f32).is_finite() {
                return Err(line_at.error(format!("weight '{}' overflows f32 (largest {:e})", show(toks[2]), f32::MAX)));
            }
            weights.push(w as f32);
        }
        src.push(s);
        dst.push(d);
    }
    if src.is_empty()
        && let Some((no, text)) = header_line
    {
        // A file of one non-numeric line is far more likely a wrong file than an empty graph.
        return Err(Error::parse(path, no, format!("no edges: the only line, '{text}', is not 'src dst [weight]'")));
    }
    let n = match opts.n_nodes {
        Some(n) => n,
        None if src.is_empty() => 0,
        None => {
            let n = max_id as usize + 1;
            if let Some(msg) = implausible_dimension(n, src.len()) {
                return Err(Error::parse(path, lines.line_no(), format!("{msg} (pass the node count to allow it)")));
            }
            n
        }
    };
    if columns == Some(3) {
        Csr::from_coo(n, n, &src, &dst, Some(&weights))
    } else {
        let m = Csr::from_coo(n, n, &src, &dst, None)?;
        let nnz = m.nnz();
        m.with_values(vec![1.0; nnz])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str, n: Option<usize>) -> Result<Csr> {
        parse_edgelist(s.as_bytes(), Path::new("e.csv"), EdgeListOptions { n_nodes: n, skip_first_line: false })
    }

    #[test]
    fn snap_and_csv_forms() {
        let snap = parse("# Directed graph\n# FromNodeId\tToNodeId\n0\t1\n1\t2\n\n0\t1\n", None).unwrap();
        assert_eq!((snap.n_rows(), snap.nnz()), (3, 2));
        assert_eq!(snap.values(), &[1.0, 1.0]);
        let csv = parse("id_1,id_2\r\n0,3\r\n2,1\r\n", None).unwrap();
        assert_eq!((csv.n_rows(), csv.nnz()), (4, 2));
        assert_eq!(csv.col_idx(), &[3, 1]);
        let w = parse("0 1 0.5\n0 1 0.25\n", Some(5)).unwrap();
        assert_eq!((w.n_rows(), w.nnz()), (5, 1));
        assert_eq!(w.values(), &[0.75]);
        assert_eq!(parse("% nothing\n", None).unwrap().n_rows(), 0);
        let opts = EdgeListOptions { n_nodes: None, skip_first_line: true };
        let h = parse_edgelist(&b"# c\n36694 183832\n0 1\n"[..], Path::new("h.txt"), opts).unwrap();
        assert_eq!((h.n_rows(), h.nnz()), (2, 1));
    }

    #[test]
    fn fuzz_regressions() {
        // A line holding only commas (found by cargo fuzz: indexed an empty token list).
        let g = parse("id_1,id_2\r\n,\n3,0\n", None).unwrap();
        assert_eq!((g.n_rows(), g.nnz()), (4, 1));
        // The fuzzer's input (after its options byte): must return, Ok or Err.
        let crash = b"% Dirtedph \x00id_1,id_2\r\n,\n\r3,021\r\n\n01\t2\n5\r\n01\t2\n5\t\x00";
        let _ = parse_edgelist(&crash[..], Path::new("c.txt"), EdgeListOptions::default());
    }

    #[test]
    fn errors_name_line_and_cause() {
        let cases = [
            ("0 1\n1 x\n", "e.csv:2:", "target id 'x'"),
            ("0 1\n1 2 3\n", "e.csv:2:", "expected 2 fields"),
            ("0\n", "e.csv:1:", "found 1"),
            ("0 1\n0 9\n", "e.csv:2:", "out of range for 5"),
            ("0 1 nan\n", "e.csv:1:", "weight"),
            ("a,b\nc,d\n", "e.csv:2:", "source id 'c'"),
            ("0 99999999999\n", "e.csv:1:", "32-bit"),
            ("0 2000000000\n", "e.csv:1:", "refusing"),
            ("0,,1\n", "e.csv:1:", "empty field"),
            ("0,1,\n", "e.csv:1:", "empty field"),
            ("hello world\n", "e.csv:1:", "no edges"),
            ("0 1 1e39\n", "e.csv:1:", "overflows f32"),
        ];
        for (text, loc, cause) in cases {
            let n = text.contains("9\n").then_some(5).filter(|_| !text.contains("999"));
            let e = parse(text, n).unwrap_err().to_string();
            assert!(e.contains(loc) && e.contains(cause), "{text:?} gave '{e}'");
        }
    }
}
