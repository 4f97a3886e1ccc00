//! A generated suite of bad inputs on every surface a user or an attacker reaches (issue 45):
//! graph files (Matrix Market, edge lists, plain and gzip), `.tcg` caches, node data (`.npz`),
//! model files and checkpoints (safetensors), partition folders, generator specs, command-line
//! options and output paths. Each case is built from a table, runs through the library where it
//! can (fast, in a thread with a time limit) or the real binary where the surface is the command
//! line, and must end in one of:
//! - a clean error that names the file (or spec, or option) and what is wrong;
//! - the right result (for inputs that are valid, however odd);
//!
//! and never a panic, an abort, a signal or a hang, nor a result silently different from what
//! the file says. Outputs that must not change are compared byte for byte afterwards.

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::cli::{bin, run_tcgnn};
use tcgnn::graph::Csr;
use tcgnn::graph::edgelist::{EdgeListOptions, read_edgelist};
use tcgnn::graph::mtx::read_mtx;
use tcgnn::graph::npz::{Features, NodeData, Split, read_npz, write_npz};
use tcgnn::graph::tcg::{read_tcg, write_tcg};
use tcgnn::task::saved::TensorFile;

/// Per library case: far above what any of these small inputs takes when handled right.
const LIB_LIMIT: Duration = Duration::from_secs(20);
/// Per binary run.
const BIN_LIMIT: Duration = Duration::from_secs(60);

fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcgnn-suite-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What a case must give.
#[derive(Clone, Debug)]
enum Expect {
    /// An error whose message holds every one of these.
    Refused(Vec<String>),
    /// Success with this summary of the result.
    Gives(String),
    /// Either an error naming the file (in the first string) or a success: for corruptions that
    /// may land where they change nothing a reader can see (a zip timestamp, a weight).
    Either(String),
}

fn refused(parts: &[&str]) -> Expect {
    Expect::Refused(parts.iter().map(|s| s.to_string()).collect())
}

/// Runs `f` in a thread: its panic or its running past the limit is a failure (returned as
/// `Err` text starting with "PANIC" / "HANG").
fn guarded<F: FnOnce() -> Result<String, String> + Send + 'static>(f: F) -> Result<String, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(LIB_LIMIT) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Err(format!("PANIC: {msg}"))
        }
        Err(_) => Err(format!("HANG: still running after {LIB_LIMIT:?}")),
    }
}

/// One case: a label, what it runs, what it must give.
struct Case {
    label: String,
    run: Box<dyn FnOnce() -> Result<String, String> + Send>,
    expect: Expect,
}

fn case(label: impl Into<String>, expect: Expect, run: impl FnOnce() -> Result<String, String> + Send + 'static) -> Case {
    Case { label: label.into(), run: Box::new(run), expect }
}

/// Runs every case; returns how many ran. Fails listing every case that went wrong.
fn run_cases(cases: Vec<Case>) -> usize {
    let n = cases.len();
    let mut failures = Vec::new();
    for c in cases {
        let got = guarded(c.run);
        if let Some(why) = judge(&got, &c.expect) {
            failures.push(format!("{}: {why}\n    got: {got:?}", c.label));
        }
    }
    println!("{n} cases");
    assert!(failures.is_empty(), "{} of {n} cases failed:\n{}", failures.len(), failures.join("\n"));
    n
}

/// `None` when `got` is what `expect` asks for.
fn judge(got: &Result<String, String>, expect: &Expect) -> Option<String> {
    if let Err(e) = got
        && (e.starts_with("PANIC") || e.starts_with("HANG"))
    {
        return Some("panicked or hung".into());
    }
    if let Err(e) = got
        && e.contains('\x1b')
    {
        return Some("raw escape byte in the message".into());
    }
    match (expect, got) {
        (Expect::Refused(parts), Err(e)) => parts.iter().find(|p| !e.contains(p.as_str())).map(|p| format!("error lacks '{p}'")),
        (Expect::Refused(_), Ok(_)) => Some("accepted, must be refused".into()),
        (Expect::Gives(want), Ok(s)) => (s != want).then(|| format!("result differs: want {want:?}")),
        (Expect::Gives(want), Err(_)) => Some(format!("refused, must give {want:?}")),
        (Expect::Either(name), Err(e)) => (!e.contains(name.as_str())).then(|| format!("error does not name {name}")),
        (Expect::Either(_), Ok(_)) => None,
    }
}

