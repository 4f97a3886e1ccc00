//! Aᵀ as CSR with its value map (for every nonzero of Aᵀ, the nonzero of A it came from), on all
//! cores and cache-friendly. The serial counting sort writes every edge to a random place of
//! three arrays of nnz entries (on 100M edges, seconds of cache misses). Here the same stable
//! sort runs in two passes, each touching a small working set:
//! 1. chunks of A's rows (in parallel) deal their edges into buckets of `BUCKET_COLS` columns,
//!    each chunk writing sequentially into its own piece of every bucket, straight into the
//!    output arrays (row, value, edge id) and a 16-bit column-in-bucket array;
//! 2. every bucket (in parallel) sorts its edges by column with a counting sort that stays in
//!    cache, and writes its columns' row pointers.
//!
//! Both passes keep the order of equal columns (row order: chunks are consecutive rows and lay out
//! their pieces in chunk order), so the result equals the serial sort's entry for entry.

use std::ops::Range;

use rayon::prelude::*;

use crate::graph::Csr;
use crate::util::split::{default_chunks, split_lengths, window_chunks};

/// Below this many nonzeros the serial sort is as fast as spreading it over threads.
const PARALLEL_MIN_NNZ: usize = 1 << 20;

/// Columns per bucket of pass 2: its counters (256 KiB) stay in a core's L2 cache, and a
/// column's offset in its bucket fits 16 bits.
const BUCKET_COLS: usize = 1 << 16;

