//! Saving, resuming and predicting through the `tcgnn` binary on the CPU (runs in CI):
//! `train --save` then `predict` reproduces the reported test accuracy; a run checkpointed
//! part-way and resumed has exactly the loss curve of the uninterrupted run; Ctrl-C writes a
//! checkpoint and says how to resume; corrupt or mismatched model files are clear errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const GRAPH: &str = "sbm:1500:4:8";

/// The binary under test: cargo's, or `TCGNN_BIN` where the tests run away from the build
/// (the staged GPU machine).
fn bin() -> String {
    std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string())
}

fn tcgnn(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run tcgnn")
}

fn ok(out: &Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "tcgnn failed: {text}");
    text
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcgnn-persist-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The per-epoch losses and the test accuracy of a `--out DIR` report.
fn curve(dir: &Path) -> (Vec<f64>, f64) {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("train.json")).unwrap()).unwrap();
    let h = &v[0]["history"];
    let losses = h["epochs"].as_array().unwrap().iter().map(|e| e["loss"].as_f64().unwrap()).collect();
    (losses, h["test_acc"].as_f64().unwrap())
}

fn train_args<'a>(dir: &'a str, epochs: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["train", GRAPH, "--features", "16", "--classes", "4", "--device", "cpu", "--quiet", "--epochs", epochs, "--out", dir];
    a.extend_from_slice(extra);
    a
}

