//! Graph classification: the segment pooling op (GPU against the CPU in f64, poisoned outputs,
//! odd shapes; gradients against finite differences), batches of graphs against the graphs one
//! by one, stratified folds and their file, the TU reader's bad inputs, and a training step on
//! the GPU against the CPU. GPU tests skip without a GPU.

use crate::common;

use std::path::{Path, PathBuf};

use tcgnn::gpu::DeviceMatrix;
use tcgnn::graph::tu::read_tu;
use tcgnn::nn::models::{default_config, default_graph_pooling};
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, ModelConfig, Ops};
use tcgnn::ops::nn::AdamHyper;
use tcgnn::ops::nn::segment_pool::{
    DeviceSegments, NO_ROW, Pooling, segment_pool, segment_pool_backward, segment_pool_backward_cpu, segment_pool_cpu,
};
use tcgnn::ops::{Impl, Precision};
use tcgnn::task::graph::{Folds, GraphBatch, GraphModel, GraphNet, GraphSet};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

const KINDS: [Pooling; 3] = [Pooling::Sum, Pooling::Mean, Pooling::Max];

pub(crate) fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcgnn-graph-task-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Segment offsets with the odd shapes: empty segments (first, middle, last), one huge segment,
/// a single one-node segment.
fn offset_cases(seed: u64) -> Vec<(&'static str, Vec<u32>)> {
    let mut rng = SplitMix64::new(seed);
    let mut many = vec![0u32];
    for g in 0..300 {
        let len = if g % 37 == 0 { 0 } else { 1 + rng.below(60) as u32 };
        many.push(many.last().unwrap() + len);
    }
    vec![
        ("many small, some empty", many),
        ("empty first and last", vec![0, 0, 5, 5, 9, 9]),
        ("one huge", vec![0, 70_000]),
        ("one node", vec![0, 1]),
        ("huge among small", vec![0, 3, 20_003, 20_004, 20_004, 20_010]),
    ]
}

/// Random x (rows x cols, f32 values) and the f64 copy.
fn random_rows(rows: usize, cols: usize, seed: u64) -> (Matrix, Vec<f64>) {
    let mut rng = SplitMix64::new(seed);
    let m = Matrix { rows, cols, data: (0..rows * cols).map(|_| rng.uniform(-2.0, 2.0)).collect() };
    let d = m.data.iter().map(|&v| v as f64).collect();
    (m, d)
}

