//! GCN's Â = D^-1/2 (A + I) D^-1/2 in one parallel pass over A, writing Â's arrays once.
//!
//! The plain way (`ops::gcn_normalize_serial`: copy A, merge an identity in row by row through
//! per-row vectors, sum the rows, scale in a serial loop) took most of the model build on a
//! 100M-edge graph. Here every row finds where its self-loop goes (binary search in its sorted
//! columns), the row sums are taken in the same order as the merged row (so D, and Â, are
//! bit-identical to the plain way), and chunks of rows write disjoint pieces of the output.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::ops::square;
use crate::util::split::{default_chunks, split_lengths, window_chunks};

/// Where row r's self-loop is: `Ok(i)` an existing entry at row offset i, `Err(i)` to be
/// inserted before offset i.
type Diagonal = std::result::Result<usize, usize>;

/// Â for A: self-loops of weight 1 where missing (existing ones keep their weight, as PyG's
/// `gcn_norm`), D the row sums of A + I. Negative or NaN weights are refused (a row sum could
/// be zero or negative and D^-1/2 silently 0 or NaN).
pub fn gcn_normalize(a: &Csr) -> Result<Csr> {
    if let Some(e) = a.values().par_iter().position_first(|&v| v.is_nan() || v < 0.0) {
        let r = a.row_ptr().partition_point(|&p| p as usize <= e) - 1;
        return Err(Error::InvalidGraph(format!(
            "GCN normalisation needs non-negative edge weights; edge ({r}, {}) has {}",
            a.col_idx()[e],
            a.values()[e]
        )));
    }
    square(a, "add self-loops")?;
    let n = a.n_rows();
    let canonical = (0..n).into_par_iter().all(|r| a.col_idx()[a.row_range(r)].windows(2).all(|w| w[0] < w[1]));
    let owned;
    let a = if canonical {
        a
    } else {
        owned = a.canonical();
        &owned
    };

    let diag: Vec<Diagonal> = (0..n).into_par_iter().map(|r| a.col_idx()[a.row_range(r)].binary_search(&(r as u32))).collect();
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0u64);
    for r in 0..n {
        let len = a.row_range(r).len() + usize::from(diag[r].is_err());
        row_ptr.push(row_ptr[r] + len as u64);
    }
    let total = row_ptr[n];
    if total >= 1 << 31 {
        return Err(Error::InvalidGraph(format!("{total} nonzeros exceed 32-bit indices")));
    }
    let row_ptr: Vec<u32> = row_ptr.into_iter().map(|p| p as u32).collect();

    // D^-1/2 with D summed in f64 in the merged row's order.
    let inv_sqrt: Vec<f64> = (0..n)
        .into_par_iter()
        .map(|r| {
            let v = &a.values()[a.row_range(r)];
            let d: f64 = match diag[r] {
                Ok(_) => v.iter().map(|&x| x as f64).sum(),
                Err(i) => v[..i].iter().map(|&x| x as f64).chain(std::iter::once(1.0)).chain(v[i..].iter().map(|&x| x as f64)).sum(),
            };
            if d > 0.0 { 1.0 / d.sqrt() } else { 0.0 }
        })
        .collect();

    let (mut cols, mut vals) = (vec![0u32; total as usize], vec![0f32; total as usize]);
    let chunks = window_chunks(&row_ptr, 1, default_chunks());
    let lens = || chunks.iter().map(|c| (row_ptr[c.end] - row_ptr[c.start]) as usize);
    let pieces: Vec<_> = split_lengths(&mut cols, lens()).into_iter().zip(split_lengths(&mut vals, lens())).zip(&chunks).collect();
    pieces.into_par_iter().for_each(|((cols, vals), rows)| {
        let mut out = 0;
        for r in rows.clone() {
            let (c, v) = (&a.col_idx()[a.row_range(r)], &a.values()[a.row_range(r)]);
            let mut put = |col: u32, x: f32| {
                cols[out] = col;
                vals[out] = (inv_sqrt[r] * x as f64 * inv_sqrt[col as usize]) as f32;
                out += 1;
            };
            let split = match diag[r] {
                Ok(i) | Err(i) => i,
            };
            c[..split].iter().zip(&v[..split]).for_each(|(&c, &x)| put(c, x));
            if diag[r].is_err() {
                put(r as u32, 1.0);
            }
            c[split..].iter().zip(&v[split..]).for_each(|(&c, &x)| put(c, x));
        }
    });
    Csr::new(n, n, row_ptr, cols, vals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ops::gcn_normalize_serial;
    use crate::util::rng::SplitMix64;

    /// Random weights, some rows with their self-loop (of any weight), some empty, one hub row
    /// and, unless `canonical`, unsorted rows with repeated entries.
    fn graph(n: usize, canonical: bool, seed: u64) -> Csr {
        let mut rng = SplitMix64::new(seed);
        let mut t = Vec::new();
        for r in 0..n as u32 {
            let deg = if r == 1 {
                n as u64
            } else if r % 4 == 0 {
                0
            } else {
                rng.below(5)
            };
            for _ in 0..deg {
                t.push((r, rng.below(n as u64) as u32, rng.uniform(0.0, 3.0)));
            }
            if r % 3 == 0 {
                t.push((r, r, rng.uniform(0.0, 2.0)));
            }
        }
        let a = Csr::from_triplets(n, n, &t).unwrap();
        if canonical {
            return a;
        }
        // Reverse every row and repeat its first entry: not canonical, same matrix after summing.
        let (mut rows, mut cols, mut vals) = (vec![0u32], Vec::new(), Vec::new());
        for r in 0..n {
            let row: Vec<(u32, f32)> = a.row(r).collect();
            for &(c, v) in row.iter().rev().chain(row.first()) {
                cols.push(c);
                vals.push(v);
            }
            rows.push(cols.len() as u32);
        }
        Csr::new(n, n, rows, cols, vals).unwrap()
    }

    #[test]
    fn equals_the_serial_normalisation_bit_for_bit() {
        for n in [1, 2, 17, 300] {
            for canonical in [true, false] {
                let a = graph(n, canonical, n as u64);
                assert_eq!(gcn_normalize(&a).unwrap(), gcn_normalize_serial(&a).unwrap(), "n = {n}, canonical {canonical}");
            }
        }
        let empty = Csr::new(0, 0, vec![0], vec![], vec![]).unwrap();
        assert_eq!(gcn_normalize(&empty).unwrap(), gcn_normalize_serial(&empty).unwrap());
    }

    #[test]
    fn refuses_what_the_serial_one_refuses() {
        let neg = Csr::from_triplets(3, 3, &[(0, 1, 1.0), (2, 0, -1.0)]).unwrap();
        let msg = gcn_normalize(&neg).unwrap_err().to_string();
        assert!(msg.contains("edge (2, 0) has -1"), "{msg}");
        assert_eq!(msg, gcn_normalize_serial(&neg).unwrap_err().to_string());
        let nan = Csr::new(2, 2, vec![0, 0, 1], vec![1], vec![f32::NAN]).unwrap();
        assert!(gcn_normalize(&nan).is_err());
        let rect = Csr::from_triplets(2, 3, &[(0, 2, 1.0)]).unwrap();
        assert_eq!(gcn_normalize(&rect).unwrap_err().to_string(), gcn_normalize_serial(&rect).unwrap_err().to_string());
    }
}
