//! Philox 4x32-10, the counter-based generator behind every random tensor.
//!
//! Element `i` of a stream depends only on the seed and `i`, never on threads or devices:
//! raw word `i` is word `i % 4` of the Philox block at counter `i / 4`. That is what makes a
//! seed give the same numbers on any thread count and, later, on the GPU. Uniform and
//! Bernoulli draws use integer arithmetic and exact scalings, so they are bitwise equal
//! everywhere; normal draws go through `ln`, `sin` and `cos`, whose last bits may differ
//! between math libraries (the tests allow 2 ulps in f32).

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// One Philox 4x32 block: ten rounds over a 128-bit counter under a 64-bit key.
#[inline]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = (M0 as u64) * (c[0] as u64);
        let p1 = (M1 as u64) * (c[2] as u64);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The stream of one seed: raw words, uniforms, normals and Bernoulli draws by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Philox {
    key: [u32; 2],
}

impl Philox {
    /// The stream for `seed`.
    pub fn new(seed: u64) -> Self {
        Philox {
            key: [seed as u32, (seed >> 32) as u32],
        }
    }

    /// Raw 32-bit word `i` of the stream.
    #[inline]
    pub fn word(&self, i: u64) -> u32 {
        let block = i / 4;
        let out = philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], self.key);
        out[(i % 4) as usize]
    }

    /// Four consecutive words starting at a multiple of four (one block).
    #[inline]
    pub fn block(&self, block: u64) -> [u32; 4] {
        philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], self.key)
    }

    /// Uniform `f32` number `i` in [0, 1): the top 24 bits of word `i`, scaled exactly.
    #[inline]
    pub fn uniform_f32(&self, i: u64) -> f32 {
        (self.word(i) >> 8) as f32 * (1.0 / 16_777_216.0)
    }

    /// Uniform `f64` number `i` in [0, 1): 53 bits from words `2i` and `2i + 1`, scaled exactly.
    #[inline]
    pub fn uniform_f64(&self, i: u64) -> f64 {
        let hi = self.word(2 * i) as u64;
        let lo = self.word(2 * i + 1) as u64;
        (((hi << 21) ^ (lo >> 11)) & ((1u64 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// Normal `f32` number `i` (mean 0, std 1): Box-Muller on words `2⌊i/2⌋` and `2⌊i/2⌋ + 1`;
    /// even `i` takes the cosine branch, odd `i` the sine.
    #[inline]
    pub fn normal_f32(&self, i: u64) -> f32 {
        let pair = i / 2;
        // (0, 1] so the logarithm stays finite.
        let u1 = ((self.word(2 * pair) >> 8) as f32 + 1.0) * (1.0 / 16_777_216.0);
        let u2 = (self.word(2 * pair + 1) >> 8) as f32 * (1.0 / 16_777_216.0);
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f32::consts::PI * u2;
        if i.is_multiple_of(2) {
            r * theta.cos()
        } else {
            r * theta.sin()
        }
    }

    /// Normal `f64` number `i`: Box-Muller on the uniform doubles `2⌊i/2⌋` and `2⌊i/2⌋ + 1`.
    #[inline]
    pub fn normal_f64(&self, i: u64) -> f64 {
        let pair = i / 2;
        let u1 = 1.0 - self.uniform_f64(2 * pair);
        let u2 = self.uniform_f64(2 * pair + 1);
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        if i.is_multiple_of(2) {
            r * theta.cos()
        } else {
            r * theta.sin()
        }
    }

    /// The integer threshold a raw word is compared with for a Bernoulli(p) draw.
    pub fn bernoulli_threshold(p: f64) -> u64 {
        (p.clamp(0.0, 1.0) * 4_294_967_296.0).round() as u64
    }

    /// Bernoulli draw `i`: true when word `i` is below `threshold` (see
    /// [`Philox::bernoulli_threshold`]); exact integer arithmetic on every device.
    #[inline]
    pub fn bernoulli(&self, i: u64, threshold: u64) -> bool {
        (self.word(i) as u64) < threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_random123_known_answers() {
        // Known-answer vectors published with the Random123 library (kat_vectors).
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniforms_are_in_range_and_moments_fit() {
        let g = Philox::new(7);
        let n = 100_000;
        let mut sum = 0.0f64;
        for i in 0..n {
            let u = g.uniform_f32(i);
            assert!((0.0..1.0).contains(&u));
            sum += u as f64;
        }
        assert!((sum / n as f64 - 0.5).abs() < 0.01);
        let mut s1 = 0.0;
        let mut s2 = 0.0;
        for i in 0..n {
            let z = g.normal_f64(i);
            s1 += z;
            s2 += z * z;
        }
        let mean = s1 / n as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((s2 / n as f64 - mean * mean - 1.0).abs() < 0.03);
    }

    #[test]
    fn bernoulli_edges_are_exact() {
        let g = Philox::new(1);
        let all = Philox::bernoulli_threshold(1.0);
        let none = Philox::bernoulli_threshold(0.0);
        assert!((0..1000).all(|i| g.bernoulli(i, all)));
        assert!((0..1000).all(|i| !g.bernoulli(i, none)));
    }
}
