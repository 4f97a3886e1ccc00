//! Whole-graph operations on CSR: transpose (CSR <-> CSC), symmetrize, self-loops, duplicates,
//! degrees and the GCN normalisation D^-1/2 (A + I) D^-1/2.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;

pub use crate::graph::perm::Permutation;

/// A^T as CSR (equivalently: A in CSC form). Counting sort by column: rows of the result come
/// out sorted when A's rows are visited in order.
pub fn transpose(a: &Csr) -> Csr {
    transpose_with_map(a).0
}

/// A^T as CSR, and for every nonzero of A^T the index of the nonzero of A it came from
/// (so `values_t[i] = values[map[i]]`). On all cores: see [`crate::graph::transpose`].
pub fn transpose_with_map(a: &Csr) -> (Csr, Vec<u32>) {
    crate::graph::transpose::transpose_with_map(a)
}

/// Whether `a` is its own transpose array for array: square and canonical (rows sorted, no
/// repeated entry), every entry (r, c) matched by an entry (c, r) whose value has the same bits.
/// Then [`transpose`] gives back `a`'s very arrays, so a product with Aᵀ may run as one with A
/// (same arrays, same sums in the same order). On all cores; false at the first mismatch.
pub fn is_symmetric(a: &Csr) -> bool {
    if a.n_rows() != a.n_cols() {
        return false;
    }
    let (cols, vals) = (a.col_idx(), a.values());
    (0..a.n_rows()).into_par_iter().with_min_len(1024).all(|r| {
        let range = a.row_range(r);
        cols[range.clone()].windows(2).all(|w| w[0] < w[1])
            && range.clone().all(|k| {
                let c = cols[k] as usize;
                let row_c = a.row_range(c);
                match cols[row_c.clone()].binary_search(&(r as u32)) {
                    Ok(i) => vals[row_c.start + i].to_bits() == vals[k].to_bits(),
                    Err(_) => false,
                }
            })
    })
}

/// Compressed sparse columns: column j's entries are `row_idx[col_ptr[j]..col_ptr[j+1]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Csc {
    pub n_rows: usize,
    pub n_cols: usize,
    pub col_ptr: Vec<u32>,
    pub row_idx: Vec<u32>,
    pub values: Vec<f32>,
}

impl Csc {
    pub fn from_csr(a: &Csr) -> Csc {
        let (n_cols, n_rows, col_ptr, row_idx, values) = transpose(a).into_parts();
        Csc { n_rows, n_cols, col_ptr, row_idx, values }
    }
    pub fn to_csr(&self) -> Result<Csr> {
        let t = Csr::new(self.n_cols, self.n_rows, self.col_ptr.clone(), self.row_idx.clone(), self.values.clone())?;
        Ok(transpose(&t))
    }
}

/// Sorted columns and duplicate (row, col) entries merged by summing (what `Csr::canonical`
/// does; named for graph code that thinks of it as deduplication).
pub fn deduplicate(a: &Csr) -> Csr {
    a.canonical()
}

/// Same pattern, every value 1.
pub fn pattern(a: &Csr) -> Csr {
    let nnz = a.nnz();
    a.clone().with_values(vec![1.0; nnz]).expect("same length")
}

/// The union of A and A^T: entry (i, j) present if (i, j) or (j, i) is. Its value is a_ij when
/// present, else a_ji (so a symmetric input is returned unchanged). Square matrices only.
pub fn symmetrize(a: &Csr) -> Result<Csr> {
    square(a, "symmetrize")?;
    let a = if a.is_canonical() { a.clone() } else { a.canonical() };
    let t = transpose(&a);
    merge_rows(&a, &t)
}

