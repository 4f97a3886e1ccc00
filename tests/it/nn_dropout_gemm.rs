//! Input dropout fused with the first product (`tcgnn::ops::nn::dropout_gemm`).
//!
//! CPU: the fused products equal dropout-then-product (forward bit for bit, the weight gradient
//! to f64 rounding) with the dropout op's own mask, offsets past 2^32 included; the weight
//! gradient against finite differences; every model's loss and gradients with fused input
//! dropout equal the unfused ones over several steps, and a whole model's gradients with the
//! fused input against finite differences in f64.
//! GPU (skipped without one): both kernels against the f64 CPU reference, outputs poisoned
//! first, on odd shapes (N = 1, N not a multiple of the 64-row tile, K not a multiple of 8,
//! widths over one column tile), in tf32 (the tf32 and f16 precisions' math) and 3xTF32 (f32);
//! the step counter read on the device; timing beside dropout + cuBLAS at R-MAT 2^18 x 500.

use crate::common;

use tcgnn::gpu::cublas::{Blas, GemmMath};
use tcgnn::gpu::memory::padded_ld;
use tcgnn::gpu::timing::time_gpu;
use tcgnn::gpu::{DeviceMatrix, DeviceVec};
use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::backend::{Backend, TEST_BIT, TRAIN_BIT, VAL_BIT};
use tcgnn::nn::input::{HostFeatures, InputFeatures};
use tcgnn::nn::models::{self, Model, default_config};
use tcgnn::nn::{CpuBackend, ModelConfig};
use tcgnn::ops::backend::cuda::step_increment;
use tcgnn::ops::nn::cross_entropy::CrossEntropyOp;
use tcgnn::ops::nn::dropout_gemm::*;
use tcgnn::ops::nn::{DropKey, dropout_matrix, dropout_matrix_cpu_at, input_dropout_matrix};
use tcgnn::ops::{DeviceFeatures, Precision};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

/// Uniform in [-1, 1), exactly representable in f32 (the GPU sees the same inputs).
fn rand(n: usize, seed: u64) -> Vec<f64> {
    SplitMix64::new(seed).vec_f32(n).into_iter().map(|v| v as f64).collect()
}

/// dropout(x) w and dropout(x)ᵀ dy by the unfused route: the dropout op's mask, then plain
/// f64 sums.
#[allow(clippy::too_many_arguments)]
fn unfused(
    x: &[f64],
    rows: usize,
    k: usize,
    w: &[f64],
    dy: &[f64],
    n: usize,
    p: f32,
    seed: u64,
    step: u32,
    offset: u64,
) -> (Vec<f64>, Vec<f64>) {
    let mut xd = vec![0.0; rows * k];
    let mut mask = vec![0u8; rows * padded_ld(k)];
    dropout_matrix_cpu_at(x, rows, k, &mut xd, &mut mask, DropKey::new(p, seed).at(offset), step).unwrap();
    let mut y = vec![0.0; rows * n];
    let mut dw = vec![0.0; k * n];
    for r in 0..rows {
        for c in 0..k {
            for j in 0..n {
                y[r * n + j] += xd[r * k + c] * w[c * n + j];
                dw[c * n + j] += xd[r * k + c] * dy[r * n + j];
            }
        }
    }
    (y, dw)
}

fn rel64(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}

// ------------------------------------------------------------------ CPU

#[test]
fn cpu_fused_products_equal_dropout_then_product() {
    // (rows, k, n, offset): N = 1, K not a multiple of 8, an offset whose rows straddle 2^32.
    for (rows, k, n, offset) in [(1, 1, 1, 0u64), (37, 7, 5, 0), (70, 33, 16, 3), (1100, 13, 9, (1u64 << 32) - 40)] {
        let (p, seed, step) = (0.4f32, 0xABCD, 3);
        let (x, w, dy) = (rand(rows * k, 1), rand(k * n, 2), rand(rows * n, 3));
        let (want_y, want_dw) = unfused(&x, rows, k, &w, &dy, n, p, seed, step, offset);
        let mut y = vec![f64::NAN; rows * n];
        dropout_gemm_cpu(&x, (rows, k), &w, n, &mut y, DropKey::new(p, seed).at(offset), step).unwrap();
        assert!(rel64(&y, &want_y) < 1e-14, "y {rows}x{k}x{n}: {}", rel64(&y, &want_y));
        let mut dw = vec![f64::NAN; k * n];
        dropout_gemm_dw_cpu(&x, (rows, k), &dy, n, &mut dw, DropKey::new(p, seed).at(offset), step).unwrap();
        assert!(rel64(&dw, &want_dw) < 1e-13, "dw {rows}x{k}x{n}: {}", rel64(&dw, &want_dw));
        // A different step draws a different mask (the products are not the undropped ones).
        let mut y2 = vec![0.0; rows * n];
        dropout_gemm_cpu(&x, (rows, k), &w, n, &mut y2, DropKey::new(p, seed).at(offset), step + 1).unwrap();
        assert!(rows * k < 8 || y2 != y, "step {step} and {} drew the same mask", step + 1);
    }
    // p outside [0, 1) and wrong lengths are errors, not panics.
    let mut y = vec![0.0; 4];
    assert!(dropout_gemm_cpu(&[0.0; 4], (2, 2), &[0.0; 4], 2, &mut y, DropKey::new(1.0, 0).at(0), 0).is_err());
    assert!(dropout_gemm_cpu(&[0.0; 3], (2, 2), &[0.0; 4], 2, &mut y, DropKey::new(0.5, 0).at(0), 0).is_err());
}

