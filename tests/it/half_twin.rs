//! f16 twins (`ops::nn::half_twin`, issue 42): a producer's `WRITE_F16` kernel writes its output's
//! f16 copy in the same pass (the ReLU and ReLU-dropout backwards, the streaming and wide
//! dropout-GEMM forwards), and the sparse product on that output reads it instead of casting.
//! The twin must be the cast's output bit for bit (so a training step with twins is the step
//! without them, bit for bit: `nn_gpu::gpu_half_twins_leave_the_step_unchanged`), the producer's
//! f32 output unchanged, and every product handed a twin equal to the product on the cast.

use crate::common;

use half::f16;
use tcgnn::gpu::{DeviceMatrix, Gpu};
use tcgnn::graph::Csr;
use tcgnn::nn::gcn_conv::GcnAdjacency;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, EdgeLayout};
use tcgnn::ops::nn::half_twin::HalfTwinOp;
use tcgnn::ops::nn::relu::{relu_backward, relu_backward_cpu, relu_backward_twin};
use tcgnn::ops::nn::relu_dropout::{
    relu_dropout_backward_in_place, relu_dropout_backward_in_place_cpu, relu_dropout_backward_in_place_twin,
};
use tcgnn::ops::nn::spmm::FixedPath;
use tcgnn::ops::values::cast_matrix_to_f16;
use tcgnn::ops::{Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

/// Shapes with padded columns (7, 33), one row, and widths the models use (16, 64).
const SHAPES: [(usize, usize); 6] = [(1, 1), (37, 7), (300, 16), (65, 33), (1000, 64), (2049, 8)];

/// `n` values in [-1, 1) with every fifth exactly 0 (the ReLU's edge).
fn rand(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|i| if i % 5 == 0 { 0.0 } else { rng.uniform(-1.0, 1.0) as f64 }).collect()
}

fn dev(gpu: &std::sync::Arc<Gpu>, rows: usize, cols: usize, v: &[f64]) -> DeviceMatrix<f32> {
    DeviceMatrix::upload(gpu, &Matrix::from_vec(rows, cols, v.iter().map(|&x| x as f32).collect()).unwrap()).unwrap()
}

/// The whole padded buffer of an f32 matrix.
fn raw32(gpu: &Gpu, m: &DeviceMatrix<f32>) -> Vec<f32> {
    gpu.stream().clone_dtoh(m.slice()).unwrap()
}

/// A poisoned f16 twin for `m`'s shape.
fn poisoned_twin(gpu: &std::sync::Arc<Gpu>, m: &DeviceMatrix<f32>) -> DeviceMatrix<f16> {
    let mut t = DeviceMatrix::<f16>::zeros(gpu, m.rows, m.cols).unwrap();
    t.poison().unwrap();
    t
}

/// The twin is f16(out) element for element over the whole padded buffer (padding: 0).
fn assert_twin_is_the_cast(gpu: &Gpu, what: &str, out: &DeviceMatrix<f32>, twin: &DeviceMatrix<f16>) {
    let (o, t) = (raw32(gpu, out), gpu.stream().clone_dtoh(twin.slice()).unwrap());
    assert_eq!(o.len(), t.len(), "{what}");
    for (i, (&v, h)) in o.iter().zip(&t).enumerate() {
        assert_eq!(h.to_bits(), f16::from_f32(v).to_bits(), "{what}: element {i} ({v})");
    }
}

#[test]
fn gpu_twin_producers_write_the_cast_bit_for_bit() {
    let Some(gpu) = common::gpu_or_skip("gpu_twin_producers_write_the_cast_bit_for_bit") else { return };
    for (rows, cols) in SHAPES {
        let what = format!("{rows} x {cols}");
        let (y, dy) = (rand(rows * cols, (rows * 31 + cols) as u64), rand(rows * cols, (rows * 7 + cols) as u64 + 1));
        let yd = dev(&gpu, rows, cols, &y);

        // ReLU's backward: the f32 result is the plain kernel's bit for bit, and the f64 CPU's.
        let mut plain = dev(&gpu, rows, cols, &dy);
        relu_backward(&yd, &mut plain).unwrap();
        let mut d = dev(&gpu, rows, cols, &dy);
        let mut twin = poisoned_twin(&gpu, &d);
        relu_backward_twin(&yd, &mut d, Some(&mut twin)).unwrap();
        assert_eq!(raw32(&gpu, &d), raw32(&gpu, &plain), "relu_backward {what}: the f32 result changed");
        let mut want = dy.clone();
        relu_backward_cpu(&y, &mut want);
        let got: Vec<f32> = d.download().unwrap().data;
        assert!(rel_error(&got, &want) < 1e-6, "relu_backward {what}: off the CPU");
        assert_twin_is_the_cast(&gpu, &format!("relu_backward {what}"), &d, &twin);

        // The fused tail's ReLU-dropout backward, in place.
        for p in [0.5f32, 0.1] {
            let mut plain = dev(&gpu, rows, cols, &dy);
            relu_dropout_backward_in_place(&mut plain, &yd, p).unwrap();
            let mut d = dev(&gpu, rows, cols, &dy);
            let mut twin = poisoned_twin(&gpu, &d);
            relu_dropout_backward_in_place_twin(&mut d, &yd, p, Some(&mut twin)).unwrap();
            assert_eq!(raw32(&gpu, &d), raw32(&gpu, &plain), "relu_dropout_backward {what} p {p}: the f32 result changed");
            let mut want = dy.clone();
            relu_dropout_backward_in_place_cpu(&mut want, &y, p).unwrap();
            assert!(rel_error(&d.download().unwrap().data, &want) < 1e-6, "relu_dropout_backward {what} p {p}: off the CPU");
            assert_twin_is_the_cast(&gpu, &format!("relu_dropout_backward {what} p {p}"), &d, &twin);
        }

        // A twin of another shape is refused before anything runs.
        let mut d = dev(&gpu, rows, cols, &dy);
        let mut wrong = DeviceMatrix::<f16>::zeros(&gpu, rows, cols + 8).unwrap();
        assert!(relu_backward_twin(&yd, &mut d, Some(&mut wrong)).is_err(), "{what}: a twin of the wrong width");
        assert!(relu_dropout_backward_in_place_twin(&mut d, &yd, 0.5, Some(&mut wrong)).is_err(), "{what}: a twin of the wrong width");
    }
}

