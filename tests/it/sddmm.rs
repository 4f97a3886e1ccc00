//! SDDMM and edge softmax: every GPU implementation against the f64 reference on the odd
//! shapes, both output orders, outputs poisoned (NaN) before launch.

use crate::common;

use std::sync::Arc;

use tcgnn::format::mebcrs::MeBcrs;
use tcgnn::gpu::{DeviceVec, Gpu};
use tcgnn::graph::Csr;
use tcgnn::ops::nn::edge_softmax::{edge_softmax_device, edge_softmax_reference_f64};
use tcgnn::ops::sddmm::cpu::sddmm_reference_f64;
use tcgnn::ops::sddmm::tc8::mebcrs_len;
use tcgnn::ops::sddmm::{ValueOrder, sddmm_device};
use tcgnn::ops::{DeviceFeatures, GraphHandle, Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};

fn poisoned(gpu: &Arc<Gpu>, len: usize) -> DeviceVec<f32> {
    DeviceVec::upload(gpu, &vec![f32::NAN; len.max(1)]).unwrap()
}

/// Run one SDDMM and return its values in CSR order.
fn run(gpu: &Arc<Gpu>, g: &GraphHandle, a: &Matrix, b: &Matrix, imp: Impl, prec: Precision, order: ValueOrder) -> Vec<f32> {
    let (ad, bd) = (DeviceFeatures::upload(gpu, a, prec).unwrap(), DeviceFeatures::upload(gpu, b, prec).unwrap());
    let len = match order {
        ValueOrder::Csr => g.csr().nnz(),
        ValueOrder::MeBcrs => mebcrs_len(g).unwrap(),
    };
    let mut out = poisoned(gpu, len);
    sddmm_device(g, &ad, &bd, &mut out, imp, order).unwrap();
    let got = out.download(gpu).unwrap();
    match order {
        ValueOrder::Csr => got[..g.csr().nnz()].to_vec(),
        ValueOrder::MeBcrs => {
            let m = MeBcrs::from_csr(g.csr(), 8).unwrap();
            // Every slot was written (padding slots hold S's zero times the product).
            assert!(got[..m.values.len()].iter().all(|v| v.is_finite()), "{imp:?} left ME-BCRS slots unwritten");
            m.csr_to_slot.iter().map(|&s| got[s as usize]).collect()
        }
    }
}

fn check(gpu: &Arc<Gpu>, name: &str, s: &Csr, k: usize, imp: Impl, prec: Precision, order: ValueOrder) {
    let a = Matrix::random(s.n_rows(), k, 3 + k as u64);
    let b = Matrix::random(s.n_cols(), k, 5 + k as u64);
    let want = match prec {
        Precision::F16 => sddmm_reference_f64(s, &a.rounded_f16(), &b.rounded_f16()),
        _ => sddmm_reference_f64(s, &a, &b),
    };
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let got = run(gpu, &g, &a, &b, imp, prec, order);
    let err = rel_error(&got, &want);
    println!("SDDMM {imp:?} {prec:?} {order:?} {name} K={k}: rel err {err:.2e}");
    assert!(err < prec.tolerance(), "SDDMM {imp:?} {prec:?} {order:?} on {name}, K={k}: relative error {err}");
}

#[test]
fn gpu_sddmm_kernels_match_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_sddmm_kernels_match_reference") else { return };
    for (name, s) in common::odd_shapes(31) {
        if s.nnz() == 0 {
            continue; // nothing to sample (checked separately below)
        }
        for k in [8, 16, 32, 128, 264, 13] {
            for order in [ValueOrder::Csr, ValueOrder::MeBcrs] {
                check(&gpu, &name, &s, k, Impl::Hp, Precision::F32, order);
                check(&gpu, &name, &s, k, Impl::Tc8, Precision::Tf32, order);
                check(&gpu, &name, &s, k, Impl::Tc8, Precision::F16, order);
            }
            check(&gpu, &name, &s, k, Impl::Tc16, Precision::Tf32, ValueOrder::Csr);
            check(&gpu, &name, &s, k, Impl::Tc16, Precision::F16, ValueOrder::Csr);
        }
        // Wider than the 4 float4 per lane HP keeps in registers: the streamed tail.
        check(&gpu, &name, &s, 520, Impl::Hp, Precision::F32, ValueOrder::Csr);
    }
}

