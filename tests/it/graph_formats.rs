//! Property tests on random graphs (SplitMix64): every translation round-trips to the same CSR
//! and its block counts agree with a direct count; graph operations keep their invariants.
//! Shapes include empty windows, N not a multiple of 8 or 16, a single dense row, one node and
//! the empty graph.

use std::collections::BTreeSet;

use tcgnn::format::{Coo, MEBCRS_WINDOW, MeBcrs, SGT_WINDOW, Sgt};
use tcgnn::graph::mtx::{parse_mtx, write_mtx_to};
use tcgnn::graph::ops::{symmetrize, transpose};
use tcgnn::graph::{Csr, Permutation};
use tcgnn::util::rng::SplitMix64;

/// A random n_rows x n_cols matrix of one of several shapes; values uniform in [-1, 1) and
/// never exactly 0, so "a stored zero" always means padding.
fn random_graph(rng: &mut SplitMix64, n_rows: usize, n_cols: usize, shape: u64) -> Csr {
    let mut t: Vec<(u32, u32, f32)> = Vec::new();
    let val = |rng: &mut SplitMix64| {
        let v = rng.uniform(-1.0, 1.0);
        if v == 0.0 { 0.5 } else { v }
    };
    if n_rows > 0 && n_cols > 0 {
        match shape {
            // Uniform random edges.
            0 => {
                let m = rng.below(6 * n_rows as u64 + 1);
                for _ in 0..m {
                    t.push((rng.below(n_rows as u64) as u32, rng.below(n_cols as u64) as u32, val(rng)));
                }
            }
            // Only some 16-row bands have edges: many empty windows.
            1 => {
                for r in 0..n_rows {
                    if (r / 16) % 3 == 1 {
                        for _ in 0..rng.below(5) {
                            t.push((r as u32, rng.below(n_cols as u64) as u32, val(rng)));
                        }
                    }
                }
            }
            // One dense row plus a sprinkle.
            2 => {
                let row = rng.below(n_rows as u64) as u32;
                for c in 0..n_cols as u32 {
                    t.push((row, c, val(rng)));
                }
                for _ in 0..n_rows / 4 {
                    t.push((rng.below(n_rows as u64) as u32, rng.below(n_cols as u64) as u32, val(rng)));
                }
            }
            // Banded (local columns: dense blocks).
            _ => {
                for r in 0..n_rows {
                    for _ in 0..rng.below(8) {
                        let c = (r + rng.below(12) as usize).min(n_cols - 1);
                        t.push((r as u32, c as u32, val(rng)));
                    }
                }
            }
        }
    }
    let g = Csr::from_triplets(n_rows, n_cols, &t).unwrap();
    // Summed duplicates could cancel to 0; nudge them so values stay nonzero.
    let vals = g.values().iter().map(|&v| if v == 0.0 { 0.25 } else { v }).collect();
    g.with_values(vals).unwrap()
}

fn sizes() -> Vec<(usize, usize)> {
    vec![(0, 0), (1, 1), (1, 5), (7, 7), (8, 8), (9, 9), (15, 20), (16, 16), (17, 17), (33, 40), (100, 100), (257, 300), (1000, 1000)]
}

fn direct_block_count(g: &Csr, window: usize, width: usize) -> usize {
    (0..g.n_rows().div_ceil(window))
        .map(|w| {
            let rows = w * window..((w + 1) * window).min(g.n_rows());
            let cols: BTreeSet<u32> = rows.flat_map(|r| g.row(r).map(|(c, _)| c)).collect();
            cols.len().div_ceil(width)
        })
        .sum()
}

