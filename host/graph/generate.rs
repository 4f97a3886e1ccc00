//! Synthetic graphs: small deterministic shapes for tests, and a stochastic block model with
//! label-correlated features and train/val/test masks for accuracy tests at any size.
//! (R-MAT power-law graphs live in [`crate::graph::rmat`].)

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::npz::{Features, NodeData, Split};
use crate::util::rng::SplitMix64;

fn from_edges(n: usize, edges: impl IntoIterator<Item = (u32, u32)>) -> Csr {
    let trip: Vec<(u32, u32, f32)> = edges.into_iter().map(|(a, b)| (a, b, 1.0)).collect();
    Csr::from_triplets(n, n, &trip).expect("generated ids are in range")
}

/// Undirected path 0 - 1 - ... - (n-1), both directions stored.
pub fn path(n: usize) -> Csr {
    from_edges(n, (1..n as u32).flat_map(|i| [(i - 1, i), (i, i - 1)]))
}

/// Undirected star: node 0 linked with every other node.
pub fn star(n: usize) -> Csr {
    from_edges(n, (1..n as u32).flat_map(|i| [(0, i), (i, 0)]))
}

/// Complete graph without self-loops.
pub fn complete(n: usize) -> Csr {
    let n32 = n as u32;
    from_edges(n, (0..n32).flat_map(|i| (0..n32).filter(move |&j| j != i).map(move |j| (i, j))))
}

/// rows x cols 4-neighbour grid, node id = r * cols + c, both directions stored.
pub fn grid(rows: usize, cols: usize) -> Csr {
    let id = |r: usize, c: usize| (r * cols + c) as u32;
    let mut e = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            if c + 1 < cols {
                e.extend([(id(r, c), id(r, c + 1)), (id(r, c + 1), id(r, c))]);
            }
            if r + 1 < rows {
                e.extend([(id(r, c), id(r + 1, c)), (id(r + 1, c), id(r, c))]);
            }
        }
    }
    from_edges(rows * cols, e)
}

/// n x n matrix whose row `row` is full (every column) and every other row empty: the most
/// unbalanced load a kernel can get.
pub fn dense_row(n: usize, row: usize) -> Result<Csr> {
    if row >= n.max(1) || n == 0 {
        return Err(Error::Shape(format!("row {row} of a {n}-node graph")));
    }
    Ok(from_edges(n, (0..n as u32).map(|c| (row as u32, c))))
}

/// Stochastic block model parameters.
#[derive(Clone, Copy, Debug)]
pub struct SbmParams {
    pub n: usize,
    /// Classes (= blocks); node i's class is drawn uniformly.
    pub classes: usize,
    /// Mean degree of the undirected graph.
    pub avg_degree: f64,
    /// Probability that an edge stays inside its class (homophily); 1/classes = no signal.
    pub p_in: f64,
    /// Feature width.
    pub features: usize,
    /// Noise added to the class centroid (relative to centroid entries of magnitude 1).
    pub noise: f32,
    /// Fractions of nodes in train and validation masks; the rest is test.
    pub train_frac: f64,
    pub val_frac: f64,
    pub seed: u64,
}

impl SbmParams {
    pub fn new(n: usize, classes: usize, seed: u64) -> Self {
        SbmParams { n, classes, avg_degree: 10.0, p_in: 0.8, features: 32, noise: 2.0, train_frac: 0.6, val_frac: 0.2, seed }
    }
}

