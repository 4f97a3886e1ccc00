//! The fused bias + ReLU (`tcgnn::ops::nn::bias_relu`) against bias_add then relu, and GIN's
//! `sum_bias_relu` against scaled_add / add_assign then bias_relu: on the CPU the backend's
//! default runs exactly those ops; on the GPU (skipped without one) the one kernel must give
//! the same values bit for bit (the same roundings in the same order, then the sign test), keep
//! the padding zero, and turn NaN and -0 into 0 as the ReLU kernel does.

use crate::common;

use tcgnn::gpu::DeviceMatrix;
use tcgnn::gpu::memory::padded_ld;
use tcgnn::nn::{Backend, CpuBackend};
use tcgnn::ops::nn::bias_add::BiasAddOp;
use tcgnn::ops::nn::{add_assign, bias_add, bias_add_cpu, bias_relu, relu, relu_cpu, scaled_add, sum_bias_relu};
use tcgnn::tensor::Matrix;

#[test]
fn cpu_bias_relu_is_bias_add_then_relu() {
    let b = CpuBackend::<f64>::new();
    let (rows, cols) = (37, 13);
    let x = Matrix::random(rows, cols, 1);
    let bias = Matrix::random(1, cols, 2);
    let mut y = b.upload(&x).unwrap();
    b.bias_relu(&mut y, &b.upload(&bias).unwrap()).unwrap();
    let mut want: Vec<f64> = x.data.iter().map(|&v| v as f64).collect();
    bias_add_cpu(&mut want, rows, cols, &bias.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
    relu_cpu(&mut want);
    assert_eq!(y.data, want);
    assert!(want.contains(&0.0) && want.iter().any(|&v| v > 0.0), "both signs must occur");
}

#[test]
fn gpu_bias_relu_matches_bias_add_then_relu() {
    let Some(gpu) = common::gpu_or_skip("gpu_bias_relu_matches_bias_add_then_relu") else { return };
    for (rows, cols) in [(1, 1), (37, 13), (2051, 16), (1000, 64)] {
        let mut x = Matrix::random(rows, cols, rows as u64);
        x.data[0] = f32::NAN; // NaN + b is NaN: the ReLU makes it 0
        let bias = DeviceMatrix::upload(&gpu, &Matrix::random(1, cols, 3)).unwrap();
        let mut fused = DeviceMatrix::upload(&gpu, &x).unwrap();
        bias_relu(&mut fused, &bias).unwrap();
        let mut two = DeviceMatrix::upload(&gpu, &x).unwrap();
        bias_add(&mut two, &bias).unwrap();
        relu(&mut two).unwrap();
        let (f, t) = (fused.download_padded().unwrap(), two.download_padded().unwrap());
        assert_eq!(f.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), t.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{rows} x {cols}");
        assert!(
            f.iter().enumerate().all(|(i, &v)| v >= 0.0 && (i % padded_ld(cols) < cols || v == 0.0)),
            "{rows} x {cols}: negative, NaN or padding"
        );
        assert_eq!(f[0], 0.0, "NaN not zeroed");
    }
}

#[test]
fn gpu_sum_bias_relu_matches_the_ops_it_fuses() {
    let Some(gpu) = common::gpu_or_skip("gpu_sum_bias_relu_matches_the_ops_it_fuses") else { return };
    for (rows, cols) in [(1, 1), (37, 13), (2051, 16), (1000, 64)] {
        let mut y0 = Matrix::random(rows, cols, rows as u64);
        y0.data[0] = f32::NAN;
        let x = DeviceMatrix::upload(&gpu, &Matrix::random(rows, cols, 5)).unwrap();
        let bias = DeviceMatrix::upload(&gpu, &Matrix::random(1, cols, 3)).unwrap();
        let eps = DeviceMatrix::upload(&gpu, &Matrix::from_vec(1, 1, vec![-0.375]).unwrap()).unwrap();
        for learnable in [false, true] {
            let e = learnable.then_some(&eps);
            let mut fused = DeviceMatrix::upload(&gpu, &y0).unwrap();
            sum_bias_relu(&mut fused, &x, e, &bias).unwrap();
            let mut ops = DeviceMatrix::upload(&gpu, &y0).unwrap();
            match e {
                Some(e) => scaled_add(&mut ops, &x, e, 1.0).unwrap(),
                None => add_assign(&mut ops, &x).unwrap(),
            }
            bias_relu(&mut ops, &bias).unwrap();
            let (f, t) = (fused.download_padded().unwrap(), ops.download_padded().unwrap());
            let what = format!("{rows} x {cols}, learnable eps {learnable}");
            assert_eq!(f.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), t.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{what}");
            assert!(
                f.iter().enumerate().all(|(i, &v)| v >= 0.0 && (i % padded_ld(cols) < cols || v == 0.0)),
                "{what}: negative, NaN or padding"
            );
            // (The 1 x 1 case holds only the NaN.)
            assert!(rows * cols == 1 || f.iter().any(|&v| v > 0.0), "{what}: all zero");
            assert_eq!(f[0], 0.0, "{what}: NaN not zeroed");
        }
        // eps must be 1 x 1, bias one row of y's width.
        let mut y = DeviceMatrix::upload(&gpu, &y0).unwrap();
        assert!(sum_bias_relu(&mut y, &x, Some(&bias), &bias).is_err() || cols == 1);
        assert!(sum_bias_relu(&mut y, &x, None, &x).is_err() || rows == 1);
    }
}