#[test]
fn gpu_sddmm_cusparse_on_unit_values() {
    let Some(gpu) = common::gpu_or_skip("gpu_sddmm_cusparse_on_unit_values") else { return };
    for (name, s) in common::odd_shapes(32) {
        if s.nnz() == 0 {
            continue;
        }
        let unit = s.clone().with_values(vec![1.0; s.nnz()]).unwrap();
        check(&gpu, &name, &unit, 32, Impl::Cusparse, Precision::F32, ValueOrder::Csr);
        check(&gpu, &name, &unit, 32, Impl::Auto, Precision::F16, ValueOrder::Csr);
    }
    // Non-unit values are refused rather than silently dropped.
    let s = common::random_graph(50, 4, 0, 1);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let a = DeviceFeatures::upload(&gpu, &Matrix::random(50, 8, 1), Precision::F32).unwrap();
    let mut out = poisoned(&gpu, s.nnz());
    assert!(sddmm_device(&g, &a, &a, &mut out, Impl::Cusparse, ValueOrder::Csr).is_err());
}

#[test]
fn gpu_edge_softmax_rows_sum_to_one() {
    let Some(gpu) = common::gpu_or_skip("gpu_edge_softmax_rows_sum_to_one") else { return };
    for (name, s) in common::odd_shapes(33) {
        let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
        // Scores with a wide range, so an unshifted exp would overflow.
        let scores: Vec<f32> = s.values().iter().map(|v| 80.0 * v).collect();
        let want = edge_softmax_reference_f64(&s, &scores);
        for order in [ValueOrder::Csr, ValueOrder::MeBcrs] {
            let m = MeBcrs::from_csr(&s, 8).unwrap();
            let placed: Vec<f32> = match order {
                ValueOrder::Csr => scores.clone(),
                ValueOrder::MeBcrs => {
                    let mut v = vec![0f32; m.values.len()];
                    for (e, &slot) in m.csr_to_slot.iter().enumerate() {
                        v[slot as usize] = scores[e];
                    }
                    v
                }
            };
            let mut d = DeviceVec::upload(&gpu, &placed).unwrap();
            edge_softmax_device(&g, &mut d, order).unwrap();
            let got_all = d.download(&gpu).unwrap();
            let got: Vec<f32> = match order {
                ValueOrder::Csr => got_all[..s.nnz()].to_vec(),
                ValueOrder::MeBcrs => m.csr_to_slot.iter().map(|&slot| got_all[slot as usize]).collect(),
            };
            if s.nnz() > 0 {
                let err = rel_error(&got, &want);
                assert!(err < 1e-5, "softmax {order:?} on {name}: rel err {err}");
            }
            for r in 0..s.n_rows() {
                let row = &got[s.row_range(r)];
                assert!(row.iter().all(|v| v.is_finite()), "NaN in row {r} of {name}");
                if !row.is_empty() {
                    let sum: f64 = row.iter().map(|&v| v as f64).sum();
                    assert!((sum - 1.0).abs() < 1e-5, "row {r} of {name} sums to {sum}");
                }
            }
        }
    }
}

#[test]
fn cpu_sddmm_host_api() {
    let s = common::random_graph(60, 5, 4, 2);
    let g = GraphHandle::new(s.clone(), None);
    let (a, b) = (Matrix::random(60, 12, 1), Matrix::random(60, 12, 2));
    let got = tcgnn::ops::sddmm::sddmm(&g, &a, &b, Impl::Auto, Precision::F32).unwrap();
    assert!(rel_error(&got, &sddmm_reference_f64(&s, &a, &b)) < 1e-5);
    assert!(tcgnn::ops::sddmm::sddmm(&g, &a, &Matrix::random(59, 12, 2), Impl::Cpu, Precision::F32).is_err());
    let sm = tcgnn::ops::nn::edge_softmax::edge_softmax(&g, &got).unwrap();
    assert!(rel_error(&sm, &edge_softmax_reference_f64(&s, &got)) < 1e-5);
}

#[test]
fn gpu_sddmm_repeated_entries() {
    let Some(gpu) = common::gpu_or_skip("gpu_sddmm_repeated_entries") else { return };
    // Row 0 holds column 2 twice (a CSR built directly, not canonicalised).
    let s = Csr::new(3, 3, vec![0, 3, 4, 5], vec![2, 0, 2, 1, 0], vec![0.5, 1.0, -2.0, 3.0, 1.5]).unwrap();
    for imp in [Impl::Hp, Impl::Tc16] {
        let prec = if imp == Impl::Hp { Precision::F32 } else { Precision::F16 };
        check(&gpu, "repeated entries", &s, 16, imp, prec, ValueOrder::Csr);
    }
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let a = DeviceFeatures::upload(&gpu, &Matrix::random(3, 16, 1), Precision::F16).unwrap();
    let mut out = poisoned(&gpu, s.nnz());
    let e = sddmm_device(&g, &a, &a, &mut out, Impl::Tc8, ValueOrder::Csr).unwrap_err();
    assert!(e.to_string().contains("repeated"), "{e}");
}
