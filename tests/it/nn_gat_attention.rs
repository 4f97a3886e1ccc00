//! Fused multi-head GAT attention (`ops::nn::gat_attention`, `GatConv`'s default path).
//!
//! CPU (always): a fused `GatConv` against the unfused one (per head: edge logits, softmax,
//! SpMM and their backward) in f64 without dropout: outputs and every parameter's gradient,
//! concatenated heads and one head, heads of 1 to 32 columns. (Finite differences of the fused
//! model, with attention dropout, are in `nn_grad`.)
//! GPU (skipped without one): the fused op against the CPU op in f64 on fresh random inputs,
//! outputs poisoned first, on the odd shapes (one node, empty rows, a hub row, n not a multiple
//! of 8 or 32, rows and columns of up to 599 edges), with and without attention dropout (the
//! same masks: both draw from `rng.rs`), the f16 output for heads of 8 columns at the f16
//! tolerance; and a GAT model trained on the GPU fused and unfused to
//! the same losses without dropout.

use crate::common;

use tcgnn::gpu::{DeviceMatrix, DeviceVec};
use tcgnn::graph::Csr;
use tcgnn::nn::backend::cpu::HostMat;
use tcgnn::nn::gat_conv::{GatConv, GatGraph, GatShape};
use tcgnn::nn::operand::Operand;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend};
use tcgnn::ops::nn::gat_attention::{
    GatAttention, GradInputs, GradOutputs, Inputs, gat_attention, gat_attention_backward, gat_attention_backward_cpu, gat_attention_cpu,
    gat_attention_half,
};
use tcgnn::ops::{Impl, Precision};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

type C = CpuBackend<f64>;

fn rand(n: usize, seed: u64) -> Vec<f64> {
    SplitMix64::new(seed).vec_f32(n).into_iter().map(|v| v as f64).collect()
}

fn mat(rows: usize, cols: usize, seed: u64) -> HostMat<f64> {
    HostMat { rows, cols, data: rand(rows * cols, seed) }
}

fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())).max(1.0);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * scale, "{what} [{i}]: {x} vs {y} (scale {scale})");
    }
}

/// Heads x columns per head, concatenated or not (the unfused path runs the mean of several).
const SHAPES: [(usize, usize); 7] = [(8, 8), (1, 7), (3, 5), (4, 32), (2, 1), (3, 12), (32, 2)];

#[test]
fn fused_gat_conv_equals_the_unfused_one_on_the_cpu() {
    let b = C::new();
    for (name, a) in common::odd_shapes(3) {
        let n = a.n_rows();
        let g = GatGraph::new(&b, &a).unwrap();
        for (heads, dim) in SHAPES {
            let fan_in = 6;
            let x = b.upload(&Matrix::random(n, fan_in, 11)).unwrap();
            let w = b.upload(&Matrix::random(n, heads * dim, 12)).unwrap();
            let shape = GatShape { rows: n, fan_in, heads, dim, concat: true };
            let mut fused = GatConv::new(&b, &g, shape, 0.0, 7, &mut SplitMix64::new(1)).unwrap();
            let mut plain = GatConv::new_unfused(&b, &g, shape, 0.0, 7, &mut SplitMix64::new(1)).unwrap();
            assert!(fused.is_fused() && !plain.is_fused());
            // A non-zero bias, so its place in the fused output is checked too.
            for conv in [&mut fused, &mut plain] {
                conv.bias.value.data.iter_mut().enumerate().for_each(|(i, v)| *v = 0.1 * i as f64 - 0.3);
            }
            let what = format!("{name}, {heads} x {dim}");
            let (yf, yp) = (
                fused.forward(&b, &g, &Operand::Dense(&x), true).unwrap().data.clone(),
                plain.forward(&b, &g, &Operand::Dense(&x), true).unwrap().data.clone(),
            );
            close(&yf, &yp, 1e-12, &format!("{what}: out"));
            let mut dx = (b.matrix(n, fan_in).unwrap(), b.matrix(n, fan_in).unwrap());
            fused.backward(&b, &g, &Operand::Dense(&x), &w, Some(&mut dx.0), false).unwrap();
            plain.backward(&b, &g, &Operand::Dense(&x), &w, Some(&mut dx.1), false).unwrap();
            close(&dx.0.data, &dx.1.data, 1e-12, &format!("{what}: dX"));
            let pf: Vec<Vec<f64>> = fused.params().iter().map(|(_, p)| p.grad.data.clone()).collect();
            let pp: Vec<Vec<f64>> = plain.params().iter().map(|(_, p)| p.grad.data.clone()).collect();
            for (k, (f, p)) in pf.iter().zip(&pp).enumerate() {
                close(f, p, 1e-12, &format!("{what}: gradient of parameter {k}"));
            }
        }
    }
}

