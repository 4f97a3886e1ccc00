// Counter-based random numbers shared by the device kernels and the host: the very same source
// file is `include!`d by both crates (host: `tcgnn::gpu::shared::rng`), so a CPU and a GPU
// dropout with the same (seed, step) draw the same mask, bit for bit.
//
// A draw is a pure function of (seed, step, index): no state, any order, any thread layout.
// Indices are split into 2^32-element spans. Each (seed, step, span) has a 64-bit span key: the
// word (step << 32 | span) through SplitMix64's finaliser `mix64` (a bijection on u64 with full
// avalanche), XORed with the seed's key and mixed again, so distinct (step, span) pairs under one
// seed get distinct keys. Elements come in pairs (2i, 2i + 1) of one span: the pair's 32 bits are
// a keyed 32-bit hash of i's low word (XOR with the key's low half, multiply by its high half
// made odd, then Wellons' `lowbias32` finaliser: all bijections of u32, so no two pairs of a span
// share a hash), and element 2i takes the low 16 bits, 2i + 1 the high 16. An element is kept
// iff its 16 bits are at least `dropout_threshold(p)` = round(p 2^16): P(keep) = 1 - p to within
// 2^-17. A kernel computes the span key once (`DropoutStep`) and a hash per two elements: the
// hash was what bounded the dropout-fused products (bench/NOTES.md, 2026-11-27 night and
// 2026-11-27 morning).

/// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
#[inline(always)]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Wellons' `lowbias32` (hash prospector): a bijective 32-bit mixer with low bias.
#[inline(always)]
pub const fn lowbias32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7FEB_352D);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846C_A68B);
    x ^ (x >> 16)
}

