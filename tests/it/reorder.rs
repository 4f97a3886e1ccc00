//! Reordered graph handles (`GraphHandle::with_reorder`): SpMM through a reordered handle takes
//! X and returns Y in the original node order and matches the original-order f64 reference,
//! on the CPU and (skipped without a GPU) for every device implementation; the permutations
//! round-trip on the host and on the device.

use crate::common;

use std::sync::Arc;

use tcgnn::gpu::DeviceMatrix;
use tcgnn::graph::reorder::{Reorder, reorder};
use tcgnn::graph::{Csr, Permutation};
use tcgnn::ops::permute::gather_rows;
use tcgnn::ops::spmm::cpu::spmm_reference_f64;
use tcgnn::ops::spmm::{spmm, spmm_device, spmm_device_permuted};
use tcgnn::ops::{DeviceFeatures, GraphHandle, Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};

const METHODS: [Reorder; 3] = [Reorder::Rcm, Reorder::Community, Reorder::Degree];

/// A 30 x 20 grid with its nodes shuffled (RCM and community order have something to undo),
/// random values, plus the odd shapes every kernel is tested on.
fn graphs() -> Vec<(String, Csr)> {
    let grid = tcgnn::graph::generate::grid(30, 20);
    let grid = Permutation::random(grid.n_rows(), 3).apply_to_csr(&grid).unwrap();
    let grid = tcgnn::graph::source::with_random_values(grid, 4);
    let mut v = common::odd_shapes(21);
    v.push(("shuffled 30x20 grid".into(), grid));
    v
}

#[test]
fn reordered_handle_cpu_spmm_matches_the_original_order() {
    for (name, s) in graphs() {
        let x = Matrix::random(s.n_cols(), 13, 5);
        let want = spmm_reference_f64(&s, &x);
        let mut handles: Vec<(String, GraphHandle)> =
            METHODS.iter().map(|&how| (format!("{how:?}"), GraphHandle::with_reorder(s.clone(), None, how).unwrap())).collect();
        let p = Permutation::random(s.n_rows(), 9);
        handles.push(("given".into(), GraphHandle::with_permutation(s.clone(), None, p).unwrap()));
        for (label, h) in handles {
            for imp in [Impl::Cpu, Impl::Auto] {
                let y = spmm(&h, &x, imp, Precision::F32).unwrap();
                let err = rel_error(&y.data, &want);
                assert!(err < 1e-5, "{label} {imp:?} on {name}: relative error {err}");
            }
        }
    }
}

#[test]
fn permutation_round_trip_and_handle_contents() {
    let (_, s) = graphs().pop().unwrap();
    for how in METHODS {
        let h = GraphHandle::with_reorder(s.clone(), None, how).unwrap();
        let r = h.reordering().expect("reordered");
        assert_eq!(r.method, Some(how));
        assert!(r.one_time_ms() >= 0.0);
        // The handle holds P S Pᵀ for the method's P, and Pᵀ (P S Pᵀ) P gives S back.
        assert_eq!(r.perm, reorder(&s, how).unwrap());
        assert_eq!(h.csr(), &r.perm.apply_to_csr(&s).unwrap());
        assert_eq!(r.perm.inverse().apply_to_csr(h.csr()).unwrap(), s);
        // Rows: in and back out is the identity; in is new_to_old.
        let x = Matrix::random(s.n_rows(), 5, 1);
        let xp = r.perm.apply_to_rows(&x.data, 5).unwrap();
        for (i, &old) in r.perm.new_to_old().iter().enumerate() {
            assert_eq!(&xp[5 * i..5 * i + 5], x.row(old as usize));
        }
        assert_eq!(r.perm.undo_on_rows(&xp, 5).unwrap(), x.data);
    }
    // Identity: a plain handle.
    assert!(GraphHandle::with_reorder(s.clone(), None, Reorder::Identity).unwrap().reordering().is_none());
    // A permutation of the wrong size is refused.
    assert!(GraphHandle::with_permutation(s.clone(), None, Permutation::identity(3)).is_err());
}

