//! Per-call edge values: SpMM with values that are not the handle's (every supported
//! implementation, precision and order), the transpose of a graph and of its values, casts,
//! SDDMM -> softmax -> SpMM on a pattern (unit-valued) handle, and the length / combination
//! errors. CPU parts (transpose maps, CLI budget) run everywhere; GPU parts skip without a GPU.

use crate::common;

use std::sync::Arc;

use tcgnn::Error;
use tcgnn::format::mebcrs::MeBcrs;
use tcgnn::gpu::{DeviceMatrix, DeviceVec, Gpu};
use tcgnn::graph::Csr;
use tcgnn::graph::ops::transpose;
use tcgnn::ops::nn::edge_softmax::{edge_softmax_device, edge_softmax_reference_f64};
use tcgnn::ops::sddmm::cpu::sddmm_reference_f64;
use tcgnn::ops::sddmm::sddmm_device;
use tcgnn::ops::spmm::cpu::spmm_reference_f64;
use tcgnn::ops::spmm::{spmm_device, spmm_device_values, value_order};
use tcgnn::ops::values::{cast_matrix_to_f16, cast_to_f16, transpose_values, transpose_values_cpu};
use tcgnn::ops::{DeviceFeatures, EdgeValues, GraphHandle, Impl, Precision, ValueOrder};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

/// Every supported per-call combination: (implementation, precision, order).
const SUPPORTED: [(Impl, Precision, ValueOrder); 7] = [
    (Impl::Csr, Precision::F32, ValueOrder::Csr),
    (Impl::Csr, Precision::F16, ValueOrder::Csr),
    (Impl::Hp, Precision::F32, ValueOrder::Csr),
    (Impl::Cusparse, Precision::F32, ValueOrder::Csr),
    (Impl::Cusparse, Precision::F16, ValueOrder::Csr),
    (Impl::Tc8, Precision::Tf32, ValueOrder::MeBcrs),
    (Impl::Tc8, Precision::F16, ValueOrder::MeBcrs),
];

/// Fresh random values for `s`'s nonzeros (never the handle's).
fn fresh_values(s: &Csr, seed: u64) -> Vec<f32> {
    SplitMix64::new(seed).vec_f32(s.nnz())
}

/// CSR-ordered values placed in `order` for `s` (ME-BCRS: non-edge slots 0).
fn in_order(s: &Csr, order: ValueOrder, csr_vals: &[f32]) -> Vec<f32> {
    match order {
        ValueOrder::Csr => csr_vals.to_vec(),
        ValueOrder::MeBcrs => {
            let m = MeBcrs::from_csr(s, 8).unwrap();
            let mut v = vec![0f32; m.values.len()];
            for (e, &slot) in m.csr_to_slot.iter().enumerate() {
                v[slot as usize] += csr_vals[e];
            }
            v
        }
    }
}

fn poisoned(gpu: &Arc<Gpu>, len: usize) -> DeviceVec<f32> {
    DeviceVec::upload(gpu, &vec![f32::NAN; len.max(1)]).unwrap()
}

/// Device values for `prec` and `order` from host values already in that order (f16 through
/// the device cast, which is what a training step does).
enum Owned {
    F32(DeviceVec<f32>),
    F16(DeviceVec<half::f16>),
}

impl Owned {
    fn new(gpu: &Arc<Gpu>, order: ValueOrder, prec: Precision, host: &[f32]) -> Owned {
        let v = DeviceVec::upload(gpu, host).unwrap();
        if order == ValueOrder::MeBcrs && prec == Precision::F16 {
            let mut h = DeviceVec::<half::f16>::zeros(gpu, v.len()).unwrap();
            cast_to_f16(gpu, &v, &mut h).unwrap();
            Owned::F16(h)
        } else {
            Owned::F32(v)
        }
    }
    fn edge_values(&self, order: ValueOrder) -> EdgeValues<'_> {
        match (self, order) {
            (Owned::F32(v), ValueOrder::Csr) => EdgeValues::Csr(v),
            (Owned::F32(v), ValueOrder::MeBcrs) => EdgeValues::MeBcrs(v),
            (Owned::F16(v), _) => EdgeValues::MeBcrsF16(v),
        }
    }
}

