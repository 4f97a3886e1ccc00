//! TC16 SpMM (TC-GNN, SGT 16 x 8 blocks): a CPU emulation of the kernel's loop (work items,
//! groups of blocks, A staged from the edges, column gathers, split windows accumulating)
//! against the f64 reference on the odd shapes, then the GPU kernel in tf32 and f16 with every
//! built NT on the same shapes and K.

use crate::common;

use tcgnn::format::sgt::Sgt;
use tcgnn::format::worklist::work_list;
use tcgnn::gpu::{DeviceMatrix, Gpu};
use tcgnn::graph::Csr;
use tcgnn::ops::spmm::cpu::spmm_reference_f64;
use tcgnn::ops::spmm::spmm_device;
use tcgnn::ops::spmm::tc16::spmm_tc16_with;
use tcgnn::ops::{DeviceFeatures, GraphHandle, Impl, Precision};
use tcgnn::shared::config::{TC16_BLOCK_W, TC16_GROUP, TC16_WINDOW};
use tcgnn::tensor::{Matrix, rel_error};

/// Y = S X the way the kernel computes it, item by item, in f64.
fn emulate(s: &Sgt, x: &Matrix, max_blocks: u32) -> Vec<f64> {
    let (bw, win, k) = (TC16_BLOCK_W as usize, TC16_WINDOW as usize, x.cols);
    let wl = work_list((0..s.n_windows()).map(|w| s.blocks_of(w).len() as u32), max_blocks);
    let mut y = vec![f64::NAN; s.n_rows * k];
    for &w in &wl.split_windows {
        for r in (w as usize * win)..((w as usize + 1) * win).min(s.n_rows) {
            y[r * k..(r + 1) * k].fill(0.0);
        }
    }
    for (item, &w) in wl.item_win.iter().enumerate() {
        let w = w as usize;
        let (b_first, b_end) = (wl.item_blocks[2 * item], wl.item_blocks[2 * item + 1]);
        let (c_begin, c_end) = (s.win_ptr[w] as usize, s.win_ptr[w + 1] as usize);
        let bw0 = s.blk_ptr[w] as usize;
        let whole = b_first == 0 && bw0 + b_end as usize >= s.blk_ptr[w + 1] as usize;
        let mut acc = vec![0f64; win * k];
        let mut b = b_first as usize;
        while b < b_end as usize {
            let nb = (b_end as usize - b).min(TC16_GROUP as usize);
            // Stage: tiles[j] for block b + j, edges found by the group boundaries.
            let mut tiles = vec![[0f64; 128]; TC16_GROUP as usize];
            let bound: Vec<u32> = (0..=nb).map(|i| s.blk_edge_ptr[bw0 + b + i]).collect();
            for e in bound[0]..bound[nb] {
                let j = bound[1..nb].iter().filter(|&&bd| e >= bd).count();
                tiles[j][s.blk_edge_pos[e as usize] as usize] += s.blk_edge_val[e as usize] as f64;
            }
            for (j, tile) in tiles.iter().enumerate().take(nb) {
                for col in 0..bw {
                    let c = c_begin + (b + j) * bw + col;
                    if c >= c_end {
                        continue; // the kernel loads zeros for missing columns
                    }
                    let xr = x.row(s.win_cols[c] as usize);
                    for r in 0..win {
                        let a = tile[r * bw + col];
                        for (d, &xv) in xr.iter().enumerate() {
                            acc[r * k + d] += a * xv as f64;
                        }
                    }
                }
            }
            b += TC16_GROUP as usize;
        }
        for r in 0..win {
            let row = w * win + r;
            if row >= s.n_rows {
                continue;
            }
            for d in 0..k {
                let out = &mut y[row * k + d];
                if whole { *out = acc[r * k + d] } else { *out += acc[r * k + d] }
            }
        }
    }
    y
}

