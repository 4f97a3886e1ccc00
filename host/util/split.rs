//! Work splitting for rayon: cut a CSR's rows (or row windows) into chunks of similar nonzero
//! counts, and cut output arrays at the same boundaries so chunks write disjoint slices.

use std::ops::Range;

/// Chunks of windows (`window_rows` rows each; the last may be partial) whose nonzero counts are
/// about `nnz / target_chunks` each. Power-law graphs have windows with very different loads, so
/// splitting by window count alone would leave one thread with most of the work.
pub fn window_chunks(row_ptr: &[u32], window_rows: usize, target_chunks: usize) -> Vec<Range<usize>> {
    let n_rows = row_ptr.len().saturating_sub(1);
    let n_windows = n_rows.div_ceil(window_rows.max(1));
    let nnz = row_ptr.last().copied().unwrap_or(0) as usize;
    // Also bound the number of windows per chunk, so graphs with few edges still spread out.
    let per_chunk_nnz = (nnz / target_chunks.max(1)).max(1);
    let per_chunk_windows = (n_windows / target_chunks.max(1)).max(1);
    let mut chunks = Vec::with_capacity(target_chunks + 1);
    let mut start = 0usize;
    while start < n_windows {
        let nnz_start = row_ptr[start * window_rows] as usize;
        let mut end = start + 1;
        while end < n_windows
            && end - start < per_chunk_windows
            && (row_ptr[(end * window_rows).min(n_rows)] as usize) - nnz_start < per_chunk_nnz
        {
            end += 1;
        }
        chunks.push(start..end);
        start = end;
    }
    chunks
}

/// How many chunks to aim for: a few per thread so rayon can balance uneven ones.
pub fn default_chunks() -> usize {
    4 * rayon::current_num_threads().max(1)
}

/// Split `s` into consecutive pieces of the given lengths (which must sum to at most `s.len()`).
pub fn split_lengths<T>(mut s: &mut [T], lengths: impl IntoIterator<Item = usize>) -> Vec<&mut [T]> {
    let mut out = Vec::new();
    for len in lengths {
        let (head, tail) = std::mem::take(&mut s).split_at_mut(len);
        out.push(head);
        s = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_all_windows_once() {
        let row_ptr: Vec<u32> = (0..=37u32).map(|r| r * r).collect();
        for w in [1, 8, 16] {
            for t in [1, 3, 64] {
                let ch = window_chunks(&row_ptr, w, t);
                let mut next = 0;
                for c in &ch {
                    assert_eq!(c.start, next);
                    assert!(c.end > c.start);
                    next = c.end;
                }
                assert_eq!(next, 37usize.div_ceil(w));
            }
        }
        assert!(window_chunks(&[0], 16, 4).is_empty());
    }

    #[test]
    fn split_lengths_is_consecutive() {
        let mut v = [1, 2, 3, 4, 5];
        let parts = split_lengths(&mut v, [2, 0, 3]);
        assert_eq!(parts.len(), 3);
        assert_eq!(&*parts[0], &[1, 2]);
        assert!(parts[1].is_empty());
        assert_eq!(&*parts[2], &[3, 4, 5]);
    }
}