/// SpMM on `g` with per-call values `vals` (CSR order, for `g`'s pattern) through `imp`,
/// output poisoned, against the f64 reference of the same pattern with those values.
#[allow(clippy::too_many_arguments)]
fn check_values(gpu: &Arc<Gpu>, name: &str, g: &GraphHandle, vals: &[f32], k: usize, imp: Impl, prec: Precision, order: ValueOrder) {
    let s_new = g.csr().clone().with_values(vals.to_vec()).unwrap();
    let (x, want) = common::spmm_problem(&s_new, k, prec);
    let xd = DeviceFeatures::upload(gpu, &x, prec).unwrap();
    let dv = Owned::new(gpu, order, prec, &in_order(g.csr(), order, vals));
    let mut y = DeviceMatrix::<f32>::zeros(gpu, g.csr().n_rows(), k).unwrap();
    y.poison().unwrap();
    spmm_device_values(g, dv.edge_values(order), &xd, &mut y, imp).unwrap();
    let err = rel_error(&y.download().unwrap().data, &want);
    println!("per-call {imp:?} {prec:?} {order:?} {name} K={k}: rel err {err:.2e}");
    assert!(err < prec.tolerance(), "per-call {imp:?} {prec:?} {order:?} on {name}, K={k}: relative error {err}");
}

#[test]
fn gpu_per_call_values_match_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_per_call_values_match_reference") else { return };
    for (name, s) in common::odd_shapes(41) {
        let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
        for (i, &(imp, prec, order)) in SUPPORTED.iter().enumerate() {
            if imp == Impl::Cusparse && s.nnz() == 0 {
                continue; // cuSPARSE rejects empty matrices in some versions
            }
            for k in [8, 16, 13, 32, 128] {
                let vals = fresh_values(&s, 1000 + 7 * i as u64 + k as u64);
                check_values(&gpu, &name, &g, &vals, k, imp, prec, order);
            }
            // The handle path still reads the handle's values afterwards (cuSPARSE swapped its
            // descriptor's values back; the others never touched them).
            let (x, want) = common::spmm_problem(&s, 24, prec);
            let xd = DeviceFeatures::upload(&gpu, &x, prec).unwrap();
            let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), 24).unwrap();
            y.poison().unwrap();
            spmm_device(&g, &xd, &mut y, imp).unwrap();
            let err = rel_error(&y.download().unwrap().data, &want);
            assert!(err < prec.tolerance(), "handle values after per-call values, {imp:?} {prec:?} on {name}: {err}");
        }
    }
    // Long windows split across warps (atomics) and a huge row for HP.
    let big = common::one_huge_row(60_000, 24, 5);
    let g = GraphHandle::new(big.clone(), Some(gpu.clone()));
    for &(imp, prec, order) in &SUPPORTED {
        check_values(&gpu, "n=60000 one huge row", &g, &fresh_values(&big, 77), 128, imp, prec, order);
    }
}

#[test]
fn gpu_per_call_values_same_x_y_new_values_every_call() {
    // A training loop: the same X and Y buffers, new values each step (cuSPARSE keeps one plan).
    let Some(gpu) = common::gpu_or_skip("gpu_per_call_values_same_x_y_new_values_every_call") else { return };
    let s = common::random_graph(3000, 9, 11, 3);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    for &(imp, prec, order) in &SUPPORTED {
        let x = Matrix::random(s.n_cols(), 32, 5);
        let xd = DeviceFeatures::upload(&gpu, &x, prec).unwrap();
        let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), 32).unwrap();
        for step in 0..3u64 {
            let vals = fresh_values(&s, 500 + step);
            let dv = Owned::new(&gpu, order, prec, &in_order(&s, order, &vals));
            y.poison().unwrap();
            spmm_device_values(&g, dv.edge_values(order), &xd, &mut y, imp).unwrap();
            let s_new = s.clone().with_values(vals.clone()).unwrap();
            let want = match prec {
                Precision::F16 => {
                    let r: Vec<f32> = vals.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
                    spmm_reference_f64(&s.clone().with_values(r).unwrap(), &x.rounded_f16())
                }
                _ => spmm_reference_f64(&s_new, &x),
            };
            let err = rel_error(&y.download().unwrap().data, &want);
            assert!(err < prec.tolerance(), "{imp:?} {prec:?} step {step}: {err}");
        }
    }
}