#[test]
fn reordered_handles_are_cached_and_other_ops_refuse_them() {
    let (_, s) = graphs().pop().unwrap();
    let g = GraphHandle::new(s.clone(), None);
    let a = g.reordered(Reorder::Rcm).unwrap();
    assert!(Arc::ptr_eq(&a, &g.reordered(Reorder::Rcm).unwrap()));
    assert!(!Arc::ptr_eq(&a, &g.reordered(Reorder::Community).unwrap()));
    assert!(a.reordered(Reorder::Rcm).is_err());
    // SDDMM would see the reordered node and edge order: refused.
    let m = Matrix::random(s.n_rows(), 4, 2);
    let e = tcgnn::ops::sddmm::sddmm(&a, &m, &m, Impl::Cpu, Precision::F32).unwrap_err();
    assert!(e.to_string().contains("reordered"), "{e}");
    // Sᵀ of a reordered handle is reordered the same way: its SpMM is Sᵀ X in the original order.
    let t = a.transpose().unwrap();
    assert!(t.reordering().is_some());
    let st = tcgnn::graph::ops::transpose_with_map(&s).0;
    let x = Matrix::random(s.n_rows(), 6, 3);
    let err = rel_error(&spmm(&t, &x, Impl::Cpu, Precision::F32).unwrap().data, &spmm_reference_f64(&st, &x));
    assert!(err < 1e-5, "transpose: {err}");
}

/// Every device implementation (with the storage type it reads) through a reordered handle.
const GPU_VARIANTS: [(Impl, Precision); 8] = [
    (Impl::Csr, Precision::F32),
    (Impl::Hp, Precision::F32),
    (Impl::Cusparse, Precision::F32),
    (Impl::Tc8, Precision::Tf32),
    (Impl::Tc8, Precision::F16),
    (Impl::Tc16, Precision::F16),
    (Impl::Auto, Precision::F16),
    // Auto may pick tf32 tensor cores for f32 features: the tf32 tolerance applies.
    (Impl::Auto, Precision::Tf32),
];

#[test]
fn gpu_reordered_spmm_matches_the_original_order() {
    let Some(gpu) = common::gpu_or_skip("gpu_reordered_spmm_matches_the_original_order") else { return };
    for (name, s) in graphs() {
        for how in [Reorder::Rcm, Reorder::Community] {
            let h = GraphHandle::with_reorder(s.clone(), Some(gpu.clone()), how).unwrap();
            // Two widths per handle: the scratch buffers are per width; the second K = 20
            // call reuses the first's buffers.
            for k in [20, 128, 20] {
                for (imp, prec) in GPU_VARIANTS {
                    let (x, want) = common::spmm_problem(&s, k, prec);
                    let xd = DeviceFeatures::upload(&gpu, &x, prec).unwrap();
                    let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), k).unwrap();
                    y.poison().unwrap();
                    spmm_device(&h, &xd, &mut y, imp).unwrap();
                    let err = rel_error(&y.download().unwrap().data, &want);
                    assert!(err < prec.tolerance(), "{how:?} {imp:?} {prec:?} on {name}, K={k}: relative error {err}");
                }
            }
            // The host API on the GPU.
            let (x, want) = common::spmm_problem(&s, 16, Precision::F32);
            let err = rel_error(&spmm(&h, &x, Impl::Hp, Precision::F32).unwrap().data, &want);
            assert!(err < 1e-5, "{how:?} host API on {name}: {err}");
        }
    }
}

