//! cuBLAS GEMM and CUDA graph capture. CPU: the row-major -> column-major argument mapping
//! against a plain column-major GEMM with cuBLAS's semantics. GPU (skipped without one): every
//! transpose combination on odd shapes in f32, tf32 and f16 against an f64 reference, outputs
//! poisoned and padding checked; k = 0 and empty shapes; shape errors; a captured
//! GEMM + SpMM + memset sequence replayed on changing inputs; errors inside a capture.

use crate::common;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rayon::prelude::*;
use tcgnn::Error;
use tcgnn::gpu::cublas::{Blas, ColumnMajorGemm, GemmMath, RowMajor, column_major_args};
use tcgnn::gpu::memory::padded_ld;
use tcgnn::gpu::{DeviceMatrix, DeviceVec, Gpu};
use tcgnn::graph::Csr;
use tcgnn::ops::spmm::spmm_device;
use tcgnn::ops::{DeviceFeatures, GraphHandle, Impl};
use tcgnn::tensor::{Matrix, rel_error};

// ---------------------------------------------------------------------------------------------
// Helpers

/// GPU tests share one stream; a capture would record another test's work, so they take turns.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The GPU, its lock and the binary's one cuBLAS handle, or `None` (test skipped).
fn setup(test: &str) -> Option<(Arc<Gpu>, &'static Blas, MutexGuard<'static, ()>)> {
    let gpu = common::gpu_or_skip(test)?;
    let lock = serial();
    static BLAS: OnceLock<Blas> = OnceLock::new();
    let blas = BLAS.get_or_init(|| Blas::new(&gpu).expect("creating the cuBLAS handle"));
    Some((gpu, blas, lock))
}

/// op(X) of a row-major host matrix as (rows, cols, element accessor).
fn op_dims(x: &Matrix, trans: bool) -> (usize, usize) {
    if trans { (x.cols, x.rows) } else { (x.rows, x.cols) }
}

/// op(A) op(B) in f64, row-major m x n.
fn product_f64(a: &Matrix, ta: bool, b: &Matrix, tb: bool) -> Vec<f64> {
    let (m, k) = op_dims(a, ta);
    let (kb, n) = op_dims(b, tb);
    assert_eq!(k, kb);
    let at = |i: usize, p: usize| (if ta { a.data[p * a.cols + i] } else { a.data[i * a.cols + p] }) as f64;
    let bt = |p: usize, j: usize| (if tb { b.data[j * b.cols + p] } else { b.data[p * b.cols + j] }) as f64;
    let mut out = vec![0f64; m * n];
    if n == 0 {
        return out;
    }
    out.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
        for p in 0..k {
            let aip = at(i, p);
            for (j, o) in row.iter_mut().enumerate() {
                *o += aip * bt(p, j);
            }
        }
    });
    out
}

/// alpha P + beta C0 (C0 not read when beta = 0, as BLAS defines it).
fn combine(alpha: f64, p: &[f64], beta: f64, c0: &Matrix) -> Vec<f64> {
    p.iter().zip(&c0.data).map(|(&p, &c)| alpha * p + if beta == 0.0 { 0.0 } else { beta * c as f64 }).collect()
}

/// Every element of the device buffer, padding included.
fn raw(gpu: &Gpu, m: &DeviceMatrix<f32>) -> Vec<f32> {
    gpu.stream().clone_dtoh(m.slice()).unwrap()
}

/// Padding columns (and the slack past `rows * ld`) bit-identical to `before`.
fn assert_padding_kept(what: &str, m: &DeviceMatrix<f32>, before: &[f32], after: &[f32]) {
    for (i, (x, y)) in before.iter().zip(after).enumerate() {
        let in_values = m.ld > 0 && i / m.ld < m.rows && i % m.ld < m.cols;
        if !in_values {
            assert_eq!(x.to_bits(), y.to_bits(), "{what}: padding element {i} changed from {x} to {y}");
        }
    }
}

