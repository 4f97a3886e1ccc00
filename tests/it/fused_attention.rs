//! The fused AGNN attention (`ops/nn/fused_attention.rs`): the CPU reference against the
//! unfused path (SDDMM, edge softmax, SpMMs) and against finite differences in f64 on odd
//! shapes; the GPU kernels against the CPU reference with every output poisoned (skipped
//! without a GPU).

use crate::common;

use common::{gpu_or_skip, one_huge_row, random_graph};
use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::agnn_conv::{AgnnConv, AgnnGraph};
use tcgnn::nn::backend::cpu::HostMat;
use tcgnn::nn::{Backend, CpuBackend, CudaBackend};
use tcgnn::ops::DeviceFeatures;
use tcgnn::ops::nn::attention_tc::{attention_backward_tc, attention_forward_tc};
use tcgnn::ops::nn::fused_attention::{FusedAttentionOp, GradInputs, Grads, Normalized, Outputs, attention_backward, attention_forward};
use tcgnn::ops::nn::row_normalize::RowNormalizeOp;
use tcgnn::ops::{Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

/// Node 0 points to every node and every node to node 0, plus self-loops: a hub row in S and
/// in Sᵀ (both take the block-per-row path).
fn star(n: usize) -> Csr {
    let mut t: Vec<(u32, u32, f32)> = (1..n as u32).flat_map(|i| [(0, i, 1.0), (i, 0, 1.0)]).collect();
    t.extend((0..n as u32).map(|i| (i, i, 1.0)));
    Csr::from_triplets(n, n, &t).unwrap()
}

/// Unit-valued patterns with the shapes every edge op must survive.
fn shapes(seed: u64) -> Vec<(&'static str, Csr)> {
    vec![
        ("one node", Csr::from_triplets(1, 1, &[(0, 0, 1.0)]).unwrap()),
        ("one node, no edge", Csr::from_triplets(1, 1, &[]).unwrap()),
        ("n=37, every 3rd row empty", pattern(&random_graph(37, 5, 3, seed))),
        ("n=1000 random", pattern(&random_graph(1000, 12, 0, seed + 1))),
        ("a row with a third of the edges", pattern(&one_huge_row(1201, 12, seed + 2))),
        ("star of 4500", star(4500)),
    ]
}

fn random_host(rows: usize, cols: usize, seed: u64) -> HostMat<f64> {
    let mut rng = SplitMix64::new(seed);
    HostMat { rows, cols, data: (0..rows * cols).map(|_| rng.uniform(-1.0, 1.0) as f64).collect() }
}

fn rel64(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}

/// One conv's forward and backward on the CPU in f64: (out, dh, dbeta).
fn conv_f64(s: &Csr, fused: bool, beta: f64, h: &HostMat<f64>, dout: &HostMat<f64>) -> (Vec<f64>, Vec<f64>, f64) {
    let b = CpuBackend::<f64>::new();
    let g = AgnnGraph::from_pattern(&b, s.clone(), None).unwrap();
    let mut conv = if fused { AgnnConv::new(&b, &g, h.rows, h.cols) } else { AgnnConv::new_unfused(&b, &g, h.rows, h.cols) }.unwrap();
    conv.beta.value.data[0] = beta;
    let out = conv.forward(&b, &g, h).unwrap().data.clone();
    let mut dh = HostMat::zeros(h.rows, h.cols);
    conv.backward(&b, &g, h, dout, &mut dh).unwrap();
    (out, dh.data, conv.beta.grad.data[0])
}

#[test]
fn cpu_fused_matches_unfused_path_f64() {
    for (name, s) in shapes(11) {
        for d in [8, 24] {
            let n = s.n_rows();
            let (h, dout) = (random_host(n, d, 1), random_host(n, d, 2));
            let (out_u, dh_u, db_u) = conv_f64(&s, false, 1.7, &h, &dout);
            let (out_f, dh_f, db_f) = conv_f64(&s, true, 1.7, &h, &dout);
            let (eo, eh) = (rel64(&out_f, &out_u), rel64(&dh_f, &dh_u));
            assert!(eo < 1e-12 && eh < 1e-12, "{name} d={d}: out {eo:.1e}, dh {eh:.1e}");
            assert!((db_f - db_u).abs() <= 1e-10 * db_u.abs().max(1.0), "{name} d={d}: dbeta {db_f} against {db_u}");
        }
    }
}

/// L = sum(out * w) through the fused conv.
fn loss(s: &Csr, beta: f64, h: &HostMat<f64>, w: &HostMat<f64>) -> f64 {
    let (out, _, _) = conv_f64(s, true, beta, h, w);
    out.iter().zip(&w.data).map(|(a, b)| a * b).sum()
}

#[test]
fn cpu_fused_gradients_match_finite_differences_f64() {
    let eps = 1e-6;
    for (name, s) in shapes(23) {
        let n = s.n_rows();
        let d = 5; // odd: no padding help
        let (h, w) = (random_host(n, d, 3), random_host(n, d, 4));
        let beta = 1.3;
        let (_, dh, dbeta) = conv_f64(&s, true, beta, &h, &w);
        let mut rng = SplitMix64::new(5);
        // Entries to probe: the hub's row and random ones.
        let hub = (0..n).max_by_key(|&r| s.row_ptr()[r + 1] - s.row_ptr()[r]).unwrap_or(0);
        let mut probes: Vec<usize> = (0..d).map(|c| hub * d + c).collect();
        probes.extend((0..20).map(|_| rng.below((n * d) as u64) as usize));
        for k in probes {
            let (mut hp, mut hm) = (h.clone(), h.clone());
            hp.data[k] += eps;
            hm.data[k] -= eps;
            let fd = (loss(&s, beta, &hp, &w) - loss(&s, beta, &hm, &w)) / (2.0 * eps);
            assert!((fd - dh[k]).abs() <= 1e-6 * fd.abs().max(1.0), "{name}: dh[{k}] = {} against finite difference {fd}", dh[k]);
        }
        let fd = (loss(&s, beta + eps, &h, &w) - loss(&s, beta - eps, &h, &w)) / (2.0 * eps);
        assert!((fd - dbeta).abs() <= 1e-6 * fd.abs().max(1.0), "{name}: dbeta = {dbeta} against finite difference {fd}");
    }
}

#[test]
fn cpu_fused_refuses_bad_shapes() {
    let b = CpuBackend::<f64>::new();
    let g = b.graph(Csr::from_triplets(3, 4, &[(0, 1, 1.0)]).unwrap()).unwrap();
    let m = |r, c| HostMat::<f64>::zeros(r, c);
    let outputs = |stats_rows| (m(3, 4), m(3, 1), m(3, 4), m(stats_rows, 2));
    let (mut n, mut inv_norm, mut out, mut stats) = outputs(3);
    let o = Outputs { n: &mut n, inv_norm: &mut inv_norm, out: &mut out, stats: &mut stats };
    let err = b.attention_forward(&g, &m(1, 1), &m(3, 4), o, &mut ()).unwrap_err();
    assert!(err.to_string().contains("square"), "{err}");
    let g = b.graph(Csr::from_triplets(3, 3, &[(0, 1, 1.0)]).unwrap()).unwrap();
    let (mut n, mut inv_norm, mut out, mut stats) = outputs(2);
    let o = Outputs { n: &mut n, inv_norm: &mut inv_norm, out: &mut out, stats: &mut stats };
    let err = b.attention_forward(&g, &m(1, 1), &m(3, 4), o, &mut ()).unwrap_err();
    assert!(err.to_string().contains("stats"), "{err}");
}

fn to_f32(m: &HostMat<f64>) -> Matrix {
    Matrix::from_vec(m.rows, m.cols, m.data.iter().map(|&v| v as f32).collect()).unwrap()
}

fn round_f32(m: &HostMat<f64>) -> HostMat<f64> {
    HostMat { rows: m.rows, cols: m.cols, data: m.data.iter().map(|&v| v as f32 as f64).collect() }
}

fn poison(rows: usize, cols: usize) -> Matrix {
    Matrix::from_vec(rows, cols, vec![f32::NAN; rows * cols]).unwrap()
}

#[test]
fn gpu_fused_attention_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_fused_attention_matches_cpu") else { return };
    for prec in [Precision::F32, Precision::F16] {
        let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap();
        for (name, s) in shapes(31) {
            for d in [8, 32, 40, 64, 128, 264] {
                let n = s.n_rows();
                // The reference reads the f32 values the GPU reads.
                let (h, dout) = (round_f32(&random_host(n, d, 6)), round_f32(&random_host(n, d, 7)));
                let beta = 1.7f32;
                let (out_ref, dh_ref, db_ref) = conv_f64(&s, true, beta as f64, &h, &dout);

                let g = b.graph(s.clone()).unwrap();
                let hd = b.upload(&to_f32(&h)).unwrap();
                let dd = b.upload(&to_f32(&dout)).unwrap();
                let bd = b.upload(&Matrix::from_vec(1, 1, vec![beta]).unwrap()).unwrap();
                let (mut nd, mut inv) = (b.upload(&poison(n, d)).unwrap(), b.upload(&poison(n, 1)).unwrap());
                let mut out = b.upload(&poison(n, d)).unwrap();
                let mut stats = b.upload(&poison(n, 2)).unwrap();
                let mut copy = b.attention_copy();
                let o = Outputs { n: &mut nd, inv_norm: &mut inv, out: &mut out, stats: &mut stats };
                b.attention_forward(&g, &bd, &hd, o, &mut copy).unwrap();
                let (mut dn, mut d_row, mut dh) =
                    (b.upload(&poison(n, d)).unwrap(), b.upload(&poison(n, 1)).unwrap(), b.upload(&poison(n, d)).unwrap());
                let mut dbeta = b.upload(&poison(1, 1)).unwrap();
                let x = Normalized { beta: &bd, h: &hd, n: &nd, inv_norm: &inv };
                let inputs = GradInputs { x, stats: &stats, out: &out, dout: &dd };
                b.attention_backward(&g, inputs, &copy, Grads { dn: &mut dn, d_row: &mut d_row, dh: &mut dh, dbeta: &mut dbeta }).unwrap();

                let eo = rel_error(&b.download(&out).unwrap().data, &out_ref);
                let eh = rel_error(&b.download(&dh).unwrap().data, &dh_ref);
                let db = b.download(&dbeta).unwrap().data[0] as f64;
                // f16: the neighbour rows are gathered from f16 copies.
                let (tol, tol_beta) = if prec == Precision::F16 { (1e-2, 2e-2) } else { (1e-5, 1e-4) };
                println!("{prec:?} {name} d={d}: out {eo:.1e}, dh {eh:.1e}, dbeta {db} against {db_ref}");
                assert!(eo < tol && eh < tol, "{prec:?} {name} d={d}: out {eo:.1e}, dh {eh:.1e}");
                assert!((db - db_ref).abs() <= tol_beta * db_ref.abs().max(1.0), "{prec:?} {name} d={d}: dbeta {db} against {db_ref}");
                if prec != Precision::F16 {
                    continue;
                }
                // The rows gathered from f16 copies of h and dout (the backend takes them only
                // for matrices past half of L2, so call the launchers with them here).
                let half = |m: &HostMat<f64>| match DeviceFeatures::upload(&gpu, &to_f32(m), Precision::F16).unwrap() {
                    DeviceFeatures::F16(x) => x,
                    _ => panic!("f16 upload gave f32"),
                };
                let (hh, dh16) = (half(&h), half(&dout));
                let mut out = b.upload(&poison(n, d)).unwrap();
                let mut stats = b.upload(&poison(n, 2)).unwrap();
                attention_forward(&g.handle, x, Some(&hh), &mut out, &mut stats).unwrap();
                let (mut dn, mut d_row, mut dh) =
                    (b.upload(&poison(n, d)).unwrap(), b.upload(&poison(n, 1)).unwrap(), b.upload(&poison(n, d)).unwrap());
                let mut dbeta = b.upload(&poison(1, 1)).unwrap();
                let inputs = GradInputs { x, stats: &stats, out: &out, dout: &dd };
                let grads = Grads { dn: &mut dn, d_row: &mut d_row, dh: &mut dh, dbeta: &mut dbeta };
                attention_backward(&g.handle, inputs, Some((&hh, &dh16)), grads).unwrap();
                let eo = rel_error(&b.download(&out).unwrap().data, &out_ref);
                let eh = rel_error(&b.download(&dh).unwrap().data, &dh_ref);
                let db = b.download(&dbeta).unwrap().data[0] as f64;
                println!("f16 gathers {name} d={d}: out {eo:.1e}, dh {eh:.1e}, dbeta {db} against {db_ref}");
                assert!(eo < tol && eh < tol, "f16 gathers {name} d={d}: out {eo:.1e}, dh {eh:.1e}");
                assert!((db - db_ref).abs() <= tol_beta * db_ref.abs().max(1.0), "f16 gathers {name} d={d}: dbeta {db} against {db_ref}");
            }
        }
    }
}

