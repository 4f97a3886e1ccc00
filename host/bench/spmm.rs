//! SpMM benchmark of one graph at one K: every implementation, cuSPARSE best-of-algorithms.

use std::sync::Arc;

use crate::bench::floor::spmm_bytes;
use crate::bench::{Problem, Record};
use crate::error::Result;
use crate::gpu::cusparse::{self, DataType, Layout, SparseMatrix, SpmmAlg, SpmmPlan};
use crate::gpu::memory::padded_ld;
use crate::gpu::timing::time_gpu;
use crate::gpu::{DeviceMatrix, Gpu};
use crate::ops::spmm::cpu::spmm_reference_f64;
use crate::ops::spmm::{hybrid, spmm_device};
use crate::ops::{DeviceFeatures, GraphHandle, Impl, Precision};
use crate::tensor::{Matrix, rel_error};

/// The variants a run covers, as (implementation, precision).
pub const SPMM_VARIANTS: [(Impl, Precision); 11] = [
    (Impl::Csr, Precision::F32),
    (Impl::Csr, Precision::F16),
    (Impl::Hp, Precision::F32),
    (Impl::Tc16, Precision::Tf32),
    (Impl::Tc16, Precision::F16),
    (Impl::Tc8, Precision::Tf32),
    (Impl::Tc8, Precision::F16),
    (Impl::Hybrid, Precision::Tf32),
    (Impl::Hybrid, Precision::F16),
    (Impl::Auto, Precision::Tf32),
    (Impl::Auto, Precision::F16),
];

pub struct SpmmBenchOptions {
    pub warmup: usize,
    pub reps: usize,
    pub copy_gbs: f64,
    /// Restrict to these implementations (empty = all).
    pub only: Vec<Impl>,
    /// Also time every TC8 gather source this device runs, and TC8 with f16 output.
    pub tc8_sources: bool,
    /// Hybrid thresholds to run instead of the cost model's choice (one variant "hybrid t=T"
    /// each; empty = the cost model's t, variant "hybrid").
    pub hybrid_t: Vec<usize>,
}

/// Bytes of an edge value and of a feature a variant reads (its floor's): the CSR kernel reads
/// f32 values beside f16 features.
pub fn value_feature_bytes(imp: Impl, prec: Precision) -> (usize, usize) {
    match (imp, prec) {
        (Impl::Csr, Precision::F16) => (4, 2),
        (_, Precision::F16) => (2, 2),
        _ => (4, 4),
    }
}

fn label(imp: Impl, prec: Precision) -> String {
    format!("{} {}", format!("{imp:?}").to_lowercase(), format!("{prec:?}").to_lowercase())
}

/// "hybrid f16 (t=2, CC 84%)": the cost model's t (`t = None`) or "hybrid t=2 f16 (CC 84%)" for a
/// requested one, with the share of nonzeros on the CUDA cores.
pub fn hybrid_label(prec: Precision, t: Option<usize>, split: Option<crate::format::hybrid::HybridSplit>) -> String {
    let p = format!("{prec:?}").to_lowercase();
    let cc = |s: &crate::format::hybrid::HybridSplit| format!("CC {:.0}%", 100.0 * s.cc_nnz_fraction());
    match (t, split) {
        (None, Some(s)) => format!("hybrid {p} (t={}, {})", s.t, cc(&s)),
        (None, None) => format!("hybrid {p}"),
        (Some(t), Some(s)) => format!("hybrid t={t} {p} ({})", cc(&s)),
        (Some(t), None) => format!("hybrid t={t} {p}"),
    }
}

