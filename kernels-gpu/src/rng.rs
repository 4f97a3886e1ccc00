// Counter-based random numbers shared by the device kernels and the host: the very same source
// file is `include!`d by both crates (host: `tcgnn::gpu::shared::rng`), so a CPU and a GPU
// dropout with the same (seed, step) draw the same mask, bit for bit.
//
// A draw is a pure function of (seed, step, index): no state, any order, any thread layout.
// The 64-bit key (step << 32 | index) is XORed with a mix of the seed and sent through
// SplitMix64's finaliser (a bijection on u64 with full avalanche); the hash is its top 32 bits.
// Distinct (step, index) pairs under one seed therefore never share the 64-bit value.
// Indices past 2^32 (matrices of more than 2^32 elements) XOR `mix64(index >> 32)` into the key:
// `mix64(0) = 0`, so indices below 2^32 draw exactly what they drew before 64-bit indices, and
// the high word still changes every bit of the hash (a truncated index would repeat the mask
// of the first 2^32 elements).

/// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
#[inline(always)]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The per-seed key the kernels take as a parameter (computed once on the host, so a device
/// draw costs one `mix64`).
#[inline(always)]
pub const fn dropout_seed_key(seed: u64) -> u64 {
    mix64(seed.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

/// 32 uniformly distributed bits for element `index` of draw `step`, given `dropout_seed_key(seed)`.
#[inline(always)]
pub const fn dropout_hash_keyed(seed_key: u64, step: u32, index: u64) -> u32 {
    dropout_hash_low(dropout_high_key(seed_key, index), step, index as u32)
}

/// The key shared by the indices of `index`'s 2^32-element span (the kernels hoist it out of
/// their per-element work: four consecutive elements from a multiple of 4 share it).
#[inline(always)]
pub const fn dropout_high_key(seed_key: u64, index: u64) -> u64 {
    seed_key ^ mix64(index >> 32)
}

/// The hash of the index whose low 32 bits are `low`, given its `dropout_high_key`.
#[inline(always)]
pub const fn dropout_hash_low(high_key: u64, step: u32, low: u32) -> u32 {
    let key = ((step as u64) << 32) | low as u64;
    (mix64(key ^ high_key) >> 32) as u32
}

/// Whether element `index` is kept at draw `step`, from the precomputed seed key.
#[inline(always)]
pub const fn dropout_keep_keyed(seed_key: u64, step: u32, index: u64, threshold: u32) -> bool {
    dropout_hash_keyed(seed_key, step, index) >= threshold
}

/// Whether element `index` survives dropout at draw `step`: keep iff the hash's 32 bits are
/// `>= threshold`, where `threshold = dropout_threshold(p)` (so P(keep) = 1 - p to within 2^-32).
#[inline(always)]
pub const fn dropout_keep(seed: u64, step: u32, index: u64, threshold: u32) -> bool {
    dropout_keep_keyed(dropout_seed_key(seed), step, index, threshold)
}

/// round(p * 2^32), saturated to u32::MAX; p = 0 gives 0 (everything kept). Host-side only
/// (the kernels receive the threshold as a parameter); p must be in [0, 1).
#[inline(always)]
pub fn dropout_threshold(p: f32) -> u32 {
    // No `f64::round` in `core`: add a half and truncate (the value is >= 0 here).
    let t = p as f64 * 4_294_967_296.0 + 0.5;
    if t.is_nan() || t < 1.0 {
        0 // p <= 0 (or NaN: rejected by the callers anyway)
    } else if t >= u32::MAX as f64 {
        u32::MAX
    } else {
        t as u32
    }
}

// Counter-based streams for the graph samplers (`tcgnn::sample`). Batch `batch` of `epoch` under
// `seed` owns the stream `sample_stream_key(seed, epoch, batch)`; its draws are
// `sample_draw(key, counter)` for counters the sampler assigns by position (root r, walk step
// s, ...), so any draw can be computed alone: a CPU thread or a GPU thread reproduces it
// without running the others first.

/// Separates sampler streams from dropout masks drawn with the same user seed.
const SAMPLE_DOMAIN: u64 = 0x5A4D_504C_4552_5331;

/// Key of batch `batch` of `epoch`: distinct (epoch, batch) pairs under one seed give distinct
/// keys, because the 64-bit word (epoch << 32 | batch) goes through the bijection `mix64`.
#[inline(always)]
pub const fn sample_stream_key(seed: u64, epoch: u32, batch: u32) -> u64 {
    mix64(dropout_seed_key(seed ^ SAMPLE_DOMAIN) ^ (((epoch as u64) << 32) | batch as u64))
}

/// Independent sub-stream `lane` of `key` (e.g. one per hop of a neighbour sampler).
#[inline(always)]
pub const fn sample_substream(key: u64, lane: u32) -> u64 {
    mix64(key ^ (lane as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// Draw `counter` of stream `key`: the (counter + 1)-th output of a SplitMix64 started at state
/// `key` (a Weyl sequence through `mix64`), so distinct counters give distinct draws.
#[inline(always)]
pub const fn sample_draw(key: u64, counter: u64) -> u64 {
    mix64(key.wrapping_add(counter.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

/// Uniform integer in [0, n) from one draw (Lemire's multiply-high; bias below n / 2^64).
#[inline(always)]
pub const fn sample_below(draw: u64, n: u64) -> u64 {
    ((draw as u128 * n as u128) >> 64) as u64
}

/// Uniform in [0, 1) from one draw (its top 53 bits).
#[inline(always)]
pub fn sample_unit(draw: u64) -> f64 {
    (draw >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Position `i` (< n) of a random permutation of 0..n keyed by `key`: an epoch's order of the
/// targets, one position at a time (no O(n) shuffle). A 4-round Feistel network on the smallest
/// even number of bits covering n is a bijection of [0, 2^bits); positions that land at or
/// beyond n go through it again ("cycle walking") until they land inside, which keeps it a
/// bijection of [0, n). 2^bits < 4n, so that takes fewer than 4 passes on average.
#[inline(always)]
pub fn sample_permuted_index(key: u64, n: u64, i: u64) -> u64 {
    let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2).next_multiple_of(2);
    let half = bits / 2;
    let mask = (1u64 << half) - 1;
    let mut x = i;
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        let mut round = 0u64;
        while round < 4 {
            let f = mix64(key ^ (round << 56) ^ r) & mask;
            (l, r) = (r, l ^ f);
            round += 1;
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}