#[test]
fn cpu_fused_weight_gradient_matches_finite_differences() {
    // L(w) = Σ dy ⊙ (dropout(x) w): dL/dw = dropout(x)ᵀ dy.
    let (rows, k, n, p, seed, step) = (29, 6, 3, 0.5f32, 7, 2);
    let (x, mut w, dy) = (rand(rows * k, 4), rand(k * n, 5), rand(rows * n, 6));
    let loss = |w: &[f64]| {
        let mut y = vec![0.0; rows * n];
        dropout_gemm_cpu(&x, (rows, k), w, n, &mut y, DropKey::new(p, seed).at(0), step).unwrap();
        y.iter().zip(&dy).map(|(a, b)| a * b).sum::<f64>()
    };
    let mut dw = vec![0.0; k * n];
    dropout_gemm_dw_cpu(&x, (rows, k), &dy, n, &mut dw, DropKey::new(p, seed).at(0), step).unwrap();
    let h = 1e-6;
    let fd: Vec<f64> = (0..k * n)
        .map(|i| {
            let w0 = w[i];
            w[i] = w0 + h;
            let up = loss(&w);
            w[i] = w0 - h;
            let down = loss(&w);
            w[i] = w0;
            (up - down) / (2.0 * h)
        })
        .collect();
    assert!(dw.iter().any(|v| v.abs() > 1e-3), "vanishing gradient proves nothing");
    assert!(rel64(&dw, &fd) < 1e-8, "dw vs finite differences: {}", rel64(&dw, &fd));
}

type B = CpuBackend<f64>;

/// A directed graph with an isolated node and a hub row, dense features, labels, masks.
struct Problem {
    graph: Csr,
    features: HostFeatures,
    labels: Vec<i32>,
    bits: Vec<u8>,
    classes: usize,
}

fn problem(n: usize, f: usize, classes: usize, seed: u64) -> Problem {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 2..n as u32 {
        for _ in 0..rng.below(4) {
            t.push((r, 2 + rng.below(n as u64 - 2) as u32, 1.0));
        }
    }
    for c in (2..n as u32).step_by(3) {
        t.push((1, c, 1.0));
    }
    let graph = pattern(&Csr::from_triplets(n, n, &t).unwrap().canonical());
    let labels = (0..n).map(|_| rng.below(classes as u64) as i32).collect();
    let bits = (0..n).map(|i| [TRAIN_BIT, TRAIN_BIT, VAL_BIT, TEST_BIT][i % 4]).collect();
    Problem { graph, features: HostFeatures::Dense(Matrix::random(n, f, seed + 2)), labels, bits, classes }
}

fn small(name: &str) -> ModelConfig {
    let d = default_config(name).unwrap();
    ModelConfig { layers: 2, hidden: 5, heads: d.heads.min(2), dropout: 0.4, seed: 3, ..d }
}

/// Forward in training mode, the loss, and (with `backward`) every parameter's gradient.
fn step(b: &B, net: &mut dyn Model<B>, input: &mut InputFeatures<B>, p: &Problem, labels: &<B as Backend>::Labels, backward: bool) -> f64 {
    let n_train = p.bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    let logits = net.forward(b, input, true).unwrap();
    let (r, c) = B::shape(logits);
    let mut d = b.matrix(r, c).unwrap();
    let mut s = b.stats().unwrap();
    b.cross_entropy(logits, labels, 1.0 / n_train as f32, &mut d, &mut s).unwrap();
    if backward {
        net.backward(b, input, &mut d).unwrap();
    }
    b.read_stats(&s).unwrap().loss
}

#[test]
fn cpu_models_train_alike_with_fused_and_unfused_input_dropout() {
    let p = problem(41, 11, 3, 5);
    for name in ["gcn", "sage", "gin", "agnn", "gat"] {
        let cfg = small(name);
        let run = |fused: bool| {
            let b = B::new();
            let mut net = models::build(&b, &p.graph, p.features.cols(), p.classes, &cfg).unwrap();
            let mut input = InputFeatures::with_fusion(&b, &p.features, fused).unwrap();
            assert_eq!(matches!(input, InputFeatures::DenseFused { .. }), fused);
            let labels = b.labels(&p.labels, &p.bits).unwrap();
            let mut out = Vec::new();
            for _ in 0..4 {
                b.begin_step().unwrap(); // a fresh input mask every step
                let loss = step(&b, &mut *net, &mut input, &p, &labels, true);
                let grads: Vec<f64> = net.params().iter().flat_map(|(_, q)| q.grad.data.clone()).collect();
                for (_, q) in net.params() {
                    let g = q.grad.data.clone();
                    q.value.data.iter_mut().zip(g).for_each(|(v, g)| *v -= 0.5 * g);
                }
                out.push((loss, grads));
            }
            out
        };
        let (fused, plain) = (run(true), run(false));
        // The forward products are the same sums in the same order: step 1's loss is bit-equal;
        // the weight gradient sums rows in another order, so later steps agree to rounding.
        assert_eq!(fused[0].0, plain[0].0, "{name}: first loss");
        for (s, ((lf, gf), (lp, gp))) in fused.iter().zip(&plain).enumerate() {
            assert!((lf - lp).abs() <= 1e-12 * lp.abs(), "{name} step {s}: loss {lf} fused vs {lp}");
            assert!(rel64(gf, gp) < 1e-12, "{name} step {s}: gradients differ by {}", rel64(gf, gp));
        }
        assert!(fused[3].0 != fused[0].0, "{name}: the loss never moved");
    }
}

