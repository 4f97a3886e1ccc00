//! GAT's ops (`ops::nn::{gat_scores, gat_edge_logits, head_columns, elu}`).
//!
//! CPU (always): each op of the f64 CPU backend against a plain loop written here.
//! GPU (skipped without one): each kernel against the CPU backend in f64 on fresh random inputs,
//! outputs poisoned (NaN) first, on the odd shapes (one node, empty rows, a hub row, n not a
//! multiple of 8), in both edge-value orders (f32: CSR order; tf32: ME-BCRS slots).

use crate::common;

use std::sync::Arc;

use tcgnn::gpu::{DeviceMatrix, DeviceVec, Gpu};
use tcgnn::graph::Csr;
use tcgnn::nn::backend::cpu::{HostGraph, HostMat};
use tcgnn::nn::backend::cuda::GpuGraph;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend, Side};
use tcgnn::ops::nn::elu::EluOp;
use tcgnn::ops::nn::gat_edge_logits::{GAT_SLOPE, GatEdgeLogitsOp, HeadLogits};
use tcgnn::ops::nn::gat_scores::GatScoresOp;
use tcgnn::ops::nn::head_columns::HeadColumnsOp;
use tcgnn::ops::nn::transpose_edges::TransposeEdgesOp;
use tcgnn::ops::{Impl, Precision, ValueOrder};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

type C = CpuBackend<f64>;

/// Uniform in [-1, 1), exactly representable in f32 (the GPU sees the same inputs).
fn rand(n: usize, seed: u64) -> Vec<f64> {
    SplitMix64::new(seed).vec_f32(n).into_iter().map(|v| v as f64).collect()
}

fn mat(rows: usize, cols: usize, seed: u64) -> HostMat<f64> {
    HostMat { rows, cols, data: rand(rows * cols, seed) }
}

/// The odd shapes, plus hubs on both sides of the pattern: row r of the staircase holds
/// columns 0..r, so rows and columns of every degree from 0 to 599 meet the kernels'
/// long-row threshold (256 edges) from both sides, in the forward and the transposed pattern.
fn graphs() -> Vec<(String, Csr)> {
    let mut g = common::odd_shapes(5);
    let n = 600u32;
    let stairs: Vec<(u32, u32, f32)> = (0..n).flat_map(|r| (0..r).map(move |c| (r, c, 1.0))).collect();
    g.push(("staircase n=600 (rows and columns of 0..599 edges)".into(), Csr::from_triplets(n as usize, n as usize, &stairs).unwrap()));
    g
}

const HEADS: usize = 3;
const DIM: usize = 5;

// ------------------------------------------------------------------ CPU against loops

#[test]
fn cpu_gat_scores_and_backward() {
    let b = C::new();
    for n in [1, 37, 1000] {
        let (wh, a_s, a_d) = (mat(n, HEADS * DIM, 1), mat(1, HEADS * DIM, 2), mat(1, HEADS * DIM, 5));
        let (ds_s, ds_d) = (mat(n, HEADS, 3), mat(n, HEADS, 6));
        let (mut s_s, mut s_d) = (HostMat::zeros(n, HEADS), HostMat::zeros(n, HEADS));
        b.gat_scores(&wh, (&a_s, &a_d), (&mut s_s, &mut s_d)).unwrap();
        let mut dwh = mat(n, HEADS * DIM, 4);
        let dwh0 = dwh.clone();
        // Poisoned: the gradients are overwritten.
        let (mut da_s, mut da_d) = (mat(1, HEADS * DIM, 7), mat(1, HEADS * DIM, 8));
        b.gat_scores_backward(&wh, (&a_s, &a_d), (&ds_s, &ds_d), Some(&mut dwh), (&mut da_s, &mut da_d)).unwrap();
        // Without dwh (the fused attention added its part): the same vector gradients.
        let (mut da_s_only, mut da_d_only) = (mat(1, HEADS * DIM, 9), mat(1, HEADS * DIM, 10));
        b.gat_scores_backward(&wh, (&a_s, &a_d), (&ds_s, &ds_d), None, (&mut da_s_only, &mut da_d_only)).unwrap();
        assert_eq!((&da_s_only.data, &da_d_only.data), (&da_s.data, &da_d.data), "n={n}: da without dwh");
        for i in 0..n {
            for h in 0..HEADS {
                for (a, s, what) in [(&a_s, &s_s, "s_src"), (&a_d, &s_d, "s_dst")] {
                    let want: f64 = (0..DIM).map(|f| wh.data[i * HEADS * DIM + h * DIM + f] * a.data[h * DIM + f]).sum();
                    assert!((s.data[i * HEADS + h] - want).abs() < 1e-12, "n={n} {what}[{i}][{h}]");
                }
                for f in 0..DIM {
                    let c = h * DIM + f;
                    let k = i * HEADS * DIM + c;
                    let (g_s, g_d) = (ds_s.data[i * HEADS + h], ds_d.data[i * HEADS + h]);
                    assert!((dwh.data[k] - (dwh0.data[k] + g_s * a_s.data[c] + g_d * a_d.data[c])).abs() < 1e-12, "n={n} dwh[{i}][{c}]");
                }
            }
        }
        for (ds, da, what) in [(&ds_s, &da_s, "da_src"), (&ds_d, &da_d, "da_dst")] {
            for c in 0..HEADS * DIM {
                let want: f64 = (0..n).map(|i| ds.data[i * HEADS + c / DIM] * wh.data[i * HEADS * DIM + c]).sum();
                assert!((da.data[c] - want).abs() < 1e-12 * (1.0 + want.abs()), "n={n} {what}[{c}]");
            }
        }
    }
    // Shapes that do not fit are errors, not panics.
    let (mut s, mut s2) = (HostMat::zeros(4, 2), HostMat::zeros(4, 2));
    assert!(
        b.gat_scores(&mat(4, 15, 1), (&mat(1, 15, 2), &mat(1, 15, 2)), (&mut s, &mut s2)).is_err(),
        "15 columns do not split into 2 heads"
    );
}

