//! The primitive ops of GNN training (`tcgnn::ops::nn`).
//!
//! CPU: every op against a direct f64 formula, every backward against central finite
//! differences in f64, dropout's mask statistics and reproducibility, Adam against torch's
//! update written out step by step.
//! GPU (skipped without one): every kernel against the CPU version in f64 on fresh random
//! inputs, outputs poisoned (NaN) first, odd shapes, both value orders for the edge ops;
//! dropout masks bit-identical to the CPU's; padding columns zero after every op.

use crate::common;

use std::sync::Arc;

use tcgnn::format::mebcrs::MeBcrs;
use tcgnn::gpu::memory::padded_ld;
use tcgnn::gpu::{DeviceMatrix, DeviceVec, Gpu};
use tcgnn::graph::Csr;
use tcgnn::ops::GraphHandle;
use tcgnn::ops::backend::cuda::step_increment;
use tcgnn::ops::nn::*;
use tcgnn::ops::sddmm::ValueOrder;
use tcgnn::shared::rng::{dropout_keep, dropout_threshold};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::Real;
use tcgnn::util::rng::SplitMix64;

// ------------------------------------------------------------------ helpers

/// Uniform in [-1, 1), exactly representable in f32 (so the GPU sees the same inputs).
fn rand(n: usize, seed: u64) -> Vec<f64> {
    SplitMix64::new(seed).vec_f32(n).into_iter().map(|v| v as f64).collect()
}

/// ||a - b|| / ||b|| in f64.
fn rel64(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}

/// Central finite differences of `f` at `x`, one coordinate at a time.
fn fd_grad(x: &[f64], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let h = 1e-6;
    let mut xp = x.to_vec();
    (0..x.len())
        .map(|i| {
            let x0 = xp[i];
            xp[i] = x0 + h;
            let fp = f(&xp);
            xp[i] = x0 - h;
            let fm = f(&xp);
            xp[i] = x0;
            (fp - fm) / (2.0 * h)
        })
        .collect()
}

fn assert_grad(name: &str, analytic: &[f64], numeric: &[f64]) {
    let err = rel64(analytic, numeric);
    assert!(err < 1e-6, "{name}: analytic vs finite differences: rel err {err}");
}

const ROWS: [usize; 3] = [1, 37, 2051];
const COLS: [usize; 5] = [1, 7, 16, 33, 130];

fn to_f32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn dev(gpu: &Arc<Gpu>, rows: usize, cols: usize, data: &[f64]) -> DeviceMatrix<f32> {
    DeviceMatrix::upload(gpu, &Matrix::from_vec(rows, cols, to_f32(data)).unwrap()).unwrap()
}

fn poisoned(gpu: &Arc<Gpu>, rows: usize, cols: usize) -> DeviceMatrix<f32> {
    let mut m = DeviceMatrix::zeros(gpu, rows, cols).unwrap();
    m.poison().unwrap();
    m
}

fn poisoned_vec(gpu: &Arc<Gpu>, len: usize) -> DeviceVec<f32> {
    DeviceVec::upload(gpu, &vec![f32::NAN; len.max(1)]).unwrap()
}

fn host(m: &DeviceMatrix<f32>) -> Vec<f32> {
    m.download().unwrap().data
}

/// Every padding column of `m` is exactly zero.
fn assert_padding_zero(m: &DeviceMatrix<f32>, what: &str) {
    let all = m.download_padded().unwrap();
    for r in 0..m.rows {
        for c in m.cols..m.ld {
            let v = all[r * m.ld + c];
            assert!(v == 0.0, "{what}: padding ({r}, {c}) of a {} x {} matrix is {v}", m.rows, m.cols);
        }
    }
}

fn assert_close(what: &str, got: &[f32], want: &[f64]) {
    let err = rel_error(got, want);
    assert!(err < 1e-5, "{what}: rel err {err}");
}

// ------------------------------------------------------------------ CPU: forward formulas

#[test]
fn cpu_bias_add_col_sums_add_assign() {
    for (rows, cols) in [(1, 1), (5, 3), (2500, 7), (0, 4)] {
        let x = rand(rows * cols, 1);
        let b = rand(cols, 2);
        let mut y = x.clone();
        bias_add_cpu(&mut y, rows, cols, &b);
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(y[r * cols + c], x[r * cols + c] + b[c]);
            }
        }
        let mut s = vec![f64::NAN; cols];
        col_sums_cpu(&x, rows, cols, &mut s);
        for c in 0..cols {
            let want: f64 = (0..rows).map(|r| x[r * cols + c]).sum();
            assert!((s[c] - want).abs() <= 1e-12 * (1.0 + want.abs()), "col {c}: {} vs {want}", s[c]);
        }
        // Deterministic: bit-identical on a second run (also in f32).
        let mut s2 = vec![0.0; cols];
        col_sums_cpu(&x, rows, cols, &mut s2);
        assert_eq!(s, s2);
        let x32 = to_f32(&x);
        let (mut a, mut b32) = (vec![0f32; cols], vec![0f32; cols]);
        col_sums_cpu(&x32, rows, cols, &mut a);
        col_sums_cpu(&x32, rows, cols, &mut b32);
        assert_eq!(a, b32);

        let d = rand(rows * cols, 3);
        let mut z = x.clone();
        add_assign_cpu(&mut z, &d);
        assert!(z.iter().zip(x.iter().zip(&d)).all(|(&z, (&a, &b))| z == a + b));
    }
}

#[test]
fn cpu_relu_and_backward() {
    let mut x = rand(1000, 4);
    for v in &mut x {
        if v.abs() < 1e-3 {
            *v = 0.5; // keep finite differences away from the kink
        }
    }
    let mut y = x.clone();
    relu_cpu(&mut y);
    assert!(y.iter().zip(&x).all(|(&y, &x)| y == x.max(0.0)));
    let mut nan = vec![f64::NAN, -0.0, -1.0, 2.0];
    relu_cpu(&mut nan);
    assert_eq!(nan, vec![0.0, 0.0, 0.0, 2.0]);

    let dy = rand(1000, 5);
    let mut dx = dy.clone();
    relu_backward_cpu(&y, &mut dx);
    let numeric = fd_grad(&x, |x| {
        let mut y = x.to_vec();
        relu_cpu(&mut y);
        y.iter().zip(&dy).map(|(a, b)| a * b).sum()
    });
    assert_grad("relu_backward", &dx, &numeric);
}

#[test]
fn cpu_dropout_mask_statistics_and_reproducibility() {
    let n = 200_000;
    let x = rand(n, 6);
    for p in [0.1f32, 0.5, 0.9] {
        let (mut y, mut mask) = (vec![0.0; n], vec![0u8; n]);
        dropout_cpu(&x, &mut y, &mut mask, p, 42, 7).unwrap();
        let kept = mask.iter().filter(|&&m| m == 1).count() as f64 / n as f64;
        // 6 sigma of a binomial proportion.
        let sigma = ((1.0 - p as f64) * p as f64 / n as f64).sqrt();
        assert!((kept - (1.0 - p as f64)).abs() < 6.0 * sigma, "p = {p}: kept {kept}");
        assert!(mask.iter().all(|&m| m <= 1));
        let thr = dropout_threshold(p);
        for i in 0..n {
            let keep = dropout_keep(42, 7, i as u64, thr);
            assert_eq!(mask[i], keep as u8);
            let want = if keep { x[i] / (1.0 - p as f64) } else { 0.0 };
            assert!((y[i] - want).abs() <= 1e-15, "element {i}");
        }
        // Same (seed, step): same mask; another step or seed: another mask.
        let (mut y2, mut m2) = (vec![0.0; n], vec![0u8; n]);
        dropout_cpu(&x, &mut y2, &mut m2, p, 42, 7).unwrap();
        assert_eq!(mask, m2);
        assert_eq!(y, y2);
        for (seed, step) in [(42, 8), (43, 7)] {
            dropout_cpu(&x, &mut y2, &mut m2, p, seed, step).unwrap();
            let differ = mask.iter().zip(&m2).filter(|(a, b)| a != b).count() as f64 / n as f64;
            let expect = 2.0 * p as f64 * (1.0 - p as f64); // independent masks
            assert!((differ - expect).abs() < 0.02, "seed {seed} step {step}: {differ} of the mask differs, expected {expect}");
        }
    }
    // Consecutive indices and steps are not correlated: the keep rate of pairs is (1-p)^2.
    let (p, thr) = (0.5f32, dropout_threshold(0.5));
    let both = (0..100_000u64).filter(|&i| dropout_keep(1, 3, i, thr) && dropout_keep(1, 3, i + 1, thr)).count() as f64 / 1e5;
    assert!((both - 0.25).abs() < 0.01, "adjacent indices: {both}");
    let both = (0..100_000u64).filter(|&i| dropout_keep(1, 3, i, thr) && dropout_keep(1, 4, i, thr)).count() as f64 / 1e5;
    assert!((both - 0.25).abs() < 0.01, "adjacent steps: {both}, p {p}");
}

#[test]
fn cpu_dropout_edges_and_backward() {
    let x = rand(1001, 7);
    // p = 0: identity, everything kept.
    let (mut y, mut mask) = (vec![0.0; 1001], vec![0u8; 1001]);
    dropout_cpu(&x, &mut y, &mut mask, 0.0, 1, 1).unwrap();
    assert_eq!(y, x);
    assert!(mask.iter().all(|&m| m == 1));
    assert_eq!(dropout_threshold(0.0), 0);
    assert_eq!(dropout_threshold(0.5), 1 << 15);
    assert_eq!(dropout_threshold(0.25), 1 << 14);
    assert_eq!(dropout_threshold(0.99999), 65_535);
    // p outside [0, 1): Unsupported.
    for p in [-0.1f32, 1.0, 1.5, f32::NAN] {
        assert!(matches!(dropout_cpu(&x, &mut y, &mut mask, p, 1, 1), Err(tcgnn::Error::Unsupported(_))), "p = {p}");
        let mut dx = vec![0.0; 1001];
        assert!(matches!(dropout_backward_cpu(&x, &mask, p, &mut dx), Err(tcgnn::Error::Unsupported(_))));
    }
    assert!(matches!(dropout_cpu(&x, &mut y[..10], &mut mask, 0.5, 1, 1), Err(tcgnn::Error::Shape(_))));

    // Backward: dx = mask ? dy / (1 - p) : 0 = d/dx of sum(dy * dropout(x)) with the mask fixed.
    let p = 0.3;
    dropout_cpu(&x, &mut y, &mut mask, p, 9, 2).unwrap();
    let dy = rand(1001, 8);
    let mut dx = vec![f64::NAN; 1001];
    dropout_backward_cpu(&dy, &mask, p, &mut dx).unwrap();
    let numeric = fd_grad(&x, |x| {
        let (mut y, mut m) = (vec![0.0; x.len()], vec![0u8; x.len()]);
        dropout_cpu(x, &mut y, &mut m, p, 9, 2).unwrap();
        y.iter().zip(&dy).map(|(a, b)| a * b).sum()
    });
    assert_grad("dropout_backward", &dx, &numeric);
}

