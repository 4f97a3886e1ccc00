//! SpMM: CPU against a dense product, every GPU implementation against the f64 reference on
//! odd shapes and several K, outputs poisoned before launch.

use crate::common;

use tcgnn::gpu::DeviceMatrix;
use tcgnn::graph::Csr;
use tcgnn::ops::spmm::cpu::spmm_cpu;
use tcgnn::ops::spmm::spmm_device;
use tcgnn::ops::{DeviceFeatures, GraphHandle, Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};

#[test]
fn cpu_spmm_matches_dense_product() {
    let s = common::random_graph(50, 6, 4, 1);
    let x = Matrix::random(50, 13, 2);
    let y = spmm_cpu(&s, &x);
    let mut dense = vec![0f64; 50 * 50];
    for r in 0..50 {
        for (c, v) in s.row(r) {
            dense[r * 50 + c as usize] += v as f64;
        }
    }
    for r in 0..50 {
        for j in 0..13 {
            let want: f64 = (0..50).map(|c| dense[r * 50 + c] * x.data[c * 13 + j] as f64).sum();
            approx::assert_abs_diff_eq!(y.data[r * 13 + j] as f64, want, epsilon = 1e-4);
        }
    }
}

/// Run `imp` on the GPU with poisoned output and compare with the f64 reference.
pub fn check_gpu(gpu: &std::sync::Arc<tcgnn::gpu::Gpu>, name: &str, s: &Csr, k: usize, imp: Impl, prec: Precision) {
    check_gpu_with(gpu, name, s, k, prec, &format!("{imp:?}"), |g, x, y| spmm_device(g, x, y, imp));
}

/// `check_gpu` for any device SpMM entry point (`label` names it in messages).
fn check_gpu_with(
    gpu: &std::sync::Arc<tcgnn::gpu::Gpu>,
    name: &str,
    s: &Csr,
    k: usize,
    prec: Precision,
    label: &str,
    run: impl Fn(&GraphHandle, &DeviceFeatures, &mut DeviceMatrix<f32>) -> tcgnn::Result<()>,
) {
    let (x, want) = common::spmm_problem(s, k, prec);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let xd = DeviceFeatures::upload(gpu, &x, prec).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(gpu, s.n_rows(), k).unwrap();
    y.poison().unwrap();
    run(&g, &xd, &mut y).unwrap();
    let got = y.download().unwrap();
    let err = rel_error(&got.data, &want);
    let tol = prec.tolerance();
    println!("{label} {prec:?} {name} K={k}: rel err {err:.2e}");
    assert!(err < tol, "{label} {prec:?} on {name}, K={k}: relative error {err} >= {tol}");
}

/// Graphs for the CSR kernel beyond `odd_shapes`: rows past its long-row threshold in many
/// warps (each such warp sums its rows with all lanes), a hub among short rows, and row counts
/// around its rows per block (`32 / lanes a row` rows a warp, 8 warps a block).
fn csr_kernel_shapes(seed: u64) -> Vec<(String, Csr)> {
    let mut v = common::odd_shapes(seed);
    v.push(("n=600 rows up to 400 entries, every 11th empty".into(), common::random_graph(600, 200, 11, seed + 10)));
    v.push(("n=100000 one huge row".into(), common::one_huge_row(100_000, 4, seed + 11)));
    for n in [127, 129, 257, 1023] {
        v.push((format!("n={n} random"), common::random_graph(n, 3, 5, seed + n as u64)));
    }
    v.push(("n=30000 hubs of 512..20000 entries among short rows".into(), hubs_among_short_rows(30_000, seed + 12)));
    v
}

