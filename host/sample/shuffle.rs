//! A random permutation of 0..n evaluated at one position at a time: the seed order of an
//! epoch, as a pure function of (key, n, position), with no O(n) shuffle per epoch or per batch.
//! The function lives in the shared `rng.rs` (`sample_permuted_index`), so the GPU neighbour
//! sampler visits the targets in the same order.

/// Position `i` (< n) of the permutation of 0..n keyed by `key`.
pub fn permuted_index(key: u64, n: u64, i: u64) -> u64 {
    debug_assert!(i < n);
    crate::shared::rng::sample_permuted_index(key, n, i)
}