#[test]
fn cpu_gat_edge_logits_backward_and_row_sums() {
    let b = C::new();
    for (name, s) in graphs() {
        let n = s.n_rows();
        let g: HostGraph<f64> = b.graph(s.clone()).unwrap();
        let (s_dst, s_src) = (mat(n, HEADS, 11), mat(n, HEADS, 12));
        let (rp, ci) = (s.row_ptr(), s.col_idx());
        let mut ds_dst = mat(n, HEADS, 13);
        let mut ds_src = mat(n, HEADS, 14);
        for h in 0..HEADS {
            let mut logits = b.edges(&g, Side::Forward).unwrap();
            b.gat_edge_logits(&g, HeadLogits { s_dst: &s_dst, s_src: &s_src, head: h, slope: GAT_SLOPE }, &mut logits).unwrap();
            let de = rand(s.nnz(), 15 + h as u64);
            let mut dz = b.edges(&g, Side::Forward).unwrap();
            b.gat_edge_logits_backward(
                &g,
                HeadLogits { s_dst: &s_dst, s_src: &s_src, head: h, slope: GAT_SLOPE },
                &de,
                &mut dz,
                &mut ds_dst,
            )
            .unwrap();
            let mut dz_t = b.edges(&g, Side::Transposed).unwrap();
            b.transpose_edges(&g, &dz, &mut dz_t).unwrap();
            b.edge_row_sums(&g, Side::Transposed, &dz_t, h, &mut ds_src).unwrap();
            let slope = GAT_SLOPE as f64;
            let (mut row_sum, mut col_sum) = (vec![0.0; n], vec![0.0; n]);
            for r in 0..n {
                for e in rp[r] as usize..rp[r + 1] as usize {
                    let c = ci[e] as usize;
                    let z = s_dst.data[r * HEADS + h] + s_src.data[c * HEADS + h];
                    let want = if z > 0.0 { z } else { slope * z };
                    assert!((logits[e] - want).abs() < 1e-12, "{name} head {h}: logit of edge {e}");
                    let d = if z > 0.0 { de[e] } else { slope * de[e] };
                    assert!((dz[e] - d).abs() < 1e-12, "{name} head {h}: dz of edge {e}");
                    row_sum[r] += d;
                    col_sum[c] += d;
                }
            }
            for r in 0..n {
                assert!((ds_dst.data[r * HEADS + h] - row_sum[r]).abs() < 1e-9, "{name} head {h}: ds_dst[{r}]");
                assert!((ds_src.data[r * HEADS + h] - col_sum[r]).abs() < 1e-9, "{name} head {h}: ds_src[{r}]");
            }
        }
    }
}

