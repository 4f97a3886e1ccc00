//! SpMM through a reordered graph handle (`tcgnn bench spmm --reorder rcm|community|degree`):
//! every implementation end to end (X rows gathered into the reordered order, SpMM on
//! P S Pᵀ, Y rows gathered back) and the SpMM alone (features already in the reordered
//! order), against cuSPARSE on the original order, next to the original-order run.

use std::sync::Arc;

use crate::bench::floor::spmm_bytes;
use crate::bench::spmm::{SPMM_VARIANTS, SpmmBenchOptions, bench_spmm, value_feature_bytes};
use crate::bench::{Problem, Record};
use crate::error::Result;
use crate::gpu::timing::time_gpu;
use crate::gpu::{DeviceMatrix, Gpu};
use crate::graph::reorder::Reorder;
use crate::ops::spmm::cpu::spmm_reference_f64;
use crate::ops::spmm::{spmm_device, spmm_device_permuted};
use crate::ops::{DeviceFeatures, GraphHandle, Precision};
use crate::tensor::{Matrix, rel_error};

/// The labels of the two reordered rows of `variant` (e.g. "tc8 f16"): end to end and kernel alone.
pub fn reordered_labels(variant: &str, how: Reorder) -> (String, String) {
    let m = format!("{how:?}").to_lowercase();
    (format!("{variant} {m} e2e"), format!("{variant} {m} kernel"))
}

/// [`bench_spmm`] on `g` (original order: cuSPARSE, and our kernels as usual), then every
/// variant through `g.reordered(how)` (built once per graph and kept in `g`). The reordered
/// rows carry the reordering's one-time host cost in `setup_ms`; their speedups are over
/// cuSPARSE on the original order; errors are against the original-order reference (end to
/// end) or its rows permuted (kernel alone).
pub fn bench_spmm_reordered(
    gpu: &Arc<Gpu>,
    name: &str,
    g: &GraphHandle,
    k: usize,
    opt: &SpmmBenchOptions,
    how: Reorder,
) -> Result<Vec<Record>> {
    let mut out = bench_spmm(gpu, name, g, k, opt)?;
    let base = |prefix: &str| out.iter().find(|r| r.variant.starts_with(prefix)).and_then(|r| r.ms);
    let (base_f32, base_f16) = (base("cusparse f32"), base("cusparse f16"));
    let rg = g.reordered(how)?;
    let perm = &rg.reordering().expect("a reordered handle").perm;
    let setup_ms = rg.reordering().map(|r| r.one_time_ms());
    let csr = g.csr();
    let (n, nnz) = (csr.n_rows(), csr.nnz());
    let x = Matrix::random(csr.n_cols(), k, 0x5eed ^ k as u64);
    let xp = Matrix::from_vec(x.rows, x.cols, perm.apply_to_rows(&x.data, k)?)?;
    let reference = spmm_reference_f64(csr, &x);
    let reference_f16 = {
        let vals: Vec<f32> = csr.values().iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
        spmm_reference_f64(&csr.clone().with_values(vals)?, &x.rounded_f16())
    };
    let permuted = |r: &[f64]| perm.apply_to_rows(r, k);
    let (reference_p, reference_f16_p) = (permuted(&reference)?, permuted(&reference_f16)?);
    let problem = Problem { graph: name, n, nnz, k, copy_gbs: opt.copy_gbs };
    let mut y = DeviceMatrix::<f32>::zeros(gpu, n, k)?;
    let mut rows = Vec::new();
    for (imp, prec) in SPMM_VARIANTS {
        if !opt.only.is_empty() && !opt.only.contains(&imp) {
            continue;
        }
        let (reference, reference_p) = match prec {
            Precision::F16 => (&reference_f16, &reference_f16_p),
            _ => (&reference, &reference_p),
        };
        let fb = value_feature_bytes(imp, prec);
        let floor = spmm_bytes(n, csr.n_cols(), nnz, k, fb.0, fb.1);
        let (e2e, alone) = reordered_labels(&format!("{} {}", format!("{imp:?}").to_lowercase(), format!("{prec:?}").to_lowercase()), how);
        for (label, xin, want, whole) in [(e2e, &x, reference, true), (alone, &xp, reference_p, false)] {
            let res = (|| -> Result<(f64, f64)> {
                let xd = DeviceFeatures::upload(gpu, xin, prec)?;
                let run =
                    |y: &mut DeviceMatrix<f32>| if whole { spmm_device(&rg, &xd, y, imp) } else { spmm_device_permuted(&rg, &xd, y, imp) };
                y.poison()?;
                run(&mut y)?; // first call: translation, uploads, scratch; outside timing
                let err = rel_error(&y.download()?.data, want);
                let t = time_gpu(gpu, opt.warmup, opt.reps, || run(&mut y))?;
                Ok((t.median_ms, err))
            })();
            let mut r = Record::new(&problem, label, res.map_err(|e| e.to_string()), floor);
            r.setup_ms = setup_ms;
            rows.push(r);
        }
    }
    Record::set_speedups(&mut rows, base_f32);
    Record::set_speedups_f16(&mut rows, base_f16);
    out.extend(rows);
    Ok(out)
}