#[test]
fn cpu_models_with_fused_input_dropout_match_finite_differences() {
    let p = problem(23, 6, 3, 11);
    for name in ["gcn", "sage", "gin"] {
        let b = B::new();
        let mut net = models::build(&b, &p.graph, p.features.cols(), p.classes, &small(name)).unwrap();
        let mut input = InputFeatures::with_fusion(&b, &p.features, true).unwrap();
        let labels = b.labels(&p.labels, &p.bits).unwrap();
        b.begin_step().unwrap();
        // Off the ReLU kinks of all-dropped rows (see tests/nn_grad.rs).
        let mut rng = SplitMix64::new(77);
        for (_, q) in net.params() {
            q.value.data.iter_mut().for_each(|v| *v += rng.uniform(-0.1, 0.1) as f64);
        }
        step(&b, &mut *net, &mut input, &p, &labels, true);
        let grads: Vec<Vec<f64>> = net.params().iter().map(|(_, q)| q.grad.data.clone()).collect();
        let h = 1e-6;
        for (pi, g) in grads.iter().enumerate() {
            for (i, &gi) in g.iter().enumerate() {
                let orig = net.params()[pi].1.value.data[i];
                net.params()[pi].1.value.data[i] = orig + h;
                let up = step(&b, &mut *net, &mut input, &p, &labels, false);
                net.params()[pi].1.value.data[i] = orig - h;
                let down = step(&b, &mut *net, &mut input, &p, &labels, false);
                net.params()[pi].1.value.data[i] = orig;
                let fd = (up - down) / (2.0 * h);
                let err = (fd - gi).abs() / (1e-6 + fd.abs().max(gi.abs()));
                assert!(
                    err < 1e-4 || (fd - gi).abs() < 1e-8,
                    "{name} {} [{i}]: analytic {gi} vs finite difference {fd}",
                    net.params()[pi].1.value.rows
                );
            }
        }
        assert!(grads[0].iter().any(|v| v.abs() > 1e-6), "{name}: first weight's gradient vanishes");
    }
}

// ------------------------------------------------------------------ GPU

#[test]
fn gpu_fused_products_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_fused_products_match_cpu") else { return };
    // Rows: 1, not a multiple of 64 (forward tile) or 32 (gradient step); k: not a multiple of
    // 8, one chunk, several; n: each kernel instance (2 / 4 / 8 n8 tiles) and several column
    // tiles (100, 256). n ≤ 32 runs the streaming kernels unless w's fragments are too large to
    // stage (k = 3703: the tiled kernels again); 24 fills 3 of the 4 n8 tiles.
    let shapes = [
        (1, 1, 1),
        (1, 500, 16),
        (37, 7, 5),
        (65, 33, 16),
        (130, 130, 32),
        (2051, 500, 16),
        (2051, 500, 24),
        (2051, 63, 64),
        (4100, 500, 100),
        (1000, 72, 256),
        (300, 3703, 16),
        (70_001, 500, 16),
    ];
    let mut step = DeviceVec::upload(&gpu, &[4u32]).unwrap();
    step_increment(&gpu, &mut step).unwrap(); // the kernels read 5 from the device
    for (math, tol_math) in [(GemmMath::Tf32, 5e-3), (GemmMath::F32, 1e-5)] {
        for &(rows, k, n) in &shapes {
            // The tensor cores' f32 accumulation truncates: 3xTF32's error grows with k (k = 3703
            // measured 2.6e-5 on the H100), so the f32 bound scales with k past 500.
            let tol = if math == GemmMath::F32 { tol_math * (k as f64 / 500.0).max(1.0) } else { tol_math };
            for offset in [0u64, (1u64 << 32) - 4 * padded_ld(k) as u64 - 2] {
                let (p, seed) = (0.5f32, 0x5EED + rows as u64);
                let (x, w, dy) = (rand(rows * k, rows as u64), rand(k * n, 9), rand(rows * n, 10));
                let (want_y, want_dw) = unfused(&x, rows, k, &w, &dy, n, p, seed, 5, offset);
                let up = |r: usize, c: usize, v: &[f64]| {
                    DeviceMatrix::upload(&gpu, &Matrix::from_vec(r, c, v.iter().map(|&a| a as f32).collect()).unwrap()).unwrap()
                };
                let (xd, wd, dyd) = (up(rows, k, &x), up(k, n, &w), up(rows, n, &dy));
                let mut yd = DeviceMatrix::<f32>::zeros(&gpu, rows, n).unwrap();
                yd.poison().unwrap();
                dropout_gemm(&xd, &wd, &mut yd, DropKey::new(p, seed).at(offset), &step, math).unwrap();
                let what = format!("{math:?} {rows} x {k} x {n} offset {offset}");
                // A product's padding is zero and its values match the reference.
                let check = |m: &DeviceMatrix<f32>, r: usize, want: &[f64], what: &str| {
                    let (got, ld) = (m.download_padded().unwrap(), padded_ld(n));
                    assert!(got.iter().enumerate().all(|(i, v)| i % ld < n || *v == 0.0), "{what}: padding not zero");
                    let gv: Vec<f32> = (0..r * n).map(|i| got[(i / n) * ld + i % n]).collect();
                    let e = rel_error(&gv, want);
                    assert!(e < tol, "{what}: rel error {e:.2e} (tolerance {tol:.0e})");
                };
                check(&yd, rows, &want_y, &format!("{what} y"));

                let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_scratch_len(&gpu, rows, k, n, false).unwrap()).unwrap();
                let mut dwd = DeviceMatrix::<f32>::zeros(&gpu, k, n).unwrap();
                dwd.poison().unwrap();
                dropout_gemm_dw(&xd, &dyd, &mut dwd, &mut scratch, DropKey::new(p, seed).at(offset), &step, math).unwrap();
                check(&dwd, k, &want_dw, &format!("{what} dw"));
                // Deterministic: a second run gives the same bits.
                let dw = dwd.download_padded().unwrap();
                dropout_gemm_dw(&xd, &dyd, &mut dwd, &mut scratch, DropKey::new(p, seed).at(offset), &step, math).unwrap();
                assert_eq!(dwd.download_padded().unwrap(), dw, "{what}: dw not deterministic");

                // x stored in f16 (the f16 precision's features): the streaming kernels read it
                // and multiply in tf32; the reference is the same products on x rounded to f16.
                // Elsewhere (outputs past 32 columns, w too large to stage, 3xTF32) it is refused.
                let xh: Vec<f64> = x.iter().map(|&v| half::f16::from_f64(v).to_f64()).collect();
                let xhd = DeviceFeatures::upload(
                    &gpu,
                    &Matrix::from_vec(rows, k, x.iter().map(|&a| a as f32).collect()).unwrap(),
                    Precision::F16,
                )
                .unwrap();
                let DeviceFeatures::F16(xhd) = xhd else { panic!("f16 upload gave f32") };
                let takes = takes_f16_features(k, n);
                if !takes || math == GemmMath::F32 {
                    assert!(
                        dropout_gemm(&xhd, &wd, &mut yd, DropKey::new(p, seed).at(offset), &step, math).is_err(),
                        "{what}: f16 x accepted"
                    );
                    continue;
                }
                let (want_y, want_dw) = unfused(&xh, rows, k, &w, &dy, n, p, seed, 5, offset);
                yd.poison().unwrap();
                dropout_gemm(&xhd, &wd, &mut yd, DropKey::new(p, seed).at(offset), &step, math).unwrap();
                check(&yd, rows, &want_y, &format!("{what} f16 x: y"));
                let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_scratch_len(&gpu, rows, k, n, true).unwrap()).unwrap();
                dwd.poison().unwrap();
                dropout_gemm_dw(&xhd, &dyd, &mut dwd, &mut scratch, DropKey::new(p, seed).at(offset), &step, math).unwrap();
                check(&dwd, k, &want_dw, &format!("{what} f16 x: dw"));
            }
        }
    }
    // A scratch too small is an error, not an overrun.
    let x = DeviceMatrix::<f32>::zeros(&gpu, 1000, 40).unwrap();
    let dy = DeviceMatrix::<f32>::zeros(&gpu, 1000, 16).unwrap();
    let mut dw = DeviceMatrix::<f32>::zeros(&gpu, 40, 16).unwrap();
    let mut small = DeviceVec::<f32>::zeros(&gpu, 1).unwrap();
    assert!(dropout_gemm_dw(&x, &dy, &mut dw, &mut small, DropKey::new(0.5, 0).at(0), &step, GemmMath::Tf32).is_err());
}

