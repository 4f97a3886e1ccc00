//! GPU translation (CSR -> ME-BCRS, CSR -> SGT) against the CPU translation, array by array and
//! bit for bit. Skips without a GPU; the index arithmetic it shares with the kernels is tested
//! on the CPU in `tcgnn::gpu::translate::plan`.

use crate::common;

use std::sync::Arc;

use common::{datasets_dir, gpu_or_skip, odd_shapes, random_graph};
use tcgnn::format::{MeBcrs, Sgt};
use tcgnn::gpu::Gpu;
use tcgnn::gpu::translate::{mebcrs_on_gpu, sgt_on_gpu};
use tcgnn::graph::Csr;
use tcgnn::util::rng::SplitMix64;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn check_mebcrs(gpu: &Arc<Gpu>, name: &str, csr: &Csr) {
    let want = MeBcrs::from_csr(csr, 8).unwrap();
    let got = mebcrs_on_gpu(gpu, csr).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!((got.n_rows, got.n_cols, got.k), (want.n_rows, want.n_cols, want.k), "{name}: shape");
    assert_eq!(got.win_ptr, want.win_ptr, "{name}: win_ptr");
    assert_eq!(got.vec_col, want.vec_col, "{name}: vec_col");
    assert_eq!(got.csr_to_slot, want.csr_to_slot, "{name}: csr_to_slot");
    assert_eq!(bits(&got.values), bits(&want.values), "{name}: values");
    got.validate().unwrap();
}

fn check_sgt(gpu: &Arc<Gpu>, name: &str, csr: &Csr) {
    for bw in [8, 16] {
        let want = Sgt::from_csr(csr, bw).unwrap();
        let got = sgt_on_gpu(gpu, csr, bw).unwrap_or_else(|e| panic!("{name} (block_w {bw}): {e}"));
        assert_eq!(got.win_ptr, want.win_ptr, "{name} {bw}: win_ptr");
        assert_eq!(got.win_cols, want.win_cols, "{name} {bw}: win_cols");
        assert_eq!(got.blk_ptr, want.blk_ptr, "{name} {bw}: blk_ptr");
        assert_eq!(got.edge_to_col, want.edge_to_col, "{name} {bw}: edge_to_col");
        assert_eq!(got.blk_edge_ptr, want.blk_edge_ptr, "{name} {bw}: blk_edge_ptr");
        assert_eq!(got.blk_edge_pos, want.blk_edge_pos, "{name} {bw}: blk_edge_pos");
        assert_eq!(got.blk_edge_csr, want.blk_edge_csr, "{name} {bw}: blk_edge_csr");
        assert_eq!(bits(&got.blk_edge_val), bits(&want.blk_edge_val), "{name} {bw}: blk_edge_val");
        got.validate().unwrap();
    }
}

fn check_both(gpu: &Arc<Gpu>, name: &str, csr: &Csr) {
    check_mebcrs(gpu, name, csr);
    check_sgt(gpu, name, csr);
}

/// Rows with unsorted columns and repeated entries (not canonical): ME-BCRS adds repeats into
/// one slot in CSR order, SGT keeps them as separate edges; `dense_rows` rows get `wide` edges
/// over few columns (long windows with many repeats, sorted on the large path when wide).
fn messy_graph(n: usize, avg_deg: usize, dense_rows: usize, wide: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let (mut row_ptr, mut cols, mut vals) = (vec![0u32], Vec::new(), Vec::new());
    for r in 0..n {
        let (deg, span) = if r < dense_rows { (wide, n.min(64)) } else { (rng.below(2 * avg_deg as u64 + 1) as usize, n) };
        for _ in 0..deg {
            cols.push(rng.below(span as u64) as u32);
            vals.push(rng.uniform(-1.0, 1.0));
        }
        row_ptr.push(cols.len() as u32);
    }
    Csr::new(n, n, row_ptr, cols, vals).unwrap()
}