#[test]
fn gpu_transpose_spmm_on_directed_graph() {
    let Some(gpu) = common::gpu_or_skip("gpu_transpose_spmm_on_directed_graph") else { return };
    let mut graphs = common::odd_shapes(43);
    // Rectangular: Sᵀ has other dimensions than S.
    let mut rng = SplitMix64::new(9);
    let trip: Vec<(u32, u32, f32)> = (0..4000).map(|_| (rng.below(700) as u32, rng.below(1900) as u32, rng.uniform(-1.0, 1.0))).collect();
    graphs.push(("700 x 1900 rectangular".into(), Csr::from_triplets(700, 1900, &trip).unwrap()));
    for (name, s) in graphs {
        let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
        let gt = g.transpose().unwrap();
        assert!(Arc::ptr_eq(&gt, &g.transpose().unwrap()), "the transpose is built once");
        assert_eq!(gt.csr(), &transpose(&s));
        for &(imp, prec, order) in &SUPPORTED {
            if imp == Impl::Cusparse && s.nnz() == 0 {
                continue;
            }
            let vals = fresh_values(&s, 900 + s.nnz() as u64);
            let src = DeviceVec::upload(&gpu, &in_order(&s, order, &vals)).unwrap();
            let mut dst = poisoned(&gpu, gt.value_len(order).unwrap());
            transpose_values(&g, order, &src, &mut dst).unwrap();
            // Exactly the host gather: S's values in the order of Sᵀ, 0 in padding slots.
            let vals_t = transpose(&s.clone().with_values(vals.clone()).unwrap()).values().to_vec();
            let want_t = in_order(gt.csr(), order, &vals_t);
            let got_t = dst.download(&gpu).unwrap();
            assert_eq!(&got_t[..want_t.len()], &want_t[..], "transpose_values {order:?} on {name}");
            // Sᵀ X with those values.
            let st = gt.csr().clone().with_values(vals_t.clone()).unwrap();
            let (x, want) = common::spmm_problem(&st, 32, prec);
            let xd = DeviceFeatures::upload(&gpu, &x, prec).unwrap();
            let mut y = DeviceMatrix::<f32>::zeros(&gpu, st.n_rows(), 32).unwrap();
            y.poison().unwrap();
            let owned_f16;
            let ev = match (order, prec) {
                (ValueOrder::Csr, _) => EdgeValues::Csr(&dst),
                (ValueOrder::MeBcrs, Precision::F16) => {
                    let mut h = DeviceVec::<half::f16>::zeros(&gpu, dst.len()).unwrap();
                    cast_to_f16(&gpu, &dst, &mut h).unwrap();
                    owned_f16 = h;
                    EdgeValues::MeBcrsF16(&owned_f16)
                }
                (ValueOrder::MeBcrs, _) => EdgeValues::MeBcrs(&dst),
            };
            spmm_device_values(&gt, ev, &xd, &mut y, imp).unwrap();
            let err = rel_error(&y.download().unwrap().data, &want);
            println!("Sᵀ X {imp:?} {prec:?} {order:?} {name}: rel err {err:.2e}");
            assert!(err < prec.tolerance(), "Sᵀ X {imp:?} {prec:?} {order:?} on {name}: {err}");
        }
    }
}