#[test]
fn sgt_round_trips_and_counts_blocks() {
    let mut rng = SplitMix64::new(11);
    for (n, m) in sizes() {
        for shape in 0..4 {
            let g = random_graph(&mut rng, n, m, shape);
            for bw in [8, 16] {
                let s = Sgt::from_csr(&g, bw).unwrap();
                s.validate().unwrap();
                assert_eq!(s.to_csr().unwrap(), g, "{n}x{m} shape {shape} bw {bw}");
                assert_eq!(s.n_windows(), n.div_ceil(SGT_WINDOW));
                assert_eq!(s.n_blocks(), direct_block_count(&g, SGT_WINDOW, bw), "{n}x{m} shape {shape} bw {bw}");
                assert_eq!(s.blk_edge_ptr.len(), s.n_blocks() + 1);
                // Inside a block every (row, col) position is filled at most once.
                for b in 0..s.n_blocks() {
                    let pos: BTreeSet<u8> =
                        s.blk_edge_pos[s.blk_edge_ptr[b] as usize..s.blk_edge_ptr[b + 1] as usize].iter().copied().collect();
                    assert_eq!(pos.len(), (s.blk_edge_ptr[b + 1] - s.blk_edge_ptr[b]) as usize);
                    assert!(pos.iter().all(|&p| (p as usize) < SGT_WINDOW * bw));
                }
                // Window columns sorted and unique.
                for w in 0..s.n_windows() {
                    assert!(s.cols_of(w).windows(2).all(|p| p[0] < p[1]));
                }
            }
        }
    }
}

#[test]
fn mebcrs_round_trips_and_counts_blocks() {
    let mut rng = SplitMix64::new(12);
    for (n, m) in sizes() {
        for shape in 0..4 {
            let g = random_graph(&mut rng, n, m, shape);
            for k in [4, 8, 16] {
                let b = MeBcrs::from_csr(&g, k).unwrap();
                b.validate().unwrap();
                let ctx = format!("{n}x{m} shape {shape} k {k}");
                assert_eq!(b.to_csr().unwrap(), g, "{ctx}");
                assert_eq!(b.n_windows(), n.div_ceil(MEBCRS_WINDOW), "{ctx}");
                assert_eq!(b.n_blocks(), direct_block_count(&g, MEBCRS_WINDOW, k), "{ctx}");
                assert_eq!(b.values.len(), 8 * b.n_vectors(), "{ctx}");
                // Every nonzero is in exactly one slot and everything else is 0.
                assert_eq!(b.values.iter().filter(|&&v| v != 0.0).count(), g.nnz(), "{ctx}");
                for (e, &slot) in b.csr_to_slot.iter().enumerate() {
                    assert_eq!(b.values[slot as usize], g.values()[e], "{ctx}");
                }
                for w in 0..b.n_windows() {
                    let v = &b.vec_col[b.win_ptr[w] as usize..b.win_ptr[w + 1] as usize];
                    assert!(v.windows(2).all(|p| p[0] < p[1]), "{ctx}");
                }
            }
        }
    }
}