#[test]
fn cpu_head_columns_and_elu() {
    let b = C::new();
    let wide = mat(7, 12, 21);
    let mut narrow = HostMat::zeros(7, 4);
    b.head_take(&wide, 8, 0.5, &mut narrow).unwrap();
    let mut out = mat(7, 12, 22);
    let before = out.clone();
    b.head_put(&narrow, 4, 2.0, true, &mut out).unwrap();
    for r in 0..7 {
        for c in 0..12 {
            let k = r * 12 + c;
            if c < 4 {
                assert_eq!(narrow.data[r * 4 + c], 0.5 * wide.data[r * 12 + 8 + c]);
            }
            let want = if (4..8).contains(&c) { before.data[k] + 2.0 * narrow.data[r * 4 + c - 4] } else { before.data[k] };
            assert_eq!(out.data[k], want, "put ({r}, {c})");
        }
    }
    b.head_put(&narrow, 0, 1.0, false, &mut out).unwrap();
    assert_eq!(out.data[0], narrow.data[0], "put without accumulate overwrites");
    assert!(b.head_take(&wide, 9, 1.0, &mut narrow).is_err(), "block past the last column");

    let x = mat(9, 7, 23);
    let mut y = x.clone();
    b.elu(&mut y).unwrap();
    let mut dy = mat(9, 7, 24);
    let dy0 = dy.clone();
    b.elu_backward(&y, &mut dy).unwrap();
    for k in 0..x.data.len() {
        let v = x.data[k];
        let want = if v > 0.0 { v } else { v.exp() - 1.0 };
        assert!((y.data[k] - want).abs() < 1e-15);
        let slope = if v > 0.0 { 1.0 } else { v.exp() };
        assert!((dy.data[k] - dy0.data[k] * slope).abs() < 1e-12, "elu backward at {v}");
    }
}

// ------------------------------------------------------------------ GPU against the CPU backend

fn backends(gpu: &Arc<Gpu>) -> Vec<(CudaBackend, ValueOrder)> {
    vec![
        (CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap(), ValueOrder::Csr),
        (CudaBackend::new(gpu.clone(), Precision::Tf32, Impl::Tc8).unwrap(), ValueOrder::MeBcrs),
    ]
}

fn dev(b: &CudaBackend, m: &HostMat<f64>) -> DeviceMatrix<f32> {
    b.upload(&Matrix::from_vec(m.rows, m.cols, m.data.iter().map(|&v| v as f32).collect()).unwrap()).unwrap()
}

fn poisoned(b: &CudaBackend, rows: usize, cols: usize) -> DeviceMatrix<f32> {
    let mut m = b.matrix(rows, cols).unwrap();
    m.poison().unwrap();
    m
}

/// The CSR slot of each edge of `side` in `order`.
fn slots(g: &GpuGraph, side: Side, order: ValueOrder) -> Vec<usize> {
    let h = match side {
        Side::Forward => g.handle.clone(),
        Side::Transposed => g.handle.transpose().unwrap(),
    };
    match order {
        ValueOrder::Csr => (0..h.csr().nnz()).collect(),
        ValueOrder::MeBcrs => h.mebcrs(8).unwrap().csr_to_slot.iter().map(|&s| s as usize).collect(),
    }
}

/// CSR-ordered values placed in `order`'s slots (other slots NaN).
fn place(b: &CudaBackend, g: &GpuGraph, side: Side, order: ValueOrder, vals: &[f64]) -> DeviceVec<f32> {
    let len = b.edges(g, side).unwrap().len();
    let mut v = vec![f32::NAN; len.max(1)];
    for (e, s) in slots(g, side, order).into_iter().enumerate() {
        v[s] = vals[e] as f32;
    }
    DeviceVec::upload(b.gpu(), &v).unwrap()
}

/// The edge values of `side` back in CSR order.
fn gather(b: &CudaBackend, g: &GpuGraph, side: Side, order: ValueOrder, v: &DeviceVec<f32>) -> Vec<f32> {
    let all = v.download(b.gpu()).unwrap();
    slots(g, side, order).into_iter().map(|s| all[s]).collect()
}

fn poisoned_edges(b: &CudaBackend, g: &GpuGraph, side: Side) -> DeviceVec<f32> {
    let len = b.edges(g, side).unwrap().len();
    DeviceVec::upload(b.gpu(), &vec![f32::NAN; len.max(1)]).unwrap()
}