#[test]
fn gpu_auto_with_per_call_values_picks_a_matching_implementation() {
    use tcgnn::ops::spmm::auto::choose;
    let Some(gpu) = common::gpu_or_skip("gpu_auto_with_per_call_values_picks_a_matching_implementation") else { return };
    let s = common::random_graph(5000, 20, 9, 21);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    for (prec, order) in [
        (Precision::F32, ValueOrder::Csr),
        (Precision::F16, ValueOrder::Csr),
        (Precision::Tf32, ValueOrder::MeBcrs),
        (Precision::F16, ValueOrder::MeBcrs),
    ] {
        let vals = fresh_values(&s, 31);
        let dv = Owned::new(&gpu, order, prec, &in_order(&s, order, &vals));
        let ev = dv.edge_values(order);
        let x = DeviceFeatures::upload(&gpu, &Matrix::random(s.n_cols(), 64, 3), prec).unwrap();
        let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), 64).unwrap();
        let picked = choose(&g, x.view(), &mut y, Some(order), |g, x, y, imp| spmm_device_values(g, ev, x, y, imp)).unwrap();
        println!("Auto with {ev:?} and {prec:?} features: {picked:?}");
        assert_eq!(value_order(picked), Some(order), "Auto picked {picked:?} for {order:?} values");
        check_values(&gpu, "n=5000 (Auto)", &g, &vals, 64, Impl::Auto, prec, order);
    }
}

#[test]
fn gpu_wrong_lengths_and_combinations_are_refused() {
    let Some(gpu) = common::gpu_or_skip("gpu_wrong_lengths_and_combinations_are_refused") else { return };
    let s = common::random_graph(200, 6, 0, 8);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let mlen = g.value_len(ValueOrder::MeBcrs).unwrap();
    assert_eq!(mlen, tcgnn::ops::sddmm::tc8::mebcrs_len(&g).unwrap());
    assert_ne!(mlen, s.nnz());
    let x32 = DeviceFeatures::upload(&gpu, &Matrix::random(200, 16, 1), Precision::F32).unwrap();
    let x16 = DeviceFeatures::upload(&gpu, &Matrix::random(200, 16, 1), Precision::F16).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, 200, 16).unwrap();
    let csr_ok = DeviceVec::<f32>::zeros(&gpu, s.nnz()).unwrap();
    let csr_long = DeviceVec::<f32>::zeros(&gpu, s.nnz() + 1).unwrap();
    let me_ok = DeviceVec::<f32>::zeros(&gpu, mlen).unwrap();
    let me16_ok = DeviceVec::<half::f16>::zeros(&gpu, mlen).unwrap();
    let me_short = DeviceVec::<f32>::zeros(&gpu, mlen - 1).unwrap();
    let shape = |r: tcgnn::Result<()>| assert!(matches!(r, Err(Error::Shape(_))), "{r:?}");
    let unsupported = |r: tcgnn::Result<()>| assert!(matches!(r, Err(Error::Unsupported(_))), "{r:?}");
    for imp in [Impl::Csr, Impl::Hp, Impl::Cusparse, Impl::Auto] {
        shape(spmm_device_values(&g, EdgeValues::Csr(&csr_long), &x32, &mut y, imp));
        shape(spmm_device_values(&g, EdgeValues::Csr(&me_ok), &x32, &mut y, imp)); // ME-BCRS-sized buffer as CSR
    }
    for imp in [Impl::Tc8, Impl::Auto] {
        shape(spmm_device_values(&g, EdgeValues::MeBcrs(&me_short), &x32, &mut y, imp));
        shape(spmm_device_values(&g, EdgeValues::MeBcrs(&csr_ok), &x32, &mut y, imp));
    }
    // Orders and storage types an implementation does not read.
    unsupported(spmm_device_values(&g, EdgeValues::Csr(&csr_ok), &x32, &mut y, Impl::Tc8));
    unsupported(spmm_device_values(&g, EdgeValues::Csr(&csr_ok), &x32, &mut y, Impl::Tc16));
    unsupported(spmm_device_values(&g, EdgeValues::MeBcrs(&me_ok), &x32, &mut y, Impl::Hp));
    unsupported(spmm_device_values(&g, EdgeValues::MeBcrs(&me_ok), &x32, &mut y, Impl::Tc16));
    unsupported(spmm_device_values(&g, EdgeValues::MeBcrs(&me_ok), &x16, &mut y, Impl::Tc8));
    unsupported(spmm_device_values(&g, EdgeValues::MeBcrsF16(&me16_ok), &x32, &mut y, Impl::Tc8));
    unsupported(spmm_device_values(&g, EdgeValues::Csr(&csr_ok), &x16, &mut y, Impl::Hp));
    unsupported(spmm_device_values(&g, EdgeValues::Csr(&csr_ok), &x32, &mut y, Impl::Cpu));
    // transpose_values: source sized for S, destination for Sᵀ, in the order asked.
    let gt = g.transpose().unwrap();
    let mut dst_me = DeviceVec::<f32>::zeros(&gpu, gt.value_len(ValueOrder::MeBcrs).unwrap()).unwrap();
    let mut dst_csr = DeviceVec::<f32>::zeros(&gpu, s.nnz()).unwrap();
    shape(transpose_values(&g, ValueOrder::Csr, &csr_long, &mut dst_csr));
    shape(transpose_values(&g, ValueOrder::MeBcrs, &csr_ok, &mut dst_me));
    shape(transpose_values(&g, ValueOrder::MeBcrs, &me_ok, &mut dst_csr));
    transpose_values(&g, ValueOrder::MeBcrs, &me_ok, &mut dst_me).unwrap();
    let mut short16 = DeviceVec::<half::f16>::zeros(&gpu, s.nnz() - 1).unwrap();
    shape(cast_to_f16(&gpu, &csr_ok, &mut short16));
}