/// Run `imp` on the GPU with poisoned output and compare with the f64 reference (inputs rounded
/// to f16 for the f16 reference); names the kernel, graph and K on failure.
/// `nt`: the 8-dim tiles per warp (`None`: through `ops::spmm` with the default).
fn check_gpu(gpu: &std::sync::Arc<Gpu>, name: &str, s: &Csr, k: usize, nt: Option<u32>, prec: Precision) {
    let imp = Impl::Tc16;
    let (x, want) = common::spmm_problem(s, k, prec);
    let g = GraphHandle::new(s.clone(), Some(gpu.clone()));
    let xd = DeviceFeatures::upload(gpu, &x, prec).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(gpu, s.n_rows(), k).unwrap();
    // Twice: the second call reuses the cached format and work list.
    for call in 0..2 {
        y.poison().unwrap();
        match nt {
            Some(_) => spmm_tc16_with(&g, xd.view(), &mut y, nt),
            None => spmm_device(&g, &xd, &mut y, imp),
        }
        .unwrap_or_else(|e| panic!("{imp:?} NT {nt:?} {prec:?} {name} K={k}: {e}"));
        let got = y.download().unwrap();
        let err = rel_error(&got.data, &want);
        let tol = prec.tolerance();
        println!("{imp:?} NT {nt:?} {prec:?} {name} K={k} call {call}: rel err {err:.2e}");
        assert!(err < tol, "{imp:?} NT {nt:?} {prec:?} on {name}, K={k}, call {call}: relative error {err} >= {tol}");
    }
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, |m, d| if d.is_nan() { f64::NAN } else { m.max(d) })
}

fn emulation_cases() -> Vec<(String, Csr)> {
    let mut cases = common::odd_shapes(31);
    // Duplicate (row, col) entries (a non-canonical CSR): the shared atomics must add them.
    let dup = Csr::new(3, 3, vec![0, 3, 3, 4], vec![1, 1, 2, 0], vec![0.5, 0.25, -1.0, 2.0]).unwrap();
    cases.push(("duplicate entries".into(), dup));
    cases
}

#[test]
fn emulated_kernel_loop_matches_reference() {
    for (name, s) in emulation_cases() {
        let sgt = Sgt::from_csr(&s, TC16_BLOCK_W as usize).unwrap();
        for k in [8, 13] {
            let x = Matrix::random(s.n_cols(), k, 3);
            let want = spmm_reference_f64(&s, &x);
            // 1: nearly every window split (atomic path); 2 and 5 cut groups mid-way; big: whole.
            for max_blocks in [1, 2, 5, 1 << 20] {
                let got = emulate(&sgt, &x, max_blocks);
                let err = max_abs_diff(&got, &want);
                // f64 sums in another order than the reference's.
                assert!(err < 1e-6, "{name} K={k} max_blocks={max_blocks}: max error {err}");
            }
        }
    }
}

#[test]
fn gpu_tc16_spmm_matches_reference() {
    let Some(gpu) = common::gpu_or_skip("gpu_tc16_spmm_matches_reference") else { return };
    let rmat = tcgnn::graph::rmat::rmat(tcgnn::graph::rmat::RmatParams::new(14, 16, 7));
    let big = common::one_huge_row(60_000, 24, 5);
    for (prec, nts) in [(Precision::Tf32, [2, 4]), (Precision::F16, [4, 8])] {
        for nt in nts {
            let v = Some(nt);
            for (name, s) in emulation_cases() {
                for k in [8, 16, 24, 32, 64, 128, 264, 13] {
                    check_gpu(&gpu, &name, &s, k, v, prec);
                }
            }
            // Windows of thousands of blocks: the split path with atomic accumulation.
            for k in [32, 128] {
                check_gpu(&gpu, "n=60000 one huge row", &big, k, v, prec);
            }
            check_gpu(&gpu, "R-MAT 2^14 x 16", &rmat, 128, v, prec);
        }
    }
    // Through ops::spmm with Impl::Tc16 (the default NT).
    check_gpu(&gpu, "R-MAT 2^14 x 16", &rmat, 64, None, Precision::Tf32);
    check_gpu(&gpu, "R-MAT 2^14 x 16", &rmat, 64, None, Precision::F16);
}