/// The per-seed key the kernels take as a parameter (computed once on the host).
#[inline(always)]
pub const fn dropout_seed_key(seed: u64) -> u64 {
    mix64(seed.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

/// The key of draw `step` over the 2^32-element span that holds `index`.
#[inline(always)]
pub const fn dropout_span_key(seed_key: u64, step: u32, index: u64) -> u64 {
    mix64(seed_key ^ mix64(((step as u64) << 32) | (index >> 32)))
}

/// 32 uniformly distributed bits for the pair of elements whose low index words are
/// 2 `pair` and 2 `pair` + 1, given their span key.
#[inline(always)]
pub const fn dropout_hash_span(span_key: u64, pair: u32) -> u32 {
    lowbias32((pair ^ span_key as u32).wrapping_mul((span_key >> 32) as u32 | 1))
}

/// The 16 bits of the element whose low index word is `low` (half `low & 1` of its pair's hash).
#[inline(always)]
pub const fn dropout_bits_span(span_key: u64, low: u32) -> u32 {
    (dropout_hash_span(span_key, low >> 1) >> (16 * (low & 1))) & 0xFFFF
}

/// 16 uniformly distributed bits for element `index` of draw `step`, given `dropout_seed_key(seed)`.
#[inline(always)]
pub const fn dropout_bits_keyed(seed_key: u64, step: u32, index: u64) -> u32 {
    dropout_bits_span(dropout_span_key(seed_key, step, index), index as u32)
}

/// One draw's step with the key of its first span (indices below 2^32) computed once: what a
/// kernel carries through its loops, so that two elements cost one `dropout_hash_span`.
#[derive(Clone, Copy)]
pub struct DropoutStep {
    pub step: u32,
    pub span0: u64,
}

impl DropoutStep {
    #[inline(always)]
    pub const fn new(seed_key: u64, step: u32) -> Self {
        DropoutStep { step, span0: dropout_span_key(seed_key, step, 0) }
    }

    /// The key of the span holding `index`.
    #[inline(always)]
    const fn key(self, seed_key: u64, index: u64) -> u64 {
        if index >> 32 == 0 { self.span0 } else { dropout_span_key(seed_key, self.step, index) }
    }

    /// `dropout_bits_keyed(seed_key, self.step, index)`.
    #[inline(always)]
    pub const fn bits(self, seed_key: u64, index: u64) -> u32 {
        dropout_bits_span(self.key(seed_key, index), index as u32)
    }

    /// `dropout_keep_keyed(seed_key, self.step, index, threshold)`.
    #[inline(always)]
    pub const fn keep(self, seed_key: u64, index: u64, threshold: u32) -> bool {
        self.bits(seed_key, index) >= threshold
    }

    /// `keep` of the four elements `base..base + 4`: one span key and two hashes where `base`
    /// is even and the four share a span (always, for a multiple of 4); element by element
    /// otherwise, in a rolled loop (one inlined copy of the slow path, not four).
    #[inline(always)]
    pub const fn keep4(self, seed_key: u64, base: u64, threshold: u32) -> [bool; 4] {
        if base & 1 == 0 && base >> 32 == (base + 3) >> 32 {
            return keep4_span(self.key(seed_key, base), base as u32, threshold);
        }
        let mut kept = 0u32;
        let mut e = 0;
        while e < 4 {
            kept |= (self.keep(seed_key, base + e, threshold) as u32) << e;
            e += 1;
        }
        [kept & 1 != 0, kept & 2 != 0, kept & 4 != 0, kept & 8 != 0]
    }
}

impl DropoutStep {
    /// `keep` of the four elements `low..low + 4` of the first span (indices below 2^32), `low`
    /// even: two hashes and 32-bit arithmetic only, for kernels whose indices all lie there.
    #[inline(always)]
    pub const fn keep4_low(self, low: u32, threshold: u32) -> [bool; 4] {
        keep4_span(self.span0, low, threshold)
    }
}

/// The four elements from even low word `low` under span key `key`: two pair hashes.
#[inline(always)]
const fn keep4_span(key: u64, low: u32, threshold: u32) -> [bool; 4] {
    let (a, b) = (dropout_hash_span(key, low >> 1), dropout_hash_span(key, (low >> 1) + 1));
    [a & 0xFFFF >= threshold, a >> 16 >= threshold, b & 0xFFFF >= threshold, b >> 16 >= threshold]
}

/// Whether element `index` is kept at draw `step`, from the precomputed seed key.
#[inline(always)]
pub const fn dropout_keep_keyed(seed_key: u64, step: u32, index: u64, threshold: u32) -> bool {
    dropout_bits_keyed(seed_key, step, index) >= threshold
}

/// Whether element `index` survives dropout at draw `step`: keep iff its 16 bits are
/// `>= threshold`, where `threshold = dropout_threshold(p)` (so P(keep) = 1 - p to within 2^-17).
#[inline(always)]
pub const fn dropout_keep(seed: u64, step: u32, index: u64, threshold: u32) -> bool {
    dropout_keep_keyed(dropout_seed_key(seed), step, index, threshold)
}

/// round(p * 2^16), saturated to 2^16 - 1; p = 0 gives 0 (everything kept). Host-side only
/// (the kernels receive the threshold as a parameter); p must be in [0, 1).
#[inline(always)]
pub fn dropout_threshold(p: f32) -> u32 {
    // No `f64::round` in `core`: add a half and truncate (the value is >= 0 here).
    let t = p as f64 * 65_536.0 + 0.5;
    if t.is_nan() || t < 1.0 {
        0 // p <= 0 (or NaN: rejected by the callers anyway)
    } else if t >= 65_535.0 {
        65_535
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

// Link prediction's training negatives (`tcgnn::task::link`): slot `slot` of an epoch's
// negatives tries up to `NEG_ATTEMPTS` candidate pairs, attempt `a` reading the draws
// 2 (slot NEG_ATTEMPTS + a) and the next of the epoch's stream; the first candidate that is a
// non-edge of two distinct nodes is the slot's pair. A CPU thread and a GPU thread compute the
// same slot alike, whatever the order.

/// Candidate pairs a negative slot tries before it is left empty (`u32::MAX`): the chance that
/// 32 uniform pairs all hit edges is density^32, below 1e-27 at ogbl-ddi's 14%.
pub const NEG_ATTEMPTS: u64 = 32;

/// Separates the negatives' stream from the other samplers' under one seed.
const NEG_LANE: u32 = 0x4E45_4701;

/// The stream of epoch `epoch`'s training negatives under `seed`.
#[inline(always)]
pub const fn negative_stream_key(seed: u64, epoch: u32) -> u64 {
    sample_substream(sample_stream_key(seed, epoch, 0), NEG_LANE)
}

/// Attempt `attempt` of negative slot `slot`: a pair of nodes, each uniform in [0, n).
#[inline(always)]
pub const fn negative_candidate(key: u64, n: u64, slot: u64, attempt: u64) -> (u32, u32) {
    let c = 2 * (slot * NEG_ATTEMPTS + attempt);
    (sample_below(sample_draw(key, c), n) as u32, sample_below(sample_draw(key, c + 1), n) as u32)
}
