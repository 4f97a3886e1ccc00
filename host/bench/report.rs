//! Benchmark reports: JSON (everything, for later analysis), markdown (tables a person reads),
//! SVG (speedup chart). Written to `bench/results/<op>.{json,md,svg}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bench::Record;
use crate::error::{Error, Result};
use crate::gpu::GpuInfo;

#[derive(Serialize)]
pub struct Report {
    pub op: String,
    pub gpu: GpuInfo,
    pub date: String,
    pub commit: String,
    pub ptx_arch: String,
    pub copy_bandwidth_gbs: f64,
    pub warmup: usize,
    pub reps: usize,
    pub records: Vec<Record>,
    pub summary: Vec<SummaryRow>,
}

/// Geometric mean over graphs of one variant's speedup at one K.
#[derive(Serialize, Clone, Debug)]
pub struct SummaryRow {
    pub k: usize,
    pub variant: String,
    pub graphs: usize,
    /// Versus cuSPARSE f32, best algorithm.
    pub geomean_speedup_vs_cusparse: f64,
    /// Versus cuSPARSE f16, best algorithm, over the graphs where that was measured
    /// (`graphs_f16` of them); `None` when it was measured on none (SDDMM).
    pub geomean_speedup_vs_cusparse_f16: Option<f64>,
    pub graphs_f16: usize,
    pub geomean_floor_fraction: f64,
    pub max_rel_error: f64,
    pub failures: usize,
}

pub fn summarize(records: &[Record]) -> Vec<SummaryRow> {
    let mut groups: BTreeMap<(usize, String), Vec<&Record>> = BTreeMap::new();
    for r in records {
        groups.entry((r.k, r.variant_group().to_string())).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((k, variant), rs)| {
            let ok: Vec<&&Record> = rs.iter().filter(|r| r.speedup_vs_cusparse.is_some()).collect();
            let geo = |f: &dyn Fn(&Record) -> f64| {
                if ok.is_empty() { f64::NAN } else { (ok.iter().map(|r| f(r).ln()).sum::<f64>() / ok.len() as f64).exp() }
            };
            let f16: Vec<f64> = rs.iter().filter_map(|r| r.speedup_vs_cusparse_f16).collect();
            SummaryRow {
                k,
                variant,
                graphs: ok.len(),
                geomean_speedup_vs_cusparse: geo(&|r| r.speedup_vs_cusparse.unwrap()),
                geomean_speedup_vs_cusparse_f16: (!f16.is_empty())
                    .then(|| (f16.iter().map(|v| v.ln()).sum::<f64>() / f16.len() as f64).exp()),
                graphs_f16: f16.len(),
                geomean_floor_fraction: geo(&|r| r.floor_fraction.unwrap_or(f64::NAN)),
                max_rel_error: rs.iter().filter_map(|r| r.rel_error).fold(0.0, f64::max),
                failures: rs.len() - ok.len(),
            }
        })
        .collect()
}

pub fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string()
}

/// Write `<dir>/<op>.json`, `.md`, `.svg`; returns the paths.
pub fn write(report: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.into(), source: e })?;
    let base = dir.join(&report.op);
    let files = [
        (base.with_extension("json"), serde_json::to_string_pretty(report).expect("report serialises")),
        (base.with_extension("md"), markdown(report)),
        (base.with_extension("svg"), svg_speedups(report)),
    ];
    for (path, text) in &files {
        crate::util::atomic::write_atomic(path, text.as_bytes())?;
    }
    Ok(files.into_iter().map(|(p, _)| p).collect())
}

