//! A tiny deterministic RNG (SplitMix64): reproducible graphs and test inputs from a seed,
//! identical on every platform, with no dependency whose stream may change between versions.

#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.next_f64() as f32
    }
    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// `len` values uniform in [-1, 1): never zeros, so unwritten outputs show.
    /// The stream is a counter (draw k reads state `seed + k * GAMMA`), so chunks are filled
    /// on all cores from their own starting states: the same values as drawing one by one
    /// (10M x 64 random features took 2 s on one core).
    pub fn vec_f32(&mut self, len: usize) -> Vec<f32> {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 16;
        let start = self.0;
        let mut out = vec![0f32; len];
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(i, chunk)| {
            let mut g = SplitMix64(start.wrapping_add(((i * CHUNK) as u64).wrapping_mul(GAMMA)));
            chunk.iter_mut().for_each(|x| *x = g.uniform(-1.0, 1.0));
        });
        self.0 = start.wrapping_add((len as u64).wrapping_mul(GAMMA));
        out
    }
}

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_vec_is_the_serial_stream() {
        for len in [0, 1, 65_535, 65_536, 200_003] {
            let mut a = SplitMix64::new(42);
            let mut b = SplitMix64::new(42);
            let serial: Vec<f32> = (0..len).map(|_| b.uniform(-1.0, 1.0)).collect();
            assert_eq!(a.vec_f32(len), serial, "len {len}");
            // The generator is left where drawing one by one leaves it.
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }
}