/// The wide f16 products (`dropout_gemm_wide` / `dropout_gemm_dw_wide`: outputs of 33-64
/// columns from x's f16 copy). The forward against the f64 product of x and w rounded to f16
/// (the kernel's inputs: f32 accumulation only) and of x rounded and w as given (the f16
/// tolerance); the weight gradient, with the forward's keep bits and with the mask drawn again,
/// against the f64 product of the rounded x (tf32 tolerance: dy rounded to tf32), and
/// deterministic. Outputs poisoned first; odd shapes: one row, rows not a multiple of 16 or
/// 32, k not a multiple of 8, k up to the 896 columns staged, outputs of 33 and 40 columns;
/// offsets past 2^32 (64-bit mask indices); p = 0. Shapes outside it are refused.
#[test]
fn gpu_wide_products_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_wide_products_match_cpu") else { return };
    let mut step = DeviceVec::upload(&gpu, &[4u32]).unwrap();
    step_increment(&gpu, &mut step).unwrap();
    let shapes = [(1, 1, 40), (37, 7, 33), (130, 130, 64), (2051, 500, 64), (4100, 500, 40), (3001, 896, 64), (70_001, 500, 64)];
    let f16r = |v: &[f64]| v.iter().map(|&a| half::f16::from_f64(a).to_f64()).collect::<Vec<_>>();
    let up = |r: usize, c: usize, v: &[f64]| {
        DeviceMatrix::upload(&gpu, &Matrix::from_vec(r, c, v.iter().map(|&a| a as f32).collect()).unwrap()).unwrap()
    };
    for &(rows, k, n) in &shapes {
        for (p, offset) in [(0.6f32, 0u64), (0.6, (1u64 << 32) - 4 * padded_ld(k) as u64 - 2), (0.0, 0)] {
            let seed = 0x77 + rows as u64;
            let (x, w, dy) = (rand(rows * k, rows as u64 + 1), rand(k * n, 11), rand(rows * n, 12));
            let (xh, wh) = (f16r(&x), f16r(&w));
            let (want_exact, _) = unfused(&xh, rows, k, &wh, &dy, n, p, seed, 5, offset);
            let (want, want_dw) = unfused(&xh, rows, k, &w, &dy, n, p, seed, 5, offset);
            let xm = Matrix::from_vec(rows, k, x.iter().map(|&a| a as f32).collect()).unwrap();
            let DeviceFeatures::F16(x16) = DeviceFeatures::upload(&gpu, &xm, Precision::F16).unwrap() else {
                panic!("f16 upload gave f32")
            };
            let (wd, dyd) = (up(k, n, &w), up(rows, n, &dy));
            let what = format!("{rows} x {k} -> {n}, p {p}, offset {offset}");
            let ld = padded_ld(n);
            let mut bits = DeviceVec::<u32>::zeros(&gpu, keep_bits_len(rows, k)).unwrap();
            for with_bits in [false, true] {
                let mut yd = DeviceMatrix::<f32>::zeros(&gpu, rows, n).unwrap();
                yd.poison().unwrap();
                dropout_gemm_wide(&x16, &wd, &mut yd, with_bits.then_some(&mut bits), DropKey::new(p, seed).at(offset), &step).unwrap();
                let got = yd.download_padded().unwrap();
                assert!(got.iter().enumerate().all(|(i, v)| i % ld < n || *v == 0.0), "{what}: y padding not zero");
                let gv: Vec<f32> = (0..rows * n).map(|i| got[(i / n) * ld + i % n]).collect();
                // f32 accumulation on the tensor cores (truncating: the bound grows with k).
                let (e, tol) = (rel_error(&gv, &want_exact), 1e-5 * (k as f64 / 500.0).max(1.0));
                assert!(e < tol, "{what}: rel error {e:.2e} against the product of the rounded inputs");
                let e = rel_error(&gv, &want);
                assert!(e < 1e-2, "{what}: rel error {e:.2e} against w unrounded (f16 tolerance)");
            }
            // The weight gradient: the mask drawn again, then read from the forward's bits.
            let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_wide_scratch_len(&gpu, rows, k, n).unwrap()).unwrap();
            for with_bits in [false, true] {
                let mut dwd = DeviceMatrix::<f32>::zeros(&gpu, k, n).unwrap();
                dwd.poison().unwrap();
                let b = with_bits.then_some(&bits);
                dropout_gemm_dw_wide(&x16, &dyd, &mut dwd, &mut scratch, b, DropKey::new(p, seed).at(offset), &step).unwrap();
                let got = dwd.download_padded().unwrap();
                assert!(got.iter().enumerate().all(|(i, v)| i % ld < n || *v == 0.0), "{what}: dw padding not zero");
                let gv: Vec<f32> = (0..k * n).map(|i| got[(i / n) * ld + i % n]).collect();
                let e = rel_error(&gv, &want_dw);
                assert!(e < 5e-3, "{what}, bits {with_bits}: dw rel error {e:.2e} (tf32 tolerance: dy rounded to tf32)");
                dropout_gemm_dw_wide(&x16, &dyd, &mut dwd, &mut scratch, b, DropKey::new(p, seed).at(offset), &step).unwrap();
                assert_eq!(dwd.download_padded().unwrap(), got, "{what}: dw not deterministic");
            }
        }
    }
    // Refused: outputs of at most 32 or past 64 columns, x wider than it stages, keep bits too
    // short.
    let refused = |rows: usize, k: usize, n: usize, bits_len: usize| {
        let xm = Matrix::random(rows, k, 1);
        let DeviceFeatures::F16(x16) = DeviceFeatures::upload(&gpu, &xm, Precision::F16).unwrap() else { panic!("f16 upload gave f32") };
        let wd = DeviceMatrix::upload(&gpu, &Matrix::random(k, n, 2)).unwrap();
        let mut yd = DeviceMatrix::<f32>::zeros(&gpu, rows, n).unwrap();
        let mut bits = DeviceVec::<u32>::zeros(&gpu, bits_len).unwrap();
        dropout_gemm_wide(&x16, &wd, &mut yd, Some(&mut bits), DropKey::new(0.5, 1).at(0), &step).is_err()
    };
    let full = keep_bits_len(100, 500);
    assert!(
        refused(100, 500, 32, full)
            && refused(100, 500, 65, full)
            && refused(100, 904, 64, keep_bits_len(100, 904))
            && refused(100, 500, 64, full - 1)
    );
    assert!(!refused(100, 500, 64, full));
}

