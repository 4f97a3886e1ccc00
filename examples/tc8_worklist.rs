//! TC8 f16 SpMM (shared-memory pipeline, the default at K = 128) timed with different work
//! lists on the same graph, in a random relabelling and after a reordering, against cuSPARSE
//! f32 in the same process: what `host/format/worklist.rs` models, measured.
//!
//! `cargo run --release --example tc8_worklist -- [--k 128] [--reorder rcm] GRAPH...`
//! (datasets from $TCGNN_DATASETS). Needs a GPU.

use std::sync::Arc;

use tcgnn::bench::spmm::{SpmmBenchOptions, bench_spmm};
use tcgnn::error::Result;
use tcgnn::format::worklist::{
    DeviceModel, ItemOrder, WorkListBuilder, balanced_work_list, launcher_work_list, modelled_time, tc8_work_list,
};
use tcgnn::gpu::timing::time_gpu;
use tcgnn::gpu::{DeviceMatrix, Gpu};
use tcgnn::graph::reorder::{Reorder, reorder};
use tcgnn::graph::{Permutation, source};
use tcgnn::ops::spmm::cpu::spmm_reference_f64;
use tcgnn::ops::spmm::spmm_device;
use tcgnn::ops::spmm::tc8::{Tc8Config, Tc8Grid, Tc8Source, spmm_tc8_with};
use tcgnn::ops::{FeaturesRef, GraphHandle, Impl};
use tcgnn::tensor::{Matrix, rel_error};

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut k = 128usize;
    let mut how = Reorder::Rcm;
    let mut reps = 50usize;
    while let Some(i) = args.iter().position(|a| a.starts_with("--")) {
        let v = args.remove(i + 1);
        match args.remove(i).as_str() {
            "--k" => k = v.parse().expect("--k N"),
            "--reorder" => how = v.parse()?,
            "--reps" => reps = v.parse().expect("--reps N"),
            o => panic!("unknown option {o}"),
        }
    }
    let gpu: Arc<Gpu> = Gpu::probe()?;
    let model = DeviceModel::new(gpu.info().sm_count);
    // The shared pipeline's f16 K slice is 64 dims (NT = 4) of the padded width.
    let k_slices = tcgnn::gpu::memory::padded_ld(k).div_ceil(64) as u32;
    println!("{}  K = {k}  k_slices = {k_slices}  (times in us; speedup = cuSPARSE f32 best / time)", gpu.info().name);
    println!(
        "{:<14} {:<8} {:<10} {:>6} {:>6} {:>6} {:>9} {:>8} {:>8} {:>8}",
        "graph", "order", "list", "items", "split", "cap", "model", "us", "speedup", "err"
    );
    for name in &args {
        let g0 = source::with_random_values(source::load(name)?, 0xbeef);
        let g0 = Permutation::random(g0.n_rows(), 1).apply_to_csr(&g0)?;
        for (order, csr) in [
            ("relabel", g0.clone()),
            (if how == Reorder::Identity { "identity" } else { "reordered" }, reorder(&g0, how)?.apply_to_csr(&g0)?),
        ] {
            let g = GraphHandle::new(csr, Some(gpu.clone()));
            let opt = SpmmBenchOptions { warmup: 5, reps, copy_gbs: 1.0, only: vec![Impl::Cusparse], tc8_sources: false, hybrid_t: vec![] };
            let base = bench_spmm(&gpu, name, &g, k, &opt)?
                .iter()
                .find(|r| r.variant.starts_with("cusparse f32"))
                .and_then(|r| r.ms)
                .unwrap_or(f64::NAN);
            let xh = Matrix::random(g.csr().n_cols(), k, 0x5eed);
            let vals: Vec<f32> = g.csr().values().iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
            let reference = spmm_reference_f64(&g.csr().clone().with_values(vals)?, &xh.rounded_f16());
            let x = DeviceMatrix::<half::f16>::upload(&gpu, &xh)?;
            let mut y = DeviceMatrix::<f32>::zeros(&gpu, g.csr().n_rows(), k)?;
            let m = g.mebcrs(8)?;
            let bpw: Vec<u32> = (0..m.n_windows()).map(|w| m.blocks_of(w) as u32).collect();
            let row = |list: &str, items: usize, split: usize, cap: u32, model_t: f64, ms: f64, err: f64| {
                println!(
                    "{:<14} {:<8} {:<10} {:>6} {:>6} {:>6} {:>9.0} {:>8.1} {:>8.2} {:>8.1e}",
                    source::display_name(name),
                    order,
                    list,
                    items,
                    split,
                    cap,
                    model_t,
                    ms * 1e3,
                    base / ms,
                    err
                );
            };
            row("cusparse", 0, 0, 0, f64::NAN, base, 0.0);
            // The library launcher itself.
            y.poison()?;
            spmm_device(&g, FeaturesRef::F16(&x), &mut y, Impl::Tc8)?;
            let err = rel_error(&y.download()?.data, &reference);
            let t = time_gpu(&gpu, 5, reps, || spmm_device(&g, FeaturesRef::F16(&x), &mut y, Impl::Tc8))?.median_ms;
            row("ops::spmm", 0, 0, 0, f64::NAN, t, err);
            let cap = launcher_work_list(&bpw, k_slices, model.sm_count).1;
            let bcap = balanced_work_list(&bpw, k_slices, &model).1;
            let cut = |cap, order| WorkListBuilder::Cut { cap, order };
            let lists = [
                ("launcher", WorkListBuilder::Launcher, cap),
                ("heavy1st", cut(cap, ItemOrder::HeavyFirst), cap),
                ("nosplit", cut(u32::MAX, ItemOrder::Window), u32::MAX),
                ("nosplit-h1", cut(u32::MAX, ItemOrder::HeavyFirst), u32::MAX),
                ("balanced", WorkListBuilder::Balanced, bcap),
            ];
            for (list, work_list, cap) in lists {
                // The library's launch with this list (cp.async source, a warp per item).
                let config = Tc8Config { source: Tc8Source::CpAsync, grid: Tc8Grid::PerItem, work_list };
                let wl = tc8_work_list(&bpw, k_slices, model.sm_count, work_list);
                y.poison()?;
                spmm_tc8_with(&g, FeaturesRef::F16(&x), &mut y, config)?;
                let err = rel_error(&y.download()?.data, &reference);
                let t = time_gpu(&gpu, 5, reps, || spmm_tc8_with(&g, FeaturesRef::F16(&x), &mut y, config))?.median_ms;
                row(list, wl.item_win.len(), wl.split_windows.len(), cap, modelled_time(&wl, k_slices, &model), t, err);
            }
        }
    }
    Ok(())
}