#[test]
fn fusion_is_chosen_where_the_kernels_take_the_heads() {
    assert!(GatConv::<C>::fuses(8, 8, true));
    assert!(GatConv::<C>::fuses(1, 7, false));
    assert!(!GatConv::<C>::fuses(3, 5, false), "the mean of several heads runs unfused");
    assert!(!GatConv::<C>::fuses(2, 64, true), "heads wider than 32 run unfused");
    assert!(GatConv::<C>::fuses(32, 32, true) && !GatConv::<C>::fuses(33, 4, true), "at most 32 heads");
}

/// The graphs of the GPU test: the odd shapes and a staircase (rows and columns of 0..599 edges).
fn graphs() -> Vec<(String, Csr)> {
    let mut g = common::odd_shapes(5);
    let n = 600u32;
    let stairs: Vec<(u32, u32, f32)> = (0..n).flat_map(|r| (0..r).map(move |c| (r, c, 1.0))).collect();
    g.push(("staircase n=600".into(), Csr::from_triplets(n as usize, n as usize, &stairs).unwrap()));
    // A hub row and a hub column of 7001 entries: cut into four segments (`ROW_SEGMENT`), whose
    // partial states the combine launch merges; the other rows have 2-3 entries.
    let n = 7001u32;
    let mut star: Vec<(u32, u32, f32)> = (0..n).map(|c| (0, c, 1.0)).chain((1..n).map(|r| (r, 0, 1.0))).collect();
    star.extend((1..n).map(|r| (r, r, 1.0)).chain((1..n - 1).map(|r| (r, r + 1, 1.0))));
    g.push(("star n=7001".into(), Csr::from_triplets(n as usize, n as usize, &star).unwrap()));
    g
}

