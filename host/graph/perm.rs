//! Node permutations: a reordering is applied to rows, columns and features at once
//! (B = P A P^T, X' = P X) and undone on outputs (Y = P^T Y').

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;

/// A bijection of 0..n. `new_to_old[i]` is the old id of the node placed at new position i;
/// `old_to_new` is its inverse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation {
    new_to_old: Vec<u32>,
    old_to_new: Vec<u32>,
}

impl Permutation {
    pub fn identity(n: usize) -> Self {
        let v: Vec<u32> = (0..n as u32).collect();
        Permutation { new_to_old: v.clone(), old_to_new: v }
    }

    /// A uniformly random permutation of 0..n (Fisher-Yates on a SplitMix64 stream): the same
    /// seed gives the same permutation on every platform.
    pub fn random(n: usize, seed: u64) -> Self {
        let mut rng = crate::util::rng::SplitMix64::new(seed);
        let mut new_to_old: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            new_to_old.swap(i, j);
        }
        Self::from_new_to_old(new_to_old).expect("a shuffle of 0..n is a bijection")
    }

    /// From the list of old ids in their new order; fails unless it is a bijection of 0..n.
    pub fn from_new_to_old(new_to_old: Vec<u32>) -> Result<Self> {
        let n = new_to_old.len();
        let mut old_to_new = vec![u32::MAX; n];
        for (new, &old) in new_to_old.iter().enumerate() {
            let slot = old_to_new.get_mut(old as usize).ok_or_else(|| Error::InvalidGraph(format!("permutation entry {old} >= {n}")))?;
            if *slot != u32::MAX {
                return Err(Error::InvalidGraph(format!("permutation repeats node {old}")));
            }
            *slot = new as u32;
        }
        Ok(Permutation { new_to_old, old_to_new })
    }

    pub fn len(&self) -> usize {
        self.new_to_old.len()
    }
    pub fn is_empty(&self) -> bool {
        self.new_to_old.is_empty()
    }
    pub fn new_to_old(&self) -> &[u32] {
        &self.new_to_old
    }
    pub fn old_to_new(&self) -> &[u32] {
        &self.old_to_new
    }
    pub fn inverse(&self) -> Permutation {
        Permutation { new_to_old: self.old_to_new.clone(), old_to_new: self.new_to_old.clone() }
    }

    /// P A P^T: row and column ids both renamed; rows stay sorted by column.
    pub fn apply_to_csr(&self, a: &Csr) -> Result<Csr> {
        self.check(a.n_rows(), "rows")?;
        self.check(a.n_cols(), "columns")?;
        let n = a.n_rows();
        let mut row_ptr = Vec::with_capacity(n + 1);
        row_ptr.push(0u32);
        for &old in &self.new_to_old {
            let last = *row_ptr.last().unwrap();
            row_ptr.push(last + a.row_len(old as usize) as u32);
        }
        let mut cols = vec![0u32; a.nnz()];
        let mut vals = vec![0f32; a.nnz()];
        let lens = (0..n).map(|i| (row_ptr[i + 1] - row_ptr[i]) as usize);
        let cparts = crate::util::split::split_lengths(&mut cols, lens.clone());
        let vparts = crate::util::split::split_lengths(&mut vals, lens);
        cparts.into_par_iter().zip(vparts).enumerate().with_min_len(256).for_each(|(new, (c, v))| {
            let old = self.new_to_old[new] as usize;
            let mut row: Vec<(u32, f32)> = a.row(old).map(|(col, val)| (self.old_to_new[col as usize], val)).collect();
            row.sort_by_key(|e| e.0);
            for (k, (col, val)) in row.into_iter().enumerate() {
                c[k] = col;
                v[k] = val;
            }
        });
        Csr::new(n, n, row_ptr, cols, vals)
    }

    /// Rows of a row-major n x width matrix (features) moved to their new positions.
    pub fn apply_to_rows<T: Copy + Send + Sync>(&self, x: &[T], width: usize) -> Result<Vec<T>> {
        permute_rows(&self.new_to_old, x, width)
    }

    /// Undo [`Permutation::apply_to_rows`] (outputs back to the original node order).
    pub fn undo_on_rows<T: Copy + Send + Sync>(&self, x: &[T], width: usize) -> Result<Vec<T>> {
        permute_rows(&self.old_to_new, x, width)
    }

    /// Per-node values (labels, masks) moved to their new positions.
    pub fn apply_to_nodes<T: Clone>(&self, v: &[T]) -> Result<Vec<T>> {
        self.check(v.len(), "node values")?;
        Ok(self.new_to_old.iter().map(|&o| v[o as usize].clone()).collect())
    }

    fn check(&self, n: usize, what: &str) -> Result<()> {
        if n != self.len() {
            return Err(Error::Shape(format!("permutation of {} nodes applied to {n} {what}", self.len())));
        }
        Ok(())
    }
}

/// out[i] = x[src[i]] row by row.
fn permute_rows<T: Copy + Send + Sync>(src: &[u32], x: &[T], width: usize) -> Result<Vec<T>> {
    if x.len() != src.len() * width {
        return Err(Error::Shape(format!("{} values are not {} rows of {width}", x.len(), src.len())));
    }
    if width == 0 {
        return Ok(Vec::new());
    }
    let mut out = x.to_vec();
    out.par_chunks_mut(width).zip(src.par_iter()).for_each(|(row, &s)| {
        row.copy_from_slice(&x[s as usize * width..(s as usize + 1) * width]);
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_and_undo() {
        let p = Permutation::from_new_to_old(vec![2, 0, 1]).unwrap();
        assert_eq!(p.old_to_new(), &[1, 2, 0]);
        let x = [10, 11, 20, 21, 30, 31];
        let y = p.apply_to_rows(&x, 2).unwrap();
        assert_eq!(y, vec![30, 31, 10, 11, 20, 21]);
        assert_eq!(p.undo_on_rows(&y, 2).unwrap(), x.to_vec());
        // Edge 0 -> 2 becomes 1 -> 0.
        let a = Csr::from_triplets(3, 3, &[(0, 2, 5.0)]).unwrap();
        let b = p.apply_to_csr(&a).unwrap();
        assert_eq!(b.row(1).collect::<Vec<_>>(), vec![(0, 5.0)]);
        assert_eq!(p.inverse().apply_to_csr(&b).unwrap(), a);
        assert!(Permutation::from_new_to_old(vec![0, 0]).is_err());
        assert!(Permutation::from_new_to_old(vec![3]).is_err());
    }

    #[test]
    fn random_is_seeded_and_mixes() {
        let p = Permutation::random(1000, 7);
        assert_eq!(p, Permutation::random(1000, 7));
        assert_ne!(p, Permutation::random(1000, 8));
        let fixed = p.new_to_old().iter().enumerate().filter(|&(i, &o)| i as u32 == o).count();
        assert!(fixed < 10, "{fixed} fixed points of 1000");
        assert_eq!(Permutation::random(0, 1).len(), 0);
        assert_eq!(Permutation::random(1, 1).new_to_old(), &[0]);
    }
}