/// The fused products against dropout + cuBLAS on GCN's first layer at R-MAT 2^18 x 500
/// (the bench/NOTES.md shape); prints the times (run with --nocapture).
#[test]
fn gpu_fused_products_time() {
    let Some(gpu) = common::gpu_or_skip("gpu_fused_products_time") else { return };
    let (rows, k) = (1usize << 18, 500);
    let blas = Blas::new(&gpu).unwrap();
    let xm = Matrix::random(rows, k, 1);
    let x = DeviceMatrix::upload(&gpu, &xm).unwrap();
    let DeviceFeatures::F16(xh) = DeviceFeatures::upload(&gpu, &xm, Precision::F16).unwrap() else { panic!("f16 upload gave f32") };
    let mut xd = DeviceMatrix::<f32>::zeros(&gpu, rows, k).unwrap();
    let mut mask = DeviceVec::<u8>::zeros(&gpu, rows * padded_ld(k)).unwrap();
    let step = DeviceVec::upload(&gpu, &[1u32]).unwrap();
    let bytes = (rows * padded_ld(k) * 4) as f64;
    for n in [16usize, 32, 64, 256] {
        let w = DeviceMatrix::upload(&gpu, &Matrix::random(k, n, 2)).unwrap();
        let dy = DeviceMatrix::upload(&gpu, &Matrix::random(rows, n, 3)).unwrap();
        let mut y = DeviceMatrix::<f32>::zeros(&gpu, rows, n).unwrap();
        let mut dw = DeviceMatrix::<f32>::zeros(&gpu, k, n).unwrap();
        let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_scratch_len(&gpu, rows, k, n, false).unwrap()).unwrap();
        for math in [GemmMath::Tf32, GemmMath::F32] {
            // p = 0 skips the mask: the products' time without the hash.
            let fwd0 = time_gpu(&gpu, 3, 20, || dropout_gemm(&x, &w, &mut y, DropKey::new(0.0, 7).at(0), &step, math)).unwrap().median_ms;
            let bwd0 = time_gpu(&gpu, 3, 20, || dropout_gemm_dw(&x, &dy, &mut dw, &mut scratch, DropKey::new(0.0, 7).at(0), &step, math))
                .unwrap()
                .median_ms;
            let fwd = time_gpu(&gpu, 3, 20, || dropout_gemm(&x, &w, &mut y, DropKey::new(0.5, 7).at(0), &step, math)).unwrap().median_ms;
            let bwd = time_gpu(&gpu, 3, 20, || dropout_gemm_dw(&x, &dy, &mut dw, &mut scratch, DropKey::new(0.5, 7).at(0), &step, math))
                .unwrap()
                .median_ms;
            let unf = time_gpu(&gpu, 3, 20, || {
                dropout_matrix(&x, &mut xd, &mut mask, 0.5, 7, &step)?;
                blas.gemm(math, 1.0, (&xd, false), (&w, false), 0.0, &mut y)?;
                blas.gemm(math, 1.0, (&xd, true), (&dy, false), 0.0, &mut dw)
            })
            .unwrap()
            .median_ms;
            println!(
                "dropout_gemm {rows} x {k} -> {n} {math:?}: forward {fwd:.3} ms ({:.0} GB/s of x), dw {bwd:.3} ms, fused total {:.3} ms vs dropout + 2 cuBLAS {unf:.3} ms; p = 0: forward {fwd0:.3}, dw {bwd0:.3}",
                bytes / fwd / 1e6,
                fwd + bwd
            );
        }
        if wide_fits(k, n) {
            // The wide f16 forward (GAT's first layer), with and without the dropped copy,
            // against what it replaces: the unfused dropout from the f16 copy, then cuBLAS.
            let wide =
                time_gpu(&gpu, 3, 20, || dropout_gemm_wide(&xh, &w, &mut y, None, DropKey::new(0.5, 7).at(0), &step)).unwrap().median_ms;
            let wide0 =
                time_gpu(&gpu, 3, 20, || dropout_gemm_wide(&xh, &w, &mut y, None, DropKey::new(0.0, 7).at(0), &step)).unwrap().median_ms;
            let mut bits = DeviceVec::<u32>::zeros(&gpu, keep_bits_len(rows, k)).unwrap();
            let wide_bits =
                time_gpu(&gpu, 3, 20, || dropout_gemm_wide(&xh, &w, &mut y, Some(&mut bits), DropKey::new(0.5, 7).at(0), &step))
                    .unwrap()
                    .median_ms;
            let unf = time_gpu(&gpu, 3, 20, || {
                input_dropout_matrix(&x, Some(&xh), &mut xd, DropKey::new(0.5, 7).at(0), &step)?;
                blas.gemm(GemmMath::Tf32, 1.0, (&xd, false), (&w, false), 0.0, &mut y)
            })
            .unwrap()
            .median_ms;
            let dw_cublas =
                time_gpu(&gpu, 3, 20, || blas.gemm(GemmMath::Tf32, 1.0, (&xd, true), (&dy, false), 0.0, &mut dw)).unwrap().median_ms;
            let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_wide_scratch_len(&gpu, rows, k, n).unwrap()).unwrap();
            let dw_wide =
                time_gpu(&gpu, 3, 20, || dropout_gemm_dw_wide(&xh, &dy, &mut dw, &mut scratch, None, DropKey::new(0.5, 7).at(0), &step))
                    .unwrap()
                    .median_ms;
            let dw_bits = time_gpu(&gpu, 3, 20, || {
                dropout_gemm_dw_wide(&xh, &dy, &mut dw, &mut scratch, Some(&bits), DropKey::new(0.5, 7).at(0), &step)
            })
            .unwrap()
            .median_ms;
            let dw_wide0 =
                time_gpu(&gpu, 3, 20, || dropout_gemm_dw_wide(&xh, &dy, &mut dw, &mut scratch, None, DropKey::new(0.0, 7).at(0), &step))
                    .unwrap()
                    .median_ms;
            println!(
                "dropout_gemm_wide {rows} x {k} -> {n} f16: forward {wide:.3} ms (p = 0: {wide0:.3}; writing the keep bits {wide_bits:.3}) vs f16 dropout + cuBLAS {unf:.3} ms; dw {dw_wide:.3} ms (from the bits {dw_bits:.3}; p = 0: {dw_wide0:.3}) vs cuBLAS on the dropped copy {dw_cublas:.3} ms; fused total {:.3} vs unfused {:.3}",
                wide_bits + dw_bits,
                unf + dw_cublas
            );
        }
        if takes_f16_features(k, n) {
            // x stored in f16: half the bytes.
            let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_scratch_len(&gpu, rows, k, n, true).unwrap()).unwrap();
            let math = GemmMath::Tf32;
            let fwd = time_gpu(&gpu, 3, 20, || dropout_gemm(&xh, &w, &mut y, DropKey::new(0.5, 7).at(0), &step, math)).unwrap().median_ms;
            let bwd = time_gpu(&gpu, 3, 20, || dropout_gemm_dw(&xh, &dy, &mut dw, &mut scratch, DropKey::new(0.5, 7).at(0), &step, math))
                .unwrap()
                .median_ms;
            let fwd0 = time_gpu(&gpu, 3, 20, || dropout_gemm(&xh, &w, &mut y, DropKey::new(0.0, 7).at(0), &step, math)).unwrap().median_ms;
            let bwd0 = time_gpu(&gpu, 3, 20, || dropout_gemm_dw(&xh, &dy, &mut dw, &mut scratch, DropKey::new(0.0, 7).at(0), &step, math))
                .unwrap()
                .median_ms;
            println!(
                "dropout_gemm {rows} x {k} -> {n} f16 x, tf32: forward {fwd:.3} ms ({:.0} GB/s of x), dw {bwd:.3} ms, fused total {:.3} ms; p = 0: forward {fwd0:.3}, dw {bwd0:.3}",
                bytes / 2.0 / fwd / 1e6,
                fwd + bwd
            );
        }
    }
}

