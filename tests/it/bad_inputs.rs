//! Hostile and mistaken inputs through the real `tcgnn` binary: each must end in a clean error
//! (exit status 1, or 2 for a command-line error caught by clap) whose message says what is
//! wrong and where, within a time limit. A panic (101), an abort on a failed allocation (a
//! signal) or a hang fails the test instead of the CI job.
//!
//! Memory-hungry inputs run under `ulimit -v` so that "refused up front" is what is tested: an
//! input the machine could hold would otherwise just run (slowly) on a large CI box.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::{Outcome, bin, run_tcgnn};
use tcgnn::graph::Csr;
use tcgnn::graph::npz::{Features, NodeData, Split, write_npz};

/// The binary under test: cargo's, or `TCGNN_BIN` where the tests run away from the build
/// (the staged GPU machine).
const TIMEOUT: Duration = Duration::from_secs(60);

fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcgnn-bad-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `tcgnn ARGS` in `dir` under the address-space limit; kills it past the timeout.
fn run_in(dir: &Path, args: &[&str]) -> Outcome {
    let out = dir.join(format!("stdout-{}", args.join("_").replace('/', "_").chars().take(60).collect::<String>()));
    run_tcgnn(dir, args, &out, TIMEOUT)
}

/// `tcgnn ARGS` must fail cleanly with every one of `expect` in its error message.
fn refuses(dir: &Path, args: &[&str], expect: &[&str]) {
    let o = run_in(dir, args);
    assert!(
        matches!(o.code, Some(1) | Some(2)),
        "tcgnn {args:?}: exit {:?} (a signal, a panic or success), stderr:\n{}\nstdout:\n{}",
        o.code,
        o.stderr,
        o.stdout
    );
    for e in expect {
        assert!(o.stderr.contains(e), "tcgnn {args:?}: error lacks '{e}':\n{}", o.stderr);
    }
    assert!(!o.stderr.contains("panicked"), "tcgnn {args:?} panicked:\n{}", o.stderr);
    assert!(!o.stderr.contains('\x1b'), "tcgnn {args:?} echoed a raw escape byte:\n{:?}", o.stderr);
}

/// A gzip file of `head`, then `body` repeated `times` times, as concatenated gzip members
/// (each member compresses `body` once, so a few MB of file can hold gigabytes of text).
fn gzip_repeated(path: &Path, head: &[u8], body: &[u8], times: usize) {
    let member = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&member(head)).unwrap();
    let m = member(body);
    for _ in 0..times {
        f.write_all(&m).unwrap();
    }
    f.flush().unwrap();
}

fn write(dir: &Path, name: &str, text: &[u8]) -> String {
    std::fs::write(dir.join(name), text).unwrap();
    name.to_string()
}

/// A small graph and node data: 6 nodes, 3 features, 2 classes, every mask non-empty.
fn node_data(n: usize) -> NodeData {
    let split = Split {
        train: (0..n).map(|i| i % 3 == 0).collect(),
        val: (0..n).map(|i| i % 3 == 1).collect(),
        test: (0..n).map(|i| i % 3 == 2).collect(),
    };
    NodeData {
        x: Features::Dense { n, f: 3, data: (0..n * 3).map(|i| i as f32).collect() },
        y: (0..n as i64).map(|i| i % 2).collect(),
        split: Some(split),
        splits_all: Vec::new(),
        class_names: Vec::new(),
    }
}

const RING6: &[u8] = b"%%MatrixMarket matrix coordinate pattern symmetric\n6 6 6\n2 1\n3 2\n4 3\n5 4\n6 5\n6 1\n";