/// A small graph's full content as text: the comparisons of "gives" cases.
fn summary(g: &Csr) -> String {
    let mut s = format!("{}x{} nnz {}:", g.n_rows(), g.n_cols(), g.nnz());
    for r in 0..g.n_rows() {
        for i in g.row_ptr()[r] as usize..g.row_ptr()[r + 1] as usize {
            s += &format!(" ({r},{})={}", g.col_idx()[i], g.values()[i]);
        }
    }
    s
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A graph-file case through `read`, written as `name` (and as `name.gz`, compressed, when
/// `also_gz`): the error must name the file.
fn graph_cases(
    dir: &Path,
    label: &str,
    name: &str,
    bytes: &[u8],
    expect: Expect,
    also_gz: bool,
    read: fn(&Path) -> tcgnn::Result<Csr>,
) -> Vec<Case> {
    let mut out = Vec::new();
    let mut variants = vec![(name.to_string(), bytes.to_vec())];
    if also_gz {
        variants.push((format!("{name}.gz"), gz(bytes)));
    }
    for (file, data) in variants {
        let p = dir.join(&file);
        std::fs::write(&p, &data).unwrap();
        let expect = match &expect {
            Expect::Refused(parts) => Expect::Refused(std::iter::once(file.clone()).chain(parts.iter().cloned()).collect()),
            e => e.clone(),
        };
        out.push(case(format!("{label} [{file}]"), expect, move || read(&p).map(|g| summary(&g)).map_err(|e| e.to_string())));
    }
    out
}

fn read_mtx_path(p: &Path) -> tcgnn::Result<Csr> {
    read_mtx(p)
}
fn read_edges_path(p: &Path) -> tcgnn::Result<Csr> {
    read_edgelist(p, EdgeListOptions::default())
}
fn read_edges_6(p: &Path) -> tcgnn::Result<Csr> {
    read_edgelist(p, EdgeListOptions { n_nodes: Some(6), skip_first_line: false })
}

#[test]
fn matrix_market_files() {
    let dir = scratch("mtx");
    let mut cases = Vec::new();
    let mut k = 0;
    let mut add = |label: &str, text: &[u8], expect: Expect| {
        k += 1;
        cases.extend(graph_cases(&dir, label, &format!("m{k}.mtx"), text, expect, true, read_mtx_path));
    };
    // Headers.
    for (h, why) in [
        ("", "header"),
        ("%%MatrixMarket", "bad header"),
        ("%%MatrixMarket matrix", "bad header"),
        ("%%MatrixMarket matrix coordinate real", "bad header"),
        ("%%MatrixMarket matrix array real general", "'array' format"),
        ("%%MatrixMarket matrix coordinate complex general", "field 'complex'"),
        ("%%MatrixMarket matrix coordinate real hermitian", "symmetry 'hermitian'"),
        ("%%MatrixMarket matrix coordinate real skew-symmetric", "symmetry 'skew-symmetric'"),
        ("%%MatrixMarket vector coordinate real general", "bad header"),
        ("%%MatrixMarket matrix coordinate real general extra", "bad header"),
        ("%%NotMarket matrix coordinate real general", "bad header"),
        ("\x1b]0;owned\x07 matrix coordinate real general", "\\u{1b}"),
        ("%MatrixMarket matrix coordinate real general", "bad header"),
        ("%%MatrixMarket matrix coordinate \x1b[31mreal general", "\\u{1b}"),
    ] {
        add(&format!("header {h:?}"), format!("{h}\n2 2 1\n1 2 1\n").as_bytes(), refused(&[why]));
    }
    // Size lines.
    let rg = "%%MatrixMarket matrix coordinate real general\n";
    for (size, why) in [
        ("", "row index 2 is out of range"),
        ("3 3", "3 integers"),
        ("3 3 1 1", "3 integers"),
        ("-1 3 1", "rows '-1'"),
        ("3 -1 1", "cols '-1'"),
        ("x 3 1", "rows 'x'"),
        ("3 3 1e3", "entries '1e3'"),
        ("99999999999999999999 3 1", "rows '99999999999999999999'"),
        ("2147483648 2 1", "32-bit"),
        ("3 2147483648 1", "32-bit"),
        ("3 3 18446744073709551615", "host memory"),
        ("2147483647 2147483646 3", "empty rows"),
        ("3 3 2", "more entries than the 2"),
        ("3 3 9", "declares 9"),
        ("3 3 \x1b[2J", "\\u{1b}"),
    ] {
        add(&format!("size {size:?}"), format!("{rg}{size}\n1 2 1\n2 3 1\n3 1 1\n").as_bytes(), refused(&[why]));
    }
    // Entry lines.
    for (entry, why) in [
        ("0 1 1", "row index 0"),
        ("4 1 1", "row index 4"),
        ("1 0 1", "column index 0"),
        ("1 4 1", "column index 4"),
        ("1 1", "missing value"),
        ("1", "missing column"),
        ("1 1 x", "value 'x'"),
        ("1 1 nan", "not a finite number"),
        ("1 1 inf", "not a finite number"),
        ("1 1 -inf", "not a finite number"),
        ("1 1 1e39", "overflows f32"),
        ("1 1 -1e39", "overflows f32"),
        ("1 1 1 1", "extra token"),
        ("a b c", "row index 'a'"),
        ("1.5 1 1", "row index '1.5'"),
        ("-1 1 1", "row index '-1'"),
        ("1 1 0x10", "value '0x10'"),
        ("\x1b]0;t\x07 1 1", "\\u{1b}"),
        ("18446744073709551616 1 1", "row index"),
        ("1 1 1\x00", "value"),
    ] {
        add(&format!("entry {entry:?}"), format!("{rg}3 3 1\n{entry}\n").as_bytes(), refused(&[why]));
    }
    // Valid files, however odd: the reader must give exactly what they say.
    let pat = "%%MatrixMarket matrix coordinate pattern general\n";
    let sym = "%%MatrixMarket matrix coordinate real symmetric\n";
    for (label, text, want) in [
        ("pattern duplicate is one edge", format!("{pat}2 2 3\n1 2\n1 2\n2 1\n"), "2x2 nnz 2: (0,1)=1 (1,0)=1"),
        (
            "pattern symmetric lower",
            "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 3\n".to_string(),
            "3x3 nnz 3: (0,1)=1 (1,0)=1 (2,2)=1",
        ),
        ("real duplicates are summed", format!("{rg}2 2 2\n1 2 1.5\n1 2 2\n"), "2x2 nnz 1: (0,1)=3.5"),
        ("symmetric upper only", format!("{sym}3 3 2\n1 2 4\n2 3 5\n"), "3x3 nnz 4: (0,1)=4 (1,0)=4 (1,2)=5 (2,1)=5"),
        ("symmetric diagonal", format!("{sym}2 2 2\n1 1 7\n2 1 3\n"), "2x2 nnz 3: (0,0)=7 (0,1)=3 (1,0)=3"),
        ("byte-order mark", format!("\u{feff}{rg}2 2 1\n2 1 9\n"), "2x2 nnz 1: (1,0)=9"),
        ("CRLF endings", format!("{rg}2 2 1\r\n1 2 6\r\n").replace("general\n", "general\r\n"), "2x2 nnz 1: (0,1)=6"),
        ("comments and blanks between entries", format!("{rg}% c\n\n2 2 2\n% x\n1 1 1\n\n   \n2 2 2\n"), "2x2 nnz 2: (0,0)=1 (1,1)=2"),
        ("uppercase header", "%%MATRIXMARKET MATRIX COORDINATE REAL GENERAL\n1 1 1\n1 1 2\n".to_string(), "1x1 nnz 1: (0,0)=2"),
        ("integer field", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n2 2 -3\n".to_string(), "2x2 nnz 1: (1,1)=-3"),
        ("empty matrix", format!("{rg}0 0 0\n"), "0x0 nnz 0:"),
        ("tabs", format!("{rg}2\t2\t1\n1\t2\t5\n"), "2x2 nnz 1: (0,1)=5"),
        ("no final newline", format!("{rg}2 2 1\n1 2 5"), "2x2 nnz 1: (0,1)=5"),
        ("rectangular", format!("{rg}2 3 1\n2 3 1\n"), "2x3 nnz 1: (1,2)=1"),
    ] {
        add(label, text.as_bytes(), Expect::Gives(want.to_string()));
    }
    // Silently wrong before: a symmetric file listing both triangles.
    for (label, body) in [
        ("symmetric both triangles", "3 3 2\n2 1 1\n1 2 1\n"),
        ("symmetric both triangles far apart", "3 3 3\n3 1 1\n2 2 4\n1 3 1\n"),
        ("pattern symmetric both triangles", "3 3 2\n1 2\n2 1\n"),
    ] {
        let head = if label.starts_with("pattern") { "%%MatrixMarket matrix coordinate pattern symmetric\n" } else { sym };
        add(label, format!("{head}{body}").as_bytes(), refused(&["both listed", "one triangle"]));
    }
    // Streams: gzip damaged, binary junk, gigabytes of blank lines from a small file.
    let good = format!("{rg}3 3 3\n1 2 1\n2 3 1\n3 1 1\n").into_bytes();
    let z = gz(&good);
    for (label, name, data, why) in [
        ("truncated gzip", "t1.mtx.gz", z[..z.len() / 2].to_vec(), "read failed"),
        (
            "corrupt gzip",
            "t2.mtx.gz",
            {
                let mut b = z.clone();
                let l = b.len();
                b[l - 6] ^= 0xff;
                b
            },
            "t2.mtx.gz",
        ),
        ("gzip of nothing", "t3.mtx.gz", gz(b""), "empty file"),
        ("not gzip at all", "t4.mtx.gz", good.clone(), "t4.mtx.gz"),
        ("binary junk", "t5.mtx", (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect(), "t5.mtx:1:"),
        ("NUL bytes", "t6.mtx", vec![0u8; 100_000], "t6.mtx:1:"),
        (
            "blank lines without end",
            "t7.mtx.gz",
            {
                let mut head = format!("{rg}2 2 1\n").into_bytes();
                head.extend(std::iter::repeat_n(b'\n', 20 << 20));
                head.extend_from_slice(b"1 2 1\n");
                gz(&head)
            },
            "blank or comment lines",
        ),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, &data).unwrap();
        cases.push(case(label, refused(&[name, why]), move || read_mtx(&p).map(|g| summary(&g)).map_err(|e| e.to_string())));
    }
    let n = run_cases(cases);
    assert!(n >= 135, "{n} cases");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn edge_lists() {
    let dir = scratch("edges");
    let mut cases = Vec::new();
    let mut k = 0;
    let mut add = |label: &str, text: &[u8], expect: Expect, read: fn(&Path) -> tcgnn::Result<Csr>| {
        k += 1;
        cases.extend(graph_cases(&dir, label, &format!("e{k}.txt"), text, expect, true, read));
    };
    for (text, why) in [
        ("0,1\n0,,1\n", "empty field"),
        ("hello world\n", "no edges"),
        ("0 1 2 3\n", "found 4 fields"),
        ("0 1\n0 1 2\n", "expected 2 fields"),
        ("0 1 2\n0 1\n", "expected 3 fields"),
        ("0\n1 2\n", "expected 'src dst'"),
        ("0 1\n-1 2\n", "source id '-1'"),
        ("0 1\n1 -2\n", "target id '-2'"),
        ("0 4294967296\n", "exceeds 32-bit"),
        ("0 2147483647\n", "exceeds 32-bit"),
        ("0 1 nan\n", "weight 'nan'"),
        ("0 1 inf\n", "weight 'inf'"),
        ("0 1 1e39\n", "overflows f32"),
        ("0 1 x\n", "weight 'x'"),
        ("0 1\n\x1b]0;owned\x07 2\n", "\\u{1b}"),
        ("0 1\n1.5 2\n", "source id '1.5'"),
        ("0 1\n99999999999999999999 1\n", "source id"),
        ("0 1\n1 2\0\n", "target id"),
        ("0 2000000000\n", "empty rows"),
        ("src dst\nfrom to\n", "source id 'from'"),
    ] {
        add(&format!("{text:?}"), text.as_bytes(), refused(&[why]), read_edges_path);
    }
    for (text, why) in [("0 6\n", "target id 6 is out of range"), ("7 1\n", "source id 7"), ("0 1\n5 5\n6 0\n", "source id 6")] {
        add(&format!("6 nodes: {text:?}"), text.as_bytes(), refused(&[why]), read_edges_6);
    }
    for (label, text, want) in [
        ("plain", "0 1\n1 2\n", "3x3 nnz 2: (0,1)=1 (1,2)=1"),
        ("byte-order mark keeps the first edge", "\u{feff}0 1\n1 2\n", "3x3 nnz 2: (0,1)=1 (1,2)=1"),
        ("byte-order mark before a header", "\u{feff}id_1,id_2\n0,1\n", "2x2 nnz 1: (0,1)=1"),
        ("csv header", "id_1,id_2\n0,1\n2,0\n", "3x3 nnz 2: (0,1)=1 (2,0)=1"),
        ("comments", "# snap\n% c\n0 1\n", "2x2 nnz 1: (0,1)=1"),
        ("duplicates merge", "0 1\n0 1\n", "2x2 nnz 1: (0,1)=1"),
        ("weights sum", "0 1 2\n0 1 0.5\n", "2x2 nnz 1: (0,1)=2.5"),
        ("tabs and CRLF", "0\t1\r\n1\t0\r\n", "2x2 nnz 2: (0,1)=1 (1,0)=1"),
        ("self loop", "3 3\n", "4x4 nnz 1: (3,3)=1"),
        ("empty file", "", "0x0 nnz 0:"),
        ("only comments", "# nothing\n", "0x0 nnz 0:"),
        ("no final newline", "0 1", "2x2 nnz 1: (0,1)=1"),
    ] {
        add(label, text.as_bytes(), Expect::Gives(want.to_string()), read_edges_path);
    }
    // A Matrix Market file named .txt is read as one by the CLI (binary case below); the library
    // edge-list reader itself refuses it rather than inventing edges from its size line.
    add(
        "matrix market text into the edge-list reader",
        b"%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n",
        refused(&["Matrix Market"]),
        read_edges_path,
    );
    // Gigabytes of blank lines from a small gzip file: bounded by the edges it holds.
    let mut blanks = b"0 1\n".to_vec();
    blanks.extend(std::iter::repeat_n(b'\n', (1 << 20) + 100));
    let p = dir.join("blank.txt.gz");
    std::fs::write(&p, gz(&blanks)).unwrap();
    cases.push(case("blank lines without end", refused(&["blank.txt.gz", "blank or comment lines"]), move || {
        read_edges_path(&p).map(|g| summary(&g)).map_err(|e| e.to_string())
    }));
    let n = run_cases(cases);
    assert!(n >= 70, "{n} cases");
    std::fs::remove_dir_all(&dir).ok();
}

fn ring(n: u32) -> Csr {
    let t: Vec<(u32, u32, f32)> = (0..n).flat_map(|i| [(i, (i + 1) % n, 1.0), ((i + 1) % n, i, 1.0)]).collect();
    Csr::from_triplets(n as usize, n as usize, &t).unwrap()
}

#[test]
fn tcg_caches() {
    let dir = scratch("tcg");
    let g = ring(6);
    let good = dir.join("good.tcg");
    write_tcg(&good, &g).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let want = summary(&g);
    let mut cases = Vec::new();
    let mut add = |label: String, data: Vec<u8>, expect: Expect| {
        let name = format!("c{}.tcg", cases.len());
        let p = dir.join(&name);
        std::fs::write(&p, data).unwrap();
        let expect = match expect {
            Expect::Refused(mut parts) => {
                parts.insert(0, name);
                Expect::Refused(parts)
            }
            e => e,
        };
        cases.push(case(label, expect, move || read_tcg(&p).map(|g| summary(&g)).map_err(|e| e.to_string())));
    };
    // Every byte of the header, and bytes spread over the body, flipped: always caught.
    for at in (0..40).chain((40..bytes.len()).step_by(7)) {
        let mut b = bytes.clone();
        b[at] ^= 0x41;
        add(format!("byte {at} flipped"), b, refused(&[]));
    }
    for len in [0, 1, 7, 8, 39, 40, 47, bytes.len() - 9, bytes.len() - 1] {
        add(format!("truncated to {len}"), bytes[..len].to_vec(), refused(&[]));
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 8]);
    add("8 bytes appended".into(), longer, refused(&["takes"]));
    for (field, at, v) in
        [("rows", 16, u64::MAX), ("cols", 24, 1 << 40), ("nnz", 32, u64::MAX), ("rows", 16, (1 << 31) - 1), ("nnz", 32, 0)]
    {
        let mut b = bytes.clone();
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        add(format!("{field} = {v}"), b, refused(&[]));
    }
    add("good".into(), bytes.clone(), Expect::Gives(want));
    for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
        let mut vals = g.values().to_vec();
        vals[3] = v;
        let bad = Csr::new(6, 6, g.row_ptr().to_vec(), g.col_idx().to_vec(), vals).unwrap();
        let p = dir.join("v.tcg");
        write_tcg(&p, &bad).unwrap();
        add(format!("value {v} with a valid checksum"), std::fs::read(&p).unwrap(), refused(&["must be finite"]));
    }
    let n = run_cases(cases);
    assert!(n >= 65, "{n} cases");
    std::fs::remove_dir_all(&dir).ok();
}

fn node_data(n: usize) -> NodeData {
    NodeData {
        x: Features::Dense { n, f: 3, data: (0..n * 3).map(|i| i as f32).collect() },
        y: (0..n as i64).map(|i| i % 2).collect(),
        split: Some(Split {
            train: (0..n).map(|i| i % 3 == 0).collect(),
            val: (0..n).map(|i| i % 3 == 1).collect(),
            test: (0..n).map(|i| i % 3 == 2).collect(),
        }),
        splits_all: Vec::new(),
        class_names: vec!["a".into(), "b".into()],
    }
}

/// A dataset load through the library, as `train` does it: a summary or the error.
fn load_dataset(graph: &Path, npz: &Path) -> Result<String, String> {
    let synth = tcgnn::task::node::SyntheticNodeData { features: 4, classes: 2, seed: 0 };
    tcgnn::task::node::Dataset::load(&graph.to_string_lossy(), Some(npz), &synth)
        .map(|d| format!("{} nodes {} features {} classes", d.n(), d.features.cols(), d.classes))
        .map_err(|e| e.to_string())
}

#[test]
fn node_data_files() {
    let dir = scratch("npz");
    let graph = dir.join("ring.tcg");
    write_tcg(&graph, &ring(6)).unwrap();
    let mut cases = Vec::new();
    let mut add = |label: &str, d: NodeData, expect: Vec<&str>| {
        let name = format!("n{}.npz", cases.len());
        let p = dir.join(&name);
        write_npz(&p, &d).unwrap();
        let g = graph.clone();
        let mut parts = vec![name.as_str()];
        parts.extend(expect);
        cases.push(case(label, refused(&parts), move || load_dataset(&g, &p)));
    };
    let mut d = node_data(6);
    d.y[2] = -1;
    add("negative label", d, vec!["'y'", "negative label"]);
    let mut d = node_data(6);
    d.y[2] = 1 << 40;
    add("huge label", d, vec!["'y'", "label"]);
    for (v, what) in [(f32::NAN, "NaN"), (f32::INFINITY, "inf"), (f32::NEG_INFINITY, "-inf")] {
        let mut d = node_data(6);
        if let Features::Dense { data, .. } = &mut d.x {
            data[7] = v;
        }
        add(&format!("feature {what}"), d, vec!["'x'", "node 2", what]);
    }
    // Labels of the wrong length: blamed on the labels (and the features' count named).
    let mut d = node_data(6);
    d.y.pop();
    add("5 labels for 6 feature rows", d, vec!["'y'", "5 labels", "'x' has 6 rows"]);
    let mut d = node_data(6);
    d.y.push(1);
    add("7 labels for 6 feature rows", d, vec!["'y'", "7 labels"]);
    // Consistent arrays for another graph size.
    add("node data of 5 nodes", node_data(5), vec!["'y'", "5 labels for a graph of 6 nodes"]);
    add("node data of 7 nodes", node_data(7), vec!["'y'", "7 labels for a graph of 6 nodes"]);
    for (mask, which) in [("train", 0), ("val", 1), ("test", 2)] {
        let mut d = node_data(6);
        let s = d.split.as_mut().unwrap();
        let m = [&mut s.train, &mut s.val, &mut s.test][which].iter_mut();
        m.for_each(|b| *b = false);
        add(&format!("empty {mask} mask"), d, vec![mask, "selects no node"]);
    }
    let mut d = node_data(6);
    d.split.as_mut().unwrap().test[0] = true;
    add("overlapping masks", d, vec!["node 0", "overlap"]);
    let mut d = node_data(6);
    d.split.as_mut().unwrap().train.pop();
    add("short train mask", d, vec!["train_mask"]);
    let mut d = node_data(6);
    d.x = Features::Dense { n: 6, f: 0, data: vec![] };
    add("zero features", d, vec!["'x'", "feature width 0"]);
    let mut d = node_data(6);
    d.x = Features::SparseMultiHot { n: 6, f: 4, indptr: vec![0, 1, 2, 3, 4, 5, 6], indices: vec![0, 1, 2, 3, 4, 0] };
    add("sparse column out of range", d, vec!["x_indices", "column 4"]);
    let mut d = node_data(6);
    d.x = Features::SparseMultiHot { n: 6, f: 4, indptr: vec![0, 1, 2, 1, 4, 5, 6], indices: vec![0, 1, 2, 3, 0, 0] };
    add("sparse row pointer decreasing", d, vec!["x_indptr"]);
    let mut d = node_data(6);
    d.x = Features::SparseMultiHot { n: 5, f: 4, indptr: vec![0, 1, 2, 3, 4, 5], indices: vec![0, 1, 2, 3, 0] };
    add("sparse features of 5 rows", d, vec!["'y'", "6 labels", "declares 5 rows"]);

    // Every byte of a valid archive flipped in turn (a sample): a CRC, a header or a shape
    // check must catch it, or the data read must be exactly the original.
    let good = dir.join("good.npz");
    let original = node_data(6);
    write_npz(&good, &original).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let mut data_flips = 0;
    for at in (0..bytes.len()).step_by((bytes.len() / 90).max(1)) {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        let name = format!("flip{at}.npz");
        let p = dir.join(&name);
        std::fs::write(&p, &b).unwrap();
        let want = original.clone();
        data_flips += 1;
        cases.push(case(format!("byte {at} flipped"), Expect::Either(name), move || match read_npz(&p) {
            Ok(d) if d == want => Ok("same data".into()),
            Ok(_) => Err("PANIC: read different data without an error".into()),
            Err(e) => Err(e.to_string()),
        }));
    }
    // A corrupt member under a valid zip structure: its CRC-32 must be checked.
    let at = bytes.windows(6).position(|w| w == b"\x93NUMPY").unwrap() + 120;
    let mut b = bytes.clone();
    b[at] ^= 0x01;
    let p = dir.join("crc.npz");
    std::fs::write(&p, &b).unwrap();
    cases.push(case("member data changed (bad CRC)", refused(&["crc.npz", "CRC"]), move || {
        read_npz(&p).map(|_| "read".to_string()).map_err(|e| e.to_string())
    }));
    let n = run_cases(cases);
    assert!(data_flips >= 80 && n >= 100, "{n} cases");
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs `tcgnn ARGS` in `dir` under a memory limit: (exit code, stdout, stderr); a hang fails.
fn tcgnn(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = run_tcgnn(dir, args, &dir.join(".stdout"), BIN_LIMIT);
    (o.code, o.stdout, o.stderr)
}

/// A binary case: refused with exit 1 or 2 and every one of `parts` in the message.
fn cli(dir: &Path, args: &[&str], parts: &[&str]) -> Option<String> {
    let (code, out, err) = tcgnn(dir, args);
    let lacks = parts.iter().find(|p| !err.contains(**p));
    let why = if !matches!(code, Some(1) | Some(2)) {
        format!("exit {code:?} (must be a clean refusal)")
    } else if err.contains("panicked") || err.contains('\x1b') {
        "panicked or echoed a raw escape".into()
    } else {
        format!("error lacks '{}'", lacks?)
    };
    Some(format!("tcgnn {args:?}: {why}\nstderr: {err}\nstdout: {}", &out[..out.len().min(300)]))
}

const RING6: &[u8] = b"%%MatrixMarket matrix coordinate pattern symmetric\n6 6 6\n2 1\n3 2\n4 3\n5 4\n6 5\n6 1\n";

/// A folder with a graph, node data, a saved model and a checkpoint (trained once, 3 epochs).
fn trained(test: &str) -> PathBuf {
    let dir = scratch(test);
    std::fs::write(dir.join("ring.mtx"), RING6).unwrap();
    write_npz(dir.join("ring.npz"), &node_data(6)).unwrap();
    let (code, _, err) =
        tcgnn(&dir, &["train", "ring.mtx", "--device", "cpu", "--epochs", "3", "--quiet", "--save", "m.safetensors", "--checkpoint", "ck"]);
    assert_eq!(code, Some(0), "{err}");
    dir
}

/// `path`'s tensors and metadata, with `edit` applied to the JSON under `key`, written to `out`.
fn edit_meta(path: &Path, out: &Path, key: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let f = TensorFile::read(path).unwrap();
    let mut meta = f.metadata.clone();
    let mut v: serde_json::Value = serde_json::from_str(&meta[key]).unwrap();
    edit(&mut v);
    meta.insert(key.to_string(), v.to_string());
    TensorFile::write(out, &f.tensors, meta).unwrap();
}

/// Predicts with the model file `model` on the ring and its node data, through the library
/// (what `tcgnn predict` runs): the predicted classes, or the error.
fn predict_on_ring(dir: &Path, model: &Path) -> Result<String, String> {
    let saved = tcgnn::task::saved::SavedModel::read(model).map_err(|e| e.to_string())?;
    let synth = tcgnn::task::node::SyntheticNodeData { features: 3, classes: 2, seed: 0 };
    let data = tcgnn::task::node::Dataset::load(&dir.join("ring.mtx").to_string_lossy(), Some(&dir.join("ring.npz")), &synth)
        .map_err(|e| e.to_string())?;
    let b = std::sync::Arc::new(tcgnn::nn::CpuBackend::<f32>::new());
    tcgnn::task::node::predict::predict(&b, model, &saved, &data, None).map(|p| format!("{:?}", p.classes)).map_err(|e| e.to_string())
}

#[test]
fn model_files() {
    let dir = trained("model");
    let good = dir.join("m.safetensors");
    let key = "tcgnn.model";
    let mut cases = Vec::new();
    type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
    let set = |path: &'static str, v: serde_json::Value| -> Edit {
        Box::new(move |j: &mut serde_json::Value| {
            let mut at = j;
            let parts: Vec<&str> = path.split('.').collect();
            for p in &parts[..parts.len() - 1] {
                at = at.get_mut(*p).unwrap();
            }
            at[parts[parts.len() - 1]] = v;
        })
    };
    use serde_json::json;
    let edits: Vec<(&str, Edit, &str)> = vec![
        ("hidden 2^40", set("model.hidden", json!(1u64 << 40)), "hidden"),
        ("hidden 2^24", set("model.hidden", json!(1u64 << 24)), "weights"),
        ("hidden 1000", set("model.hidden", json!(1000)), "weights"),
        ("hidden 0", set("model.hidden", json!(0)), "hidden width"),
        ("layers 10^6", set("model.layers", json!(1_000_000)), "layers"),
        ("layers 0", set("model.layers", json!(0)), "layer"),
        ("layers 5", set("model.layers", json!(5)), "the model wants"),
        ("heads 10^9", set("model.heads", json!(1_000_000_000)), "heads"),
        ("heads 4 on gcn", set("model.heads", json!(4)), "no attention heads"),
        ("classes 2^40", set("classes", json!(1u64 << 40)), "classes"),
        ("classes 10^6", set("classes", json!(1_000_000)), "weights"),
        ("classes 0", set("classes", json!(0)), "classes"),
        ("features 10^7", set("features", json!(10_000_000)), "weights"),
        ("features 0", set("features", json!(0)), "features"),
        ("dropout 1.5", set("model.dropout", json!(1.5)), "dropout"),
        ("dropout -1", set("model.dropout", json!(-1.0)), "dropout"),
        ("model unknown", set("model.model", json!("nope")), "unknown model"),
        ("model escape", set("model.model", json!("\u{1b}[31m")), "unknown model"),
        ("precision escape", set("precision", json!("\u{1b}[2J")), "precision"),
        ("epoch 0", set("epoch", json!(0)), "epoch 0"),
        ("val accuracy 2", set("val_acc", json!(2.0)), "validation accuracy"),
        ("test accuracy -1", set("test_acc", json!(-1.0)), "test accuracy"),
        ("hidden negative", set("model.hidden", json!(-16)), "metadata"),
        ("hidden text", set("model.hidden", json!("16")), "metadata"),
        ("unknown field", set("model.extra", json!(1)), "metadata"),
        (
            "no model",
            Box::new(|j: &mut serde_json::Value| {
                j.as_object_mut().unwrap().remove("model");
            }),
            "metadata",
        ),
        ("metadata not an object", Box::new(|j: &mut serde_json::Value| *j = json!([1, 2])), "metadata"),
        ("model gat", set("model.model", json!("gat")), "missing"),
        ("model sage", set("model.model", json!("sage")), "weights"),
        ("features 4", set("features", json!(4)), "input features"),
    ];
    for (i, (label, edit, why)) in edits.into_iter().enumerate() {
        let name = format!("e{i}.safetensors");
        let p = dir.join(&name);
        edit_meta(&good, &p, key, edit);
        let d = dir.clone();
        cases.push(case(format!("metadata {label}"), refused(&[&name, why]), move || predict_on_ring(&d, &p)));
    }
    // Tensors: missing, reshaped, NaN; metadata missing or not JSON.
    let f = TensorFile::read(&good).unwrap();
    /// (label, tensors, metadata, what the error must say)
    type Variant = (String, Vec<(String, tcgnn::tensor::Matrix)>, std::collections::HashMap<String, String>, &'static str);
    let mut variants: Vec<Variant> = Vec::new();
    for (i, (name, m)) in f.tensors.iter().enumerate() {
        let mut t = f.tensors.clone();
        t.remove(i);
        // Refused by the sizes check, or by the names check once the model is built.
        variants.push((format!("without {name}"), t, f.metadata.clone(), ""));
        let mut t = f.tensors.clone();
        t[i].1 = tcgnn::tensor::Matrix::zeros(m.cols + 1, m.rows);
        variants.push((format!("{name} reshaped"), t, f.metadata.clone(), "the model wants"));
    }
    let mut meta = f.metadata.clone();
    meta.remove(key);
    variants.push(("no metadata".into(), f.tensors.clone(), meta, "no tcgnn model metadata"));
    let mut meta = f.metadata.clone();
    meta.insert(key.into(), "{not json".into());
    variants.push(("metadata not JSON".into(), f.tensors.clone(), meta, "model metadata"));
    for (i, (label, tensors, meta, why)) in variants.into_iter().enumerate() {
        let name = format!("t{i}.safetensors");
        let p = dir.join(&name);
        TensorFile::write(&p, &tensors, meta).unwrap();
        let d = dir.clone();
        cases.push(case(label, refused(&[&name, why]), move || predict_on_ring(&d, &p)));
    }
    // Raw bytes: truncated, flipped in the header, NaN in a weight.
    let bytes = std::fs::read(&good).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut raw: Vec<(String, Vec<u8>, Expect)> = Vec::new();
    for len in [0, 4, 8, 9, 8 + header_len / 2, 8 + header_len, bytes.len() - 1] {
        raw.push((format!("truncated to {len}"), bytes[..len].to_vec(), refused(&[])));
    }
    for (i, v) in [u64::MAX, 1 << 40, 0, (bytes.len() as u64) * 4].into_iter().enumerate() {
        let mut b = bytes.clone();
        b[..8].copy_from_slice(&v.to_le_bytes());
        raw.push((format!("header length {v}"), b, Expect::Refused(vec![format!("r{}", i + 7)])));
    }
    for at in (8..8 + header_len).step_by((header_len / 25).max(1)) {
        let mut b = bytes.clone();
        b[at] ^= 0x04;
        raw.push((format!("header byte {at} flipped"), b, Expect::Either(String::new())));
    }
    let mut b = bytes.clone();
    let l = b.len();
    b[l - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
    raw.push(("NaN weight".into(), b, refused(&["NaN"])));
    for (i, (label, data, expect)) in raw.into_iter().enumerate() {
        let name = format!("r{i}.safetensors");
        let p = dir.join(&name);
        std::fs::write(&p, data).unwrap();
        let expect = match expect {
            Expect::Refused(mut parts) => {
                parts.retain(|s| !s.starts_with('r'));
                parts.insert(0, name.clone());
                Expect::Refused(parts)
            }
            Expect::Either(_) => Expect::Either(name.clone()),
            e => e,
        };
        let d = dir.clone();
        cases.push(case(label, expect, move || predict_on_ring(&d, &p)));
    }
    let n = run_cases(cases);
    assert!(n >= 70, "{n} cases");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn checkpoints() {
    let dir = trained("ckpt");
    let good = dir.join("ck/checkpoint.safetensors");
    tcgnn::task::node::checkpoint::Checkpoint::read(&dir.join("ck")).unwrap();
    let mut cases = Vec::new();
    use serde_json::json;
    type Edit = Box<dyn FnOnce(&mut std::collections::HashMap<String, String>)>;
    let json_edit = |key: &'static str, f: Box<dyn FnOnce(&mut serde_json::Value)>| -> Edit {
        Box::new(move |m: &mut std::collections::HashMap<String, String>| {
            let mut v: serde_json::Value = serde_json::from_str(&m[key]).unwrap();
            f(&mut v);
            m.insert(key.into(), v.to_string());
        })
    };
    let train = |field: &'static str, v: serde_json::Value| json_edit("tcgnn.train", Box::new(move |j| j[field] = v));
    let hist = |field: &'static str, v: serde_json::Value| json_edit("tcgnn.history", Box::new(move |j| j[1][field] = v));
    let raw = |key: &'static str, v: &'static str| -> Edit {
        Box::new(move |m: &mut std::collections::HashMap<String, String>| {
            m.insert(key.into(), v.into());
        })
    };
    let edits: Vec<(&str, Edit, &str)> = vec![
        ("lr -1", train("lr", json!(-1.0)), "learning rate -1"),
        ("lr 0", train("lr", json!(0.0)), "learning rate 0"),
        ("lr 1e39", train("lr", json!(1e39)), "learning rate inf"),
        ("weight decay -0.5", train("weight_decay", json!(-0.5)), "weight decay -0.5"),
        ("lr text", train("lr", json!("x")), "tcgnn.train"),
        ("steps 0", raw("tcgnn.steps", "0"), "step counter 0"),
        ("steps 2^32 - 1", raw("tcgnn.steps", "4294967295"), "step counter"),
        ("steps -1", raw("tcgnn.steps", "-1"), "tcgnn.steps"),
        ("steps text", raw("tcgnn.steps", "many"), "tcgnn.steps"),
        ("loss -1", hist("loss", json!(-1.0)), "loss -1"),
        ("val accuracy 7", hist("val_acc", json!(7.0)), "validation accuracy 7"),
        ("test accuracy -0.5", hist("test_acc", json!(-0.5)), "test accuracy -0.5"),
        ("train accuracy 1.5", hist("train_acc", json!(1.5)), "train accuracy 1.5"),
        ("epoch renumbered", hist("epoch", json!(9)), "epoch 9"),
        (
            "history shorter",
            json_edit(
                "tcgnn.history",
                Box::new(|j| {
                    j.as_array_mut().unwrap().pop();
                }),
            ),
            "loss curve",
        ),
        ("history not JSON", raw("tcgnn.history", "[{"), "tcgnn.history"),
        ("best epoch 99", json_edit("tcgnn.best", Box::new(|j| j["epoch"] = json!(99))), "best epoch 99"),
        ("best accuracy 3", json_edit("tcgnn.best", Box::new(|j| j["val_acc"] = json!(3.0))), "validation accuracy 3"),
        (
            "no steps",
            Box::new(|m: &mut std::collections::HashMap<String, String>| {
                m.remove("tcgnn.steps");
            }),
            "tcgnn.steps",
        ),
        (
            "no train settings",
            Box::new(|m: &mut std::collections::HashMap<String, String>| {
                m.remove("tcgnn.train");
            }),
            "tcgnn.train",
        ),
        ("model hidden 2^30", json_edit("tcgnn.model", Box::new(|j| j["model"]["hidden"] = json!(1u64 << 30))), "hidden"),
        ("model classes 10^6", json_edit("tcgnn.model", Box::new(|j| j["classes"] = json!(1_000_000))), "weights"),
        ("model layers 10^6", json_edit("tcgnn.model", Box::new(|j| j["model"]["layers"] = json!(1_000_000))), "layers"),
        ("model epoch 2 of 3", json_edit("tcgnn.model", Box::new(|j| j["epoch"] = json!(2))), "loss curve"),
    ];
    let f = TensorFile::read(&good).unwrap();
    for (i, (label, edit, why)) in edits.into_iter().enumerate() {
        let sub = dir.join(format!("c{i}"));
        std::fs::create_dir_all(&sub).unwrap();
        let mut meta = f.metadata.clone();
        edit(&mut meta);
        TensorFile::write(&sub.join("checkpoint.safetensors"), &f.tensors, meta).unwrap();
        cases.push(case(format!("checkpoint {label}"), refused(&[&format!("c{i}/checkpoint.safetensors"), why]), move || {
            tcgnn::task::node::checkpoint::Checkpoint::read(&sub).map(|c| format!("epoch {}", c.meta.epoch)).map_err(|e| e.to_string())
        }));
    }
    let n = run_cases(cases);
    assert!(n >= 24, "{n} cases");
    // Through the binary: resuming with fewer epochs than done, or other settings, is refused.
    let mut failures = Vec::new();
    for (extra, parts) in [
        (vec!["--epochs", "2"], vec!["--epochs 2", "3 epochs already"]),
        (vec!["--epochs", "3"], vec!["--epochs 3", "3 epochs already"]),
        (vec!["--epochs", "9", "--lr", "0.1"], vec!["--lr", "differs", "checkpoint in ck"]),
        (vec!["--epochs", "9", "--hidden", "8"], vec!["--hidden 8", "differs", "--hidden 16 there"]),
        (vec!["--epochs", "9", "--layers", "3"], vec!["--layers 3", "differs", "--layers 2 there"]),
        // --model has a default: another model than the checkpoint's is named with both.
        (vec!["--epochs", "9", "--model", "sage"], vec!["--model sage", "differs", "a gcn model", "give --model gcn"]),
        (vec!["--epochs", "9", "--model", "gat", "--heads", "2"], vec!["--model gat", "a gcn model"]),
        (vec!["--epochs", "9", "--dropout", "0.1"], vec!["--dropout", "differs"]),
        (vec!["--epochs", "9", "--batch-norm"], vec!["--batch-norm", "differs"]),
        (vec!["--epochs", "9", "--resume", "c5"], vec!["c5/checkpoint.safetensors", "step counter 0"]),
        (vec!["--epochs", "9", "--resume", "missing"], vec!["missing", "no checkpoint"]),
    ] {
        let mut a = vec!["train", "ring.mtx", "--device", "cpu", "--quiet"];
        if !extra.contains(&"--resume") {
            a.extend(["--resume", "ck"]);
        }
        a.extend(extra.iter().copied());
        failures.extend(cli(&dir, &a, &parts));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn partition_folders() {
    let dir = scratch("parts");
    std::fs::write(dir.join("ring.mtx"), RING6).unwrap();
    std::fs::create_dir_all(dir.join("p")).unwrap();
    let (code, _, err) = tcgnn(&dir, &["partition", "ring.mtx", "--parts", "3", "--method", "contiguous", "-o", "p"]);
    assert_eq!(code, Some(0), "{err}");
    let read =
        |d: &Path, p: usize| tcgnn::dist::part_file::read_part(d, p).map(|x| format!("{} rows", x.nodes.len())).map_err(|e| e.to_string());
    read(&dir.join("p"), 2).unwrap();
    // A smaller partition into the same folder leaves no part of the old one beside it.
    let (code, _, err) = tcgnn(&dir, &["partition", "ring.mtx", "--parts", "2", "--method", "contiguous", "-o", "p"]);
    assert_eq!(code, Some(0), "{err}");
    for stale in ["part2.json", "part2.local.mtx.gz", "part2.remote.mtx.gz"] {
        assert!(!dir.join("p").join(stale).exists(), "{stale} left beside a 2-part partition");
    }
    let mut cases = Vec::new();
    type Edit = Box<dyn FnOnce(&Path)>;
    let rm = |f: &'static str| -> Edit { Box::new(move |d: &Path| std::fs::remove_file(d.join(f)).unwrap()) };
    let put = |f: &'static str, text: &'static str| -> Edit { Box::new(move |d: &Path| std::fs::write(d.join(f), text).unwrap()) };
    let json = |f: &'static str, key: &'static str, v: serde_json::Value| -> Edit {
        Box::new(move |d: &Path| {
            let mut j: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join(f)).unwrap()).unwrap();
            j[key] = v;
            std::fs::write(d.join(f), j.to_string()).unwrap();
        })
    };
    use serde_json::json;
    let edits: Vec<(&str, Edit, usize, &str)> = vec![
        ("no partition.json", rm("partition.json"), 0, "partition.json"),
        ("no part file", rm("part1.json"), 1, "part1.json"),
        ("no local block", rm("part0.local.mtx.gz"), 0, "part0.local.mtx.gz"),
        ("no remote block", rm("part1.remote.mtx.gz"), 1, "part1.remote.mtx.gz"),
        ("partition.json not JSON", put("partition.json", "{"), 0, "partition.json"),
        ("part file not JSON", put("part0.json", "[1,"), 0, "part0.json"),
        ("part file empty", put("part1.json", ""), 1, "part1.json"),
        ("local block garbage", put("part0.local.mtx.gz", "junk"), 0, "part0.local.mtx.gz"),
        ("part beyond the partition", Box::new(|_: &Path| {}), 5, "part5"),
        ("parts 3 in partition.json", json("partition.json", "parts", json!(3)), 0, "part0.json"),
        ("offsets too short", json("partition.json", "offsets", json!([0, 3])), 1, "part1.json"),
        ("offsets past the rows", json("partition.json", "offsets", json!([0, 3, 99])), 1, "part1.json"),
        ("part number wrong", json("part1.json", "part", json!(0)), 1, "part1.json"),
        ("rows wrong", json("part0.json", "rows", json!(1000)), 0, "part0.json"),
        ("halo wrong", json("part0.json", "recv_ptr", json!([0])), 0, "part0.json"),
        ("first row huge", json("part1.json", "first_row", json!(1u64 << 40)), 1, "part1.json"),
        ("nodes out of range", json("part0.json", "nodes", json!([0, 1, 99])), 0, "part0.json"),
    ];
    for (i, (label, edit, part, why)) in edits.into_iter().enumerate() {
        let d = dir.join(format!("q{i}"));
        std::fs::create_dir_all(&d).unwrap();
        for e in std::fs::read_dir(dir.join("p")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
        }
        edit(&d);
        cases.push(case(label, Expect::Either(why.to_string()), move || read(&d, part)));
    }
    let n = run_cases(cases);
    assert!(n >= 17, "{n} cases");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn generator_specs() {
    let mut cases = Vec::new();
    let synth = || tcgnn::task::node::SyntheticNodeData { features: 4, classes: 2, seed: 0 };
    for spec in [
        "rmat:",
        "rmat::",
        "rmat:10",
        "rmat:x:4",
        "rmat:10:x",
        "rmat:0:4",
        "rmat:-1:4",
        "rmat:10:0",
        "rmat:10:-1",
        "rmat:64:1",
        "rmat:99999999999:1",
        "rmat:10:1000000000",
        "rmat:10:4:x",
        "rmat:10:4:1:2",
        "rmat:10:4:relabel:1",
        "rmat:relabel",
        "rmat:1e3:4",
        "rmat:10:4:-1",
        "rmat:10:4:18446744073709551616",
        "rmat:\u{1b}[2J:4",
        "rmat:10:4:relabel:relabel",
        "sbm:",
        "sbm::",
        "sbm:x",
        "sbm:0",
        "sbm:-5",
        "sbm:inf",
        "sbm:nan",
        "sbm:1e300",
        "sbm:4000000000",
        "sbm:18446744073709551616",
        "sbm:100:0",
        "sbm:100:101",
        "sbm:100:2:inf",
        "sbm:100:2:nan",
        "sbm:100:2:-1",
        "sbm:100000000:8:1000",
        "sbm:100:2:3:4",
        "sbm:\u{1b}]0;x\u{7}",
        "sbm:100:x",
        "sbm:1000:8:1e308",
    ] {
        let shown = tcgnn::graph::text::escaped(spec);
        let shown = shown.split(':').next().unwrap().to_string() + ":";
        cases.push(case(format!("spec {spec:?}"), refused(&[&shown]), move || {
            tcgnn::task::node::Dataset::load(spec, None, &synth()).map(|d| format!("{} nodes", d.n())).map_err(|e| e.to_string())
        }));
    }
    for (spec, want) in [("rmat:4:2", "16 nodes"), ("sbm:50", "50 nodes"), ("sbm:40:4:3", "40 nodes"), ("rmat:3:1:7:relabel", "8 nodes")] {
        cases.push(case(format!("spec {spec}"), Expect::Gives(want.into()), move || {
            tcgnn::task::node::Dataset::load(spec, None, &synth()).map(|d| format!("{} nodes", d.n())).map_err(|e| e.to_string())
        }));
    }
    let n = run_cases(cases);
    assert!(n >= 45, "{n} cases");
}

/// Command-line options through the binary: each refused naming the option.
#[test]
fn options() {
    let dir = trained("options");
    let cpu = ["--device", "cpu", "--epochs", "1", "--quiet"];
    let mut failures = Vec::new();
    let mut count = 0;
    let mut train = |extra: &[&str], parts: &[&str]| {
        let mut a = vec!["train", "ring.mtx"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&cpu);
        count += 1;
        failures.extend(cli(&dir, &a, parts));
    };
    let max = "18446744073709551615";
    for (extra, parts) in [
        (vec!["--lr", "-0.01"], vec!["--lr -0.01"]),
        (vec!["--lr", "-1"], vec!["--lr -1"]),
        (vec!["--weight-decay", "-0.1"], vec!["--weight-decay"]),
        (vec!["--dropout", "-0.5"], vec!["dropout"]),
        (vec!["--dropout", "1"], vec!["dropout"]),
        (vec!["--lr", "nan"], vec!["--lr"]),
        (vec!["--heads", "4"], vec!["no attention heads", "--heads 4"]),
        (vec!["--model", "agnn", "--heads", "2"], vec!["--heads 2"]),
        (vec!["--model", "sage", "--heads", "8"], vec!["--heads 8"]),
        (vec!["--heads", max], vec!["--heads"]),
        (vec!["--model", "gat", "--heads", "100000"], vec!["--heads 100000"]),
        (vec!["--layers", "1000000"], vec!["--layers 1000000"]),
        (vec!["--layers", max], vec!["--layers"]),
        (vec!["--layers", "0"], vec!["layer"]),
        (vec!["--hidden", max], vec!["--hidden"]),
        (vec!["--hidden", "0"], vec!["hidden"]),
        (vec!["--features", max, "--npz", "ring.npz"], vec!["--features"]),
        (vec!["--classes", max], vec!["--classes"]),
        (vec!["--epochs", "0"], vec!["--epochs"]),
        // ring.npz holds 3 features and 2 classes: other values would be silently ignored.
        (vec!["--features", "64"], vec!["--features 64", "3 features", "node data"]),
        (vec!["--classes", "5"], vec!["--classes 5", "2 classes", "node data"]),
        (vec!["--task", "link", "--features", "64"], vec!["--features 64", "3 features"]),
        (vec!["--seeds", ""], vec!["--seeds"]),
        (vec!["--checkpoint-every", "0"], vec!["--checkpoint-every"]),
        (vec!["--partitions", "7"], vec!["7 parts", "6 nodes"]),
        (vec!["--partitions", "1000000"], vec!["--partitions 1000000"]),
        (vec!["--partitions", max], vec!["--partitions"]),
        (vec!["--partitions", "0"], vec!["--partitions"]),
        (vec!["--sampler", "neighbor", "--sample-workers", "1000000000000"], vec!["--sample-workers"]),
        (vec!["--sampler", "neighbor", "--sample-workers", max], vec!["--sample-workers"]),
        (vec!["--sampler", "neighbor", "--sample-workers", "0"], vec!["--sample-workers"]),
        (vec!["--sampler", "saint-rw", "--walk-length", "100000000000000"], vec!["--walk-length"]),
        (vec!["--sampler", "saint-rw", "--walk-length", max], vec!["--walk-length"]),
        (vec!["--sampler", "saint-rw", "--batch-size", max], vec!["--batch-size"]),
        (vec!["--sampler", "saint-node", "--batch-size", "100000000"], vec!["--batch-size 100000000"]),
        (vec!["--sampler", "saint-edge", "--batch-size", "100000000000"], vec!["--batch-size"]),
        (vec!["--sampler", "saint-rw", "--saint-coverage", "4294967295"], vec!["--saint-coverage"]),
        (vec!["--sampler", "saint-node", "--saint-coverage", "100000"], vec!["--saint-coverage"]),
        (vec!["--sampler", "saint-rw", "--steps-per-epoch", "4294967295"], vec!["--steps-per-epoch"]),
        (vec!["--sampler", "saint-edge", "--steps-per-epoch", max], vec!["--steps-per-epoch"]),
        (vec!["--sampler", "saint-rw", "--steps-per-epoch", "0"], vec!["--steps-per-epoch"]),
        (vec!["--sampler", "neighbor", "--fanout", "0"], vec!["--fanout"]),
        (vec!["--sampler", "neighbor", "--fanout", "-2"], vec!["--fanout"]),
        (vec!["--sampler", "neighbor", "--batch-size", "0"], vec!["--batch-size"]),
        (vec!["--batch-size", "8"], vec!["--batch-size", "--sampler"]),
        (vec!["--fanout", "5"], vec!["--fanout", "--sampler"]),
        (vec!["--neighbor-union"], vec!["--neighbor-union", "--sampler"]),
        (vec!["--sampler", "saint-rw", "--neighbor-union"], vec!["--neighbor-union", "--sampler neighbor"]),
        // The GPU sampler makes per-layer blocks and the --neighbor-union batches, not the union
        // with the full graph's normalisation (hops other than layers): asked for it, it says so.
        (vec!["--sampler", "neighbor", "--fanout", "5", "--sample-on", "gpu"], vec!["--sample-on gpu", "fan-outs not one per layer"]),
        (vec!["--sampler", "neighbor", "--sample-on", "gpu"], vec!["--sample-on gpu", "needs a GPU"]),
        (vec!["--npz", "missing.npz"], vec!["missing.npz"]),
        (vec!["--npz", "ring.mtx"], vec!["ring.mtx"]),
        (vec!["--resume", "ring.mtx"], vec!["ring.mtx"]),
        (vec!["--save", "ring.mtx"], vec!["ring.mtx", "is also an input"]),
        (vec!["--save", "ring.npz"], vec!["ring.npz", "is also an input"]),
        (vec!["--save", "./ring.mtx"], vec!["is also an input"]),
        (vec!["--save", "ring.mtx/x.safetensors"], vec!["ring.mtx", "is a file, not a folder"]),
        (vec!["--save", "nowhere/x.safetensors"], vec!["nowhere", "does not exist"]),
        (vec!["--save", "ck"], vec!["ck", "is a directory"]),
        (vec!["--save", "ck/checkpoint.safetensors", "--checkpoint", "ck"], vec!["another output"]),
        (vec!["--out", "ring.mtx"], vec!["--out is a file"]),
    ] {
        train(&extra, &parts);
    }
    let mut other = |args: &[&str], parts: &[&str]| {
        count += 1;
        failures.extend(cli(&dir, args, parts));
    };
    // Huge epoch counts would loop for ever: refused before anything is read, in every task.
    for task in ["node", "link", "graph"] {
        for e in [max, "4294967296", "1000001"] {
            other(
                &["train", "ring.mtx", "--task", task, "--device", "cpu", "--quiet", "--epochs", e],
                &[&format!("--epochs {e}"), "1000000"],
            );
        }
    }
    other(&["train", "ring.mtx", "--device", "cpu", "--quiet", "--epochs", max, "--partitions", "2"], &["--epochs"]);
    // Synthetic node data takes them; an sbm: spec fixes its classes.
    other(
        &["train", "sbm:60:3", "--device", "cpu", "--quiet", "--epochs", "1", "--classes", "4"],
        &["--classes 4", "3 classes", "sbm: spec"],
    );
    other(&["partition", "ring.mtx", "--parts", "7"], &["7 parts", "6 nodes"]);
    other(&["partition", "ring.mtx", "--parts", "1000000"], &["1000000 parts"]);
    other(&["partition", "ring.mtx", "--parts", max], &["parts"]);
    other(&["partition", "ring.mtx", "--parts", "2", "-o", "ring.mtx"], &["ring.mtx", "is a file, not a folder"]);
    other(&["partition", "ring.mtx", "--parts", "2", "-o", "nowhere"], &["nowhere", "does not exist"]);
    other(&["gen", "sbm", "--features", max, "-o", "g.mtx"], &["features"]);
    other(&["gen", "sbm", "--n", max, "-o", "g.mtx"], &["nodes"]);
    other(&["gen", "sbm", "--p-in", "-0.5", "-o", "g.mtx"], &["p_in"]);
    other(&["gen", "sbm", "--avg-degree", "-3", "-o", "g.mtx"], &["mean degree"]);
    other(&["gen", "rmat", "--a", "-0.2", "-o", "g.mtx"], &["probabilities"]);
    other(&["gen", "grid", "--n", max, "-o", "g.mtx"], &["Grid"]);
    other(&["spmm", "ring.mtx", "--impl", "cpu", "--k", max], &["--k"]);
    other(&["info", "ring.mtx", "--worklist", "--k-slices", max], &["--k-slices"]);
    other(&["predict", "m.safetensors", "ring.mtx", "-o", "p.csv", "--npz", "missing.npz"], &["missing.npz"]);
    other(&["predict", "m.safetensors", "rmat:4:2", "-o", "p.csv"], &["no node data", "--synthetic-features"]);
    other(&["predict", "ring.mtx", "ring.mtx", "-o", "p.csv"], &["ring.mtx"]);
    other(&["predict", "m.safetensors", "ring.mtx", "-o", "p.txt"], &["p.txt", ".csv or .npy"]);
    other(&["predict", "m.safetensors", "ring.mtx", "-o", "m.safetensors"], &["m.safetensors"]);
    other(&["predict", "m.safetensors", "ring.mtx", "-o", "ring.npz"], &["ring.npz"]);
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
    assert!(count >= 70, "{count} cases");
    std::fs::remove_dir_all(&dir).ok();
}

/// Output paths: nothing a command must not write is changed; errors name the path.
#[test]
fn output_paths() {
    let dir = trained("outputs");
    let keep = ["ring.mtx", "ring.npz", "m.safetensors", "ck/checkpoint.safetensors"];
    let before: Vec<Vec<u8>> = keep.iter().map(|f| std::fs::read(dir.join(f)).unwrap()).collect();
    let mut failures = Vec::new();
    let mut refuse = |args: &[&str], parts: &[&str]| failures.extend(cli(&dir, args, parts));
    // The model file as predict's output, by every spelling.
    std::fs::copy(dir.join("m.safetensors"), dir.join("m.npy")).unwrap();
    refuse(&["predict", "m.npy", "ring.mtx", "-o", "m.npy"], &["m.npy", "is also an input"]);
    refuse(&["predict", "m.npy", "ring.mtx", "-o", "./m.npy"], &["is also an input"]);
    refuse(&["predict", "m.safetensors", "ring.mtx", "-o", "ring.mtx/p.csv"], &["is a file, not a folder"]);
    refuse(&["convert", "ring.mtx", "-o", "ring.mtx/x.mtx"], &["is a file, not a folder"]);
    refuse(&["convert", "ring.mtx", "-o", "ring.mtx"], &["is also an input"]);
    refuse(&["convert", "ring.npz", "-o", "x.mtx"], &["ring.npz"]);
    refuse(&["train", "ring.mtx", "--device", "cpu", "--epochs", "1", "--quiet", "--save", "ring.npz"], &["is also an input"]);
    // An unwritable folder is reported under the name given, not the temporary one.
    refuse(&["convert", "ring.mtx", "-o", "/proc/tcgnn-out.mtx"], &["/proc/tcgnn-out.mtx"]);
    let (_, _, err) = tcgnn(&dir, &["convert", "ring.mtx", "-o", "/proc/tcgnn-out.mtx"]);
    assert!(!err.contains(".tmp-"), "temporary name in the message: {err}");
    // A symlink loop is reported as one, not as a missing file.
    std::os::unix::fs::symlink("loop2", dir.join("loop1")).unwrap();
    std::os::unix::fs::symlink("loop1", dir.join("loop2")).unwrap();
    refuse(&["info", "loop1"], &["loop1", "symbolic links"]);
    refuse(&["convert", "ring.mtx", "-o", "loop1"], &["loop1"]);
    // A Matrix Market file named .txt is read as what it is.
    std::fs::write(dir.join("mm.txt"), RING6).unwrap();
    let (code, out, err) = tcgnn(&dir, &["info", "mm.txt"]);
    assert!(code == Some(0) && out.contains("nnz        12"), "{out}{err}");
    // A symlink output: the file it names gets the output, the link stays a link.
    std::fs::write(dir.join("target.mtx"), b"old").unwrap();
    std::os::unix::fs::symlink("target.mtx", dir.join("link.mtx")).unwrap();
    let (code, _, err) = tcgnn(&dir, &["convert", "ring.mtx", "-o", "link.mtx"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::symlink_metadata(dir.join("link.mtx")).unwrap().file_type().is_symlink(), "symlink replaced by a file");
    assert_eq!(read_mtx(dir.join("target.mtx")).unwrap(), read_mtx(dir.join("ring.mtx")).unwrap());
    // A device: written into, never replaced by a regular file.
    let (code, _, err) = tcgnn(&dir, &["convert", "ring.mtx", "-o", "/dev/null"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!std::fs::metadata("/dev/null").unwrap().is_file(), "/dev/null replaced");
    // Broken pipe and a full stdout: quiet success / one clean error.
    let mut child =
        Command::new(bin()).args(["info", "ring.mtx"]).current_dir(&dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(0) && err.is_empty(), "closed stdout: {:?} {err}", out.status);
    let full = Command::new(bin())
        .args(["info", "ring.mtx"])
        .current_dir(&dir)
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&full.stderr);
    assert!(full.status.code() == Some(1) && err.contains("standard output") && !err.contains("panicked"), "/dev/full: {err}");
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
    for (f, b) in keep.iter().zip(&before) {
        assert_eq!(&std::fs::read(dir.join(f)).unwrap(), b, "{f} changed");
    }
    std::fs::remove_dir_all(&dir).ok();
}