/// Sorted merge, row by row, of two canonical matrices of the same shape; `first` wins ties.
fn merge_rows(first: &Csr, second: &Csr) -> Result<Csr> {
    let n = first.n_rows();
    let rows: Vec<(Vec<u32>, Vec<f32>)> = (0..n)
        .into_par_iter()
        .with_min_len(512)
        .map(|r| {
            let (mut c, mut v) = (Vec::new(), Vec::new());
            let (mut x, mut y) = (first.row(r).peekable(), second.row(r).peekable());
            loop {
                let take = match (x.peek(), y.peek()) {
                    (None, None) => break,
                    (Some(_), None) => x.next(),
                    (None, Some(_)) => y.next(),
                    (Some(p), Some(q)) if p.0 < q.0 => x.next(),
                    (Some(p), Some(q)) if p.0 > q.0 => y.next(),
                    _ => {
                        y.next();
                        x.next()
                    }
                };
                let (col, val) = take.expect("peeked");
                c.push(col);
                v.push(val);
            }
            (c, v)
        })
        .collect();
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0u32);
    let total: usize = rows.iter().map(|r| r.0.len()).sum();
    if total >= 1 << 31 {
        return Err(Error::InvalidGraph(format!("{total} nonzeros exceed 32-bit indices")));
    }
    let (mut cols, mut vals) = (Vec::with_capacity(total), Vec::with_capacity(total));
    for (c, v) in rows {
        cols.extend(c);
        vals.extend(v);
        row_ptr.push(cols.len() as u32);
    }
    Csr::new(n, first.n_cols(), row_ptr, cols, vals)
}

/// Give every node a self-loop of value `fill` where it has none; existing diagonal entries
/// keep their value (PyG's `add_remaining_self_loops`). Square matrices only.
pub fn add_self_loops(a: &Csr, fill: f32) -> Result<Csr> {
    square(a, "add self-loops")?;
    let n = a.n_rows();
    let diag: Vec<(u32, u32, f32)> = (0..n as u32).map(|i| (i, i, fill)).collect();
    let eye = Csr::from_triplets(n, n, &diag)?;
    let a = if a.is_canonical() { a.clone() } else { a.canonical() };
    merge_rows(&a, &eye)
}

/// Drop diagonal entries.
pub fn remove_self_loops(a: &Csr) -> Csr {
    let mut trip = Vec::with_capacity(a.nnz());
    for r in 0..a.n_rows() {
        trip.extend(a.row(r).filter(|&(c, _)| c as usize != r).map(|(c, v)| (r as u32, c, v)));
    }
    Csr::from_triplets(a.n_rows(), a.n_cols(), &trip).expect("entries of a valid CSR")
}

/// Entries per row (out-degree of a graph stored source -> target).
pub fn out_degrees(a: &Csr) -> Vec<u32> {
    a.row_ptr().windows(2).map(|w| w[1] - w[0]).collect()
}

/// Entries per column (in-degree).
pub fn in_degrees(a: &Csr) -> Vec<u32> {
    let mut d = vec![0u32; a.n_cols()];
    for &c in a.col_idx() {
        d[c as usize] += 1;
    }
    d
}

/// Sum of the values of each row (weighted degree).
pub fn row_sums(a: &Csr) -> Vec<f64> {
    (0..a.n_rows()).into_par_iter().map(|r| a.row(r).map(|(_, v)| v as f64).sum()).collect()
}

/// Min, mean and max of the row lengths (0, 0, 0 for no rows).
pub fn degree_summary(a: &Csr) -> (u32, f64, u32) {
    let d = out_degrees(a);
    if d.is_empty() {
        return (0, 0.0, 0);
    }
    let (min, max) = (d.iter().copied().min().unwrap(), d.iter().copied().max().unwrap());
    (min, a.nnz() as f64 / d.len() as f64, max)
}

/// Kipf & Welling's propagation matrix D^-1/2 (A + I) D^-1/2, with D the row sums of A + I.
/// Self-loops are added where missing (existing ones keep their weight, as PyG's `gcn_norm`).
///
/// Negative edge weights are refused: a row sum can then be zero or negative, and D^-1/2 would
/// be silently replaced by 0 or become NaN.
pub fn gcn_normalize(a: &Csr) -> Result<Csr> {
    crate::graph::gcn_norm::gcn_normalize(a)
}

