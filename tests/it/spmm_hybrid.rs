//! Hybrid SpMM (`Impl::Hybrid`, `ops::spmm::hybrid`): TC8 on the dense 8x1 vectors, the CUDA-core
//! remainder kernel on the rest. GPU tests run every threshold against the f64 reference with
//! poisoned outputs, on odd shapes and on graphs whose S_cc or S_tc is empty; CPU tests check the
//! host side (the split into handles and work items, the threshold choice) by replaying the two
//! passes on the host.

use crate::common;

use tcgnn::format::hybrid::hybrid_stats;
use tcgnn::gpu::DeviceMatrix;
use tcgnn::gpu::abi::hybrid::{self as kernels, HYBRID_CC_SPLIT_ROW};
use tcgnn::graph::Csr;
use tcgnn::ops::spmm::cpu::spmm_reference_f64;
use tcgnn::ops::spmm::hybrid::{CcUnroll, HybridHost, cc_item_nnz, choose_threshold, spmm_hybrid_with, threshold};
use tcgnn::ops::spmm::{spmm_device, spmm_device_values, value_order};
use tcgnn::ops::{DeviceFeatures, EdgeValues, GraphHandle, Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};
use tcgnn::util::rng::SplitMix64;

/// Thresholds the GPU tests run: all on tensor cores, singletons off, pairs off, all on CUDA cores.
const THRESHOLDS: [usize; 4] = [1, 2, 3, 9];
/// Feature widths: 1, not a multiple of 8, a warp of f32 chunks, more than a warp.
const KS: [usize; 4] = [1, 20, 128, 130];