/// Write `host` into `m` (same shape) with a host-to-device copy, zero padding.
fn write(gpu: &Gpu, m: &mut DeviceMatrix<f32>, host: &Matrix) {
    assert_eq!((m.rows, m.cols), (host.rows, host.cols));
    let mut buf = vec![0f32; m.slice().len()];
    for r in 0..host.rows {
        buf[r * m.ld..r * m.ld + host.cols].copy_from_slice(host.row(r));
    }
    gpu.stream().memcpy_htod(&buf, m.slice_mut()).unwrap();
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    F32,
    Tf32,
    F16,
}

impl Kind {
    fn tolerance(self) -> f64 {
        match self {
            Kind::F32 => 1e-5,
            Kind::Tf32 => 5e-3,
            Kind::F16 => 1e-2,
        }
    }
}

/// (m, n, k): odd sizes, a GCN input layer (2708 nodes, 1433 features -> 16) and output layer.
const SHAPES: [(usize, usize, usize); 7] =
    [(1, 1, 1), (7, 13, 33), (33, 7, 130), (130, 33, 13), (13, 130, 7), (2708, 16, 1433), (2708, 7, 16)];
/// (alpha, beta): plain, accumulate with a scale, scaled overwrite.
const SCALARS: [(f32, f32); 3] = [(1.0, 0.0), (-0.75, 1.0), (1.5, 0.0)];
const TRANS: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