#[test]
fn gpu_fused_gat_attention_equals_the_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_fused_gat_attention_equals_the_cpu") else { return };
    let b = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap();
    let dev = |m: &HostMat<f64>| -> DeviceMatrix<f32> {
        b.upload(&Matrix::from_vec(m.rows, m.cols, m.data.iter().map(|&v| v as f32).collect()).unwrap()).unwrap()
    };
    let poisoned = |rows: usize, cols: usize| -> DeviceMatrix<f32> {
        let mut m = b.matrix(rows, cols).unwrap();
        m.poison().unwrap();
        m
    };
    let down = |m: &DeviceMatrix<f32>| -> Vec<f64> { b.download(m).unwrap().data.iter().map(|&v| v as f64).collect() };
    for (name, s) in graphs() {
        let n = s.n_rows();
        let g = b.graph(s.clone()).unwrap();
        let (t, t_of) = tcgnn::graph::ops::transpose_with_map(&s);
        for (heads, dim) in SHAPES {
            for p in [0.0f32, 0.3] {
                let a = GatAttention { heads, dim, slope: 0.2, p, seed: 5, first_edge: 17, edge_ids: None, rows: None, cols: None };
                let ad: GatAttention<'_, DeviceVec<u32>> =
                    GatAttention { heads, dim, slope: 0.2, p, seed: 5, first_edge: 17, edge_ids: None, rows: None, cols: None };
                let w = heads * dim;
                let what = format!("{name}, {heads} x {dim}, dropout {p}");
                let (wh, s_src, s_dst, bias, dout) = (mat(n, w, 1), mat(n, heads, 2), mat(n, heads, 3), mat(1, w, 4), mat(n, w, 5));
                let step = 3u32;
                let mut out = vec![0.0; n * w];
                let mut stats = vec![0.0; n * 2 * heads];
                let x = Inputs { wh: &wh.data[..], s_src: &s_src.data[..], s_dst: &s_dst.data[..], bias: &bias.data[..] };
                gat_attention_cpu(&s, &a, step, x, &mut out, &mut stats);
                // The attention vectors, for the backward that adds the scores' part to dWh.
                let (a_src, a_dst) = (mat(1, w, 6), mat(1, w, 7));
                let (mut d_row, mut ds_dst, mut ds_src, mut dwh) =
                    (vec![0.0; n * heads], vec![0.0; n * heads], vec![0.0; n * heads], vec![0.0; n * w]);
                let inputs = GradInputs {
                    wh: &wh.data[..],
                    s_src: &s_src.data[..],
                    s_dst: &s_dst.data[..],
                    stats: &stats[..],
                    dout: &dout.data[..],
                    att: None,
                };
                let grads = GradOutputs { d_row: &mut d_row[..], ds_dst: &mut ds_dst[..], ds_src: &mut ds_src[..], dwh: &mut dwh[..] };
                gat_attention_backward_cpu((&s, &t, &t_of), &a, step, inputs, grads);
                let mut dwh_att = vec![0.0; n * w];
                let inputs = GradInputs {
                    wh: &wh.data[..],
                    s_src: &s_src.data[..],
                    s_dst: &s_dst.data[..],
                    stats: &stats[..],
                    dout: &dout.data[..],
                    att: Some((&a_src.data[..], &a_dst.data[..])),
                };
                let (mut d_row2, mut ds_dst2, mut ds_src2) = (d_row.clone(), ds_dst.clone(), ds_src.clone());
                let grads =
                    GradOutputs { d_row: &mut d_row2[..], ds_dst: &mut ds_dst2[..], ds_src: &mut ds_src2[..], dwh: &mut dwh_att[..] };
                gat_attention_backward_cpu((&s, &t, &t_of), &a, step, inputs, grads);
                // ... which is the aggregation's part plus ds_src a_src + ds_dst a_dst.
                for (k, (&with, &without)) in dwh_att.iter().zip(&dwh).enumerate() {
                    let (j, c) = (k / w, k % w);
                    let want = without + ds_src[j * heads + c / dim] * a_src.data[c] + ds_dst[j * heads + c / dim] * a_dst.data[c];
                    assert!((with - want).abs() <= 1e-12 * (1.0 + want.abs()), "{what}: CPU dWh with the scores' part at {k}");
                }

                let step_dev = DeviceVec::upload(&gpu, &[step]).unwrap();
                let (whd, srcd, dstd, biasd, doutd) = (dev(&wh), dev(&s_src), dev(&s_dst), dev(&bias), dev(&dout));
                let (mut outd, mut statsd) = (poisoned(n, w), poisoned(n, 2 * heads));
                let xd = Inputs { wh: &whd, s_src: &srcd, s_dst: &dstd, bias: &biasd };
                gat_attention(&g, &ad, step_dev.arg(&gpu), xd, &mut outd, &mut statsd).unwrap();
                close(&down(&outd), &out, 1e-5, &format!("{what}: out"));
                close(&down(&statsd), &stats, 1e-5, &format!("{what}: statistics"));
                if dim == 8 {
                    // The f16 output (a hidden layer whose next reads it in f16): out rounded.
                    let mut out16 = DeviceMatrix::<half::f16>::zeros(&gpu, n, w).unwrap();
                    out16.poison().unwrap();
                    statsd.poison().unwrap();
                    gat_attention_half(&g, &ad, step_dev.arg(&gpu), xd, &mut out16, &mut statsd).unwrap();
                    let got: Vec<f64> = out16.download().unwrap().data.iter().map(|&v| v as f64).collect();
                    close(&got, &out, 1e-2, &format!("{what}: f16 out"));
                    close(&down(&statsd), &stats, 1e-5, &format!("{what}: statistics (f16 out)"));
                } else {
                    let mut out16 = DeviceMatrix::<half::f16>::zeros(&gpu, n, w).unwrap();
                    assert!(
                        gat_attention_half(&g, &ad, step_dev.arg(&gpu), xd, &mut out16, &mut statsd).is_err(),
                        "{what}: f16 out refused"
                    );
                }
                let (a_srcd, a_dstd) = (dev(&a_src), dev(&a_dst));
                for (att, want_dwh) in [(None, &dwh), (Some((&a_srcd, &a_dstd)), &dwh_att)] {
                    let what = format!("{what}{}", if att.is_some() { ", scores' part added" } else { "" });
                    let (mut drd, mut ddd, mut dsd, mut dwd) = (poisoned(n, heads), poisoned(n, heads), poisoned(n, heads), poisoned(n, w));
                    let inputs = GradInputs { wh: &whd, s_src: &srcd, s_dst: &dstd, stats: &statsd, dout: &doutd, att };
                    let grads = GradOutputs { d_row: &mut drd, ds_dst: &mut ddd, ds_src: &mut dsd, dwh: &mut dwd };
                    gat_attention_backward(&g, &ad, step_dev.arg(&gpu), inputs, grads).unwrap();
                    close(&down(&drd), &d_row, 1e-5, &format!("{what}: D"));
                    close(&down(&ddd), &ds_dst, 1e-5, &format!("{what}: ds_dst"));
                    close(&down(&dsd), &ds_src, 1e-5, &format!("{what}: ds_src"));
                    close(&down(&dwd), want_dwh, 1e-5, &format!("{what}: dWh"));
                }
            }
        }
    }
}