/// Distinct variant groups and graphs, in first-seen order (the order the suite ran them).
fn variants_and_graphs(recs: &[&Record]) -> (Vec<String>, Vec<String>) {
    let (mut variants, mut graphs): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for x in recs {
        if !variants.iter().any(|v| v == x.variant_group()) {
            variants.push(x.variant_group().to_string());
        }
        if !graphs.contains(&x.graph) {
            graphs.push(x.graph.clone());
        }
    }
    (variants, graphs)
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// Summary table, then one table per K: graphs as rows, variants as columns, "ms (speedup)".
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {} benchmark\n", r.op);
    let _ = writeln!(
        s,
        "{} ({} SMs, cc {}.{}), {}, commit {}, PTX {}; copy bandwidth {:.0} GB/s (read+write); median of {} after {} warm-up runs.\n",
        r.gpu.name,
        r.gpu.sm_count,
        r.gpu.compute_capability.0,
        r.gpu.compute_capability.1,
        r.date,
        r.commit,
        r.ptx_arch,
        r.copy_bandwidth_gbs,
        r.reps,
        r.warmup
    );
    // cuSPARSE f16 columns only where it was measured (SpMM), so SDDMM tables stay as they were.
    let has_f16 = r.records.iter().any(|x| x.speedup_vs_cusparse_f16.is_some());
    if has_f16 {
        let _ = writeln!(s, "## Geometric means over graphs (speedup vs cuSPARSE f32 and vs cuSPARSE f16, best algorithm each)\n");
        let _ = writeln!(s, "| K | variant | graphs | vs f32 | vs f16 | floor fraction | max rel. error | failures |");
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---:|---:|");
    } else {
        let _ = writeln!(s, "## Geometric means over graphs (speedup vs cuSPARSE f32, best algorithm)\n");
        let _ = writeln!(s, "| K | variant | graphs | speedup | floor fraction | max rel. error | failures |");
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---:|");
    }
    for row in &r.summary {
        let f16 = if has_f16 {
            format!(" {} |", row.geomean_speedup_vs_cusparse_f16.map_or("-".into(), |v| format!("{v:.2}x")))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2}x |{f16} {:.2} | {:.1e} | {} |",
            row.k, row.variant, row.graphs, row.geomean_speedup_vs_cusparse, row.geomean_floor_fraction, row.max_rel_error, row.failures
        );
    }
    let ks: Vec<usize> = {
        let mut v: Vec<usize> = r.records.iter().map(|x| x.k).collect();
        v.sort();
        v.dedup();
        v
    };
    for k in ks {
        let recs: Vec<&Record> = r.records.iter().filter(|x| x.k == k).collect();
        let (variants, graphs) = variants_and_graphs(&recs);
        let vs = if has_f16 { "speedup vs cuSPARSE f32 / vs cuSPARSE f16" } else { "speedup vs cuSPARSE f32" };
        let _ = writeln!(s, "\n## K = {k}: ms ({vs})\n");
        let _ = writeln!(s, "| graph | n | nnz | {} |", variants.join(" | "));
        let _ = writeln!(s, "|---|---:|---:|{}", "---:|".repeat(variants.len()));
        for g in &graphs {
            let first = recs.iter().find(|x| &x.graph == g).unwrap();
            let cells: Vec<String> = variants
                .iter()
                .map(|v| match recs.iter().find(|x| &x.graph == g && x.variant_group() == v) {
                    Some(x) if x.ms.is_some() && has_f16 => format!(
                        "{} ({}x / {}x)",
                        fmt_opt(x.ms, 4),
                        fmt_opt(x.speedup_vs_cusparse, 2),
                        fmt_opt(x.speedup_vs_cusparse_f16, 2)
                    ),
                    Some(x) if x.ms.is_some() => {
                        format!("{} ({}x)", fmt_opt(x.ms, 4), fmt_opt(x.speedup_vs_cusparse, 2))
                    }
                    Some(_) => "fail".into(),
                    None => "-".into(),
                })
                .collect();
            let _ = writeln!(s, "| {g} | {} | {} | {} |", first.n, first.nnz, cells.join(" | "));
        }
    }
    let failures: Vec<&Record> = r.records.iter().filter(|x| x.error.is_some()).collect();
    if !failures.is_empty() {
        let _ = writeln!(s, "\n## Variants that did not run\n");
        for x in failures.iter().take(50) {
            let _ = writeln!(s, "- {} K={} {}: {}", x.graph, x.k, x.variant, x.error.as_deref().unwrap_or(""));
        }
    }
    s
}