#[test]
fn cpu_dropout_matrix_uses_padded_index() {
    let (p, seed, step) = (0.4f32, 77, 3);
    for (rows, cols) in [(1, 1), (37, 7), (5, 16), (9, 33)] {
        let ld = padded_ld(cols);
        let x = rand(rows * cols, 10);
        let (mut y, mut mask) = (vec![0.0; rows * cols], vec![9u8; rows * ld]);
        dropout_matrix_cpu_at(&x, rows, cols, &mut y, &mut mask, DropKey::new(p, seed), step).unwrap();
        let thr = dropout_threshold(p);
        for r in 0..rows {
            for c in 0..ld {
                let keep = dropout_keep(seed, step, (r * ld + c) as u64, thr);
                assert_eq!(mask[r * ld + c], keep as u8, "({r}, {c})");
                if c < cols {
                    let want = if keep { x[r * cols + c] / (1.0 - p as f64) } else { 0.0 };
                    assert!((y[r * cols + c] - want).abs() < 1e-15);
                }
            }
        }
        let dy = rand(rows * cols, 11);
        let mut dx = vec![f64::NAN; rows * cols];
        dropout_backward_matrix_cpu(&dy, &mask, rows, cols, p, &mut dx).unwrap();
        for r in 0..rows {
            for c in 0..cols {
                let want = if mask[r * ld + c] != 0 { dy[r * cols + c] / (1.0 - p as f64) } else { 0.0 };
                assert_eq!(dx[r * cols + c], want);
            }
        }
        // The mask is padded: an unpadded one is refused.
        if ld != cols {
            let mut short = vec![0u8; rows * cols];
            assert!(dropout_matrix_cpu_at(&x, rows, cols, &mut y, &mut short, DropKey::new(p, seed), step).is_err());
        }
    }
}

#[test]
fn cpu_row_normalize_and_backward() {
    let (rows, cols) = (40, 9);
    let mut h = rand(rows * cols, 12);
    for v in &mut h[3 * cols..4 * cols] {
        *v = 0.0; // a zero row: clamped norm, n = 0
    }
    let (mut n, mut inv) = (vec![0.0; rows * cols], vec![0.0; rows]);
    row_normalize_cpu(&h, rows, cols, &mut n, &mut inv);
    for r in 0..rows {
        let norm = h[r * cols..(r + 1) * cols].iter().map(|v| v * v).sum::<f64>().sqrt();
        let want_inv = 1.0 / norm.max(1e-12);
        assert!((inv[r] - want_inv).abs() <= 1e-14 * want_inv, "row {r}");
        for c in 0..cols {
            assert!((n[r * cols + c] - h[r * cols + c] * want_inv).abs() < 1e-14);
        }
    }
    assert!((inv[3] - 1e12).abs() < 1.0);

    // Backward: accumulates dh += J'(h) for J = sum dn . n(h).
    let dn = rand(rows * cols, 13);
    let dh0 = rand(rows * cols, 14);
    let mut dh = dh0.clone();
    row_normalize_backward_cpu(&n, &inv, &dn, rows, cols, &mut dh);
    let grad: Vec<f64> = dh.iter().zip(&dh0).map(|(a, b)| a - b).collect();
    // Finite differences away from the zero row (the clamp makes it non-differentiable there).
    let mut numeric = fd_grad(&h, |h| {
        let (mut n, mut inv) = (vec![0.0; rows * cols], vec![0.0; rows]);
        row_normalize_cpu(h, rows, cols, &mut n, &mut inv);
        n.iter().zip(&dn).map(|(a, b)| a * b).sum()
    });
    let mut analytic = grad.clone();
    for c in 0..cols {
        numeric[3 * cols + c] = 0.0;
        analytic[3 * cols + c] = 0.0;
    }
    assert_grad("row_normalize_backward", &analytic, &numeric);
    // At the clamped row the formula gives dn * 1e12 (n = 0 there), as PyTorch's does.
    for c in 0..cols {
        assert!((grad[3 * cols + c] - dn[3 * cols + c] * 1e12).abs() <= 1e-2);
    }
}

/// CSR values of every odd-shape graph with random cos in [-1, 1).
fn edge_problems(seed: u64) -> Vec<(String, Csr, Vec<f64>)> {
    common::odd_shapes(seed)
        .into_iter()
        .enumerate()
        .map(|(i, (name, s))| {
            let cos = rand(s.nnz(), seed + 100 + i as u64);
            (name, s, cos)
        })
        .collect()
}

#[test]
fn cpu_edge_softmax_scaled_and_backward() {
    let beta = 1.7;
    for (name, s, cos) in edge_problems(20) {
        let rp = s.row_ptr();
        let mut alpha = vec![f64::NAN; s.nnz()];
        edge_softmax_scaled_cpu(rp, beta, &cos, &mut alpha);
        for r in 0..s.n_rows() {
            let e = s.row_range(r);
            if e.is_empty() {
                continue;
            }
            let denom: f64 = cos[e.clone()].iter().map(|c| (beta * c).exp()).sum();
            for i in e {
                let want = (beta * cos[i]).exp() / denom;
                assert!((alpha[i] - want).abs() <= 1e-14, "{name}: edge {i}");
            }
        }
        // Large scores: no overflow (max-subtracted).
        let mut big = vec![0.0; s.nnz()];
        edge_softmax_scaled_cpu(rp, 900.0, &cos, &mut big);
        assert!(big.iter().all(|v| v.is_finite()), "{name}");
    }
    // Backward against finite differences of J = sum dalpha . alpha(beta, cos), on the small
    // graphs (each difference is a whole softmax).
    for (name, s, cos) in edge_problems(21).into_iter().filter(|(_, s, _)| s.nnz() < 400) {
        let rp = s.row_ptr().to_vec();
        let dalpha = rand(s.nnz(), 22);
        let j = |beta: f64, cos: &[f64]| -> f64 {
            let mut a = vec![0.0; cos.len()];
            edge_softmax_scaled_cpu(&rp, beta, cos, &mut a);
            a.iter().zip(&dalpha).map(|(x, y)| x * y).sum()
        };
        let mut alpha = vec![0.0; s.nnz()];
        edge_softmax_scaled_cpu(&rp, beta, &cos, &mut alpha);
        let mut dcos = vec![f64::NAN; s.nnz()];
        let dbeta = edge_softmax_backward_cpu(&rp, beta, &alpha, &dalpha, &cos, &mut dcos);
        assert_grad(&format!("edge_softmax dcos on {name}"), &dcos, &fd_grad(&cos, |c| j(beta, c)));
        let fd_beta = fd_grad(&[beta], |b| j(b[0], &cos));
        assert_grad(&format!("edge_softmax dbeta on {name}"), &[dbeta], &fd_beta);
    }
}

/// Labels in range except a few out of range; mask bytes of every combination.
fn ce_problem(rows: usize, cols: usize, seed: u64) -> (Vec<f64>, Vec<i32>, Vec<u8>, f64) {
    let logits: Vec<f64> = rand(rows * cols, seed).iter().map(|v| 4.0 * v).collect();
    let mut rng = SplitMix64::new(seed + 1);
    let labels: Vec<i32> = (0..rows)
        .map(|r| match r % 17 {
            5 => -1,
            11 => cols as i32,
            _ => rng.below(cols as u64) as i32,
        })
        .collect();
    let mask: Vec<u8> = (0..rows).map(|_| rng.below(8) as u8).collect();
    let n_train = mask.iter().filter(|&&m| m & MASK_TRAIN != 0).count().max(1);
    (logits, labels, mask, 1.0 / n_train as f64)
}

#[test]
fn cpu_cross_entropy_formula_and_gradient() {
    for (rows, cols) in [(1, 1), (50, 3), (2100, 7)] {
        let (mut logits, labels, mask, inv) = ce_problem(rows, cols, 30);
        if rows > 1 && cols > 1 {
            // Ties: the first maximum is the prediction.
            for c in 0..cols {
                logits[cols + c] = 0.25;
            }
        }
        let mut d = vec![f64::NAN; rows * cols];
        let stats = cross_entropy_cpu(&logits, rows, cols, &labels, &mask, inv, &mut d);
        let (mut loss, mut correct) = (0.0, [0.0; 3]);
        for r in 0..rows {
            let x = &logits[r * cols..(r + 1) * cols];
            let lse = x.iter().map(|v| v.exp()).sum::<f64>().ln();
            let y = labels[r];
            let valid = y >= 0 && (y as usize) < cols;
            let train = valid && mask[r] & MASK_TRAIN != 0;
            if train {
                loss += (lse - x[y as usize]) * inv;
            }
            let mut arg = 0;
            for c in 1..cols {
                if x[c] > x[arg] {
                    arg = c;
                }
            }
            if r == 1 && cols > 1 {
                assert_eq!(arg, 0);
            }
            for c in 0..cols {
                let want = if train { ((x[c] - lse).exp() - if c == y as usize { 1.0 } else { 0.0 }) * inv } else { 0.0 };
                assert!((d[r * cols + c] - want).abs() < 1e-14, "row {r} col {c}");
            }
            for (b, n) in correct.iter_mut().enumerate() {
                if valid && arg == y as usize && mask[r] & (1 << b) != 0 {
                    *n += 1.0;
                }
            }
        }
        assert!((stats[0] - loss).abs() <= 1e-12 * loss.max(1.0), "{rows} x {cols}: loss {} vs {loss}", stats[0]);
        assert_eq!(&stats[1..], &correct[..]);
        if rows <= 50 {
            let numeric = fd_grad(&logits, |x| {
                let mut d = vec![0.0; rows * cols];
                cross_entropy_cpu(x, rows, cols, &labels, &mask, inv, &mut d)[0]
            });
            assert_grad("cross_entropy dlogits", &d, &numeric);
        }
    }
}