#[test]
fn segment_pool_gpu_matches_cpu_f64() {
    let Some(gpu) = common::gpu_or_skip("segment_pool_gpu_matches_cpu_f64") else { return };
    for (name, offsets) in offset_cases(3) {
        let rows = *offsets.last().unwrap() as usize;
        let graphs = offsets.len() - 1;
        for cols in [1usize, 7, 13, 64, 67] {
            let (x, x64) = random_rows(rows, cols, 11 + cols as u64);
            let (dout, dout64) = random_rows(graphs, cols, 29 + cols as u64);
            let xd = DeviceMatrix::upload(&gpu, &x).unwrap();
            let dd = DeviceMatrix::upload(&gpu, &dout).unwrap();
            for kind in KINDS {
                let mut want = vec![0f64; graphs * cols];
                let mut am = vec![0u32; graphs * cols];
                segment_pool_cpu(kind, &x64, cols, &offsets, &mut want, &mut am).unwrap();
                let mut seg = DeviceSegments::new(&gpu, &offsets, rows, cols, kind).unwrap();
                let mut out = DeviceMatrix::<f32>::zeros(&gpu, graphs, cols).unwrap();
                out.poison().unwrap();
                segment_pool(kind, &xd, &mut seg, &mut out).unwrap();
                let got = out.download().unwrap();
                let e = rel_error(&got.data, &want);
                assert!(e < 1e-5, "{name} cols {cols} {kind:?}: forward rel. error {e:.2e}");
                if kind == Pooling::Max {
                    let ld = tcgnn::gpu::memory::padded_ld(cols);
                    let dam = seg.argmax.download(&gpu).unwrap();
                    for g in 0..graphs {
                        for c in 0..cols {
                            assert_eq!(dam[g * ld + c], am[g * cols + c], "{name} cols {cols}: argmax of graph {g} column {c}");
                        }
                    }
                    // Empty segments pool to 0 and have no argmax.
                    for g in (0..graphs).filter(|&g| offsets[g] == offsets[g + 1]) {
                        assert!(am[g * cols..(g + 1) * cols].iter().all(|&a| a == NO_ROW));
                    }
                }
                let mut want_dx = vec![0f64; rows * cols];
                segment_pool_backward_cpu(kind, &dout64, cols, &offsets, &am, &mut want_dx).unwrap();
                let mut dx = DeviceMatrix::<f32>::zeros(&gpu, rows, cols).unwrap();
                dx.poison().unwrap();
                segment_pool_backward(kind, &seg, &dd, &mut dx).unwrap();
                let got = dx.download().unwrap();
                let e = rel_error(&got.data, &want_dx);
                assert!(e < 1e-5, "{name} cols {cols} {kind:?}: backward rel. error {e:.2e}");
                // Padding columns are written zero (the next op reads whole padded rows).
                let padded = out.download_padded().unwrap();
                let ld = out.ld;
                assert!((0..graphs).all(|g| (cols..ld).all(|c| padded[g * ld + c] == 0.0)), "{name} cols {cols}: padding");
            }
        }
    }
    // Offsets that do not describe the rows are refused before any launch.
    let x = DeviceMatrix::<f32>::zeros(&gpu, 5, 8).unwrap();
    assert!(DeviceSegments::new(&gpu, &[0, 3, 2, 5], 5, 8, Pooling::Sum).is_err());
    let mut seg = DeviceSegments::new(&gpu, &[0, 2, 4], 4, 8, Pooling::Sum).unwrap();
    let mut out = DeviceMatrix::<f32>::zeros(&gpu, 2, 8).unwrap();
    assert!(segment_pool(Pooling::Sum, &x, &mut seg, &mut out).is_err());
}

#[test]
fn segment_pool_gradients_match_finite_differences() {
    // L = sum_g,c w[g][c] pool(x)[g][c]; dL/dx from the backward of w against central
    // differences of L (max: random values, no ties, a step far below the gaps).
    for (name, offsets) in [("small", vec![0u32, 3, 3, 7, 8]), ("one node", vec![0, 1])] {
        let rows = *offsets.last().unwrap() as usize;
        let graphs = offsets.len() - 1;
        let cols = 5;
        let (_, x) = random_rows(rows, cols, 5);
        let (_, w) = random_rows(graphs, cols, 6);
        for kind in KINDS {
            let loss = |x: &[f64]| {
                let mut out = vec![0f64; graphs * cols];
                let mut am = vec![0u32; graphs * cols];
                segment_pool_cpu(kind, x, cols, &offsets, &mut out, &mut am).unwrap();
                out.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>()
            };
            let mut out = vec![0f64; graphs * cols];
            let mut am = vec![0u32; graphs * cols];
            segment_pool_cpu(kind, &x, cols, &offsets, &mut out, &mut am).unwrap();
            let mut dx = vec![f64::NAN; rows * cols];
            segment_pool_backward_cpu(kind, &w, cols, &offsets, &am, &mut dx).unwrap();
            let h = 1e-6;
            for i in 0..rows * cols {
                let (mut p, mut m) = (x.clone(), x.clone());
                p[i] += h;
                m[i] -= h;
                let fd = (loss(&p) - loss(&m)) / (2.0 * h);
                assert!((fd - dx[i]).abs() < 1e-7 * fd.abs().max(1.0), "{name} {kind:?} dx[{i}] = {} vs finite difference {fd}", dx[i]);
            }
        }
    }
}