#[test]
fn gpu_casts_round_like_the_host() {
    let Some(gpu) = common::gpu_or_skip("gpu_casts_round_like_the_host") else { return };
    for n in [1usize, 7, 8, 9, 13, 1000, 100_003] {
        let mut host = SplitMix64::new(n as u64).vec_f32(n);
        host.iter_mut().enumerate().for_each(|(i, v)| *v *= (i % 40) as f32 * 100.0); // beyond f16's range too
        let src = DeviceVec::upload(&gpu, &host).unwrap();
        let mut dst = DeviceVec::upload(&gpu, &vec![half::f16::NAN; n]).unwrap();
        cast_to_f16(&gpu, &src, &mut dst).unwrap();
        let got = dst.download(&gpu).unwrap();
        for (i, (&h, &f)) in got.iter().zip(&host).enumerate() {
            assert_eq!(h.to_bits(), half::f16::from_f32(f).to_bits(), "element {i} of {n}: {f}");
        }
    }
    for (rows, cols) in [(1, 1), (37, 13), (1000, 128)] {
        let m = Matrix::random(rows, cols, 3);
        let src = DeviceMatrix::<f32>::upload(&gpu, &m).unwrap();
        let mut dst = DeviceMatrix::<half::f16>::zeros(&gpu, rows, cols).unwrap();
        dst.poison().unwrap();
        cast_matrix_to_f16(&src, &mut dst).unwrap();
        assert_eq!(dst.download().unwrap(), m.rounded_f16());
        // The whole padded buffer: padding stays zero (f16 kernels read whole 16-byte chunks).
        let raw = gpu.stream().clone_dtoh(dst.slice()).unwrap();
        for (i, h) in raw.iter().enumerate() {
            let (r, c) = (i / dst.ld, i % dst.ld);
            let want = if c < cols { half::f16::from_f32(m.data[r * cols + c]) } else { half::f16::ZERO };
            assert_eq!(h.to_bits(), want.to_bits(), "{rows}x{cols}: element ({r}, {c})");
        }
        let mut wrong = DeviceMatrix::<half::f16>::zeros(&gpu, rows, cols + 1).unwrap();
        assert!(matches!(cast_matrix_to_f16(&src, &mut wrong), Err(Error::Shape(_))));
    }
}