#[test]
fn cpu_adam_matches_torch_update() {
    // By hand, step 1 with torch's defaults: m = 0.05, v = 2.5e-4, m_hat = 0.5, v_hat = 0.25,
    // param = 1 - lr * 0.5 / (0.5 + eps) (the hyperparameters are f32: lr = 1e-3 to 5e-8).
    let (mut p, mut m, mut v) = (vec![1.0f64], vec![0.0], vec![0.0]);
    adam_cpu(&mut p, &[0.5], &mut m, &mut v, &AdamHyper::default(), 1);
    let (lr, eps) = (1e-3f32 as f64, 1e-8f32 as f64);
    assert!((p[0] - (1.0 - lr * 0.5 / (0.5 + eps))).abs() < 1e-15, "{}", p[0]);
    assert!((p[0] - (1.0 - 1e-3 * 0.5 / (0.5 + 1e-8))).abs() < 1e-10, "{}", p[0]);
    let (b1, b2) = (0.9f32 as f64, 0.999f32 as f64);
    assert!((m[0] - (1.0 - b1) * 0.5).abs() < 1e-16 && (v[0] - (1.0 - b2) * 0.25).abs() < 1e-16, "m {} v {}", m[0], v[0]);
    assert!((m[0] - 0.05).abs() < 1e-7 && (v[0] - 2.5e-4).abs() < 1e-7);

    // Three steps with weight decay against torch's _single_tensor_adam, step by step.
    let hp = AdamHyper { lr: 0.01, beta1: 0.8, beta2: 0.95, eps: 1e-6, weight_decay: 5e-4 };
    let n = 257;
    let mut param = rand(n, 40);
    let (mut m, mut v) = (vec![0.0; n], vec![0.0; n]);
    let (mut tp, mut tm, mut tv) = (param.clone(), m.clone(), v.clone());
    let f = |x: f32| x as f64;
    for t in 1..=3u32 {
        let grad = rand(n, 41 + t as u64);
        adam_cpu(&mut param, &grad, &mut m, &mut v, &hp, t);
        for i in 0..n {
            let g = grad[i] + f(hp.weight_decay) * tp[i];
            tm[i] += (g - tm[i]) * (1.0 - f(hp.beta1)); // exp_avg.lerp_(grad, 1 - beta1)
            tv[i] = tv[i] * f(hp.beta2) + (1.0 - f(hp.beta2)) * g * g;
            let bc1 = 1.0 - f(hp.beta1).powi(t as i32);
            let bc2 = 1.0 - f(hp.beta2).powi(t as i32);
            let step_size = f(hp.lr) / bc1;
            let denom = tv[i].sqrt() / bc2.sqrt() + f(hp.eps);
            tp[i] -= step_size * tm[i] / denom;
        }
        assert!(rel64(&param, &tp) < 1e-13, "step {t}: {}", rel64(&param, &tp));
        assert!(rel64(&m, &tm) < 1e-13 && rel64(&v, &tv) < 1e-13);
    }
    // f32 instantiation agrees with f64.
    let mut p32 = to_f32(&rand(n, 40));
    let (mut m32, mut v32) = (vec![0f32; n], vec![0f32; n]);
    let mut p64 = rand(n, 40);
    let (mut m64, mut v64) = (vec![0.0; n], vec![0.0; n]);
    for t in 1..=3u32 {
        let g = rand(n, 41 + t as u64);
        adam_cpu(&mut p32, &to_f32(&g), &mut m32, &mut v32, &hp, t);
        adam_cpu(&mut p64, &g, &mut m64, &mut v64, &hp, t);
    }
    assert!(rel_error(&p32, &p64) < 1e-6);
}

#[test]
fn row_groups_cover_rows() {
    use tcgnn::shared::partition::nn_row_group_shift;
    for (items, lanes) in [(0u32, 1u32), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (17, 32), (32, 32), (33, 32), (1000, 32)] {
        assert_eq!(1 << nn_row_group_shift(items), lanes, "{items} items per row");
    }
}

#[test]
fn real_trait_basics() {
    fn check<T: Real>() {
        assert_eq!(T::zero().to_f64(), 0.0);
        assert_eq!(T::one().to_f64(), 1.0);
        assert!((T::from_f64(2.0).ln().exp().to_f64() - 2.0).abs() < 1e-6);
        assert_eq!(T::from_f64(9.0).sqrt().to_f64(), 3.0);
        assert_eq!(T::from_f64(-1.0).max(T::from_f64(2.0)).to_f64(), 2.0);
    }
    check::<f32>();
    check::<f64>();
}

// ------------------------------------------------------------------ GPU against CPU

#[test]
fn gpu_elementwise_ops() {
    let Some(gpu) = common::gpu_or_skip("gpu_elementwise_ops") else { return };
    for rows in ROWS {
        for cols in COLS {
            let what = format!("{rows} x {cols}");
            let seed = (rows * 1000 + cols) as u64;
            let x = rand(rows * cols, seed);
            let b = rand(cols, seed + 1);
            let z = rand(rows * cols, seed + 2);

            // bias_add
            let mut yd = dev(&gpu, rows, cols, &x);
            bias_add(&mut yd, &dev(&gpu, 1, cols, &b)).unwrap();
            let mut want = x.clone();
            bias_add_cpu(&mut want, rows, cols, &b);
            assert_close(&format!("bias_add {what}"), &host(&yd), &want);
            assert_padding_zero(&yd, "bias_add");

            // add_assign
            let mut yd = dev(&gpu, rows, cols, &x);
            add_assign(&mut yd, &dev(&gpu, rows, cols, &z)).unwrap();
            let mut want = x.clone();
            add_assign_cpu(&mut want, &z);
            assert_close(&format!("add_assign {what}"), &host(&yd), &want);
            assert_padding_zero(&yd, "add_assign");

            // relu + backward
            let mut yd = dev(&gpu, rows, cols, &x);
            relu(&mut yd).unwrap();
            let mut want = x.clone();
            relu_cpu(&mut want);
            assert_close(&format!("relu {what}"), &host(&yd), &want);
            assert_padding_zero(&yd, "relu");
            let mut dyd = dev(&gpu, rows, cols, &z);
            relu_backward(&yd, &mut dyd).unwrap();
            let mut want_d = z.clone();
            relu_backward_cpu(&want, &mut want_d);
            assert_close(&format!("relu_backward {what}"), &host(&dyd), &want_d);
            assert_padding_zero(&dyd, "relu_backward");

            // col_sums
            let mut out = poisoned(&gpu, 1, cols);
            col_sums(&dev(&gpu, rows, cols, &x), &mut out).unwrap();
            let mut want = vec![0.0; cols];
            col_sums_cpu(&x, rows, cols, &mut want);
            assert_close(&format!("col_sums {what}"), &host(&out), &want);
            assert_padding_zero(&out, "col_sums");
        }
    }
    // Shape errors are values.
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, 3, 5).unwrap();
    let b = DeviceMatrix::<f32>::zeros(&gpu, 1, 4).unwrap();
    assert!(matches!(bias_add(&mut y, &b), Err(tcgnn::Error::Shape(_))));
    assert!(matches!(add_assign(&mut y, &DeviceMatrix::zeros(&gpu, 3, 4).unwrap()), Err(tcgnn::Error::Shape(_))));
    assert!(matches!(col_sums(&y, &mut DeviceMatrix::zeros(&gpu, 2, 5).unwrap()), Err(tcgnn::Error::Shape(_))));
}

#[test]
fn gpu_col_sums_large() {
    let Some(gpu) = common::gpu_or_skip("gpu_col_sums_large") else { return };
    for (rows, cols) in [(1 << 20, 16), (300_000, 128), (1000, 1100)] {
        let x = rand(rows * cols, 50 + cols as u64);
        let mut out = poisoned(&gpu, 1, cols);
        col_sums(&dev(&gpu, rows, cols, &x), &mut out).unwrap();
        let mut want = vec![0.0; cols];
        col_sums_cpu(&x, rows, cols, &mut want);
        assert_close(&format!("col_sums {rows} x {cols}"), &host(&out), &want);
        assert_padding_zero(&out, "col_sums");
    }
}