fn close(what: &str, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    assert!(got.iter().all(|v| v.is_finite()), "{what}: NaN or unwritten values");
    let err = rel_error(got, want);
    assert!(err < 1e-5, "{what}: rel err {err}");
}

fn down(m: &DeviceMatrix<f32>) -> Vec<f32> {
    m.download().unwrap().data
}

#[test]
fn gpu_gat_scores_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_gat_scores_match_cpu") else { return };
    let c = C::new();
    for (b, _) in backends(&gpu) {
        // The last two: a block of 256 threads holds fewer than one row of 300 / 2000 columns
        // (its column loop), and 2000 x 2 x 4 bytes still fit the shared-memory sums.
        // One head of at most 8 columns takes a thread a row (the first three).
        for (n, heads, dim) in [(1, 1, 1), (2051, 1, 8), (1000, 1, 3), (37, 3, 5), (2051, 8, 8), (1000, 2, 33), (300, 3, 100), (50, 4, 500)]
        {
            let what = format!("{} n={n} {heads}x{dim}", b.describe());
            let w = heads * dim;
            let (wh, a_s, a_d, dwh0) = (mat(n, w, 1), mat(1, w, 2), mat(1, w, 5), mat(n, w, 4));
            let (ds_s, ds_d) = (mat(n, heads, 3), mat(n, heads, 6));
            let (mut s_s, mut s_t) = (HostMat::zeros(n, heads), HostMat::zeros(n, heads));
            c.gat_scores(&wh, (&a_s, &a_d), (&mut s_s, &mut s_t)).unwrap();
            let (mut dwh, mut da_s, mut da_d) = (dwh0.clone(), HostMat::zeros(1, w), HostMat::zeros(1, w));
            c.gat_scores_backward(&wh, (&a_s, &a_d), (&ds_s, &ds_d), Some(&mut dwh), (&mut da_s, &mut da_d)).unwrap();

            let (wh_d, a_s_d, a_d_d, ds_s_d, ds_d_d) = (dev(&b, &wh), dev(&b, &a_s), dev(&b, &a_d), dev(&b, &ds_s), dev(&b, &ds_d));
            let (mut s_s_d, mut s_t_d) = (poisoned(&b, n, heads), poisoned(&b, n, heads));
            b.gat_scores(&wh_d, (&a_s_d, &a_d_d), (&mut s_s_d, &mut s_t_d)).unwrap();
            let mut dwh_d = dev(&b, &dwh0);
            let (mut da_s_d, mut da_d_d) = (poisoned(&b, 1, w), poisoned(&b, 1, w));
            b.gat_scores_backward(&wh_d, (&a_s_d, &a_d_d), (&ds_s_d, &ds_d_d), Some(&mut dwh_d), (&mut da_s_d, &mut da_d_d)).unwrap();
            // The vectors' gradients alone (no dwh): the same sums.
            let (mut da_s_only, mut da_d_only) = (poisoned(&b, 1, w), poisoned(&b, 1, w));
            b.gat_scores_backward(&wh_d, (&a_s_d, &a_d_d), (&ds_s_d, &ds_d_d), None, (&mut da_s_only, &mut da_d_only)).unwrap();
            close(&format!("{what} da_src without dwh"), &down(&da_s_only), &da_s.data);
            close(&format!("{what} da_dst without dwh"), &down(&da_d_only), &da_d.data);
            close(&format!("{what} s_src"), &down(&s_s_d), &s_s.data);
            close(&format!("{what} s_dst"), &down(&s_t_d), &s_t.data);
            close(&format!("{what} dwh"), &down(&dwh_d), &dwh.data);
            close(&format!("{what} da_src"), &down(&da_s_d), &da_s.data);
            close(&format!("{what} da_dst"), &down(&da_d_d), &da_d.data);
            for m in [&s_s_d, &s_t_d] {
                let padded = m.download_padded().unwrap();
                assert!((0..n).all(|r| (heads..m.ld).all(|k| padded[r * m.ld + k] == 0.0)), "{what}: score padding not zero");
            }
        }
    }
}