/// [`gcn_normalize`] the plain way (self-loops merged in, row sums, one scaling pass): the
/// reference the one-pass parallel version is tested against.
pub fn gcn_normalize_serial(a: &Csr) -> Result<Csr> {
    if let Some(e) = a.values().iter().position(|&v| v.is_nan() || v < 0.0) {
        let r = a.row_ptr().partition_point(|&p| p as usize <= e) - 1;
        return Err(Error::InvalidGraph(format!(
            "GCN normalisation needs non-negative edge weights; edge ({r}, {}) has {}",
            a.col_idx()[e],
            a.values()[e]
        )));
    }
    let ai = add_self_loops(a, 1.0)?;
    let inv_sqrt: Vec<f64> = row_sums(&ai).into_iter().map(|d| if d > 0.0 { 1.0 / d.sqrt() } else { 0.0 }).collect();
    let mut vals = ai.values().to_vec();
    for r in 0..ai.n_rows() {
        for e in ai.row_range(r) {
            let c = ai.col_idx()[e] as usize;
            // The degrees' product first: (r, c) and (c, r) then round alike, so a symmetric
            // weighted A gives an Â that is symmetric bit for bit (`is_symmetric`).
            vals[e] = (inv_sqrt[r] * inv_sqrt[c] * vals[e] as f64) as f32;
        }
    }
    ai.with_values(vals)
}

pub(crate) fn square(a: &Csr, what: &str) -> Result<()> {
    if a.n_rows() != a.n_cols() {
        return Err(Error::Shape(format!("{what} needs a square matrix, got {} x {}", a.n_rows(), a.n_cols())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(n: usize, t: &[(u32, u32, f32)]) -> Csr {
        Csr::from_triplets(n, n, t).unwrap()
    }

    #[test]
    fn transpose_and_csc() {
        let a = Csr::from_triplets(2, 3, &[(0, 2, 1.0), (1, 0, 2.0), (1, 2, 3.0)]).unwrap();
        let t = transpose(&a);
        assert_eq!((t.n_rows(), t.n_cols()), (3, 2));
        assert_eq!(t.row(2).collect::<Vec<_>>(), vec![(0, 1.0), (1, 3.0)]);
        assert_eq!(transpose(&t), a);
        let csc = Csc::from_csr(&a);
        assert_eq!(csc.col_ptr, vec![0, 1, 1, 3]);
        assert_eq!(csc.to_csr().unwrap(), a);
    }

    #[test]
    fn symmetrize_keeps_forward_values() {
        let a = m(3, &[(0, 1, 5.0), (1, 0, 7.0), (2, 0, 1.0)]);
        let s = symmetrize(&a).unwrap();
        assert_eq!(s, m(3, &[(0, 1, 5.0), (1, 0, 7.0), (2, 0, 1.0), (0, 2, 1.0)]));
        assert_eq!(symmetrize(&s).unwrap(), s);
        assert!(symmetrize(&Csr::from_triplets(2, 3, &[]).unwrap()).is_err());
    }

    #[test]
    fn self_loops_and_gcn() {
        let a = m(3, &[(0, 1, 1.0), (1, 0, 1.0), (2, 2, 4.0)]);
        let l = add_self_loops(&a, 1.0).unwrap();
        assert_eq!(l, m(3, &[(0, 0, 1.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 1.0), (2, 2, 4.0)]));
        assert_eq!(remove_self_loops(&l), m(3, &[(0, 1, 1.0), (1, 0, 1.0)]));
        let g = gcn_normalize(&a).unwrap();
        // Degrees of A + I (keeping the existing loop of 4): 2, 2, 4.
        assert_eq!(g.values(), &[0.5, 0.5, 0.5, 0.5, 1.0]);
        assert_eq!(out_degrees(&l), vec![2, 2, 1]);
        assert_eq!(in_degrees(&a), vec![1, 1, 1]);
        assert_eq!(degree_summary(&l), (1, 5.0 / 3.0, 2));
        let dup = Csr::new(1, 2, vec![0, 3], vec![1, 0, 1], vec![1.0, 2.0, 3.0]).unwrap();
        assert_eq!(deduplicate(&dup).values(), &[2.0, 4.0]);
        assert_eq!(pattern(&dup).values(), &[1.0; 3]);
    }
}