/// Every stack model's first step on the GPU with the fused input dropout against the unfused
/// path (dropped copy + cuBLAS) on the same backend settings: the same mask, so logits and
/// gradients agree to the precision's tolerance, and only the unfused features keep a copy.
#[test]
fn gpu_models_fused_and_unfused_agree() {
    let Some(gpu) = common::gpu_or_skip("gpu_models_fused_and_unfused_agree") else { return };
    use tcgnn::nn::CudaBackend;
    use tcgnn::ops::Impl;
    let p = problem(700, 37, 4, 9);
    // The narrow first products (16 columns) in every precision; the wide ones (GAT's 8 heads
    // of 8, GIN at 64: `dropout_gemm_wide` from x's f16 copy) in f16, features as the trainer
    // holds them (`for_model`, `with_half_features`).
    let cases = [Precision::F32, Precision::Tf32, Precision::F16]
        .into_iter()
        .flat_map(|prec| ["gcn", "sage", "gin"].map(|name| (prec, ModelConfig { hidden: 16, ..small(name) })))
        .chain([
            (Precision::F16, ModelConfig { hidden: 8, heads: 8, ..small("gat") }),
            (Precision::F16, ModelConfig { hidden: 64, ..small("gin") }),
        ]);
    for (prec, cfg) in cases {
        let name = cfg.model;
        let wide = cfg.first_product_columns() > 32;
        {
            let run = |fused: bool| {
                let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap().with_fused_input_dropout(fused);
                let mut net = models::build(&b, &p.graph, p.features.cols(), p.classes, &cfg).unwrap();
                let mut input = if wide {
                    InputFeatures::for_model(&b, &p.features, &cfg).unwrap().with_half_features(&b, &cfg).unwrap()
                } else {
                    InputFeatures::new(&b, &p.features).unwrap()
                };
                // Fused: no dropped copy, the features in f32 or (where every first-layer
                // product reads them in f16, the wide ones included) in f16 alone.
                let fused_kind = matches!(input, InputFeatures::DenseFused { .. } | InputFeatures::Half { dropped: None, .. });
                assert_eq!(fused_kind, fused);
                if wide {
                    assert!(matches!(input, InputFeatures::Half { .. }), "{name}: the wide kernels' features not held in f16 alone");
                }
                let labels = b.labels(&p.labels, &p.bits).unwrap();
                b.begin_step().unwrap();
                let logits = net.forward(&b, &mut input, true).unwrap();
                let host = b.download(logits).unwrap();
                let (r, c) = CudaBackend::shape(logits);
                let mut d = b.matrix(r, c).unwrap();
                let mut s = b.stats().unwrap();
                b.cross_entropy(logits, &labels, 0.01, &mut d, &mut s).unwrap();
                net.backward(&b, &mut input, &mut d).unwrap();
                let grads: Vec<Matrix> = net.params().iter().map(|(_, q)| b.download(&q.grad).unwrap()).collect();
                (host, grads)
            };
            let ((lf, gf), (lu, gu)) = (run(true), run(false));
            // tests/nn_gpu.rs's bounds: a whole model in tf32 / f16 at 4x f16's op bound, GIN's
            // amplified first-weight gradient (tests/gin_tf32.rs) at twice that.
            let tol =
                4.0 * if prec == Precision::F32 { 1e-5 } else { 1e-2 } * if name == "gin" && prec != Precision::F32 { 2.0 } else { 1.0 };
            let name = format!("{name}{}", if wide { " (wide)" } else { "" });
            let to64 = |m: &Matrix| m.data.iter().map(|&v| v as f64).collect::<Vec<_>>();
            let e = rel_error(&lf.data, &to64(&lu));
            assert!(e < tol, "{name} {prec:?}: logits fused vs unfused {e:.2e}");
            for (i, (a, u)) in gf.iter().zip(&gu).enumerate() {
                let e = rel_error(&a.data, &to64(u));
                assert!(e < tol, "{name} {prec:?}: gradient {i} fused vs unfused {e:.2e}");
            }
        }
    }
}