#[test]
fn gpu_dropout_masks_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_dropout_masks_match_cpu") else { return };
    let seed = 0x5EED;
    // Flat buffers, n not a multiple of 4; elements past n untouched.
    for n in [1usize, 5, 1000, 4099, 100_003] {
        for p in [0.0f32, 0.25, 0.5] {
            let x = rand(n, n as u64);
            let xd = DeviceVec::upload(&gpu, &to_f32(&x)).unwrap();
            let mut yd = poisoned_vec(&gpu, n + 3);
            let mut md = DeviceVec::upload(&gpu, &vec![0xAAu8; n + 3]).unwrap();
            let mut step = DeviceVec::upload(&gpu, &[5u32]).unwrap();
            dropout_at(&gpu, &xd, &mut yd, &mut md, n, DropKey::new(p, seed), &step).unwrap();
            let (y, m) = (yd.download(&gpu).unwrap(), md.download(&gpu).unwrap());
            let (mut wy, mut wm) = (vec![0.0; n], vec![0u8; n]);
            dropout_cpu(&x, &mut wy, &mut wm, p, seed, 5).unwrap();
            assert_eq!(&m[..n], &wm[..], "dropout mask n = {n} p = {p}");
            assert!(m[n..].iter().all(|&b| b == 0xAA) && y[n..].iter().all(|v| v.is_nan()), "dropout wrote past n = {n}");
            assert_close(&format!("dropout n = {n} p = {p}"), &y[..n], &wy);

            // The step is read on the device: advance it there, draw again.
            step_increment(&gpu, &mut step).unwrap();
            dropout_at(&gpu, &xd, &mut yd, &mut md, n, DropKey::new(p, seed), &step).unwrap();
            assert_eq!(step.download(&gpu).unwrap()[0], 6);
            dropout_cpu(&x, &mut wy, &mut wm, p, seed, 6).unwrap();
            assert_eq!(&md.download(&gpu).unwrap()[..n], &wm[..], "dropout mask after step_increment, n = {n}");

            // Backward.
            let dy = rand(n, 7 + n as u64);
            let mut dxd = poisoned_vec(&gpu, n);
            dropout_backward(&gpu, &DeviceVec::upload(&gpu, &to_f32(&dy)).unwrap(), &md, n, p, &mut dxd).unwrap();
            let mut wdx = vec![0.0; n];
            dropout_backward_cpu(&dy, &wm, p, &mut wdx).unwrap();
            assert_close(&format!("dropout_backward n = {n}"), &dxd.download(&gpu).unwrap()[..n], &wdx);
        }
    }
    // Matrices: padded index, mask over the padded buffer.
    for rows in ROWS {
        for cols in COLS {
            let (p, ld) = (0.5f32, padded_ld(cols));
            let x = rand(rows * cols, (rows + cols) as u64);
            let xd = dev(&gpu, rows, cols, &x);
            let mut yd = poisoned(&gpu, rows, cols);
            let mut md = DeviceVec::upload(&gpu, &vec![0xAAu8; rows * ld]).unwrap();
            let step = DeviceVec::upload(&gpu, &[11u32]).unwrap();
            dropout_matrix(&xd, &mut yd, &mut md, p, seed, &step).unwrap();
            let (mut wy, mut wm) = (vec![0.0; rows * cols], vec![0u8; rows * ld]);
            dropout_matrix_cpu_at(&x, rows, cols, &mut wy, &mut wm, DropKey::new(p, seed), 11).unwrap();
            assert_eq!(md.download(&gpu).unwrap(), wm, "dropout_matrix mask {rows} x {cols}");
            assert_close(&format!("dropout_matrix {rows} x {cols}"), &host(&yd), &wy);
            assert_padding_zero(&yd, "dropout_matrix");

            // The unfused first layer's input dropout: the same y without a mask, from x or from
            // its f16 copy (then y is x rounded to f16, dropped), keyed from an offset.
            let offset = 7 * ld as u64;
            let (mut in_mask, mut in_y) = (vec![0u8; rows * ld], vec![0.0; rows * cols]);
            dropout_matrix_cpu_at(&x, rows, cols, &mut in_y, &mut in_mask, DropKey::new(p, seed).at(offset), 11).unwrap();
            let mut in_yd = poisoned(&gpu, rows, cols);
            input_dropout_matrix(&xd, None, &mut in_yd, DropKey::new(p, seed).at(offset), &step).unwrap();
            assert_close(&format!("input_dropout_matrix {rows} x {cols}"), &host(&in_yd), &in_y);
            assert_padding_zero(&in_yd, "input_dropout_matrix");
            let mut x16 = DeviceMatrix::<half::f16>::zeros(&gpu, rows, cols).unwrap();
            tcgnn::ops::values::cast_matrix_to_f16(&xd, &mut x16).unwrap();
            let rounded: Vec<f64> = x.iter().map(|&v| half::f16::from_f64(v).to_f64()).collect();
            dropout_matrix_cpu_at(&rounded, rows, cols, &mut in_y, &mut in_mask, DropKey::new(p, seed).at(offset), 11).unwrap();
            let mut in_yd = poisoned(&gpu, rows, cols);
            input_dropout_matrix(&xd, Some(&x16), &mut in_yd, DropKey::new(p, seed).at(offset), &step).unwrap();
            assert_close(&format!("input_dropout_matrix from f16 {rows} x {cols}"), &host(&in_yd), &in_y);
            assert_padding_zero(&in_yd, "input_dropout_matrix from f16");

            let dy = rand(rows * cols, 3 + (rows + cols) as u64);
            let mut dxd = poisoned(&gpu, rows, cols);
            dropout_backward_matrix(&dev(&gpu, rows, cols, &dy), &md, p, &mut dxd).unwrap();
            let mut wdx = vec![0.0; rows * cols];
            dropout_backward_matrix_cpu(&dy, &wm, rows, cols, p, &mut wdx).unwrap();
            assert_close(&format!("dropout_backward_matrix {rows} x {cols}"), &host(&dxd), &wdx);
            assert_padding_zero(&dxd, "dropout_backward_matrix");
        }
    }
    // Errors are values.
    let xd = DeviceVec::upload(&gpu, &[1f32; 8]).unwrap();
    let mut yd = DeviceVec::<f32>::zeros(&gpu, 8).unwrap();
    let mut md = DeviceVec::<u8>::zeros(&gpu, 8).unwrap();
    let step = DeviceVec::upload(&gpu, &[1u32]).unwrap();
    assert!(matches!(dropout_at(&gpu, &xd, &mut yd, &mut md, 8, DropKey::new(1.0, 1), &step), Err(tcgnn::Error::Unsupported(_))));
    assert!(matches!(dropout_at(&gpu, &xd, &mut yd, &mut md, 9, DropKey::new(0.5, 1), &step), Err(tcgnn::Error::Shape(_))));
    let xm = DeviceMatrix::<f32>::zeros(&gpu, 3, 5).unwrap();
    let mut ym = DeviceMatrix::<f32>::zeros(&gpu, 3, 5).unwrap();
    assert!(matches!(dropout_matrix(&xm, &mut ym, &mut md, 0.5, 1, &step), Err(tcgnn::Error::Shape(_)))); // mask < 3 * 8
}

#[test]
fn gpu_row_normalize_and_backward() {
    let Some(gpu) = common::gpu_or_skip("gpu_row_normalize_and_backward") else { return };
    for rows in ROWS {
        for cols in COLS {
            let what = format!("{rows} x {cols}");
            let mut h = rand(rows * cols, (3 * rows + cols) as u64);
            if rows > 3 {
                for v in &mut h[2 * cols..3 * cols] {
                    *v = 0.0; // clamped norm
                }
            }
            let mut nd = poisoned(&gpu, rows, cols);
            let mut invd = poisoned_vec(&gpu, rows);
            row_normalize(&dev(&gpu, rows, cols, &h), &mut nd, &mut invd).unwrap();
            let (mut n, mut inv) = (vec![0.0; rows * cols], vec![0.0; rows]);
            row_normalize_cpu(&h, rows, cols, &mut n, &mut inv);
            let zero_row = if rows > 3 { Some(2) } else { None };
            // The clamped row's 1e12 would swamp the other rows' errors: compare it apart.
            let split = |got: &[f32], want: &[f64], width: usize, what: &str| {
                let keep = |i: usize| zero_row != Some(i / width);
                let (g, w): (Vec<f32>, Vec<f64>) = (0..want.len()).filter(|&i| keep(i)).map(|i| (got[i], want[i])).unzip();
                assert_close(what, &g, &w);
                let (g, w): (Vec<f32>, Vec<f64>) = (0..want.len()).filter(|&i| !keep(i)).map(|i| (got[i], want[i])).unzip();
                assert_close(&format!("{what}, clamped row"), &g, &w);
            };
            split(&host(&nd), &n, cols, &format!("row_normalize n {what}"));
            split(&invd.download(&gpu).unwrap()[..rows], &inv, 1, &format!("row_normalize inv_norm {what}"));
            assert_padding_zero(&nd, "row_normalize");
            // With the f16 copy (the tensor-core attention's): the same n, and beside it n rounded
            // to f16 (round to nearest even, as `half` rounds), padding included.
            let mut n16 = DeviceMatrix::<half::f16>::zeros(&gpu, rows, cols).unwrap();
            n16.poison().unwrap();
            let (mut nd2, mut invd2) = (poisoned(&gpu, rows, cols), poisoned_vec(&gpu, rows));
            row_normalize_with_half(&dev(&gpu, rows, cols, &h), &mut nd2, Some(&mut n16), &mut invd2).unwrap();
            assert_eq!(host(&nd2), host(&nd), "row_normalize_with_half n {what}");
            let want: Vec<u16> = nd2.download_padded().unwrap().iter().map(|&v| half::f16::from_f32(v).to_bits()).collect();
            let got: Vec<u16> = n16.download_padded().unwrap().iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "row_normalize_with_half n16 {what}");

            // Backward from the GPU's own n and inv_norm (the CPU reads the same f32 values).
            let (n32, inv32): (Vec<f64>, Vec<f64>) =
                (host(&nd).iter().map(|&v| v as f64).collect(), invd.download(&gpu).unwrap()[..rows].iter().map(|&v| v as f64).collect());
            let dn = rand(rows * cols, 5 + rows as u64);
            let dh0 = rand(rows * cols, 6 + cols as u64);
            let mut dhd = dev(&gpu, rows, cols, &dh0);
            row_normalize_backward(&nd, &invd, &dev(&gpu, rows, cols, &dn), &mut dhd).unwrap();
            let mut dh = dh0.clone();
            row_normalize_backward_cpu(&n32, &inv32, &dn, rows, cols, &mut dh);
            split(&host(&dhd), &dh, cols, &format!("row_normalize_backward {what}"));
            assert_padding_zero(&dhd, "row_normalize_backward");
        }
    }
}

/// Values in CSR order placed at their slots of `order`; other slots hold `fill`.
fn place(s: &Csr, m: &MeBcrs, order: ValueOrder, vals: &[f64], fill: f32) -> Vec<f32> {
    match order {
        ValueOrder::Csr => {
            let mut v = to_f32(vals);
            if v.is_empty() {
                v.push(fill);
            }
            v
        }
        ValueOrder::MeBcrs => {
            let mut v = vec![fill; m.values.len().max(1)];
            for e in 0..s.nnz() {
                v[m.csr_to_slot[e] as usize] = vals[e] as f32;
            }
            v
        }
    }
}