#[test]
fn gpu_fused_conv_matches_unfused_conv() {
    let Some(gpu) = gpu_or_skip("gpu_fused_conv_matches_unfused_conv") else { return };
    // The whole layer on the GPU both ways, in the precision the unfused products run in.
    for prec in [Precision::F32, Precision::F16] {
        let b = CudaBackend::new(gpu.clone(), prec, Impl::Auto).unwrap();
        let s = pattern(&random_graph(3000, 16, 0, 41));
        let n = s.n_rows();
        let g = AgnnGraph::from_pattern(&b, s.clone(), None).unwrap();
        let h = b.upload(&Matrix::random(n, 32, 8)).unwrap();
        let dout = b.upload(&Matrix::random(n, 32, 9)).unwrap();
        let run = |fused: bool| {
            let mut conv = if fused { AgnnConv::new(&b, &g, n, 32) } else { AgnnConv::new_unfused(&b, &g, n, 32) }.unwrap();
            let out = b.download(conv.forward(&b, &g, &h).unwrap()).unwrap();
            let mut dh = b.matrix(n, 32).unwrap();
            conv.backward(&b, &g, &h, &dout, &mut dh).unwrap();
            (out, b.download(&dh).unwrap(), b.download(&conv.beta.grad).unwrap().data[0])
        };
        let (out_u, dh_u, db_u) = run(false);
        let (out_f, dh_f, db_f) = run(true);
        let f64s = |m: &Matrix| m.data.iter().map(|&v| v as f64).collect::<Vec<_>>();
        let tol = if prec == Precision::F16 { 1e-2 } else { 1e-5 };
        let (eo, eh) = (rel_error(&out_f.data, &f64s(&out_u)), rel_error(&dh_f.data, &f64s(&dh_u)));
        println!("{prec:?}: fused against unfused: out {eo:.1e}, dh {eh:.1e}, dbeta {db_f} against {db_u}");
        assert!(eo < tol && eh < tol, "{prec:?}: out {eo:.1e}, dh {eh:.1e}");
        assert!(((db_f - db_u) as f64).abs() <= 10.0 * tol * (db_u as f64).abs().max(1.0), "{prec:?}: dbeta {db_f} against {db_u}");
    }
}