/// Rows at and around the kernel's hub threshold (`CSR_SPMM_HUB_ROW`: longer rows get a block
/// of their own) and far beyond it, next to each other, to empty rows and at the last row,
/// among rows of 0-6 entries. A row's columns are distinct (consecutive from a random one), so
/// its length is exactly the one chosen.
fn hubs_among_short_rows(n: usize, seed: u64) -> Csr {
    use tcgnn::util::rng::SplitMix64;
    let hub = tcgnn::shared::config::CSR_SPMM_HUB_ROW as usize;
    let mut rng = SplitMix64::new(seed);
    let lens: [(usize, usize); 8] =
        [(3, hub), (4, hub + 1), (5, hub + 7), (100, 20_000), (101, 3 * hub), (15_000, 2 * hub + 1), (15_002, 4_000), (n - 1, 9_000)];
    let mut t = Vec::new();
    for r in 0..n {
        let len = match lens.iter().find(|(row, _)| *row == r) {
            Some(&(_, len)) => len,
            None if r % 13 == 0 => 0,
            None => rng.below(7) as usize,
        };
        let first = rng.below(n as u64) as usize;
        for i in 0..len.min(n) {
            t.push((r as u32, ((first + i) % n) as u32, rng.uniform(-1.0, 1.0)));
        }
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// The CSR kernel with f16 features reads f32 values and adds in f32: against the f64 product
/// of X rounded to f16 and the exact values it must be f32-accurate, not only f16-accurate.
fn check_csr_f16_exact_values(gpu: &std::sync::Arc<tcgnn::gpu::Gpu>, name: &str, s: &Csr, k: usize) {
    let x = Matrix::random(s.n_cols(), k, 0xc5 + k as u64 + s.nnz() as u64).rounded_f16();
    let want = tcgnn::ops::spmm::cpu::spmm_reference_f64(s, &x);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let xd = DeviceFeatures::upload(gpu, &x, Precision::F16).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(gpu, s.n_rows(), k).unwrap();
    y.poison().unwrap();
    spmm_device(&g, &xd, &mut y, Impl::Csr).unwrap();
    let got = y.download().unwrap();
    let err = rel_error(&got.data, &want);
    println!("Csr f16 features, f32 values {name} K={k}: rel err {err:.2e}");
    assert!(err < 1e-5, "Csr with f16 features on {name}, K={k}: relative error {err} against the f32 values");
    assert!(got.data.iter().all(|v| v.is_finite()), "Csr f16 on {name}, K={k}: a poisoned output survived");
}

#[test]
fn gpu_csr_spmm_matches_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_csr_spmm_matches_reference") else { return };
    for (name, s) in csr_kernel_shapes(11) {
        for k in [1, 7, 8, 16, 17, 24, 64, 100, 128, 264] {
            check_gpu(&gpu, &name, &s, k, Impl::Csr, Precision::F32);
            check_gpu(&gpu, &name, &s, k, Impl::Csr, Precision::F16);
        }
    }
}

#[test]
fn gpu_csr_spmm_f16_features_keep_f32_accuracy() {
    let Some(gpu) = common::gpu_or_skip("gpu_csr_spmm_f16_features_keep_f32_accuracy") else { return };
    for (name, s) in csr_kernel_shapes(15) {
        for k in [1, 8, 16, 17, 64, 100, 520] {
            check_csr_f16_exact_values(&gpu, &name, &s, k);
        }
    }
}

#[test]
fn gpu_hp_spmm_matches_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_hp_spmm_matches_reference") else { return };
    for (name, s) in common::odd_shapes(12) {
        for k in [8, 24, 128, 264] {
            check_gpu(&gpu, &name, &s, k, Impl::Hp, Precision::F32);
        }
    }
    // Many warps over one huge row: the atomic path.
    let big = common::one_huge_row(100_000, 16, 5);
    check_gpu(&gpu, "n=100000 one huge row", &big, 64, Impl::Hp, Precision::F32);
}

