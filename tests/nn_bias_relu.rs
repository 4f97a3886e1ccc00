//! The fused bias + ReLU (`tcgnn::ops::nn::bias_relu`) against bias_add then relu: on the CPU
//! the backend's default runs exactly those two ops; on the GPU (skipped without one) the one
//! kernel must give the same values bit for bit (one rounding: y + b, then the sign test), keep
//! the padding zero, and turn NaN and -0 into 0 as the ReLU kernel does.

mod common;

use tcgnn::gpu::DeviceMatrix;
use tcgnn::gpu::memory::padded_ld;
use tcgnn::nn::{Backend, CpuBackend};
use tcgnn::ops::nn::bias_add::BiasAddOp;
use tcgnn::ops::nn::{bias_add, bias_add_cpu, bias_relu, relu, relu_cpu};
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
        assert!(f.iter().enumerate().all(|(i, &v)| v >= 0.0 && (i % padded_ld(cols) < cols || v == 0.0)), "{rows} x {cols}: negative, NaN or padding");
        assert_eq!(f[0], 0.0, "NaN not zeroed");
    }
}