/// The forward products' twins (`dropout_gemm_twin`: the streaming kernels in tf32 on f32 and
/// f16 x, the tiled ones and 3xTF32 through the cast after; `dropout_gemm_wide_twin`, with and
/// without the mask's bits; `skinny_gemm_twin`): y is the plain launch's bit for bit and the
/// twin is f16(y) over the whole padded buffer, with dropout and without.
#[test]
fn gpu_dropout_gemm_twins_are_the_cast_bit_for_bit() {
    use tcgnn::gpu::DeviceVec;
    use tcgnn::gpu::cublas::GemmMath;
    use tcgnn::ops::nn::DropKey;
    use tcgnn::ops::nn::dropout_gemm::{
        dropout_gemm, dropout_gemm_twin, dropout_gemm_wide, dropout_gemm_wide_twin, keep_bits_len, skinny_gemm_twin,
    };
    let Some(gpu) = common::gpu_or_skip("gpu_dropout_gemm_twins_are_the_cast_bit_for_bit") else { return };
    let step = DeviceVec::upload(&gpu, &[4u32]).unwrap();
    let up16 = |m: &DeviceMatrix<f32>| {
        let mut h = DeviceMatrix::<f16>::zeros(&gpu, m.rows, m.cols).unwrap();
        cast_matrix_to_f16(m, &mut h).unwrap();
        h
    };
    // (rows, k, n): streaming outputs (8, 16, 32 columns), the tiled kernels (64 columns from
    // f32 x), the wide ones (40 and 64 columns from f16 x).
    for (rows, k, n) in [(37, 7, 8), (1000, 64, 16), (2049, 33, 32), (300, 16, 64), (37, 7, 40), (1000, 64, 64)] {
        let x = dev(&gpu, rows, k, &rand(rows * k, rows as u64 + 3));
        let w = dev(&gpu, k, n, &rand(k * n, 5));
        let x16 = up16(&x);
        for p in [0.5f32, 0.0] {
            let key = DropKey::new(p, 0x5EED).at(8);
            let what = format!("{rows} x {k} -> {n}, p {p}");
            let mut plain = DeviceMatrix::<f32>::zeros(&gpu, rows, n).unwrap();
            let mut y = DeviceMatrix::<f32>::zeros(&gpu, rows, n).unwrap();
            if n <= 32 || n == 64 && k == 16 {
                for math in [GemmMath::Tf32, GemmMath::F32] {
                    plain.poison().unwrap();
                    dropout_gemm(&x, &w, &mut plain, key, &step, math).unwrap();
                    y.poison().unwrap();
                    let mut twin = poisoned_twin(&gpu, &y);
                    dropout_gemm_twin(&x, &w, (&mut y, Some(&mut twin)), key, &step, math).unwrap();
                    assert_eq!(raw32(&gpu, &y), raw32(&gpu, &plain), "{what} {math:?}: y changed");
                    assert_twin_is_the_cast(&gpu, &format!("dropout_gemm {what} {math:?}"), &y, &twin);
                }
                if p == 0.0 && n <= 32 {
                    let mut twin = poisoned_twin(&gpu, &y);
                    y.poison().unwrap();
                    skinny_gemm_twin(&x, &w, (&mut y, Some(&mut twin)), &step, GemmMath::Tf32).unwrap();
                    plain.poison().unwrap();
                    dropout_gemm(&x, &w, &mut plain, key, &step, GemmMath::Tf32).unwrap();
                    assert_eq!(raw32(&gpu, &y), raw32(&gpu, &plain), "skinny {what}: y changed");
                    assert_twin_is_the_cast(&gpu, &format!("skinny_gemm {what}"), &y, &twin);
                }
            }
            if n <= 16 {
                // f16 x on the streaming kernels (tf32 math only).
                plain.poison().unwrap();
                dropout_gemm(&x16, &w, &mut plain, key, &step, GemmMath::Tf32).unwrap();
                y.poison().unwrap();
                let mut twin = poisoned_twin(&gpu, &y);
                dropout_gemm_twin(&x16, &w, (&mut y, Some(&mut twin)), key, &step, GemmMath::Tf32).unwrap();
                assert_eq!(raw32(&gpu, &y), raw32(&gpu, &plain), "{what} f16 x: y changed");
                assert_twin_is_the_cast(&gpu, &format!("dropout_gemm f16 x {what}"), &y, &twin);
            }
            if n > 32 && k != 16 {
                let mut bits = DeviceVec::<u32>::zeros(&gpu, keep_bits_len(rows, k)).unwrap();
                for with_bits in [false, true] {
                    plain.poison().unwrap();
                    dropout_gemm_wide(&x16, &w, &mut plain, with_bits.then_some(&mut bits), key, &step).unwrap();
                    y.poison().unwrap();
                    let mut twin = poisoned_twin(&gpu, &y);
                    dropout_gemm_wide_twin(&x16, &w, (&mut y, Some(&mut twin)), with_bits.then_some(&mut bits), key, &step).unwrap();
                    assert_eq!(raw32(&gpu, &y), raw32(&gpu, &plain), "wide {what} bits {with_bits}: y changed");
                    assert_twin_is_the_cast(&gpu, &format!("dropout_gemm_wide {what} bits {with_bits}"), &y, &twin);
                }
            }
        }
    }
}