#[test]
fn gpu_gat_edge_logits_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_gat_edge_logits_match_cpu") else { return };
    let c = C::new();
    for (b, order) in backends(&gpu) {
        for (name, s) in graphs() {
            let what = format!("{} {name}", b.describe());
            let n = s.n_rows();
            let (s_dst, s_src) = (mat(n, HEADS, 31), mat(n, HEADS, 32));
            let cg = c.graph(s.clone()).unwrap();
            let g = b.graph(s.clone()).unwrap();
            let (s_dst_d, s_src_d) = (dev(&b, &s_dst), dev(&b, &s_src));
            let (mut ds_dst, mut ds_src) = (HostMat::zeros(n, HEADS), HostMat::zeros(n, HEADS));
            let (mut ds_dst_d, mut ds_src_d) = (poisoned(&b, n, HEADS), poisoned(&b, n, HEADS));
            for h in 0..HEADS {
                let mut logits = c.edges(&cg, Side::Forward).unwrap();
                c.gat_edge_logits(&cg, HeadLogits { s_dst: &s_dst, s_src: &s_src, head: h, slope: GAT_SLOPE }, &mut logits).unwrap();
                let de = rand(s.nnz(), 40 + h as u64);
                let mut dz = c.edges(&cg, Side::Forward).unwrap();
                c.gat_edge_logits_backward(
                    &cg,
                    HeadLogits { s_dst: &s_dst, s_src: &s_src, head: h, slope: GAT_SLOPE },
                    &de,
                    &mut dz,
                    &mut ds_dst,
                )
                .unwrap();
                let mut dz_t = c.edges(&cg, Side::Transposed).unwrap();
                c.transpose_edges(&cg, &dz, &mut dz_t).unwrap();
                c.edge_row_sums(&cg, Side::Transposed, &dz_t, h, &mut ds_src).unwrap();

                let mut logits_d = poisoned_edges(&b, &g, Side::Forward);
                b.gat_edge_logits(&g, HeadLogits { s_dst: &s_dst_d, s_src: &s_src_d, head: h, slope: GAT_SLOPE }, &mut logits_d).unwrap();
                let de_d = place(&b, &g, Side::Forward, order, &de);
                let mut dz_d = poisoned_edges(&b, &g, Side::Forward);
                b.gat_edge_logits_backward(
                    &g,
                    HeadLogits { s_dst: &s_dst_d, s_src: &s_src_d, head: h, slope: GAT_SLOPE },
                    &de_d,
                    &mut dz_d,
                    &mut ds_dst_d,
                )
                .unwrap();
                let mut dz_t_d = poisoned_edges(&b, &g, Side::Transposed);
                b.transpose_edges(&g, &dz_d, &mut dz_t_d).unwrap();
                b.edge_row_sums(&g, Side::Transposed, &dz_t_d, h, &mut ds_src_d).unwrap();
                close(&format!("{what} head {h} logits"), &gather(&b, &g, Side::Forward, order, &logits_d), &logits);
                close(&format!("{what} head {h} dz"), &gather(&b, &g, Side::Forward, order, &dz_d), &dz);
            }
            // Every column written once all heads ran (the poison is gone).
            close(&format!("{what} ds_dst"), &down(&ds_dst_d), &ds_dst.data);
            close(&format!("{what} ds_src"), &down(&ds_src_d), &ds_src.data);
            // No atomics in the sums: a second run gives the same bits.
            let (mut again_dst, mut again_src) = (poisoned(&b, n, HEADS), poisoned(&b, n, HEADS));
            for h in 0..HEADS {
                let de_d = place(&b, &g, Side::Forward, order, &rand(s.nnz(), 40 + h as u64));
                let mut dz_d = poisoned_edges(&b, &g, Side::Forward);
                b.gat_edge_logits_backward(
                    &g,
                    HeadLogits { s_dst: &s_dst_d, s_src: &s_src_d, head: h, slope: GAT_SLOPE },
                    &de_d,
                    &mut dz_d,
                    &mut again_dst,
                )
                .unwrap();
                let mut dz_t_d = poisoned_edges(&b, &g, Side::Transposed);
                b.transpose_edges(&g, &dz_d, &mut dz_t_d).unwrap();
                b.edge_row_sums(&g, Side::Transposed, &dz_t_d, h, &mut again_src).unwrap();
            }
            let bits = |m: &DeviceMatrix<f32>| down(m).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&again_dst), bits(&ds_dst_d), "{what}: ds_dst differs between two runs");
            assert_eq!(bits(&again_src), bits(&ds_src_d), "{what}: ds_src differs between two runs");
        }
    }
}