#[test]
fn gpu_hp_spmm_any_nnz_per_warp() {
    // DTP takes 8 nonzeros per warp on small graphs (HP-SpMM's candidate set), and the kernel
    // must take any count: batches shorter than a warp, counts that are not multiples of 32.
    let Some(gpu) = common::gpu_or_skip("gpu_hp_spmm_any_nnz_per_warp") else { return };
    for (name, s) in common::odd_shapes(13) {
        for npw in [1, 5, 8, 33, 512] {
            check_gpu_with(&gpu, &name, &s, 24, Precision::F32, &format!("HP npw {npw}"), |g, x, y| match x {
                DeviceFeatures::F32(x) => tcgnn::ops::spmm::hp::spmm_hp_npw(g, None, x, y, Some(npw)),
                DeviceFeatures::F16(_) => unreachable!("f32 features"),
            });
        }
    }
    let big = common::one_huge_row(100_000, 16, 5);
    check_gpu_with(&gpu, "one huge row", &big, 64, Precision::F32, "HP npw 8", |g, x, y| match x {
        DeviceFeatures::F32(x) => tcgnn::ops::spmm::hp::spmm_hp_npw(g, None, x, y, Some(8)),
        DeviceFeatures::F16(_) => unreachable!("f32 features"),
    });
}

#[test]
fn gpu_spmm_k_not_multiple_of_8_is_padded() {
    let Some(gpu) = common::gpu_or_skip("gpu_spmm_k_not_multiple_of_8_is_padded") else { return };
    let s = common::random_graph(300, 7, 5, 3);
    for k in [1, 5, 13] {
        check_gpu(&gpu, "n=300", &s, k, Impl::Csr, Precision::F32);
        check_gpu(&gpu, "n=300", &s, k, Impl::Hp, Precision::F32);
    }
}

#[test]
fn host_api_runs_without_gpu() {
    let s = common::random_graph(40, 4, 0, 9);
    let x = Matrix::random(40, 8, 1);
    let g = GraphHandle::new(s.clone(), None);
    let y = tcgnn::ops::spmm::spmm(&g, &x, Impl::Auto, Precision::F32).unwrap();
    assert_eq!(y, spmm_cpu(&s, &x));
    let e = tcgnn::ops::spmm::spmm(&g, &x, Impl::Csr, Precision::F32).unwrap_err();
    assert!(e.to_string().contains("no GPU"), "{e}");
    let bad = Matrix::random(41, 8, 1);
    assert!(tcgnn::ops::spmm::spmm(&g, &bad, Impl::Cpu, Precision::F32).is_err());
}

#[test]
fn gpu_tc8_spmm_matches_reference() {
    use tcgnn::format::worklist::WorkListBuilder;
    use tcgnn::ops::spmm::tc8::{Tc8Config, Tc8Grid, Tc8Source, spmm_tc8_with};
    let Some(gpu) = common::gpu_or_skip("gpu_tc8_spmm_matches_reference") else { return };
    for prec in [Precision::Tf32, Precision::F16] {
        for source in Tc8Source::all(&gpu) {
            for (grid, work_list) in [
                (Tc8Grid::PerItem, WorkListBuilder::Launcher),
                (Tc8Grid::Persistent, WorkListBuilder::Launcher),
                (Tc8Grid::PerItem, WorkListBuilder::Balanced),
            ] {
                let config = Tc8Config { source, grid, work_list };
                let label = format!("Tc8 {config:?}");
                let run = |g: &GraphHandle, x: &DeviceFeatures, y: &mut DeviceMatrix<f32>| spmm_tc8_with(g, x.into(), y, config);
                for (name, s) in common::odd_shapes(13) {
                    for k in [8, 16, 24, 32, 128, 264, 13] {
                        check_gpu_with(&gpu, &name, &s, k, prec, &label, run);
                    }
                }
                // Windows of thousands of blocks: the split path with atomic accumulation.
                let big = common::one_huge_row(60_000, 24, 5);
                for k in [32, 128] {
                    check_gpu_with(&gpu, "n=60000 one huge row", &big, k, prec, &label, run);
                }
                // Many short windows and empty ones: a persistent warp walks hundreds of items.
                let sparse = common::random_graph(40_000, 2, 300, 17);
                check_gpu_with(&gpu, "n=40000 avg degree 2", &sparse, 72, prec, &label, run);
            }
        }
    }
    // And the default through the public entry point.
    for (name, s) in common::odd_shapes(13).into_iter().take(3) {
        check_gpu(&gpu, &name, &s, 128, Impl::Tc8, Precision::F16);
    }
}