/// GCN's normalisation takes non-negative weights only.
fn positive(a: Csr) -> Csr {
    let v = a.values().iter().map(|v| v.abs() + 0.01).collect();
    Csr::new(a.n_rows(), a.n_cols(), a.row_ptr().to_vec(), a.col_idx().to_vec(), v).unwrap()
}

/// A product handed the twin (here made by the cast itself, so that only the consumer is
/// under test) writes what the product that casts writes, bit for bit, on every path a fixed
/// adjacency can take and on values given back for rewriting (`parts_mut`), both sides, both
/// edge layouts; f32 and tf32 backends make no twin.
#[test]
fn gpu_products_on_a_twin_equal_the_products_on_the_cast() {
    let Some(gpu) = common::gpu_or_skip("gpu_products_on_a_twin_equal_the_products_on_the_cast") else { return };
    for prec in [Precision::F32, Precision::Tf32] {
        let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap();
        assert!(b.with_twin(10, 8, |t| Ok(t.is_none())).unwrap(), "{prec:?} makes a twin");
    }
    let off = CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap().with_half_twins(false);
    assert!(off.with_twin(10, 8, |t| Ok(t.is_none())).unwrap(), "twins turned off, yet one was made");
    let directed = positive(common::one_huge_row(2000, 6, 17));
    let symmetric = positive(tcgnn::graph::ops::symmetrize(&directed).unwrap());
    for (name, a) in [("directed", &directed), ("symmetric", &symmetric)] {
        for layout in [EdgeLayout::Kernel, EdgeLayout::Csr] {
            for path in [None, Some(FixedPath::Stored), Some(FixedPath::CsrHalf), Some(FixedPath::CsrF32)] {
                let b = CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap().with_edge_layout(layout).with_fixed_spmm(path);
                let mut adj = GcnAdjacency::new(&b, a).unwrap();
                for rewritten in [false, true] {
                    if rewritten {
                        adj.parts_mut().unwrap();
                    }
                    for k in [1, 16, 17, 64] {
                        let what = format!("{name} {layout:?} {path:?} rewritten {rewritten} K={k}");
                        let x = b.upload(&Matrix::random(a.n_rows(), k, 40 + k as u64)).unwrap();
                        for (side, ways) in [("forward", [0, 0]), ("transposed", [1, 2])] {
                            let mut want = b.matrix(a.n_rows(), k).unwrap();
                            want.poison().unwrap();
                            if side == "forward" {
                                adj.forward(&b, &x, &mut want).unwrap();
                            } else {
                                adj.transposed(&b, &x, &mut want).unwrap();
                            }
                            let want = raw32(&gpu, &want);
                            for way in ways {
                                let mut got = b.matrix(a.n_rows(), k).unwrap();
                                got.poison().unwrap();
                                b.with_twin(x.rows, x.cols, |twin| {
                                    let twin = twin.expect("an f16 backend makes twins");
                                    cast_matrix_to_f16(&x, twin)?;
                                    match way {
                                        0 => adj.forward_twin(&b, (&x, Some(&*twin)), &mut got),
                                        1 => adj.transposed_twin(&b, (&x, Some(&*twin)), &mut got),
                                        _ => adj.transposed_give_back_twin(&b, (&x, Some(&*twin)), &mut got),
                                    }
                                })
                                .unwrap();
                                assert_eq!(raw32(&gpu, &got), want, "{what} {side} (way {way})");
                            }
                        }
                    }
                }
            }
        }
    }
    // The CPU makes none.
    let cpu = CpuBackend::<f64>::new();
    assert!(cpu.with_twin(10, 8, |t| Ok(t.is_none())).unwrap());
}
