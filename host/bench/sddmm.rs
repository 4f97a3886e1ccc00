//! SDDMM benchmark of one graph at one K: every implementation against cuSPARSE SDDMM.
//!
//! cuSPARSE computes C = (A Bᵀ) ⊙ spy(C), i.e. it does not scale by S's values; the suite
//! therefore runs on unit-valued S (the attention case: scores on the graph's pattern), so
//! every implementation computes the same function. Outputs are in CSR order for all.

use std::sync::Arc;

use crate::bench::floor::sddmm_bytes;
use crate::bench::{Problem, Record};
use crate::error::Result;
use crate::gpu::timing::time_gpu;
use crate::gpu::{DeviceVec, Gpu};
use crate::ops::sddmm::cpu::sddmm_reference_f64;
use crate::ops::sddmm::{ValueOrder, sddmm_device};
use crate::ops::{DeviceFeatures, GraphHandle, Impl, Precision};
use crate::tensor::{Matrix, rel_error};

pub const SDDMM_VARIANTS: [(Impl, Precision); 8] = [
    (Impl::Cusparse, Precision::F32),
    (Impl::Hp, Precision::F32),
    (Impl::Tc16, Precision::Tf32),
    (Impl::Tc16, Precision::F16),
    (Impl::Tc8, Precision::Tf32),
    (Impl::Tc8, Precision::F16),
    (Impl::Auto, Precision::Tf32),
    (Impl::Auto, Precision::F16),
];

use crate::bench::spmm::SpmmBenchOptions as BenchOptions;

pub fn bench_sddmm(gpu: &Arc<Gpu>, name: &str, g: &GraphHandle, k: usize, opt: &BenchOptions) -> Result<Vec<Record>> {
    let csr = g.csr();
    let (n, nnz) = (csr.n_rows(), csr.nnz());
    let a = Matrix::random(n, k, 0xa ^ k as u64);
    let b = Matrix::random(csr.n_cols(), k, 0xb ^ k as u64);
    let reference = sddmm_reference_f64(csr, &a, &b);
    let reference_f16 = {
        let vals: Vec<f32> = csr.values().iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
        sddmm_reference_f64(&csr.clone().with_values(vals)?, &a.rounded_f16(), &b.rounded_f16())
    };
    let mut out_vals = DeviceVec::<f32>::zeros(gpu, nnz)?;
    let mut out = Vec::new();
    let problem = Problem { graph: name, n, nnz, k, copy_gbs: opt.copy_gbs };
    let record = |variant: String, outcome: Result<(f64, f64), String>, fbytes| {
        Record::new(&problem, variant, outcome, sddmm_bytes(n, csr.n_cols(), nnz, k, fbytes))
    };
    let poison = |v: &mut DeviceVec<f32>| -> Result<()> {
        let host = vec![f32::NAN; v.len()];
        gpu.stream().memcpy_htod(&host, v.slice_mut()).map_err(|e| crate::Error::cuda("poison", e))
    };

    let a32 = DeviceFeatures::upload(gpu, &a, Precision::F32)?;
    let b32 = DeviceFeatures::upload(gpu, &b, Precision::F32)?;
    let a16 = DeviceFeatures::upload(gpu, &a, Precision::F16)?;
    let b16 = DeviceFeatures::upload(gpu, &b, Precision::F16)?;
    for (imp, prec) in SDDMM_VARIANTS {
        if !opt.only.is_empty() && !opt.only.contains(&imp) {
            continue;
        }
        let (ad, bd, reference, fbytes) = match prec {
            Precision::F16 => (&a16, &b16, &reference_f16, 2),
            _ => (&a32, &b32, &reference, 4),
        };
        let res = (|| -> Result<(f64, f64)> {
            poison(&mut out_vals)?;
            sddmm_device(g, ad, bd, &mut out_vals, imp, ValueOrder::Csr)?;
            let err = rel_error(&out_vals.download(gpu)?, reference);
            let t = time_gpu(gpu, opt.warmup, opt.reps, || sddmm_device(g, ad, bd, &mut out_vals, imp, ValueOrder::Csr))?;
            Ok((t.median_ms, err))
        })();
        let lab = format!("{} {}", format!("{imp:?}").to_lowercase(), format!("{prec:?}").to_lowercase());
        match res {
            Ok(r) => out.push(record(lab, Ok(r), fbytes)),
            Err(e) => out.push(record(lab, Err(e.to_string()), fbytes)),
        }
    }
    let base = out.iter().find(|r| r.variant == "cusparse f32").and_then(|r| r.ms);
    Record::set_speedups(&mut out, base);
    Ok(out)
}