#[test]
fn unsorted_rows_round_trip() {
    // CSR with unsorted (but unique) columns: both translations give the same matrix back.
    let g = Csr::new(3, 20, vec![0, 3, 3, 5], vec![9, 2, 17, 4, 0], vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    assert!(!g.is_canonical());
    assert_eq!(Sgt::from_csr(&g, 8).unwrap().to_csr().unwrap(), g);
    assert_eq!(MeBcrs::from_csr(&g, 8).unwrap().to_csr().unwrap(), g);
    assert_eq!(Coo::from_csr(&g).to_csr().unwrap(), g);
}

#[test]
fn coo_round_trips() {
    let mut rng = SplitMix64::new(13);
    for (n, m) in sizes() {
        let shape = rng.below(4);
        let g = random_graph(&mut rng, n, m, shape);
        let c = Coo::from_csr(&g);
        assert!(c.row.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(c.to_csr().unwrap(), g);
    }
}

#[test]
fn graph_ops_invariants() {
    let mut rng = SplitMix64::new(14);
    for (n, _) in sizes() {
        let shape = rng.below(4);
        let g = random_graph(&mut rng, n, n, shape);
        assert_eq!(transpose(&transpose(&g)), g);
        let s = symmetrize(&g).unwrap();
        assert_eq!(transpose(&s).col_idx(), s.col_idx());
        // A random permutation and its inverse.
        let mut order: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let p = Permutation::from_new_to_old(order).unwrap();
        let pg = p.apply_to_csr(&g).unwrap();
        assert_eq!(pg.nnz(), g.nnz());
        assert!(pg.is_canonical());
        assert_eq!(p.inverse().apply_to_csr(&pg).unwrap(), g);
        // Features move with their nodes: (P A P^T)(P x) = P (A x).
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let ax: Vec<f64> = (0..n).map(|r| g.row(r).map(|(c, v)| v as f64 * x[c as usize] as f64).sum()).collect();
        let px = p.apply_to_rows(&x, 1).unwrap();
        let pax: Vec<f64> = (0..n).map(|r| pg.row(r).map(|(c, v)| v as f64 * px[c as usize] as f64).sum()).collect();
        let back = p.undo_on_rows(&pax, 1).unwrap();
        for (a, b) in ax.iter().zip(&back) {
            assert!((a - b).abs() < 1e-9 * (1.0 + a.abs()));
        }
    }
}

#[test]
fn mtx_text_round_trips() {
    let mut rng = SplitMix64::new(15);
    for (n, m) in sizes() {
        let shape = rng.below(4);
        let g = random_graph(&mut rng, n, m, shape);
        let text = write_mtx_to(Vec::new(), &g).unwrap();
        assert_eq!(parse_mtx(&text[..], std::path::Path::new("r.mtx")).unwrap(), g);
    }
}

/// `is_symmetric` (what lets a model's adjacency hold one side, issue 42 item 4): true exactly
/// when the transpose gives back the very arrays.
#[test]
fn is_symmetric_means_transpose_gives_the_same_arrays() {
    use tcgnn::graph::ops::is_symmetric;
    let m = |n: usize, t: &[(u32, u32, f32)]| Csr::from_triplets(n, n, t).unwrap();
    let sym = m(4, &[(0, 1, 2.0), (1, 0, 2.0), (1, 1, 5.0), (2, 3, -1.0), (3, 2, -1.0)]);
    assert!(is_symmetric(&sym));
    assert_eq!(transpose(&sym), sym);
    // A value that differs in its bits only (-0 against 0), a missing mirror, a non-square
    // matrix, a repeated entry: none is.
    assert!(!is_symmetric(&m(2, &[(0, 1, 0.0), (1, 0, -0.0)])));
    assert!(!is_symmetric(&m(3, &[(0, 1, 1.0), (1, 0, 1.0), (2, 0, 1.0)])));
    assert!(!is_symmetric(&Csr::from_triplets(2, 3, &[(0, 1, 1.0), (1, 0, 1.0)]).unwrap()));
    let repeated = Csr::new(2, 2, vec![0, 2, 3], vec![1, 1, 0], vec![1.0, 1.0, 1.0]).unwrap();
    assert!(!is_symmetric(&repeated));
    // Empty rows and an empty matrix are symmetric.
    assert!(is_symmetric(&m(3, &[(0, 2, 1.0), (2, 0, 1.0)])));
    assert!(is_symmetric(&m(0, &[])));
    // GCN's Â of a symmetric weighted graph is symmetric bit for bit (what lets a part pull in
    // its backward), whatever the weights; a directed one's is not.
    let mut rng = tcgnn::util::rng::SplitMix64::new(11);
    let mut t = Vec::new();
    for _ in 0..2000 {
        let (i, j, w) = (rng.below(300) as u32, rng.below(300) as u32, rng.uniform(0.01, 7.0));
        t.extend([(i, j, w), (j, i, w)]);
    }
    let weighted = tcgnn::graph::ops::symmetrize(&Csr::from_triplets(300, 300, &t).unwrap()).unwrap();
    assert!(is_symmetric(&weighted));
    assert!(is_symmetric(&tcgnn::graph::ops::gcn_normalize(&weighted).unwrap()));
    assert!(!is_symmetric(&tcgnn::graph::ops::gcn_normalize(&m(3, &[(0, 1, 1.0), (1, 2, 2.0)])).unwrap()));
}