#[test]
fn odd_shapes_match_the_cpu() {
    let Some(gpu) = gpu_or_skip("odd_shapes_match_the_cpu") else { return };
    for (name, csr) in odd_shapes(11) {
        check_both(&gpu, &name, &csr);
    }
    // Windows of exactly SORT_SMEM_KEYS edges and one more (small/large boundary).
    for len in [4096usize, 4097, 9000] {
        let t: Vec<_> = (0..len as u32).map(|i| (i % 8, i, 1.0 + i as f32)).collect();
        check_both(&gpu, &format!("one window of {len} edges"), &Csr::from_triplets(8, len, &t).unwrap());
    }
}

#[test]
fn repeated_entries_match_the_cpu() {
    let Some(gpu) = gpu_or_skip("repeated_entries_match_the_cpu") else { return };
    for (i, (n, deg, dense, wide)) in [(40, 6, 3, 50), (1000, 10, 8, 700), (3000, 8, 16, 6000)].into_iter().enumerate() {
        let csr = messy_graph(n, deg, dense, wide, 100 + i as u64);
        assert!(!csr.is_canonical());
        check_both(&gpu, &format!("messy n={n}"), &csr);
    }
    check_both(&gpu, "random n=5000", &random_graph(5000, 9, 11, 5));
}

#[test]
fn rmat_2_14_matches_the_cpu() {
    let Some(gpu) = gpu_or_skip("rmat_2_14_matches_the_cpu") else { return };
    let csr = tcgnn::graph::rmat::rmat(tcgnn::graph::rmat::RmatParams::new(14, 16, 3));
    check_both(&gpu, "R-MAT 2^14", &csr);
}

#[test]
fn cora_matches_the_cpu() {
    let Some(gpu) = gpu_or_skip("cora_matches_the_cpu") else { return };
    let p = datasets_dir().join("cora.mtx.gz");
    if !p.exists() {
        println!("cora_matches_the_cpu: skipped: {} not found (set TCGNN_DATASETS)", p.display());
        return;
    }
    let csr = tcgnn::graph::mtx::read_mtx(&p).unwrap();
    check_both(&gpu, "cora", &csr);
}

#[test]
fn graph_handle_translates_on_the_gpu_like_the_cpu() {
    // The product path: a handle with a GPU translates there; its host copies and every TC8
    // product equal a CPU-translating handle's, bit for bit.
    let Some(gpu) = gpu_or_skip("graph_handle_translates_on_the_gpu_like_the_cpu") else { return };
    use tcgnn::ops::handle::Translate;
    use tcgnn::ops::{GraphHandle, Impl, Precision};
    for (name, csr) in odd_shapes(11).into_iter().chain([("random 5000".to_string(), random_graph(5000, 9, 7, 3))]) {
        let on_gpu = GraphHandle::new(csr.clone(), Some(gpu.clone()));
        let on_cpu = GraphHandle::new(csr.clone(), Some(gpu.clone())).with_translation(Translate::Cpu);
        let (a, b) = (on_gpu.mebcrs(8).unwrap(), on_cpu.mebcrs(8).unwrap());
        assert_eq!((&a.win_ptr, &a.vec_col, &a.csr_to_slot), (&b.win_ptr, &b.vec_col, &b.csr_to_slot), "{name}");
        assert_eq!(bits(&a.values), bits(&b.values), "{name}: values");
        let (x, _) = common::spmm_problem(&csr, 24, Precision::Tf32);
        let ya = tcgnn::ops::spmm::spmm(&on_gpu, &x, Impl::Tc8, Precision::Tf32).unwrap();
        let yb = tcgnn::ops::spmm::spmm(&on_cpu, &x, Impl::Tc8, Precision::Tf32).unwrap();
        // Split windows add with atomics: equal up to the order of those additions.
        let diff = ya.data.iter().zip(&yb.data).map(|(p, q)| (p - q).abs() as f64).fold(0.0, f64::max);
        let scale = yb.data.iter().map(|v| v.abs() as f64).fold(1e-30, f64::max);
        assert!(diff / scale < 1e-6, "{name}: TC8 product through the GPU translation differs by {diff:e}");
    }
}