/// Benchmark every variant on `g` at feature width `k`. Never fails on a variant: its error is
/// recorded and the run goes on.
pub fn bench_spmm(gpu: &Arc<Gpu>, name: &str, g: &GraphHandle, k: usize, opt: &SpmmBenchOptions) -> Result<Vec<Record>> {
    let csr = g.csr();
    let (n, nnz) = (csr.n_rows(), csr.nnz());
    let x = Matrix::random(csr.n_cols(), k, 0x5eed ^ k as u64);
    let reference = spmm_reference_f64(csr, &x);
    // f16 kernels see rounded inputs; measure their error against the rounded problem.
    let reference_f16 = {
        let vals: Vec<f32> = csr.values().iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
        spmm_reference_f64(&csr.clone().with_values(vals)?, &x.rounded_f16())
    };
    let x32 = DeviceFeatures::upload(gpu, &x, Precision::F32)?;
    let x16 = DeviceFeatures::upload(gpu, &x, Precision::F16)?;
    let mut y = DeviceMatrix::<f32>::zeros(gpu, n, k)?;
    let mut out = Vec::new();
    let problem = Problem { graph: name, n, nnz, k, copy_gbs: opt.copy_gbs };
    // Floor bytes for (value bytes, feature bytes).
    let floor = |(vb, fb): (usize, usize)| spmm_bytes(n, csr.n_cols(), nnz, k, vb, fb);
    let record = |variant: String, outcome: Result<(f64, f64), String>, fb| Record::new(&problem, variant, outcome, floor(fb));

    // cuSPARSE: every CSR algorithm, f32 and f16; the best f32 time is the baseline.
    let mut cusparse_best_f32: Option<f64> = None;
    let mut cusparse_best_f16: Option<f64> = None;
    if opt.only.is_empty() || opt.only.contains(&Impl::Cusparse) {
        match cusparse::Handle::new(gpu) {
            Err(e) => out.push(record("cusparse f32".into(), Err(e.to_string()), (4, 4))),
            Ok(handle) => {
                let handle = Arc::new(handle);
                for (dtype, prec) in [(DataType::F32, Precision::F32), (DataType::F16, Precision::F16)] {
                    let (reference, fb) = match dtype {
                        DataType::F32 => (&reference, (4, 4)),
                        DataType::F16 => (&reference_f16, (2, 2)),
                    };
                    let a_csr = Arc::new(SparseMatrix::upload(gpu, csr, Layout::Csr, dtype)?);
                    let a_coo = Arc::new(SparseMatrix::upload(gpu, csr, Layout::Coo, dtype)?);
                    let mut best: Option<(f64, f64, SpmmAlg)> = None;
                    let mut last_err = None;
                    for alg in SpmmAlg::ALL {
                        let a = if alg.layout() == Layout::Coo { &a_coo } else { &a_csr };
                        let res = match dtype {
                            DataType::F32 => time_cusparse::<f32>(&handle, a, &x, dtype, &mut y, alg, opt),
                            DataType::F16 => time_cusparse::<half::f16>(&handle, a, &x, dtype, &mut y, alg, opt),
                        }
                        .and_then(|ms| Ok((ms, rel_error(&y.download()?.data, reference))));
                        match res {
                            Ok((ms, err)) if best.is_none_or(|b| ms < b.0) => best = Some((ms, err, alg)),
                            Ok(_) => {}
                            Err(e) => last_err = Some(e.to_string()),
                        }
                    }
                    let lab = format!("cusparse {}", format!("{prec:?}").to_lowercase());
                    match best {
                        Some((ms, err, alg)) => {
                            match dtype {
                                DataType::F32 => cusparse_best_f32 = Some(ms),
                                DataType::F16 => cusparse_best_f16 = Some(ms),
                            }
                            out.push(record(format!("{lab} ({alg:?})"), Ok((ms, err)), fb));
                        }
                        None => out.push(record(lab, Err(last_err.unwrap_or_default()), fb)),
                    }
                }
            }
        }
    }

    for (imp, prec) in SPMM_VARIANTS {
        if !opt.only.is_empty() && !opt.only.contains(&imp) {
            continue;
        }
        let (x, reference) = match prec {
            Precision::F16 => (&x16, &reference_f16),
            _ => (&x32, &reference),
        };
        let fb = value_feature_bytes(imp, prec);
        let mut measure = |run: &dyn Fn(&mut DeviceMatrix<f32>) -> Result<()>| -> Result<(f64, f64)> {
            y.poison()?;
            run(&mut y)?; // first call: translation + upload, outside timing
            let err = rel_error(&y.download()?.data, reference);
            let t = time_gpu(gpu, opt.warmup, opt.reps, || run(&mut y))?;
            Ok((t.median_ms, err))
        };
        if imp == Impl::Hybrid {
            // The cost model's t, or each requested one; the split goes into the label's note.
            let f16 = prec == Precision::F16;
            let ts: Vec<Option<usize>> = if opt.hybrid_t.is_empty() { vec![None] } else { opt.hybrid_t.iter().map(|&t| Some(t)).collect() };
            for t in ts {
                let res = measure(&|y: &mut DeviceMatrix<f32>| hybrid::spmm_hybrid(g, x.view(), y, t).map(|_| ()));
                let lab = hybrid_label(prec, t, hybrid::threshold(g, f16, padded_ld(k), t).ok());
                out.push(record(lab, res.map_err(|e| e.to_string()), fb));
            }
            continue;
        }
        let res = measure(&|y: &mut DeviceMatrix<f32>| spmm_device(g, x, y, imp));
        out.push(record(label(imp, prec), res.map_err(|e| e.to_string()), fb));
    }
    // TC8 f16 writing f16 Y (for a next layer that reads f16). cuSPARSE's f16 row above writes
    // f32 Y, so this row's ratio to it includes the smaller output.
    if (opt.only.is_empty() || opt.only.contains(&Impl::Tc8)) && n > 0 {
        let res = (|| -> Result<(f64, f64)> {
            let mut y16 = DeviceMatrix::<half::f16>::zeros(gpu, n, k)?;
            y16.poison()?;
            crate::ops::spmm::tc8::spmm_tc8_with(g, x16.view(), &mut y16, crate::ops::spmm::tc8::Tc8Source::Auto)?;
            let err = rel_error(&y16.download()?.data, &reference_f16);
            let t = time_gpu(gpu, opt.warmup, opt.reps, || {
                crate::ops::spmm::tc8::spmm_tc8_with(g, x16.view(), &mut y16, crate::ops::spmm::tc8::Tc8Source::Auto)
            })?;
            Ok((t.median_ms, err))
        })();
        out.push(record("tc8 f16 f16-out".into(), res.map_err(|e| e.to_string()), (2, 2)));
    }
    // TC8 with X in e4m3 (row-scaled) on sm_89+: its error is against the f32 problem.
    if (opt.only.is_empty() || opt.only.contains(&Impl::Tc8)) && n > 0 && gpu.info().compute_capability >= (8, 9) {
        use crate::ops::spmm::tc8::{E4m3Features, Tc8Source, spmm_tc8_e4m3};
        let res = (|| -> Result<(f64, f64)> {
            let xf = DeviceMatrix::<f32>::upload(gpu, &x)?;
            let mut x8 = E4m3Features::zeros(gpu, x.rows, x.cols)?;
            x8.quantize(&xf)?;
            y.poison()?;
            spmm_tc8_e4m3(g, &x8, &mut y, Tc8Source::Auto)?;
            let err = rel_error(&y.download()?.data, &reference);
            let t = time_gpu(gpu, opt.warmup, opt.reps, || spmm_tc8_e4m3(g, &x8, &mut y, Tc8Source::Auto))?;
            Ok((t.median_ms, err))
        })();
        out.push(record("tc8 e4m3".into(), res.map_err(|e| e.to_string()), (2, 1)));
    }
    if opt.tc8_sources {
        for (variant, outcome, fb) in bench_tc8_sources(gpu, g, (&x32, &x16), (&reference, &reference_f16), &mut y, opt)? {
            out.push(record(variant, outcome, fb));
        }
    }
    Record::set_speedups(&mut out, cusparse_best_f32);
    Record::set_speedups_f16(&mut out, cusparse_best_f16);
    Ok(out)
}

