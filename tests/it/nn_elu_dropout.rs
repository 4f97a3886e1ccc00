//! GAT's fused hidden tail (`ops::nn::elu_dropout`) against the ops it replaces — ELU, dropout
//! with a stored mask, then dropout' and ELU' — on the same step counter and key: equal bit for
//! bit on the CPU (f64) and on the GPU (skipped without one), padding zero, for odd shapes,
//! p in {0.6, 0.25} and a part's row offset.

use crate::common;

use tcgnn::gpu::memory::padded_ld;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, Ops};
use tcgnn::ops::nn::DropKey;
use tcgnn::ops::nn::elu_dropout::EluDropoutOp;
use tcgnn::ops::{Impl, Precision};
use tcgnn::tensor::Matrix;

/// (fused h, fused y, fused dz) and the same from the unfused ops, downloaded.
fn both<B: Ops>(b: &B, rows: usize, cols: usize, p: f32, offset: u64) -> [Matrix; 6] {
    let z = Matrix::random(rows, cols, (rows * 7 + cols) as u64);
    let dy = Matrix::random(rows, cols, 99);
    b.begin_step().unwrap();
    b.begin_step().unwrap(); // step 2: not the first mask
    let (mut h1, mut y1, mut dz1) = (b.upload(&z).unwrap(), b.matrix(rows, cols).unwrap(), b.matrix(rows, cols).unwrap());
    let dyd = b.upload(&dy).unwrap();
    b.elu_dropout(&mut h1, &mut y1, DropKey::new(p, 0xC0FFEE).at(offset)).unwrap();
    b.elu_dropout_backward(&dyd, &h1, DropKey::new(p, 0xC0FFEE).at(offset), &mut dz1).unwrap();
    let (mut h2, mut y2, mut dz2) = (b.upload(&z).unwrap(), b.matrix(rows, cols).unwrap(), b.matrix(rows, cols).unwrap());
    let mut mask = b.mask(rows, cols).unwrap();
    b.elu(&mut h2).unwrap();
    b.dropout_at(&h2, &mut y2, &mut mask, DropKey::new(p, 0xC0FFEE).at(offset)).unwrap();
    b.dropout_backward(&dyd, &mask, p, &mut dz2).unwrap();
    b.elu_backward(&h2, &mut dz2).unwrap();
    [h1, y1, dz1, h2, y2, dz2].map(|m| b.download(&m).unwrap())
}

fn check<B: Ops>(b: &B, what: &str) {
    for (rows, cols) in [(1, 1), (37, 13), (2051, 16), (1000, 64), (5, 0)] {
        for (p, offset) in [(0.6, 0), (0.25, 3 * padded_ld(cols) as u64)] {
            let [h1, y1, dz1, h2, y2, dz2] = both(b, rows, cols, p, offset);
            let name = format!("{what} {rows} x {cols} p {p} offset {offset}");
            for (f, u, part) in [(&h1, &h2, "ELU"), (&y1, &y2, "dropped"), (&dz1, &dz2, "gradient")] {
                let bits = |m: &Matrix| m.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(f), bits(u), "{name}: {part}");
            }
            if rows * cols > 100 {
                // Both kinds of element occur: kept (nonzero) and dropped.
                let kept = y1.data.iter().filter(|&&v| v != 0.0).count();
                assert!(kept > 0 && kept < rows * cols, "{name}: {kept} kept");
            }
        }
    }
}

#[test]
fn cpu_elu_dropout_is_elu_then_dropout() {
    check(&CpuBackend::<f64>::new(), "cpu");
}

#[test]
fn gpu_elu_dropout_is_elu_then_dropout() {
    let Some(gpu) = common::gpu_or_skip("gpu_elu_dropout_is_elu_then_dropout") else { return };
    let b = CudaBackend::new(gpu, Precision::F32, Impl::Auto).unwrap();
    check(&b, "gpu");
    // The padding of the fused outputs stays zero (download drops it: read it raw).
    let z = Matrix::random(37, 13, 5);
    let (mut h, mut y) = (b.upload(&z).unwrap(), b.matrix(37, 13).unwrap());
    b.elu_dropout(&mut h, &mut y, DropKey::new(0.5, 1).at(0)).unwrap();
    for m in [&h, &y] {
        let raw = m.download_padded().unwrap();
        assert!(raw.iter().enumerate().all(|(i, &v)| i % padded_ld(13) < 13 || v == 0.0), "padding");
    }
}