#[test]
fn gpu_attention_on_a_pattern_handle() {
    // AGNN's forward on a unit-valued handle: scores = SDDMM (pattern only), α = softmax,
    // out = α H through per-call values, in both orders.
    let Some(gpu) = common::gpu_or_skip("gpu_attention_on_a_pattern_handle") else { return };
    for (name, s) in common::odd_shapes(45) {
        let unit = tcgnn::graph::ops::pattern(&s);
        let g = GraphHandle::new(unit.clone(), Some(gpu.clone()));
        let k = 32;
        let h = Matrix::random(s.n_rows(), k, 17);
        let cases = [
            (Impl::Hp, Precision::F32, ValueOrder::Csr, Impl::Hp),
            (Impl::Hp, Precision::F32, ValueOrder::MeBcrs, Impl::Tc8),
            (Impl::Tc16, Precision::Tf32, ValueOrder::Csr, Impl::Csr),
            (Impl::Tc8, Precision::Tf32, ValueOrder::MeBcrs, Impl::Tc8),
            (Impl::Tc8, Precision::F16, ValueOrder::MeBcrs, Impl::Tc8),
            (Impl::Tc8, Precision::F16, ValueOrder::Csr, Impl::Cusparse),
            (Impl::Cusparse, Precision::F32, ValueOrder::Csr, Impl::Hp),
        ];
        for (sddmm_imp, prec, order, spmm_imp) in cases {
            if s.nnz() == 0 {
                continue; // nothing to sample (SDDMM tests cover it)
            }
            let hd = DeviceFeatures::upload(&gpu, &h, prec).unwrap();
            let len = g.value_len(order).unwrap();
            let mut scores = poisoned(&gpu, len);
            sddmm_device(&g, &hd, &hd, &mut scores, sddmm_imp, order).unwrap();
            // Scores in CSR order, against the pattern's reference (dot products only).
            let slots: Vec<usize> = match order {
                ValueOrder::Csr => (0..s.nnz()).collect(),
                ValueOrder::MeBcrs => MeBcrs::from_csr(&unit, 8).unwrap().csr_to_slot.iter().map(|&v| v as usize).collect(),
            };
            let all = scores.download(&gpu).unwrap();
            if order == ValueOrder::MeBcrs {
                let edge: std::collections::HashSet<usize> = slots.iter().copied().collect();
                assert!((0..len).filter(|i| !edge.contains(i)).all(|i| all[i] == 0.0), "{sddmm_imp:?}: padding slots not 0");
            }
            let got: Vec<f32> = slots.iter().map(|&i| all[i]).collect();
            let hr = if prec == Precision::F16 { h.rounded_f16() } else { h.clone() };
            let err = rel_error(&got, &sddmm_reference_f64(&unit, &hr, &hr));
            assert!(err < prec.tolerance(), "SDDMM {sddmm_imp:?} {prec:?} {order:?} on the pattern of {name}: {err}");
            // α = softmax of the scores, in place, in the same order.
            edge_softmax_device(&g, &mut scores, order).unwrap();
            let all = scores.download(&gpu).unwrap();
            let alpha: Vec<f32> = slots.iter().map(|&i| all[i]).collect();
            let err = rel_error(&alpha, &edge_softmax_reference_f64(&unit, &got));
            assert!(err < 1e-5, "softmax {order:?} on {name}: {err}");
            // out = α H with α as per-call values on the same handle.
            let sp_prec = if spmm_imp == Impl::Tc8 && prec == Precision::F32 { Precision::Tf32 } else { prec };
            let hd = DeviceFeatures::upload(&gpu, &h, sp_prec).unwrap();
            let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), k).unwrap();
            y.poison().unwrap();
            let alpha16;
            let ev = match (order, sp_prec) {
                (ValueOrder::Csr, _) => EdgeValues::Csr(&scores),
                (ValueOrder::MeBcrs, Precision::F16) => {
                    let mut a = DeviceVec::<half::f16>::zeros(&gpu, scores.len()).unwrap();
                    cast_to_f16(&gpu, &scores, &mut a).unwrap();
                    alpha16 = a;
                    EdgeValues::MeBcrsF16(&alpha16)
                }
                (ValueOrder::MeBcrs, _) => EdgeValues::MeBcrs(&scores),
            };
            spmm_device_values(&g, ev, &hd, &mut y, spmm_imp).unwrap();
            let sa = unit.clone().with_values(alpha).unwrap();
            let want = match sp_prec {
                Precision::F16 => {
                    let r: Vec<f32> = sa.values().iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
                    spmm_reference_f64(&sa.clone().with_values(r).unwrap(), &h.rounded_f16())
                }
                _ => spmm_reference_f64(&sa, &h),
            };
            let err = rel_error(&y.download().unwrap().data, &want);
            assert!(err < sp_prec.tolerance(), "α H {spmm_imp:?} {sp_prec:?} {order:?} on {name}: {err}");
        }
    }
}

