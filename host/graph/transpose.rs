//! Aᵀ as CSR with its value map (for every nonzero of Aᵀ, the nonzero of A it came from), on all
//! cores. The serial counting sort visits A's rows in order, so each row of Aᵀ comes out sorted;
//! here every thread owns a block of A's columns (a block of Aᵀ's rows, so a contiguous piece of
//! the output) and runs the same counting sort over all of A restricted to its columns. The
//! result is identical to the serial one, entry for entry; each thread reads `col_idx` twice
//! (count, then place), which costs memory bandwidth, not a second pass of random writes.

use std::ops::Range;

use rayon::prelude::*;

use crate::graph::Csr;
use crate::util::split::split_lengths;

/// Below this many nonzeros the serial sort is as fast as spreading it over threads.
const PARALLEL_MIN_NNZ: usize = 1 << 20;

/// Aᵀ and the map `values_t[i] = values[map[i]]`, on as many column blocks as rayon has threads.
pub fn transpose_with_map(a: &Csr) -> (Csr, Vec<u32>) {
    let threads = rayon::current_num_threads();
    if threads <= 1 || a.nnz() < PARALLEL_MIN_NNZ {
        return transpose_with_map_serial(a);
    }
    transpose_with_map_blocks(a, threads)
}

/// The serial counting sort: the reference the parallel one is tested against.
pub fn transpose_with_map_serial(a: &Csr) -> (Csr, Vec<u32>) {
    let (n, m) = (a.n_rows(), a.n_cols());
    let mut ptr = vec![0u32; m + 1];
    for &c in a.col_idx() {
        ptr[c as usize + 1] += 1;
    }
    for c in 0..m {
        ptr[c + 1] += ptr[c];
    }
    let mut fill = ptr[..m].to_vec();
    let mut rows = vec![0u32; a.nnz()];
    let mut vals = vec![0f32; a.nnz()];
    let mut from = vec![0u32; a.nnz()];
    for r in 0..n {
        for e in a.row_range(r) {
            let p = &mut fill[a.col_idx()[e] as usize];
            rows[*p as usize] = r as u32;
            vals[*p as usize] = a.values()[e];
            from[*p as usize] = e as u32;
            *p += 1;
        }
    }
    (Csr::new(m, n, ptr, rows, vals).expect("transpose of a valid CSR is valid"), from)
}

/// [`transpose_with_map`] with A's columns cut into `blocks` ranges of equal width (public so
/// tests can force many blocks on small graphs).
pub fn transpose_with_map_blocks(a: &Csr, blocks: usize) -> (Csr, Vec<u32>) {
    let (n, m, nnz) = (a.n_rows(), a.n_cols(), a.nnz());
    let width = m.div_ceil(blocks.max(1)).max(1);
    let ranges: Vec<Range<usize>> = (0..m).step_by(width).map(|lo| lo..(lo + width).min(m)).collect();
    let cols = a.col_idx();

    // ptr[c + 1] = entries of column c, each block counting its own columns.
    let mut ptr = vec![0u32; m + 1];
    split_lengths(&mut ptr[1..], ranges.iter().map(|r| r.len())).into_par_iter().zip(&ranges).for_each(|(count, r)| {
        for &c in cols {
            // Columns left of the block wrap to huge values and fail the bound like those right of it.
            if let Some(k) = count.get_mut((c as usize).wrapping_sub(r.start)) {
                *k += 1;
            }
        }
    });
    for c in 0..m {
        ptr[c + 1] += ptr[c];
    }

    let (mut rows, mut vals, mut from) = (vec![0u32; nnz], vec![0f32; nnz], vec![0u32; nnz]);
    let lens: Vec<usize> = ranges.iter().map(|r| (ptr[r.end] - ptr[r.start]) as usize).collect();
    let pieces = split_lengths(&mut rows, lens.iter().copied())
        .into_iter()
        .zip(split_lengths(&mut vals, lens.iter().copied()))
        .zip(split_lengths(&mut from, lens.iter().copied()))
        .zip(&ranges)
        .collect::<Vec<_>>();
    let (row_ptr, values) = (a.row_ptr(), a.values());
    pieces.into_par_iter().for_each(|(((rows, vals), from), r)| {
        let base = ptr[r.start];
        let mut fill: Vec<u32> = ptr[r.start..r.end].iter().map(|&p| p - base).collect();
        for row in 0..n {
            for e in row_ptr[row] as usize..row_ptr[row + 1] as usize {
                if let Some(p) = fill.get_mut((cols[e] as usize).wrapping_sub(r.start)) {
                    let i = *p as usize;
                    rows[i] = row as u32;
                    vals[i] = values[e];
                    from[i] = e as u32;
                    *p += 1;
                }
            }
        }
    });
    (Csr::new(m, n, ptr, rows, vals).expect("transpose of a valid CSR is valid"), from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng::SplitMix64;

    /// A graph with empty rows and columns, one hub row and one hub column, unsorted rows and a
    /// repeated entry: every case the block cut could get wrong.
    fn odd(n: usize, m: usize, seed: u64) -> Csr {
        let mut rng = SplitMix64::new(seed);
        let mut rows = vec![0u32; n + 1];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for r in 0..n {
            let deg = match r {
                _ if r % 5 == 0 => 0,
                1 => m,
                _ => rng.below(6) as usize,
            };
            for _ in 0..deg {
                let c = if rng.below(3) == 0 { m - 1 } else { rng.below(m as u64) as usize };
                cols.push(c as u32);
                vals.push(rng.uniform(-1.0, 1.0));
            }
            rows[r + 1] = cols.len() as u32;
        }
        Csr::new(n, m, rows, cols, vals).unwrap()
    }

    #[test]
    fn blocks_equal_the_serial_sort() {
        for (n, m) in [(1, 1), (7, 3), (40, 97), (300, 31)] {
            let a = odd(n, m, n as u64);
            let reference = transpose_with_map_serial(&a);
            for blocks in [1, 2, 3, 8, 1000] {
                assert_eq!(transpose_with_map_blocks(&a, blocks), reference, "{n} x {m}, {blocks} blocks");
            }
        }
    }

    #[test]
    fn empty_and_one_node_graphs() {
        for a in [Csr::new(0, 0, vec![0], vec![], vec![]).unwrap(), Csr::new(3, 4, vec![0; 4], vec![], vec![]).unwrap()] {
            assert_eq!(transpose_with_map_blocks(&a, 4), transpose_with_map_serial(&a));
        }
        let one = Csr::new(1, 1, vec![0, 1], vec![0], vec![2.5]).unwrap();
        let (t, map) = transpose_with_map_blocks(&one, 4);
        assert_eq!((t, map), (one, vec![0]));
    }

    #[test]
    fn map_points_at_the_same_edge() {
        let a = odd(50, 20, 7);
        let (t, map) = transpose_with_map_blocks(&a, 6);
        for c in 0..t.n_rows() {
            for i in t.row_range(c) {
                let e = map[i] as usize;
                assert_eq!(a.col_idx()[e] as usize, c);
                assert_eq!(a.values()[e], t.values()[i]);
                assert!(a.row_range(t.col_idx()[i] as usize).contains(&e));
            }
        }
    }
}