/// Aᵀ and the map `values_t[i] = values[map[i]]`.
pub fn transpose_with_map(a: &Csr) -> (Csr, Vec<u32>) {
    if rayon::current_num_threads() <= 1 || a.nnz() < PARALLEL_MIN_NNZ {
        return transpose_with_map_serial(a);
    }
    transpose_with_map_buckets(a, default_chunks(), BUCKET_COLS)
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

/// [`transpose_with_map`] with A's rows dealt in about `chunks` chunks into buckets of
/// `bucket_cols` (1 to 2^16) columns; public so tests can force many of both on small graphs.
pub fn transpose_with_map_buckets(a: &Csr, chunks: usize, bucket_cols: usize) -> (Csr, Vec<u32>) {
    assert!((1..=1 << 16).contains(&bucket_cols), "bucket_cols {bucket_cols} is not in 1..=65536");
    let (n, m, nnz) = (a.n_rows(), a.n_cols(), a.nnz());
    let (row_ptr, cols, values) = (a.row_ptr(), a.col_idx(), a.values());
    let buckets = m.div_ceil(bucket_cols);
    let row_chunks: Vec<Range<usize>> = window_chunks(row_ptr, 1, chunks);
    let edges = |rows: &Range<usize>| row_ptr[rows.start] as usize..row_ptr[rows.end] as usize;

    // Pass 1: edges per (chunk, bucket), then each chunk's piece of each bucket, bucket-major.
    let counts: Vec<Vec<u32>> = row_chunks
        .par_iter()
        .map(|rows| {
            let mut c = vec![0u32; buckets];
            cols[edges(rows)].iter().for_each(|&col| c[col as usize / bucket_cols] += 1);
            c
        })
        .collect();
    let n_chunks = row_chunks.len();
    let piece_len = |b: usize, k: usize| counts[k][b] as usize;
    let lens = || (0..buckets).flat_map(move |b| (0..n_chunks).map(move |k| piece_len(b, k)));
    let (mut rows_t, mut vals_t, mut from) = (vec![0u32; nnz], vec![0f32; nnz], vec![0u32; nnz]);
    let mut local_col = vec![0u16; nnz];
    {
        // Regroup the bucket-major pieces by chunk: chunk k gets its piece of every bucket.
        let mut per_chunk: Vec<Vec<_>> = (0..n_chunks).map(|_| Vec::with_capacity(buckets)).collect();
        let pieces = split_lengths(&mut rows_t, lens())
            .into_iter()
            .zip(split_lengths(&mut vals_t, lens()))
            .zip(split_lengths(&mut from, lens()))
            .zip(split_lengths(&mut local_col, lens()));
        for (i, piece) in pieces.enumerate() {
            per_chunk[i % n_chunks].push(piece);
        }
        per_chunk.into_par_iter().zip(&row_chunks).for_each(|(mut pieces, rows)| {
            let mut fill = vec![0usize; buckets];
            for r in rows.clone() {
                for e in row_ptr[r] as usize..row_ptr[r + 1] as usize {
                    let c = cols[e] as usize;
                    let b = c / bucket_cols;
                    let (((pr, pv), pf), pc) = &mut pieces[b];
                    let i = fill[b];
                    pr[i] = r as u32;
                    pv[i] = values[e];
                    pf[i] = e as u32;
                    pc[i] = (c % bucket_cols) as u16;
                    fill[b] = i + 1;
                }
            }
        });
    }

    // Pass 2: a stable counting sort by column inside each bucket, and the buckets' row pointers.
    let bucket_len: Vec<usize> = (0..buckets).map(|b| (0..n_chunks).map(|k| piece_len(b, k)).sum()).collect();
    let bucket_start: Vec<usize> = bucket_len.iter().scan(0, |s, &l| Some(std::mem::replace(s, *s + l))).collect();
    let mut ptr = vec![0u32; m + 1];
    let col_lens = (0..buckets).map(|b| bucket_cols.min(m - b * bucket_cols));
    let work: Vec<_> = split_lengths(&mut rows_t, bucket_len.iter().copied())
        .into_iter()
        .zip(split_lengths(&mut vals_t, bucket_len.iter().copied()))
        .zip(split_lengths(&mut from, bucket_len.iter().copied()))
        .zip(split_lengths(&mut local_col, bucket_len.iter().copied()))
        .zip(split_lengths(&mut ptr[1..], col_lens))
        .zip(bucket_start)
        .collect();
    work.into_par_iter().for_each(|(((((rows, vals), from), local), ptr), start)| {
        let (r0, v0, f0) = (rows.to_vec(), vals.to_vec(), from.to_vec());
        let mut fill = vec![0u32; ptr.len() + 1];
        local.iter().for_each(|&c| fill[c as usize + 1] += 1);
        for c in 0..ptr.len() {
            fill[c + 1] += fill[c];
            ptr[c] = (start + fill[c + 1] as usize) as u32;
        }
        for (i, &c) in local.iter().enumerate() {
            let p = fill[c as usize] as usize;
            rows[p] = r0[i];
            vals[p] = v0[i];
            from[p] = f0[i];
            fill[c as usize] += 1;
        }
    });
    drop(local_col);
    (Csr::new(m, n, ptr, rows_t, vals_t).expect("transpose of a valid CSR is valid"), from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng::SplitMix64;

    /// A graph with empty rows and columns, one hub row and one hub column, unsorted rows and
    /// repeated entries: every case the chunk and bucket cuts could get wrong.
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
    fn buckets_equal_the_serial_sort() {
        for (n, m) in [(1, 1), (7, 3), (40, 97), (300, 31)] {
            let a = odd(n, m, n as u64);
            let reference = transpose_with_map_serial(&a);
            for (chunks, bucket_cols) in [(1, 1 << 16), (2, 1), (3, 2), (8, 7), (1000, 16)] {
                assert_eq!(
                    transpose_with_map_buckets(&a, chunks, bucket_cols),
                    reference,
                    "{n} x {m}, {chunks} chunks, {bucket_cols}-column buckets"
                );
            }
        }
    }

    #[test]
    fn empty_and_one_node_graphs() {
        for a in [Csr::new(0, 0, vec![0], vec![], vec![]).unwrap(), Csr::new(3, 4, vec![0; 4], vec![], vec![]).unwrap()] {
            assert_eq!(transpose_with_map_buckets(&a, 4, 3), transpose_with_map_serial(&a));
        }
        let one = Csr::new(1, 1, vec![0, 1], vec![0], vec![2.5]).unwrap();
        let (t, map) = transpose_with_map_buckets(&one, 4, 3);
        assert_eq!((t, map), (one, vec![0]));
    }

    #[test]
    fn map_points_at_the_same_edge() {
        let a = odd(50, 20, 7);
        let (t, map) = transpose_with_map_buckets(&a, 6, 4);
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