/// f16 output (Y in f16 for a next layer that reads f16): every source with an f16-output
/// instance, against the f64 reference at the f16 tolerance, split windows included.
#[test]
fn gpu_tc8_spmm_f16_output_matches_reference() {
    use tcgnn::format::worklist::WorkListBuilder;
    use tcgnn::ops::spmm::tc8::{Tc8Config, Tc8Grid, Tc8Source, spmm_tc8_with};
    let Some(gpu) = common::gpu_or_skip("gpu_tc8_spmm_f16_output_matches_reference") else {
        return;
    };
    let prec = Precision::F16;
    let mut sources = vec![Tc8Source::Registers { tiles: 2 }, Tc8Source::Registers { tiles: 4 }, Tc8Source::CpAsync];
    if Tc8Source::all(&gpu).contains(&Tc8Source::Bulk { stages: 2 }) {
        sources.push(Tc8Source::Bulk { stages: 2 });
    }
    let mut shapes = common::odd_shapes(15);
    shapes.push(("n=60000 one huge row".into(), common::one_huge_row(60_000, 24, 5)));
    for source in sources {
        for (name, s) in &shapes {
            for k in [8, 24, 128, 13] {
                let (x, want) = common::spmm_problem(s, k, prec);
                let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
                let xd = DeviceFeatures::upload(&gpu, &x, prec).unwrap();
                let mut y = DeviceMatrix::<half::f16>::zeros(&gpu, s.n_rows(), k).unwrap();
                y.poison().unwrap();
                spmm_tc8_with(
                    &g,
                    xd.view(),
                    &mut y,
                    Tc8Config {
                        source,
                        grid: if k == 24 { Tc8Grid::Persistent } else { Tc8Grid::PerItem },
                        work_list: WorkListBuilder::Launcher,
                    },
                )
                .unwrap();
                let got = y.download().unwrap();
                let err = rel_error(&got.data, &want);
                println!("Tc8 {source:?} f16 out {name} K={k}: rel err {err:.2e}");
                assert!(err < prec.tolerance(), "Tc8 {source:?} f16 output on {name}, K={k}: relative error {err}");
            }
        }
    }
    // f32 features cannot write f16 output: a clear error, not a wrong answer.
    let s = common::random_graph(64, 4, 0, 3);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let xd = DeviceFeatures::upload(&gpu, &Matrix::random(64, 16, 1), Precision::Tf32).unwrap();
    let mut y = DeviceMatrix::<half::f16>::zeros(&gpu, 64, 16).unwrap();
    let e = spmm_tc8_with(&g, xd.view(), &mut y, Tc8Source::CpAsync).unwrap_err();
    assert!(e.to_string().contains("f16 output"), "{e}");
}