/// Dense 8x8 blocks on the diagonal (every vector holds 8 nonzeros, fewer in a last partial
/// window): S_cc is empty for t <= the last window's height.
fn dense_blocks(n: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 0..n {
        let w = r / 8 * 8;
        for c in w..(w + 8).min(n) {
            t.push((r as u32, c as u32, rng.uniform(-1.0, 1.0)));
        }
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// Only singleton vectors (row r's columns 8r.. mod n never meet another row of its window), some
/// rows empty, and row 5 with 3000 more nonzeros (cut into several remainder items): S_tc is
/// empty for t >= 2, so the remainder writes Y alone, its cut rows cleared first.
fn singletons_with_a_long_row(n: usize, seed: u64) -> Csr {
    assert!(n >= 3100);
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 0..n {
        let deg = rng.below(5) as usize; // 0..=4, empty rows included
        for j in 0..deg {
            t.push((r as u32, ((8 * r + j) % n) as u32, rng.uniform(-1.0, 1.0)));
        }
    }
    for i in 0..3000 {
        t.push((5, 64 + i, rng.uniform(-1.0, 1.0))); // no other row of window 0 reaches column 64
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// Dense blocks plus singletons, and row 3 with 5000 singletons: both parts non-empty at t >= 2,
/// and the remainder adds a cut row atomically onto the tensor-core part.
fn blocks_and_a_long_singleton_row(n: usize, seed: u64) -> Csr {
    assert!(n >= 5100);
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 0..n {
        let w = r / 8 * 8;
        for c in w..(w + 8).min(n) {
            t.push((r as u32, c as u32, rng.uniform(-1.0, 1.0)));
        }
        if r % 3 == 0 {
            t.push((r as u32, ((8 * r + 8 * n / 2 + 1) % n) as u32, rng.uniform(-1.0, 1.0)));
        }
    }
    for i in 0..5000 {
        t.push((3, 16 + i, rng.uniform(-1.0, 1.0)));
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// The graphs of the GPU tests: the shared odd shapes and the three above.
fn graphs() -> Vec<(String, Csr)> {
    let mut gs = common::odd_shapes(31);
    gs.push(("dense 8x8 blocks, n=61 (empty S_cc)".into(), dense_blocks(61, 32)));
    gs.push(("singletons + a 3000-nonzero row, n=4001 (empty S_tc)".into(), singletons_with_a_long_row(4001, 33)));
    gs.push(("dense blocks + a 5000-singleton row, n=5203".into(), blocks_and_a_long_singleton_row(5203, 34)));
    gs
}

/// Run the hybrid at `t` on `g` (one handle for every call: splits and uploads are reused) with a
/// poisoned Y and compare with the f64 reference.
fn check(
    gpu: &std::sync::Arc<tcgnn::gpu::Gpu>,
    g: &GraphHandle,
    name: &str,
    k: usize,
    prec: Precision,
    t: Option<usize>,
    unroll: CcUnroll,
) {
    let (x, want) = common::spmm_problem(g.csr(), k, prec);
    let xd = DeviceFeatures::upload(gpu, &x, prec).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(gpu, g.csr().n_rows(), k).unwrap();
    y.poison().unwrap();
    let split = spmm_hybrid_with(g, xd.view(), &mut y, t, unroll).unwrap();
    let got = y.download().unwrap();
    let err = rel_error(&got.data, &want);
    let tol = prec.tolerance();
    println!(
        "hybrid t={} ({:?}) {prec:?} {unroll:?} {name} K={k}: CC {} of {} nnz, rel err {err:.2e}",
        split.t, t, split.cc_nnz, split.nnz
    );
    assert!(err < tol, "hybrid t={t:?} {prec:?} {unroll:?} on {name}, K={k}: relative error {err} >= {tol}");
}

#[test]
fn gpu_hybrid_matches_reference_for_every_threshold() {
    let Some(gpu) = common::gpu_or_skip("gpu_hybrid_matches_reference_for_every_threshold") else { return };
    for (name, s) in graphs() {
        let g = GraphHandle::new(s, Some(gpu.clone()));
        for prec in [Precision::Tf32, Precision::F16] {
            for t in THRESHOLDS {
                for k in KS {
                    check(&gpu, &g, &name, k, prec, Some(t), CcUnroll::U4);
                }
            }
        }
    }
}

#[test]
fn gpu_hybrid_eight_gathers_in_flight_matches_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_hybrid_eight_gathers_in_flight_matches_reference") else { return };
    for (name, s) in graphs().into_iter().skip(2) {
        let g = GraphHandle::new(s, Some(gpu.clone()));
        for prec in [Precision::Tf32, Precision::F16] {
            for t in [2, 9] {
                for k in [20, 128, 264] {
                    check(&gpu, &g, &name, k, prec, Some(t), CcUnroll::U8);
                }
            }
        }
    }
}

#[test]
fn gpu_hybrid_parts_are_what_the_tests_mean() {
    let Some(gpu) = common::gpu_or_skip("gpu_hybrid_parts_are_what_the_tests_mean") else { return };
    let h = |s: Csr, t| {
        let g = GraphHandle::new(s, Some(gpu.clone()));
        let h = tcgnn::ops::spmm::hybrid::hybrid_handle(&g, t).unwrap();
        (h.tc_handle().map(|g| g.csr().nnz()), h.cc_handle().map(|g| g.csr().nnz()))
    };
    let (tc, cc) = h(dense_blocks(61, 32), 3);
    assert!(tc.is_none() && cc.is_none(), "all dense: TC8 on the graph itself");
    let (tc, cc) = h(singletons_with_a_long_row(4001, 33), 2);
    assert!(tc.is_none() && cc.unwrap() > 3000, "only singletons: remainder alone");
    let (tc, cc) = h(blocks_and_a_long_singleton_row(5203, 34), 2);
    assert!(tc.unwrap() > 0 && cc.unwrap() > 5000);
}

#[test]
fn gpu_hybrid_default_threshold_through_spmm_device() {
    let Some(gpu) = common::gpu_or_skip("gpu_hybrid_default_threshold_through_spmm_device") else { return };
    // A graph the tf32 model splits (t >= 2, see cpu_threshold_choice) and a small random one
    // (t = 1: TC8).
    for (name, s) in [("clustered n=40000", clustered(40_000, 41)), ("random n=2000", common::random_graph(2000, 9, 5, 42))] {
        let g = GraphHandle::new(s, Some(gpu.clone()));
        for prec in [Precision::Tf32, Precision::F16] {
            for k in [32, 128] {
                let (x, want) = common::spmm_problem(g.csr(), k, prec);
                let xd = DeviceFeatures::upload(&gpu, &x, prec).unwrap();
                let mut y = DeviceMatrix::<f32>::zeros(&gpu, g.csr().n_rows(), k).unwrap();
                for _ in 0..2 {
                    y.poison().unwrap();
                    spmm_device(&g, &xd, &mut y, Impl::Hybrid).unwrap();
                    let err = rel_error(&y.download().unwrap().data, &want);
                    let t = threshold(&g, prec == Precision::F16, y.ld, None).unwrap().t;
                    println!("hybrid (cost model t={t}) {prec:?} {name} K={k}: rel err {err:.2e}");
                    assert!(err < prec.tolerance(), "{name} {prec:?} K={k}: {err}");
                }
            }
        }
    }
}

#[test]
fn gpu_hybrid_refuses_per_call_values() {
    let Some(gpu) = common::gpu_or_skip("gpu_hybrid_refuses_per_call_values") else { return };
    let s = common::random_graph(100, 5, 0, 43);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let x = DeviceFeatures::upload(&gpu, &Matrix::random(100, 16, 1), Precision::F32).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, 100, 16).unwrap();
    let v = tcgnn::gpu::DeviceVec::upload(&gpu, s.values()).unwrap();
    let e = spmm_device_values(&g, EdgeValues::Csr(&v), &x, &mut y, Impl::Hybrid).unwrap_err();
    assert!(matches!(e, tcgnn::Error::Unsupported(_)), "{e}");
    // t = 0 is refused, not clamped.
    assert!(spmm_hybrid_with(&g, x.view(), &mut y, Some(0), CcUnroll::U4).is_err());
}

// ---------------------------------------------------------------- CPU: host side

/// Rows with one dense column per window (8 nonzeros) and `singles` scattered singletons each:
/// the tf32 model moves the singletons to CUDA cores once there are enough of them.
fn clustered(n: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 0..n as u32 {
        t.push((r, r / 8 % 1000, rng.uniform(-1.0, 1.0)));
        for j in 0..6u32 {
            t.push((r, 1000 + (r * 7 + j * 131) % (n as u32 - 1000), rng.uniform(-1.0, 1.0)));
        }
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// Dyadic random graph (values multiples of 1/8): the replay below is exact in f64.
fn dyadic_graph(rng: &mut SplitMix64, n: usize, nnz: usize, heavy: usize) -> Csr {
    let mut t = Vec::new();
    for _ in 0..nnz {
        let r = rng.below(n as u64) as u32;
        // Half of the columns clustered per window so that dense vectors occur.
        let c = if rng.below(2) == 0 { (r as u64 / 8 * 3 + rng.below(4)) % n as u64 } else { rng.below(n as u64) };
        t.push((r, c as u32, (rng.below(33) as f32 - 16.0) / 8.0));
    }
    if n > 0 {
        let h = rng.below(n as u64) as u32;
        for i in 0..heavy {
            t.push((h, (i % n) as u32, 1.0));
        }
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// The two passes of the device path replayed on the host from a [`HybridHost`]: TC writes every
/// row, then each remainder item adds (or, without a TC part, writes) its row; cut rows are
/// cleared first when the remainder writes alone.
fn replay(host: &HybridHost, n_rows: usize, x: &Matrix) -> Vec<f64> {
    let k = x.cols;
    let mut y = match &host.tc {
        Some(tc) => spmm_reference_f64(tc, x),
        None => vec![f64::NAN; n_rows * k], // poisoned: the remainder must write every row
    };
    let (Some(cc), Some(items)) = (&host.cc, &host.items) else { return y };
    let accumulate = host.tc.is_some();
    if !accumulate {
        for &r in &items.split_rows {
            y[r as usize * k..(r as usize + 1) * k].fill(0.0);
        }
    }
    for i in 0..items.n_items() {
        let row = (items.item_row[i] & !HYBRID_CC_SPLIT_ROW) as usize;
        let split = items.item_row[i] & HYBRID_CC_SPLIT_ROW != 0;
        let mut acc = vec![0f64; k];
        for e in items.item_ptr[i] as usize..items.item_ptr[i + 1] as usize {
            let (c, v) = (cc.col_idx()[e] as usize, cc.values()[e] as f64);
            for (a, &xv) in acc.iter_mut().zip(x.row(c)) {
                *a += v * xv as f64;
            }
        }
        let out = &mut y[row * k..(row + 1) * k];
        for (o, a) in out.iter_mut().zip(acc) {
            *o = if split || accumulate { *o + a } else { a };
        }
    }
    y
}

/// Property: for random graphs, thresholds and item lengths, the split, its work items and the
/// two passes reproduce S X exactly; items tile S_cc's nonzeros in order, never exceed the item
/// length, flag exactly the rows cut into several items, and list every row when S_tc is empty.
#[test]
fn cpu_split_and_items_replay_to_s_times_x() {
    let mut rng = SplitMix64::new(0x4b1d2);
    let mut shapes = vec![(1, 1, 0), (1, 0, 0), (8, 20, 0), (37, 100, 40), (61, 400, 0), (300, 900, 500)];
    for _ in 0..30 {
        let n = 1 + rng.below(400) as usize;
        shapes.push((n, rng.below(10 * n as u64) as usize, rng.below(3) as usize * 150));
    }
    // Cases seen: (remainder adding with cut rows, remainder writing alone, writing alone with cut rows).
    let mut seen = (0, 0, 0);
    for (case, &(n, nnz, heavy)) in shapes.iter().enumerate() {
        let s = dyadic_graph(&mut rng, n, nnz, heavy);
        let st = hybrid_stats(&s).unwrap();
        let x = Matrix::from_vec(n, 5, (0..n * 5).map(|_| rng.below(17) as f32 - 8.0).collect()).unwrap();
        let want = spmm_reference_f64(&s, &x);
        for t in [2, 3, 4, 9] {
            for item_nnz in [1, 7, 64] {
                let host = HybridHost::build(&s, st.split(t), item_nnz).unwrap();
                assert_eq!(host.tc.as_ref().map_or(0, |c| c.nnz()), st.split(t).tc_nnz, "case {case} t={t}");
                assert_eq!(host.cc.as_ref().map_or(0, |c| c.nnz()), st.split(t).cc_nnz, "case {case} t={t}");
                if let (Some(cc), Some(items)) = (&host.cc, &host.items) {
                    assert_eq!(items.item_ptr.first(), Some(&0));
                    assert_eq!(items.item_ptr.last().copied(), Some(cc.nnz() as u32));
                    let mut items_of_row = vec![0usize; n];
                    for i in 0..items.n_items() {
                        let (a, b) = (items.item_ptr[i], items.item_ptr[i + 1]);
                        assert!(a <= b && b - a <= item_nnz, "case {case}: item {i} is {a}..{b}");
                        let row = (items.item_row[i] & !HYBRID_CC_SPLIT_ROW) as usize;
                        let rr = cc.row_range(row);
                        assert!(rr.start <= a as usize && b as usize <= rr.end, "case {case}: item {i} leaves row {row}");
                        items_of_row[row] += 1;
                    }
                    for i in 0..items.n_items() {
                        let row = (items.item_row[i] & !HYBRID_CC_SPLIT_ROW) as usize;
                        assert_eq!(items.item_row[i] & HYBRID_CC_SPLIT_ROW != 0, items_of_row[row] > 1, "case {case}: row {row}");
                    }
                    let every_row = items_of_row.iter().all(|&c| c > 0);
                    if host.tc.is_none() {
                        assert!(every_row, "case {case}: S_tc empty, the remainder must write every row");
                    }
                    let cut: Vec<u32> = (0..n).filter(|&r| items_of_row[r] > 1).map(|r| r as u32).collect();
                    assert_eq!(items.split_rows, cut);
                    match (host.tc.is_some(), cut.is_empty()) {
                        (true, false) => seen.0 += 1,
                        (false, true) => seen.1 += 1,
                        (false, false) => seen.2 += 1,
                        _ => {}
                    }
                }
                let got = replay(&host, n, &x);
                if host.tc.is_none() && host.cc.is_none() {
                    continue; // empty graph: the device path runs TC8 on S itself
                }
                assert_eq!(got, want, "case {case} (n={n}, nnz={}) t={t} item_nnz={item_nnz}", s.nnz());
            }
        }
    }
    assert!(seen.0 > 0 && seen.1 > 0 && seen.2 > 0, "{seen:?}");
}

#[test]
fn cpu_threshold_choice() {
    // Enough singletons to pay the second launch in tf32; f16 keeps everything on tensor cores
    // (equal gather rates in the model), and a caller's t wins over the model.
    let s = clustered(40_000, 41);
    let st = hybrid_stats(&s).unwrap();
    let tf32 = choose_threshold(&st, false, 128);
    assert!(tf32.t >= 2, "{tf32:?}");
    assert_eq!(choose_threshold(&st, true, 128).t, 1);
    let g = GraphHandle::new(s, None);
    assert_eq!(threshold(&g, false, 128, None).unwrap(), tf32);
    assert_eq!(threshold(&g, true, 128, Some(3)).unwrap(), st.split(3));
    assert!(threshold(&g, true, 128, Some(0)).is_err());
    // Small graphs: the launch dominates, t = 1 (exactly TC8).
    let small = GraphHandle::new(common::random_graph(300, 4, 0, 3), None);
    assert_eq!(threshold(&small, false, 128, None).unwrap().t, 1);
    // Without a GPU the device split is refused cleanly.
    let e = tcgnn::ops::spmm::hybrid::hybrid_handle(&g, 2).err().expect("no GPU");
    assert!(e.to_string().contains("no GPU"), "{e}");
    // The item length stays within bounds for this graph on an H100.
    assert!((64..=256).contains(&cc_item_nnz(tf32.cc_nnz, 132)));
}

#[test]
fn cpu_hybrid_is_an_impl_without_per_call_values() {
    assert_eq!(value_order(Impl::Hybrid), None);
    let s = common::random_graph(40, 4, 0, 9);
    let g = GraphHandle::new(s, None);
    let e = tcgnn::ops::spmm::spmm(&g, &Matrix::random(40, 8, 1), Impl::Hybrid, Precision::Tf32).unwrap_err();
    assert!(e.to_string().contains("no GPU"), "{e}");
}

#[test]
fn hybrid_kernels_are_in_the_ptx() {
    for k in
        [kernels::spmm_cc_f32_u4.name(), kernels::spmm_cc_f32_u8.name(), kernels::spmm_cc_f16_u4.name(), kernels::spmm_cc_f16_u8.name()]
    {
        assert!(tcgnn::gpu::module::KERNELS_PTX.contains(&format!(".entry {k}(")), "{k} missing from the PTX");
    }
    assert!(tcgnn::gpu::module::KERNELS_PTX.contains(&format!(".entry {}(", kernels::spmm_cc_zero_rows.name())));
}