/// Grouped bar chart of speedup over cuSPARSE f32 per graph at the K with most records
/// (128 when present), one bar per non-cuSPARSE variant, log2 scale, a line at 1x.
pub fn svg_speedups(r: &Report) -> String {
    let k = if r.records.iter().any(|x| x.k == 128) { 128 } else { r.records.first().map_or(0, |x| x.k) };
    let recs: Vec<&Record> = r.records.iter().filter(|x| x.k == k && !x.variant.starts_with("cusparse f32")).collect();
    let (variants, graphs) = variants_and_graphs(&recs);
    let colors = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
    let (bar_w, gap, left, top, plot_h) = (6.0, 14.0, 60.0, 40.0, 320.0);
    let group_w = bar_w * variants.len() as f64 + gap;
    let width = left + group_w * graphs.len() as f64 + 180.0;
    let height = top + plot_h + 140.0;
    let (lo, hi) = (-3.0f64, 5.0f64); // log2 speedup range: 1/8x .. 32x
    let y_of = |v: f64| top + plot_h * (1.0 - (v.log2().clamp(lo, hi) - lo) / (hi - lo));
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="10">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="20" font-size="14">{} speedup over cuSPARSE f32 (best algorithm), K = {k}, {} — {}</text>"#,
        r.op, r.gpu.name, r.date
    );
    for e in (lo as i32)..=(hi as i32) {
        let v = 2f64.powi(e);
        let y = y_of(v);
        let stroke = if e == 0 { "#000" } else { "#ddd" };
        let _ = writeln!(s, r#"<line x1="{left}" x2="{:.0}" y1="{y:.1}" y2="{y:.1}" stroke="{stroke}"/>"#, width - 170.0);
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{:.1}" text-anchor="end">{}x</text>"#,
            left - 4.0,
            y + 3.0,
            if e >= 0 { format!("{}", v) } else { format!("1/{}", 1 << -e) }
        );
    }
    for (gi, g) in graphs.iter().enumerate() {
        let x0 = left + gi as f64 * group_w + gap / 2.0;
        for (vi, v) in variants.iter().enumerate() {
            if let Some(sp) = recs.iter().find(|x| &x.graph == g && x.variant_group() == v).and_then(|x| x.speedup_vs_cusparse) {
                let (y1, y0) = (y_of(sp), y_of(1.0));
                let (ya, yb) = if y1 < y0 { (y1, y0) } else { (y0, y1) };
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{ya:.1}" width="{bar_w}" height="{:.1}" fill="{}"><title>{g} {v}: {sp:.2}x</title></rect>"#,
                    x0 + vi as f64 * bar_w,
                    (yb - ya).max(0.5),
                    colors[vi % colors.len()]
                );
            }
        }
        let _ = writeln!(s, r#"<text transform="translate({:.1},{:.1}) rotate(60)">{g}</text>"#, x0 + 2.0, top + plot_h + 10.0);
    }
    for (vi, v) in variants.iter().enumerate() {
        let y = top + 14.0 * vi as f64;
        let x = width - 160.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.0}" y="{y:.0}" width="10" height="10" fill="{}"/><text x="{:.0}" y="{:.0}">{v}</text>"#,
            colors[vi % colors.len()],
            x + 14.0,
            y + 9.0
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(graph: &str, k: usize, variant: &str, ms: Option<f64>, speedup: Option<f64>) -> Record {
        Record {
            graph: graph.into(),
            n: 10,
            nnz: 20,
            k,
            variant: variant.into(),
            ms,
            gflops: ms.map(|_| 1.0),
            speedup_vs_cusparse: speedup,
            speedup_vs_cusparse_f16: None,
            floor_fraction: ms.map(|_| 0.5),
            rel_error: ms.map(|_| 1e-6),
            error: if ms.is_none() { Some("unsupported".into()) } else { None },
            setup_ms: None,
        }
    }

    fn report() -> Report {
        let records = vec![
            rec("g1", 128, "cusparse f32 (CsrAlg2)", Some(1.0), Some(1.0)),
            rec("g1", 128, "tc8 f16", Some(0.25), Some(4.0)),
            rec("g2", 128, "cusparse f32 (Default)", Some(2.0), Some(1.0)),
            rec("g2", 128, "tc8 f16", Some(2.0), Some(1.0)),
            rec("g2", 128, "tc16 f16", None, None),
        ];
        Report {
            op: "spmm".into(),
            gpu: GpuInfo {
                name: "Test GPU".into(),
                compute_capability: (9, 0),
                sm_count: 132,
                total_mem_bytes: 1,
                max_smem_per_block_optin: 1,
                l2_bytes: 1,
            },
            date: "2026-11-21".into(),
            commit: "abc".into(),
            ptx_arch: "sm_90".into(),
            copy_bandwidth_gbs: 3000.0,
            warmup: 5,
            reps: 20,
            summary: summarize(&records),
            records,
        }
    }

    #[test]
    fn summary_is_a_geometric_mean_grouped_across_cusparse_algorithms() {
        let r = report();
        let tc8 = r.summary.iter().find(|s| s.variant == "tc8 f16").unwrap();
        assert!((tc8.geomean_speedup_vs_cusparse - 2.0).abs() < 1e-12); // sqrt(4 * 1)
        let cs = r.summary.iter().find(|s| s.variant == "cusparse f32").unwrap();
        assert_eq!(cs.graphs, 2);
        let tc16 = r.summary.iter().find(|s| s.variant == "tc16 f16").unwrap();
        assert_eq!((tc16.graphs, tc16.failures), (0, 1));
    }

    #[test]
    fn f16_baseline_sits_next_to_f32_where_measured() {
        let mut r = report();
        assert!(r.summary.iter().all(|s| s.geomean_speedup_vs_cusparse_f16.is_none() && s.graphs_f16 == 0));
        assert!(!markdown(&r).contains("vs f16"));
        // g1: cuSPARSE f16 took 0.5 ms, g2: 1.0 ms; g2's tc16 failed.
        for (graph, base) in [("g1", 0.5), ("g2", 1.0)] {
            let rs: Vec<&mut Record> = r.records.iter_mut().filter(|x| x.graph == graph).collect();
            for x in rs {
                x.speedup_vs_cusparse_f16 = x.ms.map(|t| base / t);
            }
        }
        r.summary = summarize(&r.records);
        let tc8 = r.summary.iter().find(|s| s.variant == "tc8 f16").unwrap();
        // sqrt(2 * 0.5) = 1
        assert!((tc8.geomean_speedup_vs_cusparse_f16.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(tc8.graphs_f16, 2);
        let tc16 = r.summary.iter().find(|s| s.variant == "tc16 f16").unwrap();
        assert_eq!((tc16.geomean_speedup_vs_cusparse_f16, tc16.graphs_f16), (None, 0));
        let md = markdown(&r);
        assert!(md.contains("| vs f32 | vs f16 |"), "{md}");
        assert!(md.contains("| 128 | tc8 f16 | 2 | 2.00x | 1.00x |"), "{md}");
        assert!(md.contains("0.2500 (4.00x / 2.00x)"), "{md}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["records"][1]["speedup_vs_cusparse_f16"], 2.0);
        assert_eq!(json["records"][1]["speedup_vs_cusparse"], 4.0);
        assert_eq!(json["summary"][0]["graphs_f16"], 2);
    }

    #[test]
    fn markdown_and_svg_name_every_graph_and_variant() {
        let r = report();
        let md = markdown(&r);
        assert!(md.contains("| g1 |") && md.contains("| g2 |") && md.contains("tc8 f16") && md.contains("fail"));
        assert!(md.contains("Test GPU") && md.contains("2026-11-21"));
        let svg = svg_speedups(&r);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("g1 tc8 f16: 4.00x"));
    }
}