/// dz of `elu_dropout_backward_product` (dy = g wᵀ, the next layer's dX, formed inside the pass
/// on the GPU for g of at most 8 columns; cuBLAS then the in-place backward past that) on
/// `b`, for h after a training forward, step 2; and dz's column sums from the same call (their
/// output filled with garbage first: overwritten).
/// With `pre`, the backward is given the ELU's input z itself (the ELU applied inside the next
/// product), not its output.
fn product_backward<B: Ops>(b: &B, rows: usize, cols: usize, k: usize, p: f32, offset: u64, pre: bool) -> (Matrix, Matrix) {
    let (z, g, w) = (Matrix::random(rows, cols, (rows + cols) as u64), Matrix::random(rows, k, 5), Matrix::random(cols, k, 6));
    b.begin_step().unwrap();
    b.begin_step().unwrap();
    let (mut h, mut y) = (b.upload(&z).unwrap(), b.matrix(rows, cols).unwrap());
    if !pre {
        b.elu_dropout(&mut h, &mut y, DropKey::new(p, 0xC0FFEE).at(offset)).unwrap();
    }
    let (gd, wd) = (b.upload(&g).unwrap(), b.upload(&w).unwrap());
    let mut dz = b.matrix(rows, cols).unwrap();
    let mut sums = b.upload(&Matrix::random(1, cols, 9)).unwrap();
    b.elu_dropout_backward_product((&gd, &wd), (&h, pre), None, DropKey::new(p, 0xC0FFEE).at(offset), &mut dz, Some(&mut sums)).unwrap();
    (b.download(&dz).unwrap(), b.download(&sums).unwrap())
}