/// Values of `order` back in CSR order; asserts that non-edge slots still hold `fill`.
fn gather(s: &Csr, m: &MeBcrs, order: ValueOrder, got: &[f32], fill: f32, what: &str) -> Vec<f32> {
    match order {
        ValueOrder::Csr => got[..s.nnz()].to_vec(),
        ValueOrder::MeBcrs => {
            let mut is_edge = vec![false; got.len()];
            for &slot in &m.csr_to_slot {
                is_edge[slot as usize] = true;
            }
            for (i, &v) in got.iter().enumerate() {
                assert!(is_edge[i] || v.to_bits() == fill.to_bits(), "{what}: non-edge slot {i} was written ({v})");
            }
            m.csr_to_slot.iter().map(|&slot| got[slot as usize]).collect()
        }
    }
}

#[test]
fn gpu_edge_softmax_scaled_and_backward() {
    let Some(gpu) = common::gpu_or_skip("gpu_edge_softmax_scaled_and_backward") else { return };
    let sentinel = 7.25f32;
    for (name, s, cos) in edge_problems(60) {
        let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
        let m = MeBcrs::from_csr(&s, 8).unwrap();
        let rp = s.row_ptr();
        for beta in [0.6f64, -2.5] {
            let betad = dev(&gpu, 1, 1, &[beta]);
            let mut alpha = vec![0.0; s.nnz()];
            edge_softmax_scaled_cpu(rp, beta, &cos, &mut alpha);
            let dalpha = rand(s.nnz(), 61);
            // Backward reads the f32 alpha the forward kernel would give: round the reference.
            let alpha32: Vec<f64> = alpha.iter().map(|&v| v as f32 as f64).collect();
            let mut dcos = vec![0.0; s.nnz()];
            let dbeta = edge_softmax_backward_cpu(rp, beta, &alpha32, &dalpha, &cos, &mut dcos);
            let dbeta_scale: f64 = (0..s.n_rows())
                .map(|r| {
                    let dot: f64 = s.row_range(r).map(|k| alpha32[k] * dalpha[k]).sum();
                    s.row_range(r).map(|e| (alpha32[e] * (dalpha[e] - dot) * cos[e]).abs()).sum::<f64>()
                })
                .sum();
            for order in [ValueOrder::Csr, ValueOrder::MeBcrs] {
                let what = format!("{name}, {order:?}, beta {beta}");
                // Forward: edge slots poisoned, non-edge slots hold a sentinel that must survive.
                let cosd = DeviceVec::upload(&gpu, &place(&s, &m, order, &cos, 0.0)).unwrap();
                let mut alphad = DeviceVec::upload(&gpu, &place(&s, &m, order, &vec![f64::NAN; s.nnz()], sentinel)).unwrap();
                edge_softmax_scaled(&g, order, &betad, &cosd, &mut alphad).unwrap();
                let got = gather(&s, &m, order, &alphad.download(&gpu).unwrap(), sentinel, &what);
                if s.nnz() > 0 {
                    assert_close(&format!("edge_softmax_scaled {what}"), &got, &alpha);
                }

                // Backward.
                let alphad = DeviceVec::upload(&gpu, &place(&s, &m, order, &alpha32, 0.0)).unwrap();
                let dalphad = DeviceVec::upload(&gpu, &place(&s, &m, order, &dalpha, 0.0)).unwrap();
                let mut dcosd = DeviceVec::upload(&gpu, &place(&s, &m, order, &vec![f64::NAN; s.nnz()], sentinel)).unwrap();
                let mut dbetad = poisoned(&gpu, 1, 1);
                let fwd = Softmaxed { beta: &betad, cos: &cosd, alpha: &alphad };
                edge_softmax_backward(&g, order, fwd, &dalphad, &mut dcosd, &mut dbetad).unwrap();
                let got = gather(&s, &m, order, &dcosd.download(&gpu).unwrap(), sentinel, &what);
                if s.nnz() > 0 {
                    assert_close(&format!("edge_softmax_backward dcos {what}"), &got, &dcos);
                }
                // dbeta is a cancelling sum: compare against the scale of its terms.
                let gb = host(&dbetad)[0] as f64;
                assert!(
                    (gb - dbeta).abs() <= 1e-5 * dbeta_scale.max(dbeta.abs()) + 1e-30,
                    "edge_softmax_backward dbeta {what}: {gb} vs {dbeta} (terms' scale {dbeta_scale})"
                );
                assert_padding_zero(&dbetad, "dbeta");
            }
        }
        // Too short a value buffer is an error, not a launch.
        if s.nnz() > 1 {
            let short = DeviceVec::<f32>::zeros(&gpu, s.nnz() - 1).unwrap();
            let mut out = DeviceVec::<f32>::zeros(&gpu, s.nnz()).unwrap();
            let betad = dev(&gpu, 1, 1, &[1.0]);
            assert!(matches!(edge_softmax_scaled(&g, ValueOrder::Csr, &betad, &short, &mut out), Err(tcgnn::Error::Shape(_))));
        }
    }
}

#[test]
fn gpu_cross_entropy() {
    let Some(gpu) = common::gpu_or_skip("gpu_cross_entropy") else { return };
    for rows in ROWS {
        for cols in [1usize, 7, 8, 9, 16, 33, 130, 256, 300] {
            let what = format!("{rows} x {cols}");
            let (mut logits, labels, mask, inv) = ce_problem(rows, cols, (rows + 7 * cols) as u64);
            if rows > 1 && cols > 1 {
                for c in 0..cols {
                    logits[cols + c] = 0.25; // a tie over the whole row
                }
            }
            let mut dd = poisoned(&gpu, rows, cols);
            let mut stats = poisoned_vec(&gpu, 4);
            let labelsd = DeviceVec::upload(&gpu, &labels).unwrap();
            let maskd = DeviceVec::upload(&gpu, &mask).unwrap();
            cross_entropy(&dev(&gpu, rows, cols, &logits), &labelsd, &maskd, inv as f32, &mut dd, &mut stats).unwrap();
            let mut d = vec![0.0; rows * cols];
            let want = cross_entropy_cpu(&logits, rows, cols, &labels, &mask, inv as f32 as f64, &mut d);
            assert_close(&format!("cross_entropy dlogits {what}"), &host(&dd), &d);
            assert_padding_zero(&dd, "cross_entropy dlogits");
            let got = stats.download(&gpu).unwrap();
            assert_close(&format!("cross_entropy loss {what}"), &got[..1], &want[..1]);
            assert_eq!(got[1..4].iter().map(|&v| v as f64).collect::<Vec<_>>(), want[1..4].to_vec(), "cross_entropy counts {what}");
        }
    }
    let logits = DeviceMatrix::<f32>::zeros(&gpu, 4, 3).unwrap();
    let mut d = DeviceMatrix::<f32>::zeros(&gpu, 4, 3).unwrap();
    let labels = DeviceVec::upload(&gpu, &[0i32; 3]).unwrap();
    let mask = DeviceVec::upload(&gpu, &[1u8; 4]).unwrap();
    let mut stats = DeviceVec::<f32>::zeros(&gpu, 4).unwrap();
    assert!(matches!(cross_entropy(&logits, &labels, &mask, 1.0, &mut d, &mut stats), Err(tcgnn::Error::Shape(_))));
}

#[test]
fn gpu_adam_and_step_increment() {
    let Some(gpu) = common::gpu_or_skip("gpu_adam_and_step_increment") else { return };
    let hp = AdamHyper { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 5e-4 };
    for rows in ROWS {
        for cols in COLS {
            let what = format!("{rows} x {cols}");
            let seed = (rows * 31 + cols) as u64;
            let mut p = rand(rows * cols, seed);
            let mut m = rand(rows * cols, seed + 1);
            let mut v: Vec<f64> = rand(rows * cols, seed + 2).iter().map(|x| x.abs()).collect();
            let (mut pd, mut md, mut vd) = (dev(&gpu, rows, cols, &p), dev(&gpu, rows, cols, &m), dev(&gpu, rows, cols, &v));
            let mut step = DeviceVec::upload(&gpu, &[2u32]).unwrap();
            for t in 3..=4u32 {
                let g = rand(rows * cols, seed + 10 + t as u64);
                step_increment(&gpu, &mut step).unwrap(); // 2 -> 3 -> 4, on the device
                adam(&mut pd, &dev(&gpu, rows, cols, &g), &mut md, &mut vd, &hp, &step).unwrap();
                adam_cpu(&mut p, &g, &mut m, &mut v, &hp, t);
                assert_close(&format!("adam param {what} t {t}"), &host(&pd), &p);
                assert_close(&format!("adam m {what} t {t}"), &host(&md), &m);
                assert_close(&format!("adam v {what} t {t}"), &host(&vd), &v);
                for (x, name) in [(&pd, "param"), (&md, "m"), (&vd, "v")] {
                    assert_padding_zero(x, name);
                }
            }
            assert_eq!(step.download(&gpu).unwrap(), vec![4]);
        }
    }
}

