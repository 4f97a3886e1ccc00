//! The hybrid split (FTC-GNN on ME-BCRS): the two sides always partition the nonzeros, the
//! statistics agree with the partition, and S_tc X + S_cc X = S X exactly (CPU, f64).

use tcgnn::format::MeBcrs;
use tcgnn::format::hybrid::{CostModel, hybrid_partition, hybrid_stats};
use tcgnn::graph::Csr;
use tcgnn::graph::rmat::{RmatParams, rmat};
use tcgnn::ops::spmm::cpu::spmm_reference_f64;
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

/// A random graph: `n` rows, `m` columns, about `nnz` entries (duplicates kept, so not
/// canonical), clustered columns so that dense vectors occur, plus one heavy row.
fn random_graph(rng: &mut SplitMix64, n: usize, m: usize, nnz: usize) -> Csr {
    let mut rows = Vec::new();
    let mut cols = Vec::new();
    for _ in 0..nnz {
        let r = rng.below(n as u64) as u32;
        let c = if rng.below(2) == 0 { (r as u64 / 8 * 3 + rng.below(4)) % m as u64 } else { rng.below(m as u64) };
        rows.push(r);
        cols.push(c as u32);
    }
    if n > 0 && m > 0 {
        let heavy = rng.below(n as u64) as u32;
        for c in 0..m.min(200) {
            rows.push(heavy);
            cols.push(c as u32);
        }
    }
    // Dyadic values (multiples of 1/8 in [-4, 4]): every sum below is exact in f64.
    let vals: Vec<f32> = (0..rows.len()).map(|_| (rng.below(65) as f32 - 32.0) / 8.0).collect();
    let mut row_ptr = vec![0u32; n + 1];
    for &r in &rows {
        row_ptr[r as usize + 1] += 1;
    }
    for i in 0..n {
        row_ptr[i + 1] += row_ptr[i];
    }
    // Keep duplicates and insertion order: a valid, non-canonical CSR.
    let mut fill = row_ptr.clone();
    let mut c2 = vec![0u32; rows.len()];
    let mut v2 = vec![0f32; rows.len()];
    for i in 0..rows.len() {
        let p = &mut fill[rows[i] as usize];
        c2[*p as usize] = cols[i];
        v2[*p as usize] = vals[i];
        *p += 1;
    }
    Csr::new(n, m, row_ptr, c2, v2).unwrap()
}

fn integer_features(rng: &mut SplitMix64, rows: usize, k: usize) -> Matrix {
    Matrix::from_vec(rows, k, (0..rows * k).map(|_| rng.below(17) as f32 - 8.0).collect()).unwrap()
}

fn triplets(g: &Csr) -> Vec<(usize, u32, u32)> {
    let mut t: Vec<_> = (0..g.n_rows()).flat_map(|r| g.row(r).map(move |(c, v)| (r, c, v.to_bits()))).collect();
    t.sort_unstable();
    t
}

/// Property: for random graphs, every t and every block width, the parts partition the
/// canonical nonzeros, the statistics count them, and the parts multiply to S X exactly.
#[test]
fn sides_always_partition_the_nonzeros() {
    let mut rng = SplitMix64::new(0x4b1d);
    let mut shapes = vec![(1, 1, 1), (7, 5, 10), (8, 8, 64), (9, 30, 40), (0, 4, 0), (4, 0, 0), (33, 33, 0)];
    for _ in 0..40 {
        let n = 1 + rng.below(300) as usize;
        let m = 1 + rng.below(300) as usize;
        shapes.push((n, m, rng.below(8 * n as u64) as usize));
    }
    for (case, &(n, m, nnz)) in shapes.iter().enumerate() {
        let g = random_graph(&mut rng, n, m, nnz);
        let canon = g.canonical();
        let st = hybrid_stats(&g).unwrap();
        assert_eq!(st.nnz, canon.nnz(), "case {case}");
        assert_eq!(st.vectors, MeBcrs::from_csr(&canon, 8).unwrap().n_vectors());
        let x = integer_features(&mut rng, m, 8);
        let full = spmm_reference_f64(&canon, &x);
        for t in 1..=9 {
            let sp = st.split(t);
            assert_eq!(sp.tc_nnz + sp.cc_nnz, sp.nnz, "case {case} t {t}");
            assert_eq!(sp.tc_vectors + sp.cc_vectors, sp.vectors, "case {case} t {t}");
            for k in [4, 8, 16] {
                let p = hybrid_partition(&g, t, k).unwrap();
                assert_eq!((p.tc_edges.len(), p.cc.nnz()), (sp.tc_nnz, sp.cc_nnz), "case {case} t {t} k {k}");
                assert_eq!(p.tc.n_vectors(), sp.tc_vectors);
                if k == 8 {
                    assert_eq!(p.tc.n_blocks(), sp.tc_blocks, "case {case} t {t}");
                }
                let mut cc_rows = p.cc.row.clone();
                cc_rows.dedup();
                assert_eq!(cc_rows.len(), sp.cc_rows, "case {case} t {t}");
                // Every canonical edge on exactly one side.
                let mut edges: Vec<u32> = p.tc_edges.iter().chain(&p.cc_edges).copied().collect();
                edges.sort_unstable();
                assert_eq!(edges, (0..canon.nnz() as u32).collect::<Vec<_>>());
                // S_tc + S_cc = S, entry for entry (values bit-exact).
                let mut both = triplets(&p.tc.to_csr().unwrap());
                both.extend(triplets(&p.cc.to_csr().unwrap()));
                both.sort_unstable();
                assert_eq!(both, triplets(&canon), "case {case} t {t} k {k}");
                // Tensor-core vectors hold >= t nonzeros, CUDA-core entries sit in sparser ones.
                for w in 0..p.tc.n_windows() {
                    for v in p.tc.win_ptr[w] as usize..p.tc.win_ptr[w + 1] as usize {
                        let col = p.tc.vec_col[v];
                        let count = (w * 8..(w * 8 + 8).min(n)).filter(|&r| canon.row(r).any(|(c, _)| c == col)).count();
                        assert!(count >= t, "case {case} t {t}: TC vector with {count} nonzeros");
                    }
                }
                // The CPU reference of the two parts, read block by block, equals S X in f64.
                assert_eq!(p.spmm_reference_f64(&x).unwrap(), full, "case {case} t {t} k {k}");
            }
        }
    }
}

/// On a power-law graph with random values and features: parts summed agree with the full
/// product to rounding, the expected singleton share shows, and the models pick a threshold.
#[test]
fn rmat_split() {
    let g = tcgnn::graph::source::with_random_values(rmat(RmatParams::new(13, 8, 3)), 5);
    let st = hybrid_stats(&g).unwrap();
    assert!(st.histogram[0] * 2 > st.vectors, "power law: singletons dominate {:?}", st.histogram);
    let x = Matrix::random(g.n_cols(), 16, 9);
    let full = spmm_reference_f64(&g, &x);
    for t in [1, 2, 4] {
        let y = hybrid_partition(&g, t, 8).unwrap().spmm_reference_f64(&x).unwrap();
        let scale = full.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let diff = y.iter().zip(&full).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(diff <= 1e-12 * scale, "t {t}: {diff}");
    }
    for m in [CostModel::TF32_K128, CostModel::F16_K128] {
        let c = m.choose(&st);
        assert!((1..=4).contains(&c.t));
        assert!(st.splits().iter().all(|s| m.seconds(&c) <= m.seconds(s)));
    }
}
