// Counter-based random numbers shared by the device kernels and the host: the very same source
// file is `include!`d by both crates (host: `tcgnn::gpu::shared::rng`), so a CPU and a GPU
// dropout with the same (seed, step) draw the same mask, bit for bit.
//
// A draw is a pure function of (seed, step, index): no state, any order, any thread layout.
// The 64-bit key (step << 32 | index) is XORed with a mix of the seed and sent through
// SplitMix64's finaliser (a bijection on u64 with full avalanche); the hash is its top 32 bits.
// Distinct (step, index) pairs under one seed therefore never share the 64-bit value.

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
pub const fn dropout_hash_keyed(seed_key: u64, step: u32, index: u32) -> u32 {
    let key = ((step as u64) << 32) | index as u64;
    (mix64(key ^ seed_key) >> 32) as u32
}

/// Whether element `index` is kept at draw `step`, from the precomputed seed key.
#[inline(always)]
pub const fn dropout_keep_keyed(seed_key: u64, step: u32, index: u32, threshold: u32) -> bool {
    dropout_hash_keyed(seed_key, step, index) >= threshold
}

/// Whether element `index` survives dropout at draw `step`: keep iff the hash's 32 bits are
/// `>= threshold`, where `threshold = dropout_threshold(p)` (so P(keep) = 1 - p to within 2^-32).
#[inline(always)]
pub const fn dropout_keep(seed: u64, step: u32, index: u32, threshold: u32) -> bool {
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