#[test]
fn gpu_adam_many_matches_adam_per_tensor() {
    let Some(gpu) = common::gpu_or_skip("gpu_adam_many_matches_adam_per_tensor") else { return };
    let hp = AdamHyper { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 5e-4 };
    // A model's mix: a scalar, odd shapes, an empty tensor between two, a wide weight.
    let shapes = [(1, 1), (37, 7), (0, 5), (3, 1), (500, 64), (2051, 33), (1, 130)];
    let mut ps: Vec<Vec<f64>> = shapes.iter().enumerate().map(|(k, &(r, c))| rand(r * c, 100 + k as u64)).collect();
    let mut ms: Vec<Vec<f64>> = shapes.iter().enumerate().map(|(k, &(r, c))| rand(r * c, 200 + k as u64)).collect();
    let mut vs: Vec<Vec<f64>> =
        shapes.iter().enumerate().map(|(k, &(r, c))| rand(r * c, 300 + k as u64).iter().map(|x| x.abs()).collect()).collect();
    let mut pd: Vec<_> = shapes.iter().zip(&ps).map(|(&(r, c), x)| dev(&gpu, r, c, x)).collect();
    let mut md: Vec<_> = shapes.iter().zip(&ms).map(|(&(r, c), x)| dev(&gpu, r, c, x)).collect();
    let mut vd: Vec<_> = shapes.iter().zip(&vs).map(|(&(r, c), x)| dev(&gpu, r, c, x)).collect();
    let mut step = DeviceVec::upload(&gpu, &[0u32]).unwrap();
    for t in 1..=3u32 {
        let gs: Vec<Vec<f64>> = shapes.iter().enumerate().map(|(k, &(r, c))| rand(r * c, 400 + 10 * t as u64 + k as u64)).collect();
        let gd: Vec<_> = shapes.iter().zip(&gs).map(|(&(r, c), x)| dev(&gpu, r, c, x)).collect();
        let mut tensors: Vec<AdamTensors<'_, DeviceMatrix<f32>>> = pd
            .iter_mut()
            .zip(&gd)
            .zip(md.iter_mut().zip(vd.iter_mut()))
            .map(|((param, grad), (m, v))| AdamTensors { param, grad, m, v })
            .collect();
        let table = adam_table(&mut tensors).unwrap();
        let n = tensors.len();
        let dtable = DeviceVec::upload(&gpu, &table).unwrap();
        step_increment(&gpu, &mut step).unwrap();
        adam_many(&gpu, &dtable, n, table[table.len() - 1], &hp, &step).unwrap();
        for k in 0..shapes.len() {
            adam_cpu(&mut ps[k], &gs[k], &mut ms[k], &mut vs[k], &hp, t);
            let what = format!("adam_many tensor {k} {:?} t {t}", shapes[k]);
            assert_close(&format!("{what} param"), &host(&pd[k]), &ps[k]);
            assert_close(&format!("{what} m"), &host(&md[k]), &ms[k]);
            assert_close(&format!("{what} v"), &host(&vd[k]), &vs[k]);
            for (x, name) in [(&pd[k], "param"), (&md[k], "m"), (&vd[k], "v")] {
                assert_padding_zero(x, name);
            }
        }
    }
    // A table that does not match its count is refused before launching.
    let t = DeviceVec::upload(&gpu, &[0u64; 5]).unwrap();
    assert!(matches!(adam_many(&gpu, &t, 2, 0, &hp, &step), Err(tcgnn::Error::Shape(_))));
}

// ------------------------------------------------------------------ GIN's scalar ops, BatchNorm

#[test]
fn cpu_scaled_add_and_dot() {
    let (x, y0) = (rand(5000, 70), rand(5000, 71));
    let mut y = y0.clone();
    scaled_add_cpu(&mut y, &x, 1.25);
    for i in 0..x.len() {
        assert_eq!(y[i], y0[i] + 1.25 * x[i], "scaled_add at {i}");
    }
    let d = dot_cpu(&x, &y0);
    let want: f64 = x.iter().zip(&y0).map(|(a, b)| a * b).sum();
    assert!((d - want).abs() < 1e-10, "dot {d} vs {want}");
    assert_eq!(dot_cpu::<f64>(&[], &[]), 0.0);
}

/// Plain loops of BatchNorm1d in training mode: (y, batch mean, biased var).
fn bn_reference(x: &[f64], rows: usize, cols: usize, gamma: &[f64], beta: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut mean = vec![0.0; cols];
    let mut var = vec![0.0; cols];
    for c in 0..cols {
        mean[c] = (0..rows).map(|r| x[r * cols + c]).sum::<f64>() / rows as f64;
        var[c] = (0..rows).map(|r| (x[r * cols + c] - mean[c]).powi(2)).sum::<f64>() / rows as f64;
    }
    let y = (0..rows * cols)
        .map(|i| {
            let c = i % cols;
            (x[i] - mean[c]) / (var[c] + BN_EPS as f64).sqrt() * gamma[c] + beta[c]
        })
        .collect();
    (y, mean, var)
}

#[test]
fn cpu_batch_norm_matches_torch_definition() {
    let (rows, cols) = (37, 6);
    let x: Vec<f64> = rand(rows * cols, 80).iter().map(|v| 3.0 * v + 1.0).collect();
    let (gamma, beta) = (rand(cols, 81), rand(cols, 82));
    let (mut rm, mut rv) = (vec![0.5; cols], vec![2.0; cols]);
    let (mut mean, mut inv_std, mut y) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; rows * cols]);
    batch_norm_cpu(&x, cols, (&gamma, &beta), (&mut rm, &mut rv), BatchNormHyper::torch(true), &mut y, (&mut mean, &mut inv_std));
    let (want, bm, bv) = bn_reference(&x, rows, cols, &gamma, &beta);
    assert!(rel64(&y, &want) < 1e-12, "train forward");
    for c in 0..cols {
        // torch: running = (1 - 0.1) running + 0.1 batch, with the unbiased variance (0.1 as
        // the f32 the hyper-parameter is).
        let mo = BN_MOMENTUM as f64;
        assert!((rm[c] - ((1.0 - mo) * 0.5 + mo * bm[c])).abs() < 1e-12, "running mean {c}");
        let unbiased = bv[c] * rows as f64 / (rows - 1) as f64;
        assert!((rv[c] - ((1.0 - mo) * 2.0 + mo * unbiased)).abs() < 1e-12, "running var {c}");
    }
    // Evaluation: the running statistics normalise, and stay as they are.
    let (rm0, rv0) = (rm.clone(), rv.clone());
    batch_norm_cpu(&x, cols, (&gamma, &beta), (&mut rm, &mut rv), BatchNormHyper::torch(false), &mut y, (&mut mean, &mut inv_std));
    assert_eq!((&rm, &rv), (&rm0, &rv0));
    for i in 0..rows * cols {
        let c = i % cols;
        let want = (x[i] - rm[c]) / (rv[c] + BN_EPS as f64).sqrt() * gamma[c] + beta[c];
        assert!((y[i] - want).abs() < 1e-12, "eval at {i}");
    }
}

#[test]
fn cpu_batch_norm_backward_against_finite_differences() {
    let (rows, cols) = (23, 5);
    let x = rand(rows * cols, 90);
    let (gamma, beta) = (rand(cols, 91), rand(cols, 92));
    let dy = rand(rows * cols, 93);
    // J(x, gamma, beta) = sum dy . BN(x) in training mode (the batch statistics depend on x).
    let j = |x: &[f64], gamma: &[f64], beta: &[f64]| -> f64 {
        let (mut rm, mut rv) = (vec![0.0; cols], vec![1.0; cols]);
        let (mut m, mut s, mut y) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; rows * cols]);
        batch_norm_cpu(x, cols, (gamma, beta), (&mut rm, &mut rv), BatchNormHyper::torch(true), &mut y, (&mut m, &mut s));
        y.iter().zip(&dy).map(|(a, b)| a * b).sum()
    };
    let (mut rm, mut rv) = (vec![0.0; cols], vec![1.0; cols]);
    let (mut m, mut s, mut y) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; rows * cols]);
    batch_norm_cpu(&x, cols, (&gamma, &beta), (&mut rm, &mut rv), BatchNormHyper::torch(true), &mut y, (&mut m, &mut s));
    let (mut dx, mut dgamma, mut dbeta) = (vec![f64::NAN; rows * cols], vec![f64::NAN; cols], vec![f64::NAN; cols]);
    batch_norm_backward_cpu(&x, &dy, cols, &gamma, (&m, &s), &mut dx, (&mut dgamma, &mut dbeta));
    assert_grad("batch_norm dx", &dx, &fd_grad(&x, |x| j(x, &gamma, &beta)));
    assert_grad("batch_norm dgamma", &dgamma, &fd_grad(&gamma, |g| j(&x, g, &beta)));
    assert_grad("batch_norm dbeta", &dbeta, &fd_grad(&beta, |b| j(&x, &gamma, b)));
}

#[test]
fn gpu_scaled_add_dot_batch_norm() {
    let Some(gpu) = common::gpu_or_skip("gpu_scaled_add_dot_batch_norm") else { return };
    for rows in ROWS {
        for cols in COLS {
            let what = format!("{rows} x {cols}");
            let seed = (rows * 1000 + cols) as u64 + 500;
            let x = rand(rows * cols, seed);
            let z = rand(rows * cols, seed + 1);

            // scaled_add: y += (1 + alpha) x with alpha read from the device.
            let mut yd = dev(&gpu, rows, cols, &z);
            scaled_add(&mut yd, &dev(&gpu, rows, cols, &x), &dev(&gpu, 1, 1, &[0.375]), 1.0).unwrap();
            let mut want = z.clone();
            scaled_add_cpu(&mut want, &x, 1.375);
            assert_close(&format!("scaled_add {what}"), &host(&yd), &want);
            assert_padding_zero(&yd, "scaled_add");

            // dot into a poisoned 1 x 1.
            let mut out = poisoned(&gpu, 1, 1);
            dot(&dev(&gpu, rows, cols, &x), &dev(&gpu, rows, cols, &z), &mut out).unwrap();
            let want = dot_cpu(&x, &z);
            let got = host(&out)[0] as f64;
            assert!(
                (got - want).abs() <= 1e-5 * (1.0 + x.iter().zip(&z).map(|(a, b)| (a * b).abs()).sum::<f64>()),
                "dot {what}: {got} vs {want}"
            );

            // batch_norm forward (train, then eval) and backward.
            let (gamma, beta) = (rand(cols, seed + 2), rand(cols, seed + 3));
            let (mut rm, mut rv) = (vec![0.25; cols], vec![1.5; cols]);
            let (mut m, mut s, mut y) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; rows * cols]);
            let (gd, bd) = (dev(&gpu, 1, cols, &gamma), dev(&gpu, 1, cols, &beta));
            let (mut rmd, mut rvd) = (dev(&gpu, 1, cols, &rm), dev(&gpu, 1, cols, &rv));
            let (mut md, mut sd, mut yd) = (poisoned(&gpu, 1, cols), poisoned(&gpu, 1, cols), poisoned(&gpu, rows, cols));
            let xd = dev(&gpu, rows, cols, &x);
            for train in [true, false] {
                let hyper = BatchNormHyper::torch(train);
                batch_norm_cpu(&x, cols, (&gamma, &beta), (&mut rm, &mut rv), hyper, &mut y, (&mut m, &mut s));
                batch_norm(&xd, (&gd, &bd), (&mut rmd, &mut rvd), hyper, &mut yd, (&mut md, &mut sd), None).unwrap();
                let w = format!("batch_norm train={train} {what}");
                assert_close(&w, &host(&yd), &y);
                assert_close(&format!("{w} running mean"), &host(&rmd), &rm);
                assert_close(&format!("{w} running var"), &host(&rvd), &rv);
                assert_padding_zero(&yd, &w);
            }
            batch_norm_cpu(&x, cols, (&gamma, &beta), (&mut rm, &mut rv), BatchNormHyper::torch(true), &mut y, (&mut m, &mut s));
            batch_norm(&xd, (&gd, &bd), (&mut rmd, &mut rvd), BatchNormHyper::torch(true), &mut yd, (&mut md, &mut sd), None).unwrap();
            let (mut dx, mut dg, mut db) = (vec![0.0; rows * cols], vec![0.0; cols], vec![0.0; cols]);
            batch_norm_backward_cpu(&x, &z, cols, &gamma, (&m, &s), &mut dx, (&mut dg, &mut db));
            let (mut dxd, mut dgd, mut dbd) = (poisoned(&gpu, rows, cols), poisoned(&gpu, 1, cols), poisoned(&gpu, 1, cols));
            batch_norm_backward(&xd, &dev(&gpu, rows, cols, &z), &gd, (&md, &sd), &mut dxd, (&mut dgd, &mut dbd), None).unwrap();
            // dx subtracts nearly equal terms: compare against the size of its parts.
            let scale = 1.0 + dx.iter().map(|v| v.abs()).fold(0.0, f64::max);
            let err = host(&dxd).iter().zip(&dx).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max) / scale;
            assert!(err < 1e-3, "batch_norm_backward dx {what}: max err {err}");
            assert_close(&format!("batch_norm dgamma {what}"), &host(&dgd), &dg);
            assert_close(&format!("batch_norm dbeta {what}"), &host(&dbd), &db);
            assert_padding_zero(&dxd, "batch_norm_backward");
        }
    }
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, 3, 5).unwrap();
    let x = DeviceMatrix::<f32>::zeros(&gpu, 3, 5).unwrap();
    assert!(matches!(scaled_add(&mut y, &x, &DeviceMatrix::zeros(&gpu, 1, 2).unwrap(), 1.0), Err(tcgnn::Error::Shape(_))));
    assert!(matches!(dot(&x, &y, &mut DeviceMatrix::zeros(&gpu, 2, 1).unwrap()), Err(tcgnn::Error::Shape(_))));
}