#[test]
fn gpu_head_columns_and_elu_match_cpu() {
    let Some(gpu) = common::gpu_or_skip("gpu_head_columns_and_elu_match_cpu") else { return };
    let c = C::new();
    let b = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap();
    for (n, heads, dim) in [(1, 1, 1), (37, 3, 5), (2051, 8, 8), (300, 2, 33)] {
        let what = format!("n={n} {heads}x{dim}");
        let wide = mat(n, heads * dim, 51);
        let wide_d = dev(&b, &wide);
        let mut out = mat(n, heads * dim, 52);
        let mut out_d = dev(&b, &out);
        for h in 0..heads {
            let mut narrow = HostMat::zeros(n, dim);
            c.head_take(&wide, h * dim, 0.25, &mut narrow).unwrap();
            let mut narrow_d = poisoned(&b, n, dim);
            b.head_take(&wide_d, h * dim, 0.25, &mut narrow_d).unwrap();
            close(&format!("{what} take {h}"), &down(&narrow_d), &narrow.data);
            let padded = narrow_d.download_padded().unwrap();
            assert!((0..n).all(|r| (dim..narrow_d.ld).all(|k| padded[r * narrow_d.ld + k] == 0.0)), "{what}: take padding not zero");
            let acc = h % 2 == 1;
            c.head_put(&narrow, (heads - 1 - h) * dim, 3.0, acc, &mut out).unwrap();
            b.head_put(&narrow_d, (heads - 1 - h) * dim, 3.0, acc, &mut out_d).unwrap();
        }
        close(&format!("{what} put"), &down(&out_d), &out.data);

        let x = mat(n, heads * dim, 53);
        let mut y = x.clone();
        c.elu(&mut y).unwrap();
        let mut y_d = dev(&b, &x);
        b.elu(&mut y_d).unwrap();
        close(&format!("{what} elu"), &down(&y_d), &y.data);
        let mut dy = mat(n, heads * dim, 54);
        let mut dy_d = dev(&b, &dy);
        c.elu_backward(&y, &mut dy).unwrap();
        b.elu_backward(&y_d, &mut dy_d).unwrap();
        close(&format!("{what} elu backward"), &down(&dy_d), &dy.data);
    }
}

/// The layers' SDDMM samples the pattern only; our GPU kernels scale by S's values and the CPU
/// reference does not, so a graph with other values is refused on both rather than answered two
/// ways (and a unit-valued one agrees).
#[test]
fn layer_sddmm_refuses_weighted_patterns_on_both_backends() {
    use tcgnn::ops::nn::sddmm::SddmmOp;
    let weighted = Csr::new(3, 3, vec![0, 2, 3, 4], vec![0, 2, 1, 0], vec![1.0, 2.0, 1.0, 1.0]).unwrap();
    let unit = Csr::new(3, 3, vec![0, 2, 3, 4], vec![0, 2, 1, 0], vec![1.0; 4]).unwrap();
    let x = Matrix::from_vec(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let cpu = C::new();
    let run = |b: &C, s: &Csr| -> tcgnn::Result<Vec<f32>> {
        let g = b.graph(s.clone())?;
        let xm = b.upload(&x)?;
        let mut out = b.edges(&g, Side::Forward)?;
        b.sddmm(&g, &xm, &xm, &mut out)?;
        b.download_edges(&out, s.nnz())
    };
    let err = run(&cpu, &weighted).unwrap_err().to_string();
    assert!(err.contains("not all 1"), "{err}");
    // x_r . x_c on the entries (0,0), (0,2), (1,1), (2,0).
    assert_eq!(run(&cpu, &unit).unwrap(), vec![5.0, 17.0, 25.0, 17.0]);
    let Some(gpu) = common::gpu_or_skip("layer_sddmm_refuses_weighted_patterns_on_both_backends") else { return };
    let b = CudaBackend::new(gpu.clone(), Precision::F32, Impl::Auto).unwrap();
    let run_gpu = |s: &Csr| -> tcgnn::Result<Vec<f32>> {
        let g = b.graph(s.clone())?;
        let xm = b.upload(&x)?;
        let mut out = b.edges(&g, Side::Forward)?;
        b.sddmm(&g, &xm, &xm, &mut out)?;
        b.download_edges(&out, s.nnz())
    };
    let err = run_gpu(&weighted).unwrap_err().to_string();
    assert!(err.contains("not all 1"), "{err}");
    assert_eq!(run_gpu(&unit).unwrap(), vec![5.0, 17.0, 25.0, 17.0]);
}
