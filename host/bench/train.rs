//! Training reports: a run's curve (SVG), its JSON, and the `bench train` table against PyTorch
//! Geometric measured on the same GPU and graphs (`bench/pyg/train.py`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::task::node::train::{EpochRecord, History, PhaseTimes};

/// One training run as `tcgnn train` reports it.
#[derive(Serialize, Clone, Debug)]
pub struct TrainRun {
    pub graph: String,
    pub n: usize,
    pub nnz: usize,
    pub features: usize,
    pub classes: usize,
    pub synthetic_labels: bool,
    pub model: crate::nn::ModelConfig,
    pub train: crate::task::node::TrainConfig,
    pub backend: String,
    pub precision: String,
    pub seed: u64,
    pub setup_ms: f64,
    pub history: History,
    pub phases: Option<PhaseTimes>,
    /// Where the setup went and the memory the run held at its peak.
    pub resources: Resources,
}

/// Setup split and peak memory of a training run (issue 15): `read_s` reads or generates the
/// data; `translate_s` and `upload_s` are the GPU's setup clock (`gpu::setup_clock`: graph
/// formats built, host data copied to the device); `other_s` the rest of building the model
/// (normalisation, allocations). Peaks: the process's resident set (VmHWM, as getrusage's
/// ru_maxrss) and the device memory in use, sampled after setup and after every epoch
/// (`total - free`: other processes on the GPU count too). The data itself: `data_bytes`.
#[derive(Serialize, Clone, Copy, Debug, Default)]
pub struct Resources {
    pub read_s: f64,
    pub translate_s: f64,
    pub upload_s: f64,
    pub other_s: f64,
    pub upload_bytes: u64,
    /// Features, graph (CSR), labels and masks as held on the host.
    pub data_bytes: u64,
    pub peak_host_bytes: Option<u64>,
    pub peak_device_bytes: Option<u64>,
}

impl Resources {
    /// The summary line `tcgnn train` prints.
    pub fn summary(&self) -> String {
        let gb = |b: Option<u64>| b.map_or("n/a".to_string(), |b| format!("{:.2} GB", b as f64 / 1e9));
        format!(
            "setup: read {:.2} s, translate {:.2} s, upload {:.2} s ({:.2} GB), other {:.2} s; peak memory: host {} (data {}), GPU {}",
            self.read_s,
            self.translate_s,
            self.upload_s,
            self.upload_bytes as f64 / 1e9,
            self.other_s,
            gb(self.peak_host_bytes),
            gb(Some(self.data_bytes)),
            gb(self.peak_device_bytes)
        )
    }
}

/// A loss / accuracy curve per epoch: loss on the left axis, accuracies (0..1) on the right.
pub fn curve_svg(title: &str, epochs: &[EpochRecord]) -> String {
    let (w, h, m) = (720.0, 360.0, 50.0);
    let n = epochs.len().max(2) as f64;
    let max_loss = epochs.iter().map(|e| e.loss).fold(1e-9, f64::max);
    let x = |i: f64| m + (w - 2.0 * m) * (i - 1.0) / (n - 1.0);
    let y = |v: f64| h - m - (h - 2.0 * m) * v;
    let mut s = String::new();
    let _ = writeln!(s, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#);
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/><text x="{m}" y="20" font-size="14">{title}</text>"#);
    let _ = writeln!(s, r#"<line x1="{m}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#, h - m, w - m, h - m);
    let _ = writeln!(s, r#"<line x1="{m}" y1="{m}" x2="{m}" y2="{}" stroke="black"/>"#, h - m);
    let _ = writeln!(s, r#"<text x="{}" y="{}">epoch</text>"#, w / 2.0, h - 15.0);
    for t in 0..=4 {
        let e = 1.0 + (n - 1.0) * t as f64 / 4.0;
        let _ = writeln!(s, r#"<text x="{:.1}" y="{}" text-anchor="middle">{:.0}</text>"#, x(e), h - m + 15.0, e);
    }
    for t in 0..=4 {
        let v = t as f64 / 4.0;
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">{:.2}</text>"#, m - 5.0, y(v) + 4.0, v * max_loss);
        let _ = writeln!(s, r#"<text x="{}" y="{}">{:.0}%</text>"#, w - m + 5.0, y(v) + 4.0, v * 100.0);
        let _ = writeln!(s, r##"<line x1="{m}" y1="{0}" x2="{1}" y2="{0}" stroke="#ddd"/>"##, y(v), w - m);
    }
    type Series<'a> = (&'a str, &'a str, Box<dyn Fn(&EpochRecord) -> f64>);
    let series: [Series; 4] = [
        ("loss", "#d62728", Box::new(move |e: &EpochRecord| e.loss / max_loss)),
        ("train acc", "#2ca02c", Box::new(|e: &EpochRecord| e.train_acc)),
        ("val acc", "#1f77b4", Box::new(|e: &EpochRecord| e.val_acc)),
        ("test acc", "#ff7f0e", Box::new(|e: &EpochRecord| e.test_acc)),
    ];
    for (i, (name, color, f)) in series.iter().enumerate() {
        let pts: Vec<String> = epochs.iter().map(|e| format!("{:.1},{:.1}", x(e.epoch as f64), y(f(e)))).collect();
        let _ = writeln!(s, r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#, pts.join(" "));
        let _ = writeln!(s, r#"<text x="{}" y="{}" fill="{color}">{name}</text>"#, m + 10.0 + 90.0 * i as f64, m - 8.0);
    }
    s.push_str("</svg>\n");
    s
}

/// Writes `value` as pretty JSON to `path`, creating the folder.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<PathBuf> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.into(), source: e })?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::Unsupported(format!("JSON: {e}")))?;
    crate::util::atomic::write_atomic(path, text.as_bytes())?;
    Ok(path.to_path_buf())
}

pub fn write_text(path: &Path, text: &str) -> Result<PathBuf> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.into(), source: e })?;
    }
    crate::util::atomic::write_atomic(path, text.as_bytes())?;
    Ok(path.to_path_buf())
}

/// Mean and sample standard deviation.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64 } else { 0.0 };
    (mean, var.sqrt())
}