#[test]
fn gather_rows_cpu_picks_rows_and_zeros_the_rest() {
    use tcgnn::ops::backend::cpu::HostMat;
    use tcgnn::ops::nn::gather_rows::gather_rows_cpu;
    let src = HostMat { rows: 3, cols: 2, data: vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0] };
    let mut dst = HostMat { rows: 4, cols: 2, data: vec![9.0; 8] };
    gather_rows_cpu(&src, &[2, 0, 2], &mut dst).unwrap();
    assert_eq!(dst.data, [5.0, 6.0, 1.0, 2.0, 5.0, 6.0, 0.0, 0.0]);
    // An id past the source's rows and more ids than rows are errors, not reads out of bounds.
    assert!(gather_rows_cpu(&src, &[3], &mut dst).unwrap_err().to_string().contains("row id 3"));
    assert!(gather_rows_cpu(&src, &[0; 5], &mut dst).is_err());
}

#[test]
fn gpu_gather_rows_matches_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_gather_rows_matches_cpu") else { return };
    use tcgnn::gpu::{DeviceMatrix, DeviceVec};
    use tcgnn::ops::backend::cpu::HostMat;
    use tcgnn::ops::nn::gather_rows::{gather_rows, gather_rows_cpu};
    // 13 columns (padded to 16), ids with repeats, fewer ids than rows, an empty id list.
    for (n, cols, ids) in [(50usize, 13usize, vec![49u32, 0, 7, 7, 31]), (5, 1, vec![]), (1, 24, vec![0, 0, 0])] {
        let m = tcgnn::tensor::Matrix::random(n, cols, 9);
        let src = DeviceMatrix::<f32>::upload(&gpu, &m).unwrap();
        let rows = ids.len() + 2;
        let mut dst = DeviceMatrix::<f32>::zeros(&gpu, rows, cols).unwrap();
        dst.poison().unwrap();
        let dev_ids = DeviceVec::upload(&gpu, &if ids.is_empty() { vec![0] } else { ids.clone() }).unwrap();
        gather_rows(&src, &dev_ids, &ids, &mut dst).unwrap();
        let got = dst.download_padded().unwrap();
        let host = HostMat { rows: n, cols, data: m.data.clone() };
        let mut want = HostMat { rows, cols, data: vec![0f32; rows * cols] };
        gather_rows_cpu(&host, &ids, &mut want).unwrap();
        for r in 0..rows {
            let ld = dst.ld;
            assert_eq!(&got[r * ld..r * ld + cols], &want.data[r * cols..(r + 1) * cols], "n={n} cols={cols} row {r}");
            assert!(got[r * ld + cols..(r + 1) * ld].iter().all(|&x| x == 0.0), "padding of row {r}");
        }
    }
}

// ------------------------------------------------------------------ fused hidden-layer tail

/// bias + ReLU + dropout, and dropout' + ReLU', on the host through the unfused ops.
#[allow(clippy::too_many_arguments)]
fn unfused_tail(
    z: &[f64],
    rows: usize,
    cols: usize,
    b: &[f64],
    dy: &[f64],
    p: f32,
    seed: u64,
    step: u32,
    offset: u64,
) -> (Vec<f64>, Vec<f64>) {
    let mut a = z.to_vec();
    bias_add_cpu(&mut a, rows, cols, b);
    relu_cpu(&mut a);
    let (mut y, mut mask) = (vec![0.0; rows * cols], vec![0u8; rows * padded_ld(cols)]);
    dropout_matrix_cpu_at(&a, rows, cols, &mut y, &mut mask, DropKey::new(p, seed).at(offset), step).unwrap();
    let mut dz = vec![0.0; rows * cols];
    dropout_backward_matrix_cpu(dy, &mask, rows, cols, p, &mut dz).unwrap();
    relu_backward_cpu(&a, &mut dz);
    (y, dz)
}

#[test]
fn cpu_fused_relu_dropout_equals_the_unfused_ops() {
    use tcgnn::ops::nn::relu_dropout::{bias_relu_dropout_in_place_cpu, relu_dropout_backward_in_place_cpu};
    for (rows, cols) in [(1, 1), (37, 7), (300, 16), (65, 33)] {
        for (p, offset) in [(0.5f32, 0u64), (0.1, 8 * 37), ((0.9), (1u64 << 32) - 40)] {
            // Some exact zeros and negatives around the bias, so the ReLU's edge is exercised.
            let mut z = rand(rows * cols, (rows * cols) as u64);
            z.iter_mut().step_by(5).for_each(|v| *v = 0.0);
            let (b, dy) = (rand(cols, 3), rand(rows * cols, 4));
            let (want_y, want_dz) = unfused_tail(&z, rows, cols, &b, &dy, p, 77, 9, offset);
            // In place (the stack's fused tail): the output written over z, dz over dy.
            let mut zy = z.clone();
            bias_relu_dropout_in_place_cpu(&mut zy, (rows, cols), &b, DropKey::new(p, 77).at(offset), 9).unwrap();
            assert_eq!(zy, want_y, "forward {rows} x {cols} p {p}");
            let mut d = dy.clone();
            relu_dropout_backward_in_place_cpu(&mut d, &zy, p).unwrap();
            assert_eq!(d, want_dz, "backward {rows} x {cols} p {p}");
        }
    }
    let mut zy = vec![0.0; 4];
    assert!(bias_relu_dropout_in_place_cpu(&mut zy, (2, 2), &[0.0; 2], DropKey::new(1.0, 1).at(0), 1).is_err());
    assert!(bias_relu_dropout_in_place_cpu(&mut zy, (2, 2), &[0.0; 3], DropKey::new(0.5, 1).at(0), 1).is_err());
    assert!(relu_dropout_backward_in_place_cpu(&mut zy, &[0.0; 3], 0.5).is_err());
}

/// The in-place kernels (a hidden layer's fused tail written over the conv's output, its
/// backward over the incoming gradient) against the f64 CPU reference of the unfused ops. The
/// output is the input buffer, so it cannot be poisoned; the padding is checked to stay 0 and
/// the second launch reads the first's output, as the stack does.
#[test]
fn gpu_fused_relu_dropout_in_place_matches_cpu() {
    use tcgnn::ops::nn::relu_dropout::{bias_relu_dropout_in_place, relu_dropout_backward_in_place};
    let Some(gpu) = common::gpu_or_skip("gpu_fused_relu_dropout_in_place_matches_cpu") else { return };
    for rows in ROWS {
        for cols in COLS {
            for (p, offset) in [(0.5f32, 0u64), (0.25, 8 * 1000 + 2)] {
                let mut z = rand(rows * cols, (rows + 3 * cols) as u64);
                z.iter_mut().step_by(7).for_each(|v| *v = 0.0);
                let (b, dy) = (rand(cols, 15), rand(rows * cols, 16));
                let (want_y, want_dz) = unfused_tail(&z, rows, cols, &b, &dy, p, 0xFEED, 13, offset);
                let step = DeviceVec::upload(&gpu, &[13u32]).unwrap();
                let mut zy = dev(&gpu, rows, cols, &z);
                bias_relu_dropout_in_place(&mut zy, &dev(&gpu, 1, cols, &b), DropKey::new(p, 0xFEED).at(offset), &step).unwrap();
                let what = format!("{rows} x {cols} p {p} offset {offset}");
                let y = host(&zy);
                assert!(y.iter().zip(&want_y).all(|(g, w)| (*g == 0.0) == (*w == 0.0)), "{what}: a different mask");
                assert_close(&format!("bias_relu_dropout_in_place {what}"), &y, &want_y);
                assert_padding_zero(&zy, "bias_relu_dropout_in_place");
                let mut d = dev(&gpu, rows, cols, &dy);
                relu_dropout_backward_in_place(&mut d, &zy, p).unwrap();
                assert_close(&format!("relu_dropout_backward_in_place {what}"), &host(&d), &want_dz);
                assert_padding_zero(&d, "relu_dropout_backward_in_place");
            }
        }
    }
}