#[test]
fn gpu_spmm_device_permuted_is_the_kernel_in_the_reordered_order() {
    let Some(gpu) = common::gpu_or_skip("gpu_spmm_device_permuted_is_the_kernel_in_the_reordered_order") else { return };
    let (_, s) = graphs().pop().unwrap();
    let h = GraphHandle::with_reorder(s.clone(), Some(gpu.clone()), Reorder::Rcm).unwrap();
    let p = &h.reordering().unwrap().perm;
    for (imp, prec) in [(Impl::Tc8, Precision::F16), (Impl::Hp, Precision::F32)] {
        let (x, want) = common::spmm_problem(&s, 64, prec);
        let xp = Matrix::from_vec(x.rows, x.cols, p.apply_to_rows(&x.data, x.cols).unwrap()).unwrap();
        let want_p = p.apply_to_rows(&want, 64).unwrap();
        let xd = DeviceFeatures::upload(&gpu, &xp, prec).unwrap();
        let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), 64).unwrap();
        y.poison().unwrap();
        spmm_device_permuted(&h, &xd, &mut y, imp).unwrap();
        let err = rel_error(&y.download().unwrap().data, &want_p);
        assert!(err < prec.tolerance(), "{imp:?} {prec:?}: {err}");
    }
    // Per-call edge values are in the caller's edge order, which the handle does not keep.
    let vals = tcgnn::gpu::DeviceVec::upload(&gpu, &vec![1f32; s.nnz()]).unwrap();
    let (x, _) = common::spmm_problem(&s, 8, Precision::F32);
    let xd = DeviceFeatures::upload(&gpu, &x, Precision::F32).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), 8).unwrap();
    let e = tcgnn::ops::spmm::spmm_device_values(&h, tcgnn::ops::EdgeValues::Csr(&vals), &xd, &mut y, Impl::Hp).unwrap_err();
    assert!(e.to_string().contains("reordered"), "{e}");
}

#[test]
fn gpu_gather_rows_round_trip() {
    let Some(gpu) = common::gpu_or_skip("gpu_gather_rows_round_trip") else { return };
    for n in [1, 37, 3001] {
        let p = Permutation::random(n, n as u64);
        let n2o = tcgnn::gpu::DeviceVec::upload(&gpu, p.new_to_old()).unwrap();
        let o2n = tcgnn::gpu::DeviceVec::upload(&gpu, p.old_to_new()).unwrap();
        for k in [1, 8, 20, 128, 300] {
            let x = Matrix::random(n, k, 3);
            // f32: bit-exact in and back out, and the way in is new_to_old.
            let xd = DeviceMatrix::<f32>::upload(&gpu, &x).unwrap();
            let mut mid = DeviceMatrix::<f32>::zeros(&gpu, n, k).unwrap();
            let mut back = DeviceMatrix::<f32>::zeros(&gpu, n, k).unwrap();
            mid.poison().unwrap();
            back.poison().unwrap();
            gather_rows(&n2o, &xd, &mut mid).unwrap();
            gather_rows(&o2n, &mid, &mut back).unwrap();
            assert_eq!(mid.download().unwrap().data, p.apply_to_rows(&x.data, k).unwrap(), "f32 n={n} K={k}");
            assert_eq!(back.download_padded().unwrap(), xd.download_padded().unwrap(), "f32 round trip n={n} K={k}");
            // f16.
            let xh = DeviceMatrix::<half::f16>::upload(&gpu, &x).unwrap();
            let mut mid = DeviceMatrix::<half::f16>::zeros(&gpu, n, k).unwrap();
            let mut back = DeviceMatrix::<half::f16>::zeros(&gpu, n, k).unwrap();
            gather_rows(&n2o, &xh, &mut mid).unwrap();
            gather_rows(&o2n, &mid, &mut back).unwrap();
            let bits = |v: Vec<half::f16>| v.into_iter().map(|h| h.to_bits()).collect::<Vec<u16>>();
            assert_eq!(bits(back.download_padded().unwrap()), bits(xh.download_padded().unwrap()), "f16 round trip n={n} K={k}");
        }
        // Shape mismatches are refused.
        let x = DeviceMatrix::<f32>::zeros(&gpu, n, 8).unwrap();
        let mut wrong = DeviceMatrix::<f32>::zeros(&gpu, n, 16).unwrap();
        assert!(gather_rows(&n2o, &x, &mut wrong).is_err());
    }
}