/// The product form against the f64 CPU backend (the product, then the unfused-order
/// backward, then the column sums): g of 1, 3, 7 and 8 columns (the fused kernel) and 12
/// (cuBLAS, then in place, then `col_sums`); from the ELU's output and from its input; one
/// row, rows and columns not multiples of 4 or 8,
/// 40 columns (10 float4s a row: the grid's threads no multiple of it, so the sums run apart),
/// a part's offset; the GPU's output poisoned first, its padding zero.
#[test]
fn gpu_elu_dropout_backward_of_a_product_matches_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_elu_dropout_backward_of_a_product_matches_cpu") else { return };
    let b = CudaBackend::new(gpu, Precision::F32, Impl::Auto).unwrap();
    let cpu = CpuBackend::<f64>::new();
    for (rows, cols, k) in [(1, 1, 1), (37, 13, 3), (2051, 64, 8), (1000, 64, 7), (70001, 64, 8), (999, 40, 8), (300, 70, 12)] {
        for ((p, offset), pre) in [((0.6, 0), false), ((0.25, 3 * padded_ld(cols) as u64), false), ((0.6, 0), true)] {
            let (want, want_sums) = product_backward(&cpu, rows, cols, k, p, offset, pre);
            let (got, got_sums) = product_backward(&b, rows, cols, k, p, offset, pre);
            let e = tcgnn::tensor::rel_error(&got.data, &want.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
            assert!(e < 1e-5, "{rows} x {cols} from {k} columns, p {p}, offset {offset}, from the ELU's input {pre}: rel error {e:.2e}");
            assert!(got.data.iter().any(|&v| v != 0.0) || rows * cols < 4, "{rows} x {cols}: all zero");
            let e = tcgnn::tensor::rel_error(&got_sums.data, &want_sums.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
            assert!(e < 1e-5, "{rows} x {cols} from {k} columns, p {p}, offset {offset}: column sums rel error {e:.2e}");
        }
    }
    // Poisoned output, padding written zero.
    let z = Matrix::random(37, 13, 5);
    let (mut h, mut y) = (b.upload(&z).unwrap(), b.matrix(37, 13).unwrap());
    b.elu_dropout(&mut h, &mut y, DropKey::new(0.5, 1).at(0)).unwrap();
    let (g, w) = (b.upload(&Matrix::random(37, 5, 1)).unwrap(), b.upload(&Matrix::random(13, 5, 2)).unwrap());
    let mut dz = b.matrix(37, 13).unwrap();
    dz.poison().unwrap();
    b.elu_dropout_backward_product((&g, &w), (&h, false), None, DropKey::new(0.5, 1).at(0), &mut dz, None).unwrap();
    let raw = dz.download_padded().unwrap();
    assert!(raw.iter().all(|v| v.is_finite()), "poison left in dz");
    assert!(raw.iter().enumerate().all(|(i, &v)| i % padded_ld(13) < 13 || v == 0.0), "padding");
}

/// `elu_dropout_gemm` / `elu_dropout_gemm_dw` (the ELU of the layer below and the dropout
/// applied as x is read, GAT's output layer) against the f64 CPU backend (ELU into a copy,
/// then the dropout products): f32 precision (3xTF32: the f32 tolerance), one row, columns
/// not multiples of 8, outputs of 1-32 columns, an offset; outputs poisoned first; outputs
/// past the streaming kernels refused.
#[test]
fn gpu_elu_dropout_products_match_cpu() {
    use tcgnn::ops::nn::dropout_gemm::DropoutGemmOp;
    let Some(gpu) = common::gpu_or_skip("gpu_elu_dropout_products_match_cpu") else { return };
    let b = CudaBackend::new(gpu, Precision::F32, Impl::Auto).unwrap();
    let cpu = CpuBackend::<f64>::new();
    let run = |be: &dyn Fn(&Matrix, &Matrix, &Matrix) -> (Matrix, Matrix), rows: usize, cols: usize, n: usize| {
        be(&Matrix::random(rows, cols, 3), &Matrix::random(cols, n, 4), &Matrix::random(rows, n, 5))
    };
    for (rows, cols, n) in [(1, 1, 1), (37, 13, 3), (2051, 64, 8), (999, 40, 32), (70_001, 64, 8)] {
        for (p, offset) in [(0.6f32, 0u64), (0.3, 5 * padded_ld(cols) as u64)] {
            let on = |bk: &dyn Fn(&Matrix, &Matrix, &Matrix) -> (Matrix, Matrix)| run(bk, rows, cols, n);
            let want = on(&|x, w, dy| {
                cpu.begin_step().unwrap();
                let (xd, wd, dyd) = (cpu.upload(x).unwrap(), cpu.upload(w).unwrap(), cpu.upload(dy).unwrap());
                let (mut y, mut dw) = (cpu.matrix(rows, n).unwrap(), cpu.matrix(cols, n).unwrap());
                cpu.elu_dropout_gemm(&xd, None, &wd, &mut y, DropKey::new(p, 7).at(offset)).unwrap();
                cpu.elu_dropout_gemm_dw(&xd, None, &dyd, &mut dw, DropKey::new(p, 7).at(offset)).unwrap();
                (cpu.download(&y).unwrap(), cpu.download(&dw).unwrap())
            });
            let got = on(&|x, w, dy| {
                b.begin_step().unwrap();
                let (xd, wd, dyd) = (b.upload(x).unwrap(), b.upload(w).unwrap(), b.upload(dy).unwrap());
                let (mut y, mut dw) = (b.matrix(rows, n).unwrap(), b.matrix(cols, n).unwrap());
                y.poison().unwrap();
                dw.poison().unwrap();
                b.elu_dropout_gemm(&xd, None, &wd, &mut y, DropKey::new(p, 7).at(offset)).unwrap();
                b.elu_dropout_gemm_dw(&xd, None, &dyd, &mut dw, DropKey::new(p, 7).at(offset)).unwrap();
                (b.download(&y).unwrap(), b.download(&dw).unwrap())
            });
            for (g, w, what) in [(&got.0, &want.0, "y"), (&got.1, &want.1, "dw")] {
                let e = tcgnn::tensor::rel_error(&g.data, &w.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
                assert!(e < 1e-5, "{rows} x {cols} -> {n}, p {p}, offset {offset}: {what} rel error {e:.2e}");
            }
        }
    }
    // Past the streaming kernels' 32 output columns: refused, not wrong.
    let (x, w) = (b.upload(&Matrix::random(10, 64, 1)).unwrap(), b.upload(&Matrix::random(64, 64, 2)).unwrap());
    let mut y = b.matrix(10, 64).unwrap();
    assert!(!b.takes_elu_input(64, 64) && b.takes_elu_input(64, 8));
    assert!(b.elu_dropout_gemm(&x, None, &w, &mut y, DropKey::new(0.5, 1).at(0)).is_err());
}

/// x (or h) rounded to f16, as an f16 activation holds it.
fn rounded_f16(m: &Matrix) -> Matrix {
    Matrix::from_vec(m.rows, m.cols, m.data.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect()).unwrap()
}

/// The ELU-on-load products and the ELU-dropout backward reading their activation's f16
/// values (`half_activation`: GAT's hidden output in f16 precision) against the f64 CPU
/// backend on the same values rounded to f16, at the tf32 tolerance: the f32 matrix beside
/// them is poisoned (it must not be read), outputs poisoned, odd shapes, an offset.
#[test]
fn gpu_f16_activations_match_cpu() {
    use tcgnn::ops::nn::dropout_gemm::DropoutGemmOp;
    let Some(gpu) = common::gpu_or_skip("gpu_f16_activations_match_cpu") else { return };
    let b = CudaBackend::new(gpu, Precision::F16, Impl::Auto).unwrap();
    let cpu = CpuBackend::<f64>::new();
    let rel = |g: &Matrix, w: &Matrix| tcgnn::tensor::rel_error(&g.data, &w.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
    for (rows, cols, n) in [(1, 8, 1), (37, 16, 3), (2051, 64, 8), (999, 40, 7), (70_001, 64, 8)] {
        for (p, offset) in [(0.6f32, 0u64), (0.3, 5 * padded_ld(cols) as u64)] {
            let (x, w, dy, g) =
                (Matrix::random(rows, cols, 3), Matrix::random(cols, n, 4), Matrix::random(rows, n, 5), Matrix::random(rows, n, 6));
            let x16 = rounded_f16(&x);
            cpu.begin_step().unwrap();
            let (xd, wd, dyd) = (cpu.upload(&x16).unwrap(), cpu.upload(&w).unwrap(), cpu.upload(&dy).unwrap());
            let (mut y, mut dw, mut dz, mut sums) =
                (cpu.matrix(rows, n).unwrap(), cpu.matrix(cols, n).unwrap(), cpu.matrix(rows, cols).unwrap(), cpu.matrix(1, cols).unwrap());
            cpu.elu_dropout_gemm(&xd, None, &wd, &mut y, DropKey::new(p, 7).at(offset)).unwrap();
            cpu.elu_dropout_gemm_dw(&xd, None, &dyd, &mut dw, DropKey::new(p, 7).at(offset)).unwrap();
            let gd = cpu.upload(&g).unwrap();
            cpu.elu_dropout_backward_product((&gd, &wd), (&xd, true), None, DropKey::new(p, 7).at(offset), &mut dz, Some(&mut sums))
                .unwrap();
            let want = [&y, &dw, &dz, &sums].map(|m| cpu.download(m).unwrap());

            b.begin_step().unwrap();
            let mut xd = b.upload(&x).unwrap();
            let mut half = b.half_activation(rows, cols, n).unwrap().expect("f16 precision keeps f16 activations");
            tcgnn::ops::values::cast_matrix_to_f16(&xd, &mut half).unwrap();
            xd.poison().unwrap();
            let (wd, dyd, gd) = (b.upload(&w).unwrap(), b.upload(&dy).unwrap(), b.upload(&g).unwrap());
            let (mut y, mut dw, mut dz, mut sums) =
                (b.matrix(rows, n).unwrap(), b.matrix(cols, n).unwrap(), b.matrix(rows, cols).unwrap(), b.matrix(1, cols).unwrap());
            for m in [&mut y, &mut dw, &mut dz, &mut sums] {
                m.poison().unwrap();
            }
            b.elu_dropout_gemm(&xd, Some(&half), &wd, &mut y, DropKey::new(p, 7).at(offset)).unwrap();
            b.elu_dropout_gemm_dw(&xd, Some(&half), &dyd, &mut dw, DropKey::new(p, 7).at(offset)).unwrap();
            b.elu_dropout_backward_product((&gd, &wd), (&xd, true), Some(&half), DropKey::new(p, 7).at(offset), &mut dz, Some(&mut sums))
                .unwrap();
            let got = [&y, &dw, &dz, &sums].map(|m| b.download(m).unwrap());
            for ((gm, wm), what) in got.iter().zip(&want).zip(["y", "dw", "dz", "dz's column sums"]) {
                let e = rel(gm, wm);
                assert!(e < 5e-3, "{rows} x {cols} -> {n}, p {p}, offset {offset}: {what} rel error {e:.2e}");
            }
        }
    }
    // f16 values of another shape: refused.
    let x = b.matrix(10, 16).unwrap();
    let half = b.half_activation(11, 16, 8).unwrap().unwrap();
    let (w, mut y) = (b.upload(&Matrix::random(16, 8, 2)).unwrap(), b.matrix(10, 8).unwrap());
    assert!(b.elu_dropout_gemm(&x, Some(&half), &w, &mut y, DropKey::new(0.5, 1).at(0)).is_err());
}