/// TC8 with every gather source (`tc8 f16 [CpAsync]`), and with f16 output
/// (`tc8 f16 [CpAsync] f16-out`: its floor still counts a 4-byte output).
fn bench_tc8_sources(
    gpu: &Arc<Gpu>,
    g: &GraphHandle,
    (x32, x16): (&DeviceFeatures, &DeviceFeatures),
    (reference, reference_f16): (&[f64], &[f64]),
    y: &mut DeviceMatrix<f32>,
    opt: &SpmmBenchOptions,
) -> Result<Vec<SourceRow>> {
    let mut rows = Vec::new();
    let mut push = |variant: String, outcome: Result<(f64, f64)>, fb| rows.push((variant, outcome.map_err(|e| e.to_string()), fb));
    use crate::format::worklist::WorkListBuilder;
    use crate::ops::spmm::tc8::{Tc8Config, Tc8Grid, Tc8Source, spmm_tc8_with};
    let mut y16 = DeviceMatrix::<half::f16>::zeros(gpu, y.rows, y.cols)?;
    for prec in [Precision::Tf32, Precision::F16] {
        let f16 = prec == Precision::F16;
        let (x, reference, fb) = if f16 { (x16, reference_f16, (2, 2)) } else { (x32, reference, (4, 4)) };
        let mut configs = Vec::new();
        for source in Tc8Source::all(gpu) {
            for grid in [Tc8Grid::PerItem, Tc8Grid::Persistent] {
                configs.push(Tc8Config { source, grid, work_list: WorkListBuilder::Launcher });
                if source == Tc8Source::CpAsync {
                    configs.push(Tc8Config { source, grid, work_list: WorkListBuilder::Balanced });
                }
            }
        }
        for config in configs {
            {
                let Tc8Config { source, grid, work_list } = config;
                let name = format!(
                    "{source:?}{}{}",
                    if grid == Tc8Grid::Persistent { ", persistent" } else { "" },
                    if work_list == WorkListBuilder::Balanced { ", balanced" } else { "" }
                );
                let res = (|| -> Result<(f64, f64)> {
                    y.poison()?;
                    spmm_tc8_with(g, x.view(), &mut *y, config)?;
                    let err = rel_error(&y.download()?.data, reference);
                    let t = time_gpu(gpu, opt.warmup, opt.reps, || spmm_tc8_with(g, x.view(), &mut *y, config))?;
                    Ok((t.median_ms, err))
                })();
                push(format!("tc8 {} [{name}]", format!("{prec:?}").to_lowercase()), res, fb);
                if f16 {
                    let res = (|| -> Result<(f64, f64)> {
                        y16.poison()?;
                        spmm_tc8_with(g, x.view(), &mut y16, config)?;
                        let err = rel_error(&y16.download()?.data, reference);
                        let t = time_gpu(gpu, opt.warmup, opt.reps, || spmm_tc8_with(g, x.view(), &mut y16, config))?;
                        Ok((t.median_ms, err))
                    })();
                    push(format!("tc8 f16 [{name}] f16-out"), res, fb);
                }
            }
        }
    }
    Ok(rows)
}

/// A benchmark row before it becomes a [`Record`]: variant, (ms, relative error) or the error,
/// (value bytes, feature bytes) for its floor.
type SourceRow = (String, std::result::Result<(f64, f64), String>, (usize, usize));

/// Median time of cuSPARSE SpMM with algorithm `alg`: plan (descriptors, workspace,
/// preprocessing) built outside the timed loop.
fn time_cusparse<T: crate::gpu::memory::Element>(
    handle: &Arc<cusparse::Handle>,
    a: &Arc<SparseMatrix>,
    x: &Matrix,
    dtype: DataType,
    y: &mut DeviceMatrix<f32>,
    alg: SpmmAlg,
    opt: &SpmmBenchOptions,
) -> Result<f64> {
    let gpu = handle.gpu();
    let xm = DeviceMatrix::<T>::upload(gpu, x)?;
    y.poison()?;
    let mut plan = SpmmPlan::new(handle, a, &xm, dtype, y, alg)?;
    Ok(time_gpu(gpu, opt.warmup, opt.reps, || plan.run())?.median_ms)
}