/// C = alpha op(A) op(B) + beta C on the GPU for every shape, transpose pair and scalar pair.
fn check_all(gpu: &Arc<Gpu>, blas: &Blas, kind: Kind) {
    let mut seed = 1000;
    for (m, n, k) in SHAPES {
        for (ta, tb) in TRANS {
            seed += 10;
            let a = Matrix::random(if ta { k } else { m }, if ta { m } else { k }, seed);
            let b = Matrix::random(if tb { n } else { k }, if tb { k } else { n }, seed + 1);
            let c0 = Matrix::random(m, n, seed + 2);
            let prod = match kind {
                Kind::F16 => product_f64(&a.rounded_f16(), ta, &b.rounded_f16(), tb),
                _ => product_f64(&a, ta, &b, tb),
            };
            let (da, db) = (DeviceMatrix::<f32>::upload(gpu, &a).unwrap(), DeviceMatrix::<f32>::upload(gpu, &b).unwrap());
            let (ha, hb) = (DeviceMatrix::<half::f16>::upload(gpu, &a).unwrap(), DeviceMatrix::<half::f16>::upload(gpu, &b).unwrap());
            for (alpha, beta) in SCALARS {
                let mut c = DeviceMatrix::<f32>::upload(gpu, &c0).unwrap();
                if beta == 0.0 {
                    c.poison().unwrap(); // values and padding: beta = 0 must not read C
                }
                let before = raw(gpu, &c);
                match kind {
                    Kind::F32 => blas.gemm(GemmMath::F32, alpha, (&da, ta), (&db, tb), beta, &mut c),
                    Kind::Tf32 => blas.gemm(GemmMath::Tf32, alpha, (&da, ta), (&db, tb), beta, &mut c),
                    Kind::F16 => blas.gemm_f16(alpha, (&ha, ta), (&hb, tb), beta, &mut c),
                }
                .unwrap();
                gpu.synchronize().unwrap();
                let got = c.download().unwrap();
                let want = combine(alpha as f64, &prod, beta as f64, &c0);
                let err = rel_error(&got.data, &want);
                let what = format!("{kind:?} m={m} n={n} k={k} ta={ta} tb={tb} alpha={alpha} beta={beta}");
                assert!(err < kind.tolerance(), "{what}: relative error {err} >= {}", kind.tolerance());
                assert_padding_kept(&what, &c, &before, &raw(gpu, &c));
                if m * n > 10_000 {
                    println!("{what}: rel err {err:.2e}");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CPU: the argument mapping

/// cuBLAS's GEMM on column-major buffers: C = alpha op(A) op(B) + beta C, element (r, c) of a
/// column-major matrix at `r + c * ld`; C not read when beta = 0.
fn colmajor_gemm(g: &ColumnMajorGemm, alpha: f64, a: &[f32], b: &[f32], beta: f64, c: &mut [f32]) {
    for j in 0..g.n {
        for i in 0..g.m {
            let mut s = 0f64;
            for p in 0..g.k {
                let aip = if g.transa { a[p + i * g.lda] } else { a[i + p * g.lda] };
                let bpj = if g.transb { b[j + p * g.ldb] } else { b[p + j * g.ldb] };
                s += aip as f64 * bpj as f64;
            }
            let idx = i + j * g.ldc;
            c[idx] = if beta == 0.0 { (alpha * s) as f32 } else { (alpha * s + beta * c[idx] as f64) as f32 };
        }
    }
}

/// A row-major host matrix in a buffer with stride `ld` and NaN padding.
fn padded(x: &Matrix, ld: usize) -> Vec<f32> {
    let mut buf = vec![f32::NAN; x.rows * ld];
    for r in 0..x.rows {
        buf[r * ld..r * ld + x.cols].copy_from_slice(x.row(r));
    }
    buf
}

#[test]
fn column_major_mapping_computes_the_row_major_product() {
    let mut seed = 1;
    for &(m, n, k) in &[(1, 1, 1), (2, 3, 4), (5, 1, 3), (1, 7, 2), (9, 8, 5), (8, 9, 17), (3, 3, 1)] {
        for (ta, tb) in TRANS {
            for (alpha, beta) in [(1.0f32, 0.0f32), (-0.5, 2.0)] {
                seed += 3;
                let a = Matrix::random(if ta { k } else { m }, if ta { m } else { k }, seed);
                let b = Matrix::random(if tb { n } else { k }, if tb { k } else { n }, seed + 1);
                let c0 = Matrix::random(m, n, seed + 2);
                // Strides above the padded ones too: the mapping must use the stride, not cols.
                let (lda, ldb, ldc) = (padded_ld(a.cols) + 3, padded_ld(b.cols), padded_ld(n) + 1);
                let g = column_major_args(
                    RowMajor::new(a.rows, a.cols, lda),
                    ta,
                    RowMajor::new(b.rows, b.cols, ldb),
                    tb,
                    RowMajor::new(m, n, ldc),
                )
                .unwrap();
                assert_eq!((g.m, g.n, g.k), (n, m, k), "cuBLAS sees Cᵀ (n x m)");
                let (abuf, bbuf) = (padded(&a, lda), padded(&b, ldb));
                let mut cbuf = padded(&c0, ldc);
                if beta == 0.0 {
                    for r in 0..m {
                        cbuf[r * ldc..r * ldc + n].fill(f32::NAN);
                    }
                }
                // cuBLAS's first operand is our B, its second our A.
                colmajor_gemm(&g, alpha as f64, &bbuf, &abuf, beta as f64, &mut cbuf);
                let want = combine(alpha as f64, &product_f64(&a, ta, &b, tb), beta as f64, &c0);
                let got: Vec<f32> = (0..m).flat_map(|r| cbuf[r * ldc..r * ldc + n].to_vec()).collect();
                let err = rel_error(&got, &want);
                assert!(err < 1e-6, "m={m} n={n} k={k} ta={ta} tb={tb}: relative error {err}");
                for r in 0..m {
                    assert!(cbuf[r * ldc + n..(r + 1) * ldc].iter().all(|v| v.is_nan()), "padding of C written");
                }
            }
        }
    }
}

#[test]
fn column_major_mapping_arguments() {
    // C (3 x 5) = A (3 x 4) B (4 x 5), padded strides 8, 8, 8.
    let g = column_major_args(RowMajor::new(3, 4, 8), false, RowMajor::new(4, 5, 8), false, RowMajor::new(3, 5, 8)).unwrap();
    assert_eq!(g, ColumnMajorGemm { transa: false, transb: false, m: 5, n: 3, k: 4, lda: 8, ldb: 8, ldc: 8 });
    // C (3 x 5) = Aᵀ (A 4 x 3) Bᵀ (B 5 x 4): the transposes swap with the operands.
    let g = column_major_args(RowMajor::new(4, 3, 8), true, RowMajor::new(5, 4, 16), false, RowMajor::new(3, 5, 8));
    assert!(matches!(g, Err(Error::Shape(_))), "B 5x4 untransposed has k = 5 != 4");
    let g = column_major_args(RowMajor::new(4, 3, 8), true, RowMajor::new(5, 4, 16), true, RowMajor::new(3, 5, 8)).unwrap();
    assert_eq!(g, ColumnMajorGemm { transa: true, transb: true, m: 5, n: 3, k: 4, lda: 16, ldb: 8, ldc: 8 });
    // k = 0: the empty operands' stride 0 becomes 1 (cuBLAS rejects 0).
    let g = column_major_args(RowMajor::new(3, 0, 0), false, RowMajor::new(0, 5, 8), false, RowMajor::new(3, 5, 8)).unwrap();
    assert_eq!((g.k, g.lda, g.ldb), (0, 8, 1));
}

#[test]
fn column_major_mapping_rejects_bad_shapes() {
    let (a, b, c) = (RowMajor::new(3, 4, 8), RowMajor::new(5, 6, 8), RowMajor::new(3, 6, 8));
    match column_major_args(a, false, b, false, c) {
        Err(Error::Shape(msg)) => {
            for s in ["A 3x4", "B 5x6", "C 3x6"] {
                assert!(msg.contains(s), "message {msg:?} does not name {s}");
            }
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    // Wrong C.
    let r = column_major_args(RowMajor::new(3, 4, 8), false, RowMajor::new(4, 6, 8), false, RowMajor::new(6, 3, 8));
    assert!(matches!(r, Err(Error::Shape(_))));
    // A stride below the columns.
    let r = column_major_args(RowMajor::new(3, 9, 8), false, RowMajor::new(9, 6, 8), false, RowMajor::new(3, 6, 8));
    assert!(matches!(r, Err(Error::Shape(_))));
    // Beyond 32-bit int.
    let big = 1usize << 31;
    let r = column_major_args(RowMajor::new(1, big, big), false, RowMajor::new(big, 1, 8), false, RowMajor::new(1, 1, 8));
    assert!(matches!(r, Err(Error::Unsupported(_))));
}

// ---------------------------------------------------------------------------------------------
// GPU: GEMM

#[test]
fn gemm_f32_all_transposes() {
    let Some((gpu, blas, _lock)) = setup("gemm_f32_all_transposes") else { return };
    check_all(&gpu, blas, Kind::F32);
}

#[test]
fn gemm_tf32_all_transposes() {
    let Some((gpu, blas, _lock)) = setup("gemm_tf32_all_transposes") else { return };
    check_all(&gpu, blas, Kind::Tf32);
}

#[test]
fn gemm_f16_inputs_all_transposes() {
    let Some((gpu, blas, _lock)) = setup("gemm_f16_inputs_all_transposes") else { return };
    check_all(&gpu, blas, Kind::F16);
}

#[test]
fn gemm_k_zero_and_empty_shapes() {
    let Some((gpu, blas, _lock)) = setup("gemm_k_zero_and_empty_shapes") else { return };
    let (m, n) = (5, 7);
    let c0 = Matrix::random(m, n, 77);
    for (ta, tb) in TRANS {
        let a = DeviceMatrix::<f32>::zeros(&gpu, if ta { 0 } else { m }, if ta { m } else { 0 }).unwrap();
        let b = DeviceMatrix::<f32>::zeros(&gpu, if tb { n } else { 0 }, if tb { 0 } else { n }).unwrap();
        let (ha, hb) = (
            DeviceMatrix::<half::f16>::zeros(&gpu, a.rows, a.cols).unwrap(),
            DeviceMatrix::<half::f16>::zeros(&gpu, b.rows, b.cols).unwrap(),
        );
        for (beta, f16) in [(0.0f32, false), (1.0, false), (2.5, false), (0.0, true), (-3.0, true)] {
            let mut c = DeviceMatrix::<f32>::upload(&gpu, &c0).unwrap();
            if beta == 0.0 {
                c.poison().unwrap();
            }
            let before = raw(&gpu, &c);
            if f16 {
                blas.gemm_f16(1.5, (&ha, ta), (&hb, tb), beta, &mut c).unwrap();
            } else {
                blas.gemm(GemmMath::F32, 1.5, (&a, ta), (&b, tb), beta, &mut c).unwrap();
            }
            gpu.synchronize().unwrap();
            let got = c.download().unwrap();
            let want: Vec<f64> = c0.data.iter().map(|&v| if beta == 0.0 { 0.0 } else { beta as f64 * v as f64 }).collect();
            let what = format!("k = 0, ta={ta} tb={tb} beta={beta} f16={f16}");
            assert!(rel_error(&got.data, &want) < 1e-6, "{what}: got {:?}", &got.data[..n]);
            assert_padding_kept(&what, &c, &before, &raw(&gpu, &c));
        }
    }
    // Empty C: nothing to do, no error.
    let a = DeviceMatrix::<f32>::zeros(&gpu, 0, 4).unwrap();
    let b = DeviceMatrix::<f32>::upload(&gpu, &Matrix::random(4, 7, 5)).unwrap();
    let mut c = DeviceMatrix::<f32>::zeros(&gpu, 0, 7).unwrap();
    blas.gemm(GemmMath::F32, 1.0, (&a, false), (&b, false), 0.0, &mut c).unwrap();
    let a = DeviceMatrix::<f32>::upload(&gpu, &Matrix::random(5, 4, 6)).unwrap();
    let b = DeviceMatrix::<f32>::zeros(&gpu, 4, 0).unwrap();
    let mut c = DeviceMatrix::<f32>::zeros(&gpu, 5, 0).unwrap();
    blas.gemm(GemmMath::Tf32, 1.0, (&a, false), (&b, false), 1.0, &mut c).unwrap();
    gpu.synchronize().unwrap();
}

#[test]
fn gemm_shape_mismatch_is_an_error() {
    let Some((gpu, blas, _lock)) = setup("gemm_shape_mismatch_is_an_error") else { return };
    let m = |r, c, s| DeviceMatrix::<f32>::upload(&gpu, &Matrix::random(r, c, s)).unwrap();
    let (a, b, mut c) = (m(3, 4, 1), m(5, 6, 2), m(3, 6, 3));
    match blas.gemm(GemmMath::F32, 1.0, (&a, false), (&b, false), 0.0, &mut c) {
        Err(Error::Shape(msg)) => assert!(msg.contains("A 3x4") && msg.contains("B 5x6") && msg.contains("C 3x6"), "{msg}"),
        other => panic!("expected a shape error, got {other:?}"),
    }
    // Right inner dimension, wrong C; and a transpose that breaks an otherwise good product.
    let (b, mut c_bad) = (m(4, 6, 4), m(6, 3, 5));
    assert!(matches!(blas.gemm(GemmMath::Tf32, 1.0, (&a, false), (&b, false), 0.0, &mut c_bad), Err(Error::Shape(_))));
    assert!(matches!(blas.gemm(GemmMath::F32, 1.0, (&a, true), (&b, false), 0.0, &mut c), Err(Error::Shape(_))));
    let h = |r, c, s| DeviceMatrix::<half::f16>::upload(&gpu, &Matrix::random(r, c, s)).unwrap();
    assert!(matches!(blas.gemm_f16(1.0, (&h(3, 4, 6), false), (&h(3, 6, 7), false), 0.0, &mut c), Err(Error::Shape(_))));
    // The good product still works afterwards.
    blas.gemm(GemmMath::F32, 1.0, (&a, false), (&b, false), 0.0, &mut c).unwrap();
    gpu.synchronize().unwrap();
}

// ---------------------------------------------------------------------------------------------
// GPU: graph capture

/// Y = S (X W) in f64, and X W.
fn gcn_reference(s: &Csr, x: &Matrix, w: &Matrix) -> (Vec<f64>, Vec<f64>) {
    let h = product_f64(x, false, w, false);
    let k = w.cols;
    let mut y = vec![0f64; s.n_rows() * k];
    for r in 0..s.n_rows() {
        for e in s.row_ptr()[r] as usize..s.row_ptr()[r + 1] as usize {
            let (c, v) = (s.col_idx()[e] as usize, s.values()[e] as f64);
            for j in 0..k {
                y[r * k + j] += v * h[c * k + j];
            }
        }
    }
    (y, h)
}

#[test]
fn captured_gemm_spmm_memset_replays_on_new_inputs() {
    let Some((gpu, blas, _lock)) = setup("captured_gemm_spmm_memset_replays_on_new_inputs") else { return };
    let s = common::random_graph(2708, 4, 9, 31);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let (n, fin, fout) = (s.n_rows(), 37, 16);
    let (x0, w0) = (Matrix::random(n, fin, 41), Matrix::random(fin, fout, 42));
    let mut x = DeviceMatrix::<f32>::upload(&gpu, &x0).unwrap();
    let mut w = DeviceMatrix::<f32>::upload(&gpu, &w0).unwrap();
    let mut h = DeviceFeatures::F32(DeviceMatrix::<f32>::zeros(&gpu, n, fout).unwrap());
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, n, fout).unwrap();
    let mut z = DeviceMatrix::<f32>::zeros(&gpu, 3, 5).unwrap();

    // One layer's forward: H = X W (cuBLAS), Y = S H (our HP kernel), and a memset.
    let step =
        |x: &DeviceMatrix<f32>, w: &DeviceMatrix<f32>, h: &mut DeviceFeatures, y: &mut DeviceMatrix<f32>, z: &mut DeviceMatrix<f32>| {
            let DeviceFeatures::F32(hm) = h else { unreachable!() };
            blas.gemm(GemmMath::F32, 1.0, (x, false), (w, false), 0.0, hm)?;
            spmm_device(&g, &*h, y, Impl::Hp)?;
            z.zero()
        };
    let check = |what: &str, x: &Matrix, w: &Matrix, h: &DeviceFeatures, y: &DeviceMatrix<f32>, z: &DeviceMatrix<f32>| {
        let (want_y, want_h) = gcn_reference(&s, x, w);
        let DeviceFeatures::F32(hm) = h else { unreachable!() };
        let err_h = rel_error(&hm.download().unwrap().data, &want_h);
        let err_y = rel_error(&y.download().unwrap().data, &want_y);
        println!("{what}: H rel err {err_h:.2e}, Y rel err {err_y:.2e}");
        assert!(err_h < 1e-5 && err_y < 1e-5, "{what}: H rel err {err_h}, Y rel err {err_y}");
        assert!(raw(&gpu, z).iter().all(|&v| v == 0.0), "{what}: the memset did not run");
        let hr = raw(&gpu, hm);
        assert!((0..n).all(|r| hr[r * hm.ld + fout..(r + 1) * hm.ld].iter().all(|&v| v == 0.0)), "{what}: H padding written");
    };

    // Eager warm-up: translations, uploads and kernel lookups happen here, outside the capture.
    step(&x, &w, &mut h, &mut y, &mut z).unwrap();
    gpu.synchronize().unwrap();
    check("eager", &x0, &w0, &h, &y, &z);

    let graph = gpu.capture(|| step(&x, &w, &mut h, &mut y, &mut z)).unwrap();
    for rep in 0..3u64 {
        let (xr, wr) = (Matrix::random(n, fin, 100 + rep), Matrix::random(fin, fout, 200 + rep));
        write(&gpu, &mut x, &xr);
        write(&gpu, &mut w, &wr);
        y.poison().unwrap();
        z.poison().unwrap();
        graph.replay().unwrap();
        gpu.synchronize().unwrap();
        check(&format!("replay {rep}"), &xr, &wr, &h, &y, &z);
    }
    // Two replays queued back to back, then the graph dropped before they finish.
    graph.replay().unwrap();
    graph.replay().unwrap();
    drop(graph);
    gpu.synchronize().unwrap();
    check("after two more replays", &Matrix::random(n, fin, 102), &Matrix::random(fin, fout, 202), &h, &y, &z);
}

#[test]
fn capture_errors_end_the_capture() {
    let Some((gpu, blas, _lock)) = setup("capture_errors_end_the_capture") else { return };
    let (a0, b0) = (Matrix::random(33, 13, 51), Matrix::random(13, 7, 52));
    let a = DeviceMatrix::<f32>::upload(&gpu, &a0).unwrap();
    let b = DeviceMatrix::<f32>::upload(&gpu, &b0).unwrap();
    let mut c = DeviceMatrix::<f32>::zeros(&gpu, 33, 7).unwrap();
    let want = product_f64(&a0, false, &b0, false);
    let mut eager_gemm_works = |what: &str| {
        assert_eq!(
            gpu.stream().capture_status().unwrap(),
            cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
            "{what}: the stream is still capturing"
        );
        c.poison().unwrap();
        blas.gemm(GemmMath::F32, 1.0, (&a, false), (&b, false), 0.0, &mut c).unwrap();
        gpu.synchronize().unwrap();
        let err = rel_error(&c.download().unwrap().data, &want);
        assert!(err < 1e-5, "{what}: relative error {err}");
    };
    eager_gemm_works("warm-up");

    // The closure's own error comes back unchanged.
    match gpu.capture(|| Err(Error::Unsupported("deliberate".into()))) {
        Err(Error::Unsupported(msg)) => assert_eq!(msg, "deliberate"),
        other => panic!("expected the closure's error, got {other:?}"),
    }
    eager_gemm_works("after a failing closure");

    // Work queued, then a failure (a shape error) inside the capture.
    let mut c2 = DeviceMatrix::<f32>::zeros(&gpu, 33, 7).unwrap();
    let r = gpu.capture(|| {
        blas.gemm(GemmMath::F32, 1.0, (&a, false), (&b, false), 0.0, &mut c2)?;
        blas.gemm(GemmMath::F32, 1.0, (&b, false), (&a, false), 0.0, &mut c2)
    });
    assert!(matches!(r, Err(Error::Shape(_))), "{r:?}");
    eager_gemm_works("after a shape error inside the capture");

    // Something that cannot be captured (a synchronize) is an error, not a broken stream.
    let r = gpu.capture(|| gpu.synchronize());
    assert!(matches!(r, Err(Error::Cuda { .. })), "synchronize inside a capture: {r:?}");
    eager_gemm_works("after a synchronize inside the capture");

    // An allocation inside the capture (cudarc's stream-ordered alloc would be recorded as a
    // graph node whose buffer a second replay cannot allocate again) is refused by name.
    let r = gpu.capture(|| DeviceVec::<f32>::zeros(&gpu, 1000).map(|_| ()));
    assert!(matches!(&r, Err(Error::Unsupported(m)) if m.contains("allocating 1000 elements")), "allocation inside a capture: {r:?}");
    eager_gemm_works("after an allocation inside the capture");

    // A panic inside the closure: the capture is ended as the panic unwinds.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = gpu.capture(|| panic!("deliberate panic"));
    }));
    assert!(caught.is_err());
    eager_gemm_works("after a panic inside the capture");

    // And capturing works again.
    let graph = gpu.capture(|| blas.gemm(GemmMath::F32, 1.0, (&a, false), (&b, false), 0.0, &mut c2)).unwrap();
    c2.poison().unwrap();
    graph.replay().unwrap();
    gpu.synchronize().unwrap();
    let err = rel_error(&c2.download().unwrap().data, &want);
    assert!(err < 1e-5, "graph after the failures: relative error {err}");
}