/// FP8: X quantised to e4m3 with a row scale, values rounded to e4m3 in the kernel. Its error
/// against the f64 reference is reported next to f16's and must stay within e4m3's precision
/// (3 mantissa bits: 6.25% per element, averaging down over a row's sum).
#[test]
fn gpu_tc8_e4m3_spmm_error_next_to_f16() {
    use tcgnn::ops::spmm::tc8::{E4m3Features, Tc8Source, spmm_tc8_e4m3, spmm_tc8_with};
    let Some(gpu) = common::gpu_or_skip("gpu_tc8_e4m3_spmm_error_next_to_f16") else { return };
    let (major, minor) = gpu.info().compute_capability;
    if (major, minor) < (8, 9) {
        println!("skipping: e4m3 MMAs need sm_89+");
        return;
    }
    let mut shapes = common::odd_shapes(16);
    shapes.push(("n=60000 one huge row".into(), common::one_huge_row(60_000, 24, 5)));
    shapes.push(("n=40000 avg degree 2".into(), common::random_graph(40_000, 2, 300, 17)));
    for (name, s) in &shapes {
        for k in [8, 24, 128, 13] {
            let (x, want) = common::spmm_problem(s, k, Precision::Tf32);
            let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
            let x32 = DeviceMatrix::<f32>::upload(&gpu, &x).unwrap();
            let mut x8 = E4m3Features::zeros(&gpu, x.rows, x.cols).unwrap();
            x8.quantize(&x32).unwrap();
            // The quantised features themselves: every element within e4m3's rounding of its row.
            let back = x8.dequantize(&gpu).unwrap();
            let qerr = rel_error(&back.data, &x.data.iter().map(|&v| v as f64).collect::<Vec<_>>());
            assert!(qerr < 0.07, "e4m3 quantisation of X on {name}, K={k}: relative error {qerr}");
            let mut y = DeviceMatrix::<f32>::zeros(&gpu, s.n_rows(), k).unwrap();
            y.poison().unwrap();
            spmm_tc8_e4m3(&g, &x8, &mut y, Tc8Source::Auto).unwrap();
            let err8 = rel_error(&y.download().unwrap().data, &want);
            let x16 = DeviceFeatures::upload(&gpu, &x, Precision::F16).unwrap();
            y.poison().unwrap();
            spmm_tc8_with(&g, x16.view(), &mut y, Tc8Source::CpAsync).unwrap();
            let err16 = rel_error(&y.download().unwrap().data, &want);
            println!("Tc8 e4m3 {name} K={k}: rel err {err8:.2e} (f16 {err16:.2e}, X quantisation {qerr:.2e})");
            assert!(err8 < 0.1, "Tc8 e4m3 on {name}, K={k}: relative error {err8}");
        }
    }
    // Only the shared-memory source multiplies whole groups.
    let s = common::random_graph(64, 4, 0, 3);
    let g = GraphHandle::new(s, Some(gpu.clone()));
    let x8 = E4m3Features::zeros(&gpu, 64, 16).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, 64, 16).unwrap();
    let e = spmm_tc8_e4m3(&g, &x8, &mut y, Tc8Source::Registers { tiles: 2 }).unwrap_err();
    assert!(e.to_string().contains("CpAsync"), "{e}");
}

#[test]
fn gpu_cusparse_through_spmm_device_matches_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_cusparse_through_spmm_device_matches_reference") else { return };
    for (name, s) in common::odd_shapes(14) {
        if s.nnz() == 0 {
            continue; // cuSPARSE rejects empty matrices in some versions; ours handle them
        }
        check_gpu(&gpu, &name, &s, 24, Impl::Cusparse, Precision::F32);
        check_gpu(&gpu, &name, &s, 24, Impl::Cusparse, Precision::F16);
    }
}

#[test]
fn gpu_auto_picks_a_correct_kernel() {
    let Some(gpu) = common::gpu_or_skip("gpu_auto_picks_a_correct_kernel") else { return };
    let s = common::random_graph(5000, 20, 9, 21);
    check_gpu(&gpu, "n=5000", &s, 64, Impl::Auto, Precision::Tf32);
    check_gpu(&gpu, "n=5000", &s, 64, Impl::Auto, Precision::F16);
    // Very sparse and scattered (where the CSR kernel is Auto's f16 candidate of choice), at
    // the narrow widths of a GCN.
    let sparse = common::random_graph(200_000, 5, 0, 22);
    for k in [8, 16, 64] {
        check_gpu(&gpu, "n=200000 degree 5", &sparse, k, Impl::Auto, Precision::F16);
    }
}