/// Node features held only in f16 (`InputFeatures::Half`, issue 42 item 4): the training
/// step's products on them are the very ones it ran on the f32 features with their f16 copy
/// (`Operand::Dropped` with `half`, the unfused input dropout from the copy), bit for bit, for
/// the narrow (16 columns) and the wide (64) kernels, features 37 and 500 wide; evaluation
/// (p = 0) reads the copy through the same kernels, within f16's tolerance of the f32 product.
#[test]
fn gpu_features_held_in_f16_alone_train_as_with_the_f32_copy() {
    let Some(gpu) = common::gpu_or_skip("gpu_features_held_in_f16_alone_train_as_with_the_f32_copy") else { return };
    use tcgnn::nn::CudaBackend;
    use tcgnn::nn::operand::Operand;
    use tcgnn::ops::Impl;
    let b = CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap();
    b.begin_step().unwrap();
    for (rows, cols, out) in [(700, 37, 16), (701, 37, 64), (3001, 500, 16), (2999, 500, 64)] {
        let what = format!("{rows} x {cols} -> {out}");
        assert!(b.half_suffices(cols, out), "{what}: not taken from f16 alone");
        let x = Matrix::from_vec(rows, cols, SplitMix64::new(rows as u64).vec_f32(rows * cols)).unwrap();
        let w = Matrix::from_vec(cols, out, SplitMix64::new(7).vec_f32(cols * out)).unwrap();
        let dy = Matrix::from_vec(rows, out, SplitMix64::new(8).vec_f32(rows * out)).unwrap();
        let (xd, wd, dyd) = (b.upload(&x).unwrap(), b.upload(&w).unwrap(), b.upload(&dy).unwrap());
        let half = b.half_features(&xd, out).unwrap().expect("an f16 copy in f16 precision");
        let key = DropKey::new(0.3, 11);
        let run = |op: &Operand<CudaBackend>| {
            let (mut y, mut dw) = (b.matrix(rows, out).unwrap(), b.matrix(cols, out).unwrap());
            y.poison().unwrap();
            dw.poison().unwrap();
            op.times(&b, &wd, &mut y).unwrap();
            op.transposed_times(&b, &dyd, &mut dw).unwrap();
            (b.download(&y).unwrap(), b.download(&dw).unwrap())
        };
        let bits = |m: &Matrix| m.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let (y0, dw0) = run(&Operand::Dropped { x: &xd, half: Some(&half), key });
        let (y1, dw1) = run(&Operand::Half { x: &half, key });
        assert_eq!(bits(&y0), bits(&y1), "{what}: the forward product changed");
        assert_eq!(bits(&dw0), bits(&dw1), "{what}: the weight gradient changed");
        // The unfused input dropout (SAGE) from the copy: the same dropped matrix.
        let (mut d0, mut d1) = (b.matrix(rows, cols).unwrap(), b.matrix(rows, cols).unwrap());
        d1.poison().unwrap();
        b.input_dropout(&xd, Some(&half), &mut d0, key).unwrap();
        b.half_input_dropout(&half, &mut d1, key).unwrap();
        assert_eq!(bits(&b.download(&d0).unwrap()), bits(&b.download(&d1).unwrap()), "{what}: the input dropout changed");
        // Evaluation: x W from the copy against the f64 product of x.
        let (ye, _) = run(&Operand::Half { x: &half, key: DropKey::new(0.0, 0) });
        let mut want = vec![0.0f64; rows * out];
        for r in 0..rows {
            for k in 0..cols {
                let a = x.data[r * cols + k] as f64;
                for c in 0..out {
                    want[r * out + c] += a * w.data[k * out + c] as f64;
                }
            }
        }
        let e = rel_error(&ye.data, &want);
        assert!(e < Precision::F16.tolerance(), "{what}: evaluation from the f16 copy off by {e:.2e}");
    }
}