#[test]
fn save_then_predict_reproduces_the_test_accuracy() {
    let d = scratch("predict");
    let model = d.join("m.safetensors");
    let (out_dir, model_s) = (d.join("run").display().to_string(), model.display().to_string());
    // GIN with BatchNorm: the running statistics are saved with the weights.
    ok(&tcgnn(&train_args(&out_dir, "30", &["--save", &model_s, "--model", "gin", "--batch-norm"])));
    let (_, test_acc) = curve(Path::new(&out_dir));
    let csv = d.join("p.csv").display().to_string();
    let text = ok(&tcgnn(&["predict", &model_s, GRAPH, "--out", &csv, "--device", "cpu", "--probabilities"]));
    let line = text.lines().find(|l| l.contains("test accuracy")).expect("test accuracy printed");
    let pct: f64 = line.split_whitespace().nth(2).unwrap().trim_end_matches('%').parse().unwrap();
    assert!((pct - test_acc * 100.0).abs() < 0.006, "predict {pct}% vs train {}%", test_acc * 100.0);
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 1501, "header + one row per node");
    assert!(rows.lines().next().unwrap().starts_with("node,class,p0"));
    // Embeddings of the hidden layer as .npy.
    let npy = d.join("e.npy").display().to_string();
    ok(&tcgnn(&["predict", &model_s, GRAPH, "--out", &npy, "--device", "cpu", "--embeddings", "0"]));
    assert!(std::fs::metadata(&npy).unwrap().len() > 1500 * 16 * 4);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn resumed_run_has_the_uninterrupted_loss_curve() {
    let d = scratch("resume");
    let (full, part, ck) = (d.join("full"), d.join("part"), d.join("ck"));
    let (full_s, part_s, ck_s) = (full.display().to_string(), part.display().to_string(), ck.display().to_string());
    // Every model; SAGE with BatchNorm so its running statistics travel through the checkpoint.
    for model in [
        &["--model", "gcn"][..],
        &["--model", "agnn"],
        &["--model", "gat"],
        &["--model", "sage", "--batch-norm"],
        &["--model", "gin", "--variant"],
    ] {
        let with = |more: &[&'static str]| [model, more].concat();
        ok(&tcgnn(&train_args(&full_s, "24", &with(&[]))));
        // 10 epochs with a checkpoint every 5, then resume to 24.
        ok(&tcgnn(&train_args(&part_s, "10", &[model, &["--checkpoint", &ck_s, "--checkpoint-every", "5"]].concat())));
        ok(&tcgnn(&train_args(&part_s, "24", &[model, &["--resume", &ck_s]].concat())));
        let (a, acc_a) = curve(&full);
        let (b, acc_b) = curve(&part);
        assert_eq!(a.len(), 24);
        assert_eq!(a, b, "{model:?}: resumed loss curve differs");
        assert_eq!(acc_a, acc_b);
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn ctrl_c_checkpoints_and_says_how_to_resume() {
    let d = scratch("sigint");
    let ck = d.join("ck").display().to_string();
    let out_dir = d.join("run").display().to_string();
    let mut child = Command::new(bin())
        .args(train_args(&out_dir, "100000", &["--checkpoint", &ck, "--checkpoint-every", "100000"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SIGINT as a terminal's Ctrl-C sends it.
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let t0 = Instant::now();
    let out = loop {
        if let Some(_status) = child.try_wait().unwrap() {
            break child.wait_with_output().unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "Ctrl-C did not stop training");
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(text.contains("--resume"), "no resume hint: {text}");
    assert!(Path::new(&ck).join("checkpoint.safetensors").is_file());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bad_model_files_are_clear_errors() {
    let d = scratch("bad");
    let model = d.join("m.safetensors");
    let model_s = model.display().to_string();
    ok(&tcgnn(&train_args(&d.join("run").display().to_string(), "3", &["--save", &model_s])));
    let out_s = d.join("p.csv").display().to_string();
    // A graph whose node data has another feature width than the model's.
    let other = d.join("other.mtx").display().to_string();
    ok(&tcgnn(&["gen", "sbm", "--n", "300", "--classes", "4", "--features", "8", "-o", &other]));
    let e = tcgnn(&["predict", &model_s, &other, "--out", &out_s, "--device", "cpu"]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success() && err.contains("16 input features") && err.contains("has 8"), "{err}");
    // A truncated and a garbage file.
    let bytes = std::fs::read(&model).unwrap();
    for (name, content) in [("trunc", bytes[..bytes.len() / 2].to_vec()), ("garbage", b"not a model at all".to_vec()), ("empty", vec![])] {
        let p = d.join(format!("{name}.safetensors"));
        std::fs::write(&p, content).unwrap();
        let e = tcgnn(&["predict", &p.display().to_string(), GRAPH, "--out", &out_s, "--device", "cpu"]);
        let err = String::from_utf8_lossy(&e.stderr);
        assert!(!e.status.success() && e.status.code() == Some(1), "{name}: {err}");
        assert!(err.contains(&p.display().to_string()), "{name}: error does not name the file: {err}");
    }
    assert!(!Path::new(&out_s).exists(), "no output left by failed predictions");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn sampled_runs_save_predict_and_resume() {
    // Mini-batch training keeps the full-graph model's persistence: predict reproduces the test
    // accuracy, and a resumed run draws the same batches (a function of seed, epoch, index).
    let d = scratch("sampled");
    let (full, part, ck) = (d.join("full"), d.join("part"), d.join("ck"));
    let (full_s, part_s, ck_s) = (full.display().to_string(), part.display().to_string(), ck.display().to_string());
    let model = d.join("m.safetensors").display().to_string();
    for sampler in [
        &["--sampler", "saint-rw", "--batch-size", "200", "--model", "sage", "--batch-norm"][..],
        &["--sampler", "neighbor", "--batch-size", "128", "--fanout", "5,5"],
    ] {
        ok(&tcgnn(&train_args(&full_s, "12", &[sampler, &["--save", &model]].concat())));
        let (a, acc_a) = curve(&full);
        let text = ok(&tcgnn(&["predict", &model, GRAPH, "--device", "cpu", "--out", &d.join("p.csv").display().to_string()]));
        let line = text.lines().find(|l| l.contains("test accuracy")).expect("test accuracy printed");
        let pct: f64 = line.split_whitespace().nth(2).unwrap().trim_end_matches('%').parse().unwrap();
        assert!((pct - acc_a * 100.0).abs() < 0.006, "{sampler:?}: predict {pct}% vs train {}%", acc_a * 100.0);
        ok(&tcgnn(&train_args(&part_s, "5", &[sampler, &["--checkpoint", &ck_s, "--checkpoint-every", "5"]].concat())));
        ok(&tcgnn(&train_args(&part_s, "12", &[sampler, &["--resume", &ck_s]].concat())));
        let (b, acc_b) = curve(&part);
        assert_eq!(a, b, "{sampler:?}: resumed loss curve differs");
        assert_eq!(acc_a, acc_b);
        assert!(acc_a > 0.8, "{sampler:?}: test accuracy {acc_a}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}