// ---------------------------------------------------------------- CPU (runs everywhere)

/// Random directed graphs (edges i -> j without their reverse), canonical.
fn directed_graphs() -> Vec<(String, Csr)> {
    let mut v = common::odd_shapes(51);
    let mut rng = SplitMix64::new(52);
    let trip: Vec<(u32, u32, f32)> = (0..3000).map(|_| (rng.below(300) as u32, rng.below(1100) as u32, rng.uniform(-1.0, 1.0))).collect();
    v.push(("300 x 1100".into(), Csr::from_triplets(300, 1100, &trip).unwrap()));
    v
}

#[test]
fn transpose_map_csr_is_a_bijection_and_values_round_trip() {
    for (name, s) in directed_graphs() {
        let g = GraphHandle::new(s.clone(), None);
        let gt = g.transpose().unwrap();
        let st = gt.csr();
        assert_eq!((st.n_rows(), st.n_cols(), st.nnz()), (s.n_cols(), s.n_rows(), s.nnz()));
        let map = g.transpose_map_host(ValueOrder::Csr).unwrap();
        assert_eq!(map.len(), s.nnz());
        let mut seen = vec![false; s.nnz()];
        // (row, col) of every nonzero of S.
        let mut pos = vec![(0u32, 0u32); s.nnz()];
        for r in 0..s.n_rows() {
            for e in s.row_range(r) {
                pos[e] = (r as u32, s.col_idx()[e]);
            }
        }
        for c in 0..st.n_rows() {
            for i in st.row_range(c) {
                let e = map[i] as usize;
                assert!(!seen[e], "{name}: nonzero {e} of S mapped twice");
                seen[e] = true;
                assert_eq!(pos[e], (st.col_idx()[i], c as u32), "{name}: Sᵀ nonzero {i} is not the reverse of S's {e}");
                assert_eq!(st.values()[i], s.values()[e]);
            }
        }
        assert!(seen.iter().all(|&b| b), "{name}: not every nonzero of S is reached");
        // Values round-trip through Sᵀ and back.
        let vals = SplitMix64::new(3).vec_f32(s.nnz());
        let vt = transpose_values_cpu(&g, &vals).unwrap();
        assert_eq!(vt, transpose(&s.clone().with_values(vals.clone()).unwrap()).values());
        assert_eq!(transpose_values_cpu(&gt, &vt).unwrap(), vals, "{name}: values do not round-trip");
        let vt64 = transpose_values_cpu(&g, &vals.iter().map(|&v| v as f64).collect::<Vec<_>>()).unwrap();
        assert!(vt64.iter().zip(&vt).all(|(&a, &b)| a == b as f64));
        assert!(matches!(transpose_values_cpu(&g, &vals[..vals.len().saturating_sub(1)]), Err(Error::Shape(_))) || vals.is_empty());
    }
}