/// The narrow GEMMs of the backend (`skinny_gemm`: the dropout products with p = 0) against
/// the product in f64 on the host, all three forms (a w, a bᵀ, aᵀ b), odd shapes: one row, K
/// not a multiple of 8, K past one 64-column step, outputs of 1 to 32 columns; outputs poisoned.
#[test]
fn gpu_skinny_gemm_matches_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_skinny_gemm_matches_cpu") else { return };
    let step = DeviceVec::upload(&gpu, &[3u32]).unwrap();
    let shapes =
        [(1, 1, 1), (1, 16, 8), (37, 7, 5), (130, 16, 8), (2051, 8, 16), (2051, 64, 7), (4100, 100, 24), (70_001, 16, 32), (3000, 500, 16)];
    let up = |r: usize, c: usize, v: &[f64]| {
        DeviceMatrix::upload(&gpu, &Matrix::from_vec(r, c, v.iter().map(|&a| a as f32).collect()).unwrap()).unwrap()
    };
    for (math, tol) in [(GemmMath::Tf32, 5e-3), (GemmMath::F32, 1e-5)] {
        for &(rows, k, n) in &shapes {
            let (a, w, dy) = (rand(rows * k, rows as u64 + 1), rand(k * n, 2), rand(rows * n, 3));
            let wt: Vec<f64> = (0..n * k).map(|i| w[(i % k) * n + i / k]).collect(); // n x k
            // p = 0: the plain products a w and aᵀ dy.
            let (y, dw) = unfused(&a, rows, k, &w, &dy, n, 0.0, 0, 0, 0);
            let (ad, wd, wtd, dyd) = (up(rows, k, &a), up(k, n, &w), up(n, k, &wt), up(rows, n, &dy));
            let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_scratch_len(&gpu, rows, k, n, false).unwrap().max(1)).unwrap();
            for (form, ta, b, tb, out_rows, want) in
                [("a w", false, &wd, false, rows, &y), ("a bT", false, &wtd, true, rows, &y), ("aT b", true, &dyd, false, k, &dw)]
            {
                let what = format!("{math:?} {form} {rows} x {k} x {n}");
                let mut c = DeviceMatrix::<f32>::zeros(&gpu, out_rows, n).unwrap();
                c.poison().unwrap();
                assert!(skinny_gemm_fits(&ad, ta, tb, &c), "{what}: not on the streaming kernels");
                skinny_gemm((&ad, ta), (b, tb), &mut c, &step, &mut scratch, math).unwrap();
                let got = c.download_padded().unwrap();
                let ld = padded_ld(n);
                assert!(got.iter().enumerate().all(|(i, v)| i % ld < n || *v == 0.0), "{what}: padding not zero");
                let gv: Vec<f64> = (0..out_rows * n).map(|i| got[(i / n) * ld + i % n] as f64).collect();
                let e = rel64(&gv, want);
                assert!(e < tol, "{what}: rel error {e:.2e} (tolerance {tol:.0e})");
            }
        }
    }
    // Too wide for the streaming kernels: refused, not computed wrongly.
    let a = DeviceMatrix::<f32>::zeros(&gpu, 100, 16).unwrap();
    let b = DeviceMatrix::<f32>::zeros(&gpu, 16, 64).unwrap();
    let mut c = DeviceMatrix::<f32>::zeros(&gpu, 100, 64).unwrap();
    let mut scratch = DeviceVec::<f32>::zeros(&gpu, 1).unwrap();
    assert!(!skinny_gemm_fits(&a, false, false, &c));
    assert!(skinny_gemm((&a, false), (&b, false), &mut c, &step, &mut scratch, GemmMath::Tf32).is_err());
}

/// The narrow GEMMs against cuBLAS at GCN's second layer on SBM 1M (1M x 16 -> 8, its weight
/// gradient and input gradient); prints the times (run with --nocapture).
#[test]
fn gpu_skinny_gemm_time() {
    let Some(gpu) = common::gpu_or_skip("gpu_skinny_gemm_time") else { return };
    let blas = Blas::new(&gpu).unwrap();
    let step = DeviceVec::upload(&gpu, &[1u32]).unwrap();
    for (rows, k, n) in [(1usize << 20, 16usize, 8usize), (1 << 18, 16, 8), (1 << 20, 32, 8), (1 << 18, 32, 16)] {
        let h = DeviceMatrix::upload(&gpu, &Matrix::random(rows, k, 1)).unwrap();
        let w = DeviceMatrix::upload(&gpu, &Matrix::random(k, n, 2)).unwrap();
        let dz = DeviceMatrix::upload(&gpu, &Matrix::random(rows, n, 3)).unwrap();
        let mut z = DeviceMatrix::<f32>::zeros(&gpu, rows, n).unwrap();
        let mut dh = DeviceMatrix::<f32>::zeros(&gpu, rows, k).unwrap();
        let mut dw = DeviceMatrix::<f32>::zeros(&gpu, k, n).unwrap();
        let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_scratch_len(&gpu, rows, k, n, false).unwrap()).unwrap();
        let m = GemmMath::Tf32;
        let t = |f: &mut dyn FnMut() -> tcgnn::error::Result<()>| time_gpu(&gpu, 3, 20, f).unwrap().median_ms;
        let ours = [
            t(&mut || skinny_gemm((&h, false), (&w, false), &mut z, &step, &mut scratch, m)),
            t(&mut || skinny_gemm((&h, true), (&dz, false), &mut dw, &step, &mut scratch, m)),
            t(&mut || skinny_gemm((&dz, false), (&w, true), &mut dh, &step, &mut scratch, m)),
        ];
        let cublas = [
            t(&mut || blas.gemm(m, 1.0, (&h, false), (&w, false), 0.0, &mut z)),
            t(&mut || blas.gemm(m, 1.0, (&h, true), (&dz, false), 0.0, &mut dw)),
            t(&mut || blas.gemm(m, 1.0, (&dz, false), (&w, true), 0.0, &mut dh)),
        ];
        println!(
            "skinny gemm {rows} x {k} -> {n} tf32: h w {:.3} ms (cuBLAS {:.3}), hT dz {:.3} ({:.3}), dz wT {:.3} ({:.3})",
            ours[0], cublas[0], ours[1], cublas[1], ours[2], cublas[2]
        );
    }
}