/// A stochastic block model graph (undirected, no self-loops, unit values) and its node data.
///
/// Edges: each node starts avg_degree / 2 edges; the other end is in the same class with
/// probability p_in, else in a uniformly chosen class. Features: a random +-1 centroid per class
/// plus uniform noise in [-noise, noise], so both structure and features predict the label.
/// O(n * avg_degree) time and memory, so it works at any size.
pub fn sbm(p: SbmParams) -> Result<(Csr, NodeData)> {
    if p.classes == 0 || p.n < p.classes || !(0.0..=1.0).contains(&p.p_in) || !(p.avg_degree.is_finite() && p.avg_degree >= 0.0) {
        return Err(Error::Unsupported(format!(
            "SBM parameters {p:?}: need 1 <= classes <= n, 0 <= p_in <= 1 and a finite mean degree >= 0"
        )));
    }
    let stored_edges = p.n as f64 * p.avg_degree;
    if p.n as u64 > crate::graph::spec::MAX_NODES || stored_edges > crate::graph::spec::MAX_NNZ as f64 {
        return Err(Error::Unsupported(format!(
            "SBM of {} nodes and mean degree {}: over 2^31 - 2 nodes or 2^31 - 1 stored edges",
            p.n, p.avg_degree
        )));
    }
    if p.features == 0 {
        return Err(Error::Unsupported("SBM with 0 features: node classification needs at least one".into()));
    }
    if !(p.noise.is_finite() && p.noise >= 0.0) {
        return Err(Error::Unsupported(format!("SBM feature noise {}: need a finite value >= 0", p.noise)));
    }
    // Edge pairs, their split into two arrays and the CSR (~40 bytes a stored edge), the
    // features, labels and masks.
    let per_node = (p.features as u64).saturating_mul(4).saturating_add(16);
    let need = (40 * stored_edges as u64).saturating_add(crate::util::memory::bytes_of(p.n as u64, per_node));
    crate::util::memory::check_host_alloc(need, &format!("an SBM of {} nodes x {} features", p.n, p.features))?;
    if !(p.train_frac >= 0.0 && p.val_frac >= 0.0 && p.train_frac + p.val_frac <= 1.0) {
        return Err(Error::Unsupported(format!("train/val fractions {} + {}", p.train_frac, p.val_frac)));
    }
    let n = p.n;
    let mut rng = SplitMix64::new(p.seed);
    let y: Vec<i64> = (0..n).map(|i| if i < p.classes { i as i64 } else { rng.below(p.classes as u64) as i64 }).collect();
    // Members of each class, to draw same-class neighbours.
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); p.classes];
    for (i, &c) in y.iter().enumerate() {
        members[c as usize].push(i as u32);
    }
    let half = p.avg_degree / 2.0;
    let chunk = 4096;
    let edges: Vec<(u32, u32)> = (0..n.div_ceil(chunk))
        .into_par_iter()
        .flat_map_iter(|ci| {
            let mut rng = SplitMix64::new(SplitMix64::new(p.seed ^ 0x5B5B ^ ((ci as u64) << 20)).next_u64());
            let (y, members) = (&y, &members);
            (ci * chunk..((ci + 1) * chunk).min(n)).flat_map(move |u| {
                // Round half up or down at random so the mean degree is exact on average.
                let k = half.floor() as usize + usize::from(rng.next_f64() < half.fract());
                let mut out = Vec::with_capacity(2 * k);
                for _ in 0..k {
                    let class = if rng.next_f64() < p.p_in { y[u] as usize } else { rng.below(p.classes as u64) as usize };
                    let m = &members[class];
                    let v = m[rng.below(m.len() as u64) as usize];
                    if v as usize != u {
                        out.push((u as u32, v));
                        out.push((v, u as u32));
                    }
                }
                out
            })
        })
        .collect();
    let (src, dst): (Vec<u32>, Vec<u32>) = edges.into_iter().unzip();
    let g = Csr::from_coo(n, n, &src, &dst, None)?;
    let nnz = g.nnz();
    let g = g.with_values(vec![1.0; nnz])?;

    let f = p.features;
    let centroids: Vec<f32> = (0..p.classes * f).map(|_| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 }).collect();
    let mut x = vec![0f32; n * f];
    x.par_chunks_mut(f.max(1)).enumerate().for_each(|(i, row)| {
        let mut r = SplitMix64::new(p.seed.wrapping_mul(31).wrapping_add(i as u64) ^ 0xFEA7);
        let c = y[i] as usize;
        for (j, v) in row.iter_mut().enumerate() {
            *v = centroids[c * f + j] + r.uniform(-p.noise, p.noise);
        }
    });
    // Split by a random order of the nodes.
    let mut order: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let n_train = (p.train_frac * n as f64).round() as usize;
    let n_val = ((p.val_frac * n as f64).round() as usize).min(n - n_train);
    let mut split = Split { train: vec![false; n], val: vec![false; n], test: vec![false; n] };
    for (k, &i) in order.iter().enumerate() {
        let mask = if k < n_train {
            &mut split.train
        } else if k < n_train + n_val {
            &mut split.val
        } else {
            &mut split.test
        };
        mask[i as usize] = true;
    }
    let data = NodeData {
        x: Features::Dense { n, f, data: x },
        y,
        split: Some(split),
        splits_all: Vec::new(),
        class_names: (0..p.classes).map(|c| format!("class{c}")).collect(),
    };
    Ok((g, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_shapes() {
        assert_eq!(path(4).nnz(), 6);
        assert_eq!(path(1).nnz(), 0);
        assert_eq!(star(5).row_len(0), 4);
        assert_eq!(complete(4).nnz(), 12);
        let g = grid(3, 4);
        assert_eq!((g.n_rows(), g.nnz()), (12, 2 * (3 * 3 + 2 * 4)));
        let d = dense_row(10, 3).unwrap();
        assert_eq!((d.row_len(3), d.nnz()), (10, 10));
        assert!(dense_row(0, 0).is_err());
        assert_eq!(path(0).n_rows(), 0);
    }

    #[test]
    fn sbm_is_homophilous_and_split() {
        let (g, d) = sbm(SbmParams::new(2000, 4, 3)).unwrap();
        assert_eq!(g, sbm(SbmParams::new(2000, 4, 3)).unwrap().0);
        assert_eq!(g, crate::graph::ops::symmetrize(&g).unwrap());
        let mean = g.nnz() as f64 / 2000.0;
        assert!((8.0..=10.5).contains(&mean), "mean degree {mean}");
        let same = (0..2000).flat_map(|r| g.row(r).map(move |(c, _)| (r, c))).filter(|&(r, c)| d.y[r] == d.y[c as usize]).count();
        assert!(same as f64 > 0.75 * g.nnz() as f64);
        let s = d.split.as_ref().unwrap();
        let count = |m: &Vec<bool>| m.iter().filter(|&&b| b).count();
        assert_eq!((count(&s.train), count(&s.val), count(&s.test)), (1200, 400, 400));
        assert!((0..2000).all(|i| s.train[i] as u8 + s.val[i] as u8 + s.test[i] as u8 == 1));
        assert_eq!(d.n_classes(), 4);
        // Features carry the label: nearest class mean (from train nodes) classifies test nodes.
        let Features::Dense { f, data, .. } = &d.x else { panic!("dense features") };
        let mut means = vec![0f64; 4 * f];
        let mut counts = [0f64; 4];
        for i in (0..2000).filter(|&i| s.train[i]) {
            counts[d.y[i] as usize] += 1.0;
            for j in 0..*f {
                means[d.y[i] as usize * f + j] += data[i * f + j] as f64;
            }
        }
        let dist = |i: usize, c: usize| -> f64 { (0..*f).map(|j| (data[i * f + j] as f64 - means[c * f + j] / counts[c]).powi(2)).sum() };
        let test: Vec<usize> = (0..2000).filter(|&i| s.test[i]).collect();
        let right = test.iter().filter(|&&i| (0..4).min_by(|&a, &b| dist(i, a).total_cmp(&dist(i, b))) == Some(d.y[i] as usize)).count();
        assert!(right as f64 > 0.9 * test.len() as f64, "{right} of {}", test.len());
        assert!(sbm(SbmParams::new(3, 4, 0)).is_err());
    }
}