#[test]
fn gpu_tensor_core_attention_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_tensor_core_attention_matches_cpu") else { return };
    let b = CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap().with_attention_tc(0);
    let mut graphs = shapes(53);
    graphs.push(("n=5000 random, degrees 0-60", pattern(&random_graph(5000, 30, 0, 54))));
    for (name, s) in graphs {
        // 32 features at stride 32 (the kernel's), and 27 (padding columns zero).
        for d in [32, 27] {
            let n = s.n_rows();
            let (h, dout) = (round_f32(&random_host(n, d, 8)), round_f32(&random_host(n, d, 9)));
            let beta = 1.7f32;
            let (out_ref, dh_ref, db_ref) = conv_f64(&s, true, beta as f64, &h, &dout);
            let g = b.graph(s.clone()).unwrap();
            let hd = b.upload(&to_f32(&h)).unwrap();
            let dd = b.upload(&to_f32(&dout)).unwrap();
            let bd = b.upload(&Matrix::from_vec(1, 1, vec![beta]).unwrap()).unwrap();
            let (mut nd, mut inv) = (b.matrix(n, d).unwrap(), b.matrix(n, 1).unwrap());
            b.row_normalize(&hd, &mut nd, &mut inv).unwrap();
            let nh = match DeviceFeatures::upload(&gpu, &b.download(&nd).unwrap(), Precision::F16).unwrap() {
                DeviceFeatures::F16(x) => x,
                _ => panic!("f16 upload gave f32"),
            };
            // Every row on the CUDA-core kernel's warps (1), most of them (4), none (256).
            for row_max in [1, 4, 256] {
                let mut out = b.upload(&poison(n, d)).unwrap();
                let mut stats = b.upload(&poison(n, 2)).unwrap();
                let x = Normalized { beta: &bd, h: &hd, n: &nd, inv_norm: &inv };
                attention_forward_tc(&g.handle, x, &nh, &mut out, &mut stats, row_max).unwrap();
                // The statistics as the CUDA-core backward reads them.
                let (mut dn, mut d_row, mut dh) =
                    (b.upload(&poison(n, d)).unwrap(), b.upload(&poison(n, 1)).unwrap(), b.upload(&poison(n, d)).unwrap());
                let mut dbeta = b.upload(&poison(1, 1)).unwrap();
                let inputs = GradInputs { x, stats: &stats, out: &out, dout: &dd };
                let grads = Grads { dn: &mut dn, d_row: &mut d_row, dh: &mut dh, dbeta: &mut dbeta };
                b.attention_backward(&g, inputs, &b.attention_copy(), grads).unwrap();
                let out_h = b.download(&out).unwrap();
                assert!(out_h.data.iter().all(|v| v.is_finite()), "{name} d={d} row_max={row_max}: unwritten output");
                let eo = rel_error(&out_h.data, &out_ref);
                let eh = rel_error(&b.download(&dh).unwrap().data, &dh_ref);
                println!("tensor cores {name} d={d} row_max={row_max}: out {eo:.1e}, dh {eh:.1e} (CUDA-core backward)");
                assert!(eo < 1e-2 && eh < 1e-2, "tensor cores {name} d={d} row_max={row_max}: out {eo:.1e}, dh {eh:.1e}");
                // The backward on the tensor cores, from the same forward; dout's f16 copy is the
                // row pass's to write (every row: poisoned here, compared with the cast after).
                let mut dout16 = match DeviceFeatures::upload(&gpu, &to_f32(&dout), Precision::F16).unwrap() {
                    DeviceFeatures::F16(x) => x,
                    _ => panic!("f16 upload gave f32"),
                };
                let want16 = dout16.download_padded().unwrap();
                dout16.poison().unwrap();
                let (mut dn, mut d_row, mut dh) =
                    (b.upload(&poison(n, d)).unwrap(), b.upload(&poison(n, 1)).unwrap(), b.upload(&poison(n, d)).unwrap());
                let mut dbeta = b.upload(&poison(1, 1)).unwrap();
                let inputs = GradInputs { x, stats: &stats, out: &out, dout: &dd };
                let grads = Grads { dn: &mut dn, d_row: &mut d_row, dh: &mut dh, dbeta: &mut dbeta };
                attention_backward_tc(&g.handle, inputs, &nh, &mut dout16, grads, row_max).unwrap();
                let bits = |v: Vec<half::f16>| v.into_iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
                assert_eq!(bits(dout16.download_padded().unwrap()), bits(want16), "{name} d={d} row_max={row_max}: dout's f16 copy");
                let dh_h = b.download(&dh).unwrap();
                assert!(dh_h.data.iter().all(|v| v.is_finite()), "{name} d={d} row_max={row_max}: unwritten dh");
                let eh = rel_error(&dh_h.data, &dh_ref);
                let db = b.download(&dbeta).unwrap().data[0] as f64;
                println!("tensor cores {name} d={d} row_max={row_max}: dh {eh:.1e}, dbeta {db} against {db_ref}");
                assert!(eh < 1e-2, "tensor-core backward {name} d={d} row_max={row_max}: dh {eh:.1e}");
                assert!(
                    (db - db_ref).abs() <= 2e-2 * db_ref.abs().max(1.0),
                    "tensor-core backward {name} d={d} row_max={row_max}: dbeta {db} against {db_ref}"
                );
            }
        }
    }
    // Through the backend with the tensor cores on: the forward normalises h, writing n's f16
    // copy for both passes; the backward takes it (and casts n afresh for another n's copy).
    let bt = CudaBackend::new(gpu.clone(), Precision::F16, Impl::Auto).unwrap().with_attention_tc(256);
    for (name, s) in [("n=5000 random", pattern(&random_graph(5000, 30, 0, 56))), ("star of 600", star(600))] {
        let n = s.n_rows();
        let (h, dout) = (round_f32(&random_host(n, 32, 10)), round_f32(&random_host(n, 32, 11)));
        let (out_ref, dh_ref, db_ref) = conv_f64(&s, true, 1.3, &h, &dout);
        let g = bt.graph(s.clone()).unwrap();
        let (hd, dd) = (bt.upload(&to_f32(&h)).unwrap(), bt.upload(&to_f32(&dout)).unwrap());
        let bd = bt.upload(&Matrix::from_vec(1, 1, vec![1.3]).unwrap()).unwrap();
        let (mut nd, mut inv) = (bt.upload(&poison(n, 32)).unwrap(), bt.upload(&poison(n, 1)).unwrap());
        let (mut out, mut stats) = (bt.upload(&poison(n, 32)).unwrap(), bt.upload(&poison(n, 2)).unwrap());
        let mut copy = bt.attention_copy();
        let o = Outputs { n: &mut nd, inv_norm: &mut inv, out: &mut out, stats: &mut stats };
        bt.attention_forward(&g, &bd, &hd, o, &mut copy).unwrap();
        let eo = rel_error(&bt.download(&out).unwrap().data, &out_ref);
        for own_copy in [true, false] {
            let (mut dn, mut d_row, mut dh) =
                (bt.upload(&poison(n, 32)).unwrap(), bt.upload(&poison(n, 1)).unwrap(), bt.upload(&poison(n, 32)).unwrap());
            let mut dbeta = bt.upload(&poison(1, 1)).unwrap();
            let other = bt.attention_copy();
            let x = Normalized { beta: &bd, h: &hd, n: &nd, inv_norm: &inv };
            let inputs = GradInputs { x, stats: &stats, out: &out, dout: &dd };
            let grads = Grads { dn: &mut dn, d_row: &mut d_row, dh: &mut dh, dbeta: &mut dbeta };
            bt.attention_backward(&g, inputs, if own_copy { &copy } else { &other }, grads).unwrap();
            let eh = rel_error(&bt.download(&dh).unwrap().data, &dh_ref);
            let db = bt.download(&dbeta).unwrap().data[0] as f64;
            println!("backend, tensor cores {name} (forward's copy {own_copy}): out {eo:.1e}, dh {eh:.1e}, dbeta {db} against {db_ref}");
            assert!(eo < 1e-2 && eh < 1e-2, "backend, tensor cores {name}: out {eo:.1e}, dh {eh:.1e}");
            assert!((db - db_ref).abs() <= 2e-2 * db_ref.abs().max(1.0), "backend, tensor cores {name}: dbeta {db} against {db_ref}");
        }
    }
    // Out of range row_max and a stride the kernel does not take are refused.
    let s = pattern(&random_graph(40, 4, 0, 55));
    let g = b.graph(s).unwrap();
    let (nd, inv, bd) = (b.matrix(40, 32).unwrap(), b.matrix(40, 1).unwrap(), b.matrix(1, 1).unwrap());
    let nh = match DeviceFeatures::upload(&gpu, &Matrix::zeros(40, 32), Precision::F16).unwrap() {
        DeviceFeatures::F16(x) => x,
        _ => panic!("f16 upload gave f32"),
    };
    let (mut out, mut stats) = (b.matrix(40, 32).unwrap(), b.matrix(40, 2).unwrap());
    let x = Normalized { beta: &bd, h: &nd, n: &nd, inv_norm: &inv };
    let err = attention_forward_tc(&g.handle, x, &nh, &mut out, &mut stats, 257).unwrap_err();
    assert!(err.to_string().contains("row_max"), "{err}");
    let (n64, mut out64) = (b.matrix(40, 64).unwrap(), b.matrix(40, 64).unwrap());
    let x = Normalized { beta: &bd, h: &n64, n: &n64, inv_norm: &inv };
    let err = attention_forward_tc(&g.handle, x, &nh, &mut out64, &mut stats, 256).unwrap_err();
    assert!(err.to_string().contains("stride"), "{err}");
}