/// A random TU set in `dir` with `graphs` graphs of 1..=12 nodes (random edges both ways, some
/// graphs without edges), `classes` graph classes and node labels unless `no_node_labels`.
pub(crate) fn write_random_set(dir: &Path, name: &str, graphs: usize, classes: u64, no_node_labels: bool, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let (mut a, mut ind, mut gl, mut nl) = (String::new(), String::new(), String::new(), String::new());
    let mut first = 1u64;
    for g in 1..=graphs {
        let n = 1 + rng.below(12);
        for _ in 0..n {
            ind += &format!("{g}\n");
            nl += &format!("{}\n", rng.below(5) + 2);
        }
        if g % 5 != 0 {
            for _ in 0..2 * n {
                let (u, v) = (first + rng.below(n), first + rng.below(n));
                a += &format!("{u}, {v}\n{v}, {u}\n");
            }
        }
        gl += &format!("{}\n", rng.below(classes) as i64 * 2 - 1);
        first += n;
    }
    std::fs::write(dir.join(format!("{name}_A.txt")), a).unwrap();
    std::fs::write(dir.join(format!("{name}_graph_indicator.txt")), ind).unwrap();
    std::fs::write(dir.join(format!("{name}_graph_labels.txt")), gl).unwrap();
    if !no_node_labels {
        std::fs::write(dir.join(format!("{name}_node_labels.txt")), nl).unwrap();
    }
}

pub(crate) fn graph_model(set: &GraphSet, model: &str, pooling: Pooling) -> GraphModel {
    let d = default_config(model).unwrap();
    let heads = d.heads.max(1);
    let encoder = ModelConfig { layers: 3, hidden: (16 / heads).max(1), batch_norm: true, dropout: 0.5, seed: 7, ..d };
    GraphModel { encoder, pooling, classes: set.classes(), features: set.features.cols }
}

