//! A random permutation of 0..n evaluated at one position at a time: the seed order of an
//! epoch, as a pure function of (key, n, position), with no O(n) shuffle per epoch or per batch.
//!
//! A 4-round Feistel network on the smallest even number of bits covering n is a bijection of
//! [0, 2^bits); positions that land at or beyond n are sent through it again ("cycle walking")
//! until they land inside, which keeps it a bijection of [0, n). 2^bits < 4n, so that takes
//! fewer than 4 passes on average.

use crate::gpu::shared::rng::mix64;

/// Position `i` (< n) of the permutation of 0..n keyed by `key`.
pub fn permuted_index(key: u64, n: u64, i: u64) -> u64 {
    debug_assert!(i < n);
    let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2).next_multiple_of(2);
    let half = bits / 2;
    let mask = (1u64 << half) - 1;
    let mut x = i;
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        for round in 0..4u64 {
            let f = mix64(key ^ (round << 56) ^ r) & mask;
            (l, r) = (r, l ^ f);
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}