#[test]
fn transpose_map_mebcrs_is_a_bijection_between_edges() {
    for (name, s) in directed_graphs() {
        let g = GraphHandle::new(s.clone(), None);
        let gt = g.transpose().unwrap();
        let map = g.transpose_map_host(ValueOrder::MeBcrs).unwrap();
        let (ms, mt) = (g.mebcrs(8).unwrap(), gt.mebcrs(8).unwrap());
        assert_eq!(map.len(), gt.value_len(ValueOrder::MeBcrs).unwrap());
        assert_eq!(ms.values.len(), g.value_len(ValueOrder::MeBcrs).unwrap());
        let edges: Vec<u32> = map.iter().copied().filter(|&m| m != u32::MAX).collect();
        assert_eq!(edges.len(), s.nnz(), "{name}: one mapped slot per edge");
        let mut sorted = edges.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), edges.len(), "{name}: a slot of S mapped twice");
        let edge_slots_s: std::collections::HashSet<u32> = ms.csr_to_slot.iter().copied().collect();
        assert!(edges.iter().all(|m| edge_slots_s.contains(m)), "{name}: mapped to a padding slot of S");
        for (slot, &m) in map.iter().enumerate() {
            if m != u32::MAX {
                let (r, c) = mt.slot_position(slot).unwrap();
                assert_eq!(ms.slot_position(m as usize), Some((c as usize, r as u32)), "{name}: slot {slot}");
            }
        }
        // S's values gathered through the map are Sᵀ's ME-BCRS values (padding 0), and back.
        let gathered: Vec<f32> = map.iter().map(|&m| if m == u32::MAX { 0.0 } else { ms.values[m as usize] }).collect();
        assert_eq!(gathered, mt.values, "{name}");
        let back_map = gt.transpose_map_host(ValueOrder::MeBcrs).unwrap();
        let back: Vec<f32> = back_map.iter().map(|&m| if m == u32::MAX { 0.0 } else { gathered[m as usize] }).collect();
        assert_eq!(back, ms.values, "{name}: values do not round-trip");
    }
}

#[test]
fn transpose_maps_need_a_canonical_csr_and_a_gpu_for_the_device_copy() {
    let s = Csr::new(2, 3, vec![0, 2, 3], vec![2, 2, 0], vec![1.0, 2.0, 3.0]).unwrap();
    let g = GraphHandle::new(s, None);
    assert!(g.transpose().is_ok(), "the transposed handle exists for any CSR");
    for order in [ValueOrder::Csr, ValueOrder::MeBcrs] {
        assert!(matches!(g.transpose_map_host(order), Err(Error::Unsupported(_))));
    }
    assert!(matches!(transpose_values_cpu(&g, &[1.0f32, 2.0, 3.0]), Err(Error::Unsupported(_))));
    let ok = GraphHandle::new(common::random_graph(20, 3, 0, 1), None);
    assert!(matches!(ok.transpose_map(ValueOrder::Csr), Err(Error::NoGpu(_))));
}

#[test]
fn value_orders_of_the_implementations() {
    assert_eq!(value_order(Impl::Csr), Some(ValueOrder::Csr));
    assert_eq!(value_order(Impl::Hp), Some(ValueOrder::Csr));
    assert_eq!(value_order(Impl::Cusparse), Some(ValueOrder::Csr));
    assert_eq!(value_order(Impl::Cpu), Some(ValueOrder::Csr));
    assert_eq!(value_order(Impl::Tc8), Some(ValueOrder::MeBcrs));
    assert_eq!(value_order(Impl::Tc16), None);
    assert_eq!(value_order(Impl::Auto), None);
}

#[test]
fn spmm_command_refuses_k_0_and_what_does_not_fit() {
    use tcgnn::bench::budget::{Footprint, check_footprint, check_spmm_command, host_available_bytes};
    let s = common::random_graph(100, 4, 0, 1);
    let e = check_spmm_command(&s, 0, None).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)) && e.to_string().contains("K = 0"), "{e}");
    check_spmm_command(&s, 16, None).unwrap();
    if host_available_bytes().is_some() {
        let e = check_spmm_command(&s, usize::MAX / 4, None).unwrap_err();
        assert!(e.to_string().contains("host memory") && e.to_string().contains("smaller --k"), "{e}");
    }
    let need = Footprint { host: 10_000_000_000, device: 50_000_000_000 };
    let e = check_footprint("SpMM", need, Some(20_000_000_000), Some(40_000_000_000)).unwrap_err();
    assert!(e.to_string().contains("50.0 GB") && e.to_string().contains("40.0 GB free"), "{e}");
    let e = check_footprint("SpMM", need, Some(8_000_000_000), Some(60_000_000_000)).unwrap_err();
    assert!(e.to_string().contains("8.0 GB is available"), "{e}");
    check_footprint("SpMM", need, Some(20_000_000_000), Some(60_000_000_000)).unwrap();
    check_footprint("SpMM", need, None, None).unwrap();
}