#[test]
fn batch_gives_the_graphs_outputs_one_by_one() {
    let dir = tmp_dir("batch");
    write_random_set(&dir, "R", 24, 3, false, 1);
    let set = GraphSet::new(read_tu(&dir, "R").unwrap()).unwrap();
    let b = CpuBackend::<f64>::new();
    let ids: Vec<u32> = (0..set.graphs() as u32).rev().collect();
    let batch = GraphBatch::new(&set, &ids).unwrap();
    assert_eq!(batch.offsets.len(), ids.len() + 1);
    for (model, pooling) in [("gin", Pooling::Sum), ("gcn", Pooling::Mean), ("sage", Pooling::Max), ("gat", Pooling::Mean)] {
        let m = graph_model(&set, model, pooling);
        // One training step first, so the weights and BatchNorm's running statistics are not
        // their initial values.
        let mut trained = GraphNet::new(&b, &batch, &m).unwrap();
        let mut stats = b.stats().unwrap();
        trained.step(&b, &AdamHyper { lr: 0.05, ..AdamHyper::default() }, &mut stats).unwrap();
        let mut whole = GraphNet::new(&b, &batch, &m).unwrap();
        let all = whole.with_state(&mut trained, |n| Ok(n.forward(&b, false)?.clone())).unwrap();
        assert!(all.data.iter().all(|v| v.is_finite()));
        for (i, &g) in ids.iter().enumerate() {
            let one = GraphBatch::new(&set, &[g]).unwrap();
            let mut net = GraphNet::new(&b, &one, &m).unwrap();
            let got = net.with_state(&mut trained, |n| Ok(n.forward(&b, false)?.clone())).unwrap();
            for c in 0..m.classes {
                let (x, y) = (got.data[c], all.data[i * m.classes + c]);
                assert!((x - y).abs() <= 1e-10 * y.abs().max(1.0), "{model}: graph {g} class {c}: alone {x}, in the batch {y}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn graph_net_gradients_match_finite_differences() {
    // The whole net (encoder, node norm, pooling, graph norm, MLP, cross entropy) in f64, no
    // dropout: every parameter's analytic gradient against central differences of the loss, on
    // a sample of its entries.
    let dir = tmp_dir("fd");
    write_random_set(&dir, "F", 12, 2, false, 5);
    let set = GraphSet::new(read_tu(&dir, "F").unwrap()).unwrap();
    let ids: Vec<u32> = (0..set.graphs() as u32).collect();
    let batch = GraphBatch::new(&set, &ids).unwrap();
    let b = CpuBackend::<f64>::new();
    for (model, pooling) in [("gin", Pooling::Sum), ("gcn", Pooling::Mean), ("sage", Pooling::Max)] {
        let mut m = graph_model(&set, model, pooling);
        m.encoder.dropout = 0.0;
        let mut net = GraphNet::new(&b, &batch, &m).unwrap();
        let mut s = b.stats().unwrap();
        net.gradients(&b, &mut s).unwrap();
        let grads: Vec<(String, Vec<f64>)> = net.params().into_iter().map(|(n, p)| (n, p.grad.data.clone())).collect();
        let mut rng = SplitMix64::new(2);
        for (k, (name, g)) in grads.iter().enumerate() {
            for _ in 0..6 {
                let i = rng.below(g.len() as u64) as usize;
                let mut loss_at = |delta: f64| {
                    net.params()[k].1.value.data[i] += delta;
                    let mut s = b.stats().unwrap();
                    net.gradients(&b, &mut s).unwrap();
                    net.params()[k].1.value.data[i] -= delta;
                    b.read_stats(&s).unwrap().loss
                };
                // ReLU (and max-pooling) kinks: a step can cross one (seen at 1e-5: the two
                // one-sided differences then disagree); it passes when one of three small steps
                // agrees, and a kink cannot sit within all three.
                let fds: Vec<f64> = [1e-6, 3e-7, 1e-7].iter().map(|&h| (loss_at(h) - loss_at(-h)) / (2.0 * h)).collect();
                let ok = fds.iter().any(|fd| (fd - g[i]).abs() <= 1e-5 * fd.abs().max(1e-2));
                assert!(ok, "{model} {name}[{i}]: analytic {} vs finite differences {fds:?}", g[i]);
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn folds_are_stratified_disjoint_and_covering() {
    let mut rng = SplitMix64::new(4);
    // Three classes of 60 %, 30 % and 10 %.
    let labels: Vec<u32> = (0..503)
        .map(|_| match rng.below(10) {
            0..=5 => 0,
            6..=8 => 1,
            _ => 2,
        })
        .collect();
    let f = Folds::stratified("S", &labels, 10, 3).unwrap();
    assert_eq!(f.k(), 10);
    let mut seen = vec![0u32; labels.len()];
    for fold in &f.test {
        fold.iter().for_each(|&g| seen[g as usize] += 1);
    }
    assert!(seen.iter().all(|&s| s == 1), "every graph in exactly one fold");
    let sizes: Vec<usize> = f.test.iter().map(Vec::len).collect();
    assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
    for c in 0..3 {
        let per: Vec<usize> = f.test.iter().map(|t| t.iter().filter(|&&g| labels[g as usize] == c).count()).collect();
        assert!(per.iter().max().unwrap() - per.iter().min().unwrap() <= 1, "class {c}: {per:?}");
    }
    for k in 0..10 {
        let train = f.train(k);
        assert_eq!(train.len() + f.test[k].len(), labels.len());
        assert!(train.iter().all(|g| f.test[k].binary_search(g).is_err()));
    }
    // Another seed shuffles differently; the same seed reproduces.
    assert_ne!(f.test, Folds::stratified("S", &labels, 10, 4).unwrap().test);
    assert_eq!(f, Folds::stratified("S", &labels, 10, 3).unwrap());
    // The file round-trips, and refuses another set's labels or a broken partition.
    let dir = tmp_dir("folds");
    let p = dir.join("f.json");
    f.write(&p).unwrap();
    assert_eq!(Folds::read(&p, "S", &labels).unwrap(), f);
    let mut other = labels.clone();
    other[17] = (other[17] + 1) % 3;
    let e = Folds::read(&p, "S", &other).unwrap_err().to_string();
    assert!(e.contains("graph 17") && e.contains("f.json"), "{e}");
    let e = Folds::read(&p, "S", &labels[1..]).unwrap_err().to_string();
    assert!(e.contains("503 graphs"), "{e}");
    let mut broken = f.clone();
    let moved = broken.test[0][0];
    broken.test[1].push(moved);
    broken.write(&p).unwrap();
    let e = Folds::read(&p, "S", &labels).unwrap_err().to_string();
    assert!(e.contains(&format!("graph {moved} is in fold 0 and fold 1")), "{e}");
    broken.test[1].pop();
    broken.test[0].remove(0);
    broken.write(&p).unwrap();
    let e = Folds::read(&p, "S", &labels).unwrap_err().to_string();
    assert!(e.contains(&format!("graph {moved} is in no fold")), "{e}");
    std::fs::write(&p, "{\"format\": 3").unwrap();
    assert!(Folds::read(&p, "S", &labels).unwrap_err().to_string().contains("f.json:1"));
    assert!(Folds::stratified("S", &labels, 1, 0).is_err());
    assert!(Folds::stratified("S", &labels[..5], 10, 0).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn tu_reader_refuses_bad_inputs() {
    let dir = tmp_dir("bad");
    // (what, A, indicator, graph labels, node labels, file the error names, its line, a phrase)
    type Case<'a> = (&'a str, &'a str, &'a str, &'a str, Option<&'a str>, &'a str, usize, &'a str);
    let good_a = "1, 2\n2, 1\n3, 4\n4, 3\n";
    let cases: [Case; 11] = [
        ("decreasing", good_a, "1\n1\n2\n1\n", "0\n1\n", None, "graph_indicator", 4, "non-decreasing"),
        ("gap", good_a, "1\n1\n3\n3\n", "0\n1\n0\n", None, "graph_indicator", 3, "no nodes"),
        ("starts at 2", good_a, "2\n2\n3\n3\n", "0\n1\n", None, "graph_indicator", 1, "start at 1"),
        ("too few graph labels", good_a, "1\n1\n2\n2\n", "0\n", None, "graph_labels", 2, "1 graph labels for 2 graphs"),
        ("extra graph label", good_a, "1\n1\n2\n2\n", "0\n1\n1\n", None, "graph_labels", 3, "more graph labels"),
        ("non-integer graph label", good_a, "1\n1\n2\n2\n", "0\nyes\n", None, "graph_labels", 2, "integer"),
        ("non-integer node label", good_a, "1\n1\n2\n2\n", "0\n1\n", Some("1\n2\n1.5\n1\n"), "node_labels", 3, "integer"),
        ("missing node label", good_a, "1\n1\n2\n2\n", "0\n1\n", Some("1\n2\n1\n"), "node_labels", 4, "3 node labels for 4 nodes"),
        ("edge across graphs", "1, 2\n2, 3\n", "1\n1\n2\n2\n", "0\n1\n", None, "_A", 2, "joins graph 1 and graph 2"),
        ("node id out of range", "1, 2\n4, 5\n", "1\n1\n2\n2\n", "0\n1\n", None, "_A", 2, "out of range"),
        ("node id zero", "0, 1\n", "1\n1\n2\n2\n", "0\n1\n", None, "_A", 1, "out of range"),
    ];
    for (i, (what, a, ind, gl, nl, file, line, phrase)) in cases.iter().enumerate() {
        let name = format!("B{i}");
        std::fs::write(dir.join(format!("{name}_A.txt")), a).unwrap();
        std::fs::write(dir.join(format!("{name}_graph_indicator.txt")), ind).unwrap();
        std::fs::write(dir.join(format!("{name}_graph_labels.txt")), gl).unwrap();
        if let Some(nl) = nl {
            std::fs::write(dir.join(format!("{name}_node_labels.txt")), nl).unwrap();
        }
        let e = read_tu(&dir, &name).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(&format!("{name}_{}", file.trim_start_matches('_'))) || e.contains(&format!("{name}{file}")), "{what}: {e}");
        assert!(e.contains(&format!(".txt:{line}:")), "{what}: wanted line {line}: {e}");
        assert!(e.contains(phrase), "{what}: wanted '{phrase}': {e}");
    }
    // A missing file is named.
    let e = read_tu(&dir, "nothing").map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("nothing_graph_indicator"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn tu_sets_read_as_their_readme_says() {
    let dir = common::datasets_dir().join("tu");
    if !dir.join("MUTAG_A.txt.gz").exists() {
        println!("tu_sets_read_as_their_readme_says: skipped: no {}", dir.display());
        return;
    }
    // (name, graphs, nodes, entries as listed, class sizes, node-label categories)
    for (name, graphs, nodes, classes, width) in [("MUTAG", 188, 3371, [125, 63], Some(7)), ("IMDB-BINARY", 1000, 19773, [500, 500], None)]
    {
        let s = read_tu(&dir, name).unwrap();
        assert_eq!((s.graphs(), s.nodes()), (graphs, nodes), "{name}");
        let per: Vec<usize> = (0..2).map(|c| s.graph_labels.iter().filter(|&&l| l == c).count()).collect();
        let mut want = classes.to_vec();
        let mut got = per.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{name}");
        let set = GraphSet::new(s).unwrap();
        match width {
            Some(w) => assert_eq!(set.features.cols, w, "{name}"),
            // One-hot degree up to the largest (deduplicated) degree.
            None => assert_eq!(set.features.cols, (0..set.tu.nodes()).map(|r| set.tu.adjacency.row_len(r)).max().unwrap() + 1),
        }
        assert!(set.tu.adjacency.is_canonical() && set.tu.adjacency.values().iter().all(|&v| v == 1.0));
        assert!(set.features.data.chunks(set.features.cols).all(|r| r.iter().sum::<f32>() == 1.0), "{name}: one-hot rows");
    }
}

/// One training step of each model on a fresh backend from `backend` against the f64 CPU: loss, every parameter's gradient
/// and value after Adam, and the evaluation logits after the step, within `tol`.
///
/// A bias right before a BatchNorm (each hidden conv's, and the last conv's before the head's node
/// norm) has an exact gradient of zero: the norm removes every column's mean. The head's node-norm
/// weight nearly so at the first step: its bias starts at 0 and ReLU, the pooling and the graph
/// norm are scale-invariant per column, so only BatchNorm's eps leaves it a gradient (~1e-7 of
/// the model's). Such a gradient is rounding noise from cancelling sums (f64: ~1e-16, f32:
/// ~1e-8): measured against the model's largest gradient, not its own norm (the GPU's "rel.
/// error 1.81e8" for GIN's `convs.0.nn.lins.1.bias`; the f32 CPU gives 4.5e8 there). Adam's
/// first step moves each element by about lr times the sign of its gradient, so such elements
/// step by noise: their values after Adam are not compared, and they are set to the
/// reference's before the logits are (the evaluation BatchNorm's running statistics would
/// carry the noise's step into the logits: 4e-2 for GIN in f32).
fn step_matches_f64<B: Ops + 'static>(backend: impl Fn() -> B, what: &str, tol: f64) {
    let dir = tmp_dir(&format!("step-{what}"));
    write_random_set(&dir, "G", 40, 2, true, 9);
    let set = GraphSet::new(read_tu(&dir, "G").unwrap()).unwrap();
    let ids: Vec<u32> = (0..set.graphs() as u32).collect();
    let batch = GraphBatch::new(&set, &ids).unwrap();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    for model in ["gin", "gcn", "sage"] {
        let m = graph_model(&set, model, default_graph_pooling(model));
        let cpu = CpuBackend::<f64>::new();
        // A fresh backend per model, as the reference: dropout's masks follow its step count.
        let b = &backend();
        let hyper = AdamHyper { lr: 0.01, ..AdamHyper::default() };
        let mut a = GraphNet::new(&cpu, &batch, &m).unwrap();
        let mut s = cpu.stats().unwrap();
        a.step(&cpu, &hyper, &mut s).unwrap();
        let mut g = GraphNet::new(b, &batch, &m).unwrap();
        let mut sg = b.stats().unwrap();
        g.step(b, &hyper, &mut sg).unwrap();
        let (lc, lg) = (cpu.read_stats(&s).unwrap().loss, b.read_stats(&sg).unwrap().loss);
        assert!((lc - lg).abs() < 1e-4 * lc.abs().max(1.0), "{what} {model}: loss {lg}, {lc} on the f64 CPU");
        let (pa, pg) = (a.params(), g.params());
        assert_eq!(pa.len(), pg.len());
        let scale = pa.iter().map(|(_, x)| norm(&x.grad.data)).fold(0.0, f64::max);
        let mut worst = (0f64, 0f64);
        for ((name, x), (_, y)) in pa.into_iter().zip(pg) {
            let want = &x.grad.data;
            let got = b.download(&y.grad).unwrap();
            let diff = norm(&got.data.iter().zip(want).map(|(&u, &w)| u as f64 - w).collect::<Vec<_>>());
            let vanishes = norm(want) < 1e-4 * scale;
            // Whole-model gradients compound the kernels' rounding (as tests/it/nn_gpu.rs).
            let e = diff / if vanishes { scale } else { norm(want) };
            assert!(e < tol, "{what} {model}: gradient of {name} rel. error {e:.2e} (vanishing: {vanishes})");
            worst.0 = worst.0.max(e);
            // After Adam: the elements whose gradient is not within rounding of zero; the others
            // take the reference's values.
            let big = if vanishes { f64::INFINITY } else { want.iter().fold(0f64, |m, v| m.max(v.abs())) * 1e-2 };
            let keep: Vec<bool> = want.iter().map(|v| v.abs() >= big).collect();
            let mut value = b.download(&y.value).unwrap();
            let (gk, wk): (Vec<f32>, Vec<f64>) = (0..want.len()).filter(|&j| keep[j]).map(|j| (value.data[j], x.value.data[j])).unzip();
            let e = rel_error(&gk, &wk);
            assert!(e < tol, "{what} {model}: {name} after Adam rel. error {e:.2e}");
            worst.1 = worst.1.max(e);
            for j in (0..want.len()).filter(|&j| !keep[j]) {
                value.data[j] = x.value.data[j] as f32;
            }
            y.value = b.upload(&value).unwrap();
        }
        let (la, lg) = (a.forward(&cpu, false).unwrap().data.clone(), b.download(g.forward(b, false).unwrap()).unwrap());
        let e = rel_error(&lg.data, &la);
        assert!(e < tol, "{what} {model}: logits after the step rel. error {e:.2e}");
        println!("{what} {model}: gradients within {:.1e}, Adam {:.1e}, logits after the step {e:.1e} (bound {tol:.0e})", worst.0, worst.1);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The comparison itself on the f32 CPU: f32 rounding, no GPU; the vanishing gradients (biases
/// before BatchNorm) failed the GPU's comparison at 1.8e8 and fail a plain relative error here.
#[test]
fn f32_cpu_training_step_matches_f64() {
    step_matches_f64(CpuBackend::<f32>::new, "f32 cpu", 4.0 * Precision::F32.tolerance());
}

#[test]
fn gpu_training_step_matches_cpu() {
    let Some((gpu, _lock)) = common::gpu_serial_or_skip("gpu_training_step_matches_cpu") else { return };
    step_matches_f64(|| CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap(), "gpu", 4.0 * Precision::F32.tolerance());
}