#[test]
fn huge_declared_sizes_are_refused_up_front() {
    let dir = scratch("sizes");
    // 132 KB of gzip: 2^31 - 2 rows and one entry repeated 34M times (passes the "mostly empty
    // rows" heuristic, so only the memory check stops it).
    gzip_repeated(
        &dir.join("big.mtx.gz"),
        b"%%MatrixMarket matrix coordinate pattern general\n2147483646 2147483646 34000000\n",
        &b"1 1\n".repeat(1 << 20),
        34,
    );
    refuses(&dir, &["info", "big.mtx.gz"], &["big.mtx.gz:2:", "host memory"]);
    // The same as an edge list: the huge id comes first, the repeats after.
    let mut head = b"2147483645 0\n".to_vec();
    head.extend_from_slice(b"0 0\n");
    gzip_repeated(&dir.join("big.txt.gz"), &head, &b"0 0\n".repeat(1 << 20), 34);
    refuses(&dir, &["info", "big.txt.gz"], &["big.txt.gz:1:", "node id 2147483645", "host memory"]);
    let small = write(&dir, "small.txt", b"0 1\n1 2\n");
    refuses(&dir, &["info", &small, "--nodes", "2147483646"], &["2147483646 nodes", "host memory"]);
    refuses(&dir, &["info", "rmat:20:1000"], &["R-MAT", "host memory"]);
    refuses(&dir, &["info", "rmat:10:1000000000"], &["rmat:10:1000000000", "edges"]);
    refuses(&dir, &["gen", "star", "--n", "4000000000", "-o", "s.mtx"], &["Star", "2^31"]);
    refuses(&dir, &["gen", "complete", "--n", "100000", "-o", "c.mtx"], &["Complete", "2^31"]);
    refuses(&dir, &["info", "small.txt", "--worklist", "--sm-count", "1000000000"], &["--sm-count", "1..=1024"]);
    refuses(&dir, &["info", "small.txt", "--worklist", "--k-slices", "1000000000"], &["--k-slices", "1..=4096"]);
    // The tensor-core attention's row limit, refused before any GPU is looked for.
    refuses(&dir, &["bench", "train", "small.txt", "--attention-tc", "300"], &["--attention-tc 300", "at most 256"]);
    refuses(&dir, &["bench", "attention", "small.txt", "--tc-row-max", "300"], &["--tc-row-max 300", "at most 256"]);
    std::fs::write(dir.join("ring.mtx"), RING6).unwrap();
    let cpu = ["--device", "cpu", "--epochs", "1", "--quiet"];
    let train = |extra: &[&str], expect: &[&str]| {
        let mut a = vec!["train"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&cpu);
        refuses(&dir, &a, expect);
    };
    train(&["ring.mtx", "--hidden", "1000000000"], &["--hidden 1000000000"]);
    train(&["ring.mtx", "--hidden", "4611686018427387904"], &["--hidden 4611686018427387904"]);
    train(&["sbm:1000", "--features", "1000000000"], &["--features", "1000000000", "1..=16777216"]);
    train(&["ring.mtx", "--features", "10000000", "--hidden", "100000"], &["host memory"]);
    train(&["sbm:inf"], &["sbm:inf", "node count"]);
    train(&["sbm:1e300"], &["sbm:1e300", "node count"]);
    train(&["sbm:1000:8:inf"], &["sbm:1000:8:inf", "finite"]);
    train(&["sbm:4000000000"], &["sbm:4000000000", "nodes"]);
    train(&["sbm:100000000:8:1000"], &["mean degree"]);
    refuses(&dir, &["gen", "sbm", "--avg-degree", "inf", "-o", "x.mtx"], &["finite mean degree"]);
    refuses(&dir, &["gen", "sbm", "--n", "100000000", "--features", "100000", "-o", "x.mtx"], &["host memory"]);
    // Labels up to 10^9: the class count is bounded, not an output layer of 10^9 columns.
    let mut d = node_data(6);
    d.y[2] = 1_000_000_000;
    write_npz(dir.join("labels.npz"), &d).unwrap();
    train(&["ring.mtx", "--npz", "labels.npz"], &["labels.npz", "'y'", "label 1000000000"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn endless_lines_are_refused() {
    let dir = scratch("lines");
    // 5 MB of gzip holding one 5 GiB line: refused after a bounded buffer, not held.
    gzip_repeated(&dir.join("line.txt.gz"), b"0 1\n", &b"7".repeat(64 << 20), 80);
    refuses(&dir, &["info", "line.txt.gz"], &["line.txt.gz:2:", "longer than"]);
    refuses(&dir, &["info", "/dev/zero"], &["/dev/zero:1:", "longer than"]);
    refuses(&dir, &["info", "/dev/zero", "--input-format", "mtx"], &["/dev/zero:1:", "longer than"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn silent_wrong_results_are_errors() {
    let dir = scratch("silent");
    let mtx = |name: &str, body: &str| write(&dir, name, format!("%%MatrixMarket matrix coordinate real general\n{body}").as_bytes());
    let big = mtx("big.mtx", "2 2 1\n1 2 1e39\n");
    refuses(&dir, &["info", &big], &["big.mtx:3:", "overflows f32"]);
    let sum = mtx("sum.mtx", "2 2 2\n1 2 3e38\n1 2 3e38\n");
    refuses(&dir, &["info", &sum], &["entry (0, 1)", "f32"]);
    refuses(&dir, &["convert", &sum, "-o", "out.mtx"], &["f32"]);
    let nan = mtx("nan.mtx", "2 2 1\n1 2 nan\n");
    refuses(&dir, &["info", &nan], &["nan.mtx:3:", "not a finite number"]);
    let csv = write(&dir, "gap.csv", b"0,1\n0,,1\n");
    refuses(&dir, &["info", &csv], &["gap.csv:2:", "empty field"]);
    let words = write(&dir, "words.txt", b"hello world\n");
    refuses(&dir, &["info", &words], &["words.txt:1:", "no edges"]);
    let esc = write(&dir, "esc.txt", b"0 1\n\x1b]0;owned\x07 2\n");
    refuses(&dir, &["info", &esc], &["esc.txt:2:", "\\u{1b}"]);

    // Training inputs a careful user would not mean.
    let neg = mtx("neg.mtx", "6 6 2\n1 2 -1\n2 1 -1\n");
    let cpu = ["--device", "cpu", "--epochs", "1", "--quiet"];
    let train = |extra: &[&str], expect: &[&str]| {
        let mut a = vec!["train"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&cpu);
        refuses(&dir, &a, expect);
    };
    write_npz(dir.join("neg.npz"), &node_data(6)).unwrap();
    train(&[&neg], &["non-negative edge weights"]);
    std::fs::write(dir.join("ring.mtx"), RING6).unwrap();
    for (flag, what) in [("--lr=-1", "--lr"), ("--lr=nan", "--lr"), ("--lr=inf", "--lr"), ("--weight-decay=-0.1", "--weight-decay")] {
        train(&["ring.mtx", flag, "--features", "4"], &[what]);
    }
    train(&["ring.mtx", "--precision", "f16", "--features", "4"], &["--precision f16", "GPU"]);
    // Sampled and partitioned training: degenerate or conflicting options.
    train(&["ring.mtx", "--features", "4", "--sampler", "neighbor", "--fanout", "0"], &["--fanout", ">= 1"]);
    train(&["ring.mtx", "--features", "4", "--sampler", "saint-rw", "--batch-size", "0"], &["--batch-size"]);
    train(&["ring.mtx", "--features", "4", "--batch-size", "8"], &["--batch-size", "--sampler"]);
    train(&["ring.mtx", "--features", "4", "--partitions", "2", "--sampler", "saint-rw"], &["--sampler", "--partitions"]);
    train(&["ring.mtx", "--features", "4", "--partitions", "0"], &["--partitions"]);
    // Layer-wise inference: only with --sampler, a positive batch, a model it runs.
    train(&["ring.mtx", "--features", "4", "--inference", "layerwise"], &["--inference", "--sampler"]);
    train(&["ring.mtx", "--features", "4", "--sampler", "saint-rw", "--inference-batch-edges", "0"], &["--inference-batch-edges"]);
    train(&["ring.mtx", "--features", "4", "--sampler", "saint-rw", "--inference", "sideways"], &["--inference", "layerwise"]);
    train(
        &["ring.mtx", "--features", "4", "--model", "gat", "--sampler", "saint-rw", "--inference", "layerwise"],
        &["layerwise", "GCN, SAGE and GIN", "gat"],
    );
    // Sampling on the GPU: only with --sampler, only on a GPU, only where the batches can be made there.
    train(&["ring.mtx", "--features", "4", "--sample-on", "gpu"], &["--sample-on", "--sampler"]);
    train(&["ring.mtx", "--features", "4", "--sampler", "saint-rw", "--sample-on", "gpu"], &["--sample-on gpu", "GPU"]);
    train(
        &["ring.mtx", "--features", "4", "--model", "gat", "--sampler", "neighbor", "--sample-on", "gpu"],
        &["--sample-on gpu", "gat", "--sample-on cpu"],
    );
    train(
        &["ring.mtx", "--features", "4", "--sampler", "saint-rw", "--saint-coverage", "0", "--sample-on", "gpu"],
        &["--sample-on gpu", "normalisation"],
    );
    // Benchmarks of this round: degenerate widths and counts, refused before any GPU work.
    refuses(&dir, &["bench", "attention", "ring.mtx", "--k", "0"], &["--k", "1..="]);
    refuses(&dir, &["bench", "attention", "ring.mtx", "--k", "100000000"], &["--k"]);
    // GAT: K must split into --heads heads the fused kernels take (<= 32 heads of <= 32 columns).
    refuses(&dir, &["bench", "attention", "ring.mtx", "--model", "gat", "--heads", "0"], &["--heads 0"]);
    refuses(&dir, &["bench", "attention", "ring.mtx", "--model", "gat", "--heads", "3", "--k", "32"], &["--heads 3", "split"]);
    refuses(&dir, &["bench", "attention", "ring.mtx", "--model", "gat", "--heads", "2", "--k", "128"], &["at most 32"]);
    refuses(&dir, &["bench", "dtp", "ring.mtx", "--fixed", "0"], &["--fixed", "1..=1048576"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--gpus", "0"], &["--gpus", ">= 1"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--row-weight", "0"], &["--row-weight 0", "at least 1"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--rebalance", "1"], &["--rebalance", "--alone"]);
    refuses(&dir, &["partition", "ring.mtx", "--row-weight", "0"], &["row weight of 0", "at least 1"]);
    train(&["ring.mtx", "--partitions", "2", "--rebalance", "1"], &["--rebalance", "NCCL ranks"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--local-input", "maybe"], &["--local-input", "maybe"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--cuda-graph", "maybe"], &["--cuda-graph", "maybe"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--pull-backward", "sometimes"], &["--pull-backward", "sometimes"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--device", "cpu", "--cuda-graph", "true"], &["--cuda-graph true", "CPU"]);
    train(&["ring.mtx", "--partitions", "2", "--overlap", "maybe"], &["--overlap", "maybe"]);
    refuses(&dir, &["bench", "dist", "ring.mtx", "--overlap-split", "diagonal"], &["--overlap-split", "diagonal"]);
    train(&["ring.mtx", "--partitions", "2", "--overlap-split", "diagonal"], &["--overlap-split", "diagonal"]);
    let mut d = node_data(6);
    d.split.as_mut().unwrap().val = vec![false; 6];
    write_npz(dir.join("noval.npz"), &d).unwrap();
    train(&["ring.mtx", "--npz", "noval.npz"], &["noval.npz", "val_mask", "selects no node"]);
    let mut d = node_data(6);
    d.split.as_mut().unwrap().test[0] = true;
    write_npz(dir.join("overlap.npz"), &d).unwrap();
    train(&["ring.mtx", "--npz", "overlap.npz"], &["overlap.npz", "node 0", "overlap"]);
    let mut d = node_data(6);
    if let Features::Dense { data, .. } = &mut d.x {
        data[4] = f32::NAN;
    }
    write_npz(dir.join("nanx.npz"), &d).unwrap();
    train(&["ring.mtx", "--npz", "nanx.npz"], &["nanx.npz", "'x'", "node 1", "NaN"]);

    refuses(&dir, &["gen", "sbm", "--features", "0", "-o", "f.mtx"], &["0 features"]);
    refuses(&dir, &["gen", "sbm", "--p-in", "nan", "-o", "f.mtx"], &["p_in"]);
    refuses(&dir, &["gen", "rmat", "--a", "nan", "-o", "f.mtx"], &["R-MAT", "probabilities"]);
    refuses(&dir, &["spmm", "ring.mtx", "--impl", "cpu", "--reps", "0"], &["--reps"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn output_paths_are_checked_before_the_work() {
    let dir = scratch("outputs");
    std::fs::write(dir.join("ring.mtx"), RING6).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    refuses(&dir, &["convert", "ring.mtx", "-o", "ring.mtx"], &["ring.mtx", "is also an input"]);
    refuses(&dir, &["convert", "ring.mtx", "-o", "./ring.mtx"], &["is also an input"]);
    refuses(&dir, &["convert", "ring.mtx", "-o", "missing/x.mtx"], &["missing", "does not exist"]);
    refuses(&dir, &["convert", "ring.mtx", "-o", "sub"], &["sub", "is a directory"]);
    refuses(&dir, &["reorder", "ring.mtx", "-o", "r.mtx", "--perm-out", "r.mtx"], &["r.mtx", "another output"]);
    refuses(&dir, &["gen", "sbm", "-o", "g.mtx", "--npz", "g.mtx"], &["g.mtx", "another output"]);
    refuses(&dir, &["gen", "path", "--n", "10", "-o", "missing/p.mtx"], &["does not exist"]);
    std::fs::write(dir.join("file"), b"x").unwrap();
    refuses(&dir, &["train", "ring.mtx", "--device", "cpu", "--epochs", "1", "--features", "4", "--out", "file"], &["--out is a file"]);
    // Nothing was written under any of those names.
    for name in ["missing", "r.mtx", "g.mtx", "g.npz"] {
        assert!(!dir.join(name).exists(), "{name} was created");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Starts `tcgnn ARGS`, waits until its temporary output `.NAME.tmp-PID` appears (it is
/// writing), SIGKILLs it, and returns the folder's entries.
fn kill_while_writing(dir: &Path, args: &[&str], name: &str) -> Vec<String> {
    let mut child = Command::new(bin()).args(args).current_dir(dir).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let tmp = dir.join(format!(".{name}.tmp-{}", child.id()));
    let start = Instant::now();
    while !tmp.exists() {
        assert!(child.try_wait().unwrap().is_none(), "tcgnn {args:?} finished before it could be killed");
        assert!(start.elapsed() < TIMEOUT, "tcgnn {args:?} never started writing");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn killed_writers_leave_no_partial_file() {
    let dir = scratch("kill");
    // A graph large enough that writing it takes a while (~4M edges of text).
    let names = kill_while_writing(&dir, &["convert", "rmat:18:16", "-o", "out.mtx.gz"], "out.mtx.gz");
    assert!(!names.contains(&"out.mtx.gz".to_string()), "partial file under the final name: {names:?}");
    // An existing output keeps its old contents when the new write is killed.
    std::fs::write(dir.join("old.mtx"), RING6).unwrap();
    kill_while_writing(&dir, &["convert", "rmat:18:16", "-o", "old.mtx"], "old.mtx");
    assert_eq!(std::fs::read(dir.join("old.mtx")).unwrap(), RING6);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn binary_cache_round_trips_and_refuses_corruption() {
    let dir = scratch("tcg");
    std::fs::write(dir.join("ring.mtx"), RING6).unwrap();
    let o = run_in(&dir, &["convert", "ring.mtx", "--to", "tcg", "-o", "ring.tcg"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let o = run_in(&dir, &["info", "ring.tcg"]);
    assert!(o.code == Some(0) && o.stdout.contains("nnz        12"), "{}{}", o.stdout, o.stderr);
    // As a dataset name: ring.tcg in $TCGNN_DATASETS.
    let o = run_in(&dir, &["info", "ring"]);
    assert!(o.code == Some(0) && o.stdout.contains("nnz        12"), "{}{}", o.stdout, o.stderr);
    let bytes = std::fs::read(dir.join("ring.tcg")).unwrap();
    std::fs::write(dir.join("cut.tcg"), &bytes[..bytes.len() - 3]).unwrap();
    refuses(&dir, &["info", "cut.tcg"], &["cut.tcg", "truncated"]);
    let mut flip = bytes.clone();
    flip[50] ^= 1;
    std::fs::write(dir.join("flip.tcg"), &flip).unwrap();
    refuses(&dir, &["info", "flip.tcg"], &["flip.tcg", "checksum"]);
    let g = tcgnn::graph::tcg::read_tcg(dir.join("ring.tcg")).unwrap();
    assert_eq!(g, tcgnn::graph::mtx::read_mtx(dir.join("ring.mtx")).unwrap());
    let _: &Csr = &g;
    std::fs::remove_dir_all(&dir).ok();
}