/// `n` distinct ids below `bound`, in random order (a part's rows' original node ids).
fn original_ids(n: usize, bound: u32, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    let mut ids: Vec<u32> = (0..bound).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i as u64 + 1) as usize);
    }
    ids.truncate(n);
    ids
}

/// A dropout keyed by original row ids draws, for local row r, exactly row ids[r] of the
/// unkeyed mask of the whole matrix (CPU reference; what makes any partition's masks the
/// one-device masks), and an edge dropout keyed by edge ids element ids[e] of the whole one.
#[test]
fn dropout_keyed_by_ids_draws_the_whole_graphs_rows() {
    let (whole, cols, p, seed, step) = (50usize, 13usize, 0.5f32, 0xD1CE, 4u32);
    let ld = padded_ld(cols);
    let x = rand(whole * cols, 1);
    let (mut wy, mut wm) = (vec![0.0; whole * cols], vec![0u8; whole * ld]);
    dropout_matrix_cpu_at(&x, whole, cols, &mut wy, &mut wm, DropKey::new(p, seed), step).unwrap();
    let ids = original_ids(17, whole as u32, 2);
    let part: Vec<f64> = ids.iter().flat_map(|&r| x[r as usize * cols..(r as usize + 1) * cols].to_vec()).collect();
    let (mut y, mut m) = (vec![0.0; ids.len() * cols], vec![0u8; ids.len() * ld]);
    dropout_matrix_cpu_at(&part, ids.len(), cols, &mut y, &mut m, DropKey::new(p, seed).with_ids(Some(&ids[..])), step).unwrap();
    for (r, &g) in ids.iter().enumerate() {
        let g = g as usize;
        assert_eq!(&m[r * ld..(r + 1) * ld], &wm[g * ld..(g + 1) * ld], "row {r} (original {g})");
        assert_eq!(&y[r * cols..(r + 1) * cols], &wy[g * cols..(g + 1) * cols], "row {r} (original {g})");
    }
    // Edges.
    let (mut ey, mut em) = (vec![0.0; 300], vec![0u8; 300]);
    let ex = rand(300, 3);
    dropout_cpu(&ex, &mut ey, &mut em, p, seed, step).unwrap();
    let eids = original_ids(41, 300, 4);
    let epart: Vec<f64> = eids.iter().map(|&e| ex[e as usize]).collect();
    let (mut py, mut pm) = (vec![0.0; 41], vec![0u8; 41]);
    dropout_cpu_at(&epart, &mut py, &mut pm, DropKey::new(p, seed).with_ids(Some(&eids[..])), step).unwrap();
    for (k, &e) in eids.iter().enumerate() {
        assert_eq!((pm[k], py[k]), (em[e as usize], ey[e as usize]), "edge {k} (original {e})");
    }
    // Too few ids is an error, not a panic.
    assert!(dropout_cpu_at(&ex, &mut ey, &mut em, DropKey::new(p, seed).with_ids(Some(&eids[..])), step).is_err());
}

/// The GPU's id-keyed dropouts (matrix, input dropout from f16, fused bias-ReLU, fused ELU and
/// its backward, the dropout products, the edge dropout) draw the CPU reference's masks.
#[test]
fn gpu_dropout_keyed_by_ids_matches_cpu() {
    use tcgnn::ops::nn::dropout_gemm::{dropout_gemm, dropout_gemm_cpu, dropout_gemm_dw, dropout_gemm_dw_cpu, dropout_gemm_dw_scratch_len};
    use tcgnn::ops::nn::elu_dropout::{elu_dropout, elu_dropout_backward, elu_dropout_backward_cpu, elu_dropout_cpu};
    use tcgnn::ops::nn::relu_dropout::{bias_relu_dropout_in_place, bias_relu_dropout_in_place_cpu};
    let Some(gpu) = common::gpu_or_skip("gpu_dropout_keyed_by_ids_matches_cpu") else { return };
    let (seed, step_v, p) = (0xBEEF, 9u32, 0.5f32);
    let step = DeviceVec::upload(&gpu, &[step_v]).unwrap();
    for (rows, cols) in [(37usize, 21usize), (130, 8), (5, 64)] {
        let ld = padded_ld(cols);
        let ids = original_ids(rows, 10 * rows as u32 + 3, rows as u64);
        let idsd = DeviceVec::upload(&gpu, &ids).unwrap();
        let (key, keyd) = (DropKey::new(p, seed).with_ids(Some(&ids[..])), DropKey::new(p, seed).with_ids(Some(&idsd)));
        let what = format!("{rows} x {cols}");
        let x = rand(rows * cols, (rows * cols) as u64);
        let xd = dev(&gpu, rows, cols, &x);
        // Matrix dropout and its mask.
        let (mut wy, mut wm) = (vec![0.0; rows * cols], vec![0u8; rows * ld]);
        dropout_matrix_cpu_at(&x, rows, cols, &mut wy, &mut wm, key, step_v).unwrap();
        let mut yd = poisoned(&gpu, rows, cols);
        let mut md = DeviceVec::upload(&gpu, &vec![0xAAu8; rows * ld]).unwrap();
        dropout_matrix_at(&xd, &mut yd, &mut md, keyd, &step).unwrap();
        assert_eq!(md.download(&gpu).unwrap(), wm, "dropout_matrix_at mask {what}");
        assert_close(&format!("dropout_matrix_at {what}"), &host(&yd), &wy);
        // Input dropout from the f16 copy.
        let mut x16 = DeviceMatrix::<half::f16>::zeros(&gpu, rows, cols).unwrap();
        tcgnn::ops::values::cast_matrix_to_f16(&xd, &mut x16).unwrap();
        let rounded: Vec<f64> = x.iter().map(|&v| half::f16::from_f64(v).to_f64()).collect();
        let (mut ry, mut rm) = (vec![0.0; rows * cols], vec![0u8; rows * ld]);
        dropout_matrix_cpu_at(&rounded, rows, cols, &mut ry, &mut rm, key, step_v).unwrap();
        let mut in_yd = poisoned(&gpu, rows, cols);
        input_dropout_matrix(&xd, Some(&x16), &mut in_yd, keyd, &step).unwrap();
        assert_close(&format!("input_dropout_matrix from f16 {what}"), &host(&in_yd), &ry);
        // Bias, ReLU and dropout.
        let b = rand(cols, 5);
        let mut want = x.clone();
        bias_relu_dropout_in_place_cpu(&mut want, (rows, cols), &b, key, step_v).unwrap();
        let mut zy = dev(&gpu, rows, cols, &x);
        bias_relu_dropout_in_place(&mut zy, &dev(&gpu, 1, cols, &b), keyd, &step).unwrap();
        assert_close(&format!("bias_relu_dropout_in_place {what}"), &host(&zy), &want);
        // ELU and dropout, and the backward drawing the mask again.
        let (mut h, mut ey) = (x.clone(), vec![0.0; rows * cols]);
        elu_dropout_cpu(&mut h, (rows, cols), &mut ey, key, step_v).unwrap();
        let (mut hd, mut eyd) = (dev(&gpu, rows, cols, &x), poisoned(&gpu, rows, cols));
        elu_dropout(&mut hd, &mut eyd, keyd, &step).unwrap();
        assert_close(&format!("elu_dropout {what}"), &host(&eyd), &ey);
        let dy = rand(rows * cols, 8);
        let mut dz = vec![0.0; rows * cols];
        elu_dropout_backward_cpu(&dy, &h, (rows, cols), key, step_v, &mut dz).unwrap();
        let mut dzd = poisoned(&gpu, rows, cols);
        elu_dropout_backward(&dev(&gpu, rows, cols, &dy), &hd, keyd, &step, &mut dzd).unwrap();
        assert_close(&format!("elu_dropout_backward {what}"), &host(&dzd), &dz);
        // The dropout products (3xTF32: f32 accuracy).
        let n = 16;
        let w = rand(cols * n, 9);
        let mut py = vec![0.0; rows * n];
        dropout_gemm_cpu(&x, (rows, cols), &w, n, &mut py, key, step_v).unwrap();
        let mut pyd = poisoned(&gpu, rows, n);
        dropout_gemm(&xd, &dev(&gpu, cols, n, &w), &mut pyd, keyd, &step, tcgnn::gpu::cublas::GemmMath::F32).unwrap();
        assert_close(&format!("dropout_gemm {what}"), &host(&pyd), &py);
        let g = rand(rows * n, 10);
        let mut dw = vec![0.0; cols * n];
        dropout_gemm_dw_cpu(&x, (rows, cols), &g, n, &mut dw, key, step_v).unwrap();
        let mut scratch = DeviceVec::<f32>::zeros(&gpu, dropout_gemm_dw_scratch_len(&gpu, rows, cols, n, false).unwrap()).unwrap();
        let mut dwd = poisoned(&gpu, cols, n);
        dropout_gemm_dw(&xd, &dev(&gpu, rows, n, &g), &mut dwd, &mut scratch, keyd, &step, tcgnn::gpu::cublas::GemmMath::F32).unwrap();
        assert_close(&format!("dropout_gemm_dw {what}"), &host(&dwd), &dw);
        // Edges (ids one per element, in any order).
        let e = rows * cols + 3;
        let eids = original_ids(e, 4 * e as u32, 11);
        let ex = rand(e, 12);
        let (mut wey, mut wem) = (vec![0.0; e], vec![0u8; e]);
        dropout_cpu_at(&ex, &mut wey, &mut wem, DropKey::new(p, seed).with_ids(Some(&eids[..])), step_v).unwrap();
        let eidsd = DeviceVec::upload(&gpu, &eids).unwrap();
        let exd = DeviceVec::upload(&gpu, &to_f32(&ex)).unwrap();
        let (mut eyd, mut emd) = (poisoned_vec(&gpu, e), DeviceVec::<u8>::zeros(&gpu, e).unwrap());
        dropout_at(&gpu, &exd, &mut eyd, &mut emd, e, DropKey::new(p, seed).with_ids(Some(&eidsd)), &step).unwrap();
        assert_eq!(emd.download(&gpu).unwrap(), wem, "edge dropout mask {what}");
        assert_close(&format!("edge dropout {what}"), &eyd.download(&gpu).unwrap(), &wey);
    }
}
