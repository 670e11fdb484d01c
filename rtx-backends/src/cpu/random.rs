//! Random-number loops: fills a fresh buffer with draws of the Philox 4x32-10 stream.
//!
//! Invariant: output element `i` is draw `i` of the stream (see [`rtx_kernels::philox`]), so a
//! seed gives the same buffer on any number of threads. Work is split into the fixed chunks of
//! [`build`], and inside a chunk each Philox block (four 32-bit words) is computed once and
//! yields all the draws it holds: 4 per block for f32 uniforms, f32 normals and Bernoulli
//! draws, 2 per block for f64 uniforms, f64 normals and 64-bit integers. The per-block
//! formulas below repeat the scalar definitions in `Philox` bit for bit; a test holds them to
//! it.

use super::CHUNK;
use super::elementwise::build;
use rtx_kernels::Philox;

/// 2^-24: scales the top 24 bits of a word into [0, 1) exactly.
const INV_2_24: f32 = 1.0 / 16_777_216.0;
/// 2^-53: scales 53 bits into [0, 1) exactly.
const INV_2_53: f64 = 1.0 / 9_007_199_254_740_992.0;

/// Philox blocks computed together before their draws are written: a loop of independent
/// blocks the compiler can interleave (and vectorize), which measured about twice as fast as
/// one block at a time.
const BATCH: usize = 16;

/// `n` values from the stream of `seed`, where value `i` is `draws(block(i / G))[i % G]`:
/// `draws` turns the four words of one Philox block into the `G` draws that block holds.
pub fn generate<T: Copy + Send, const G: usize>(
    n: usize,
    seed: u64,
    draws: impl Fn([u32; 4]) -> [T; G] + Sync,
) -> Vec<T> {
    // Chunks then start on a block boundary; only the last chunk may end inside a block.
    const { assert!(CHUNK.is_multiple_of(G), "chunks must hold whole blocks") };
    let g = Philox::new(seed);
    build(n, &|start, out| {
        let mut b = (start / G) as u64;
        let mut batches = out.chunks_exact_mut(G * BATCH);
        for batch in &mut batches {
            let mut words = [[0u32; 4]; BATCH];
            for (l, w) in words.iter_mut().enumerate() {
                *w = g.block(b + l as u64);
            }
            for (group, w) in batch.chunks_exact_mut(G).zip(words) {
                for (o, v) in group.iter_mut().zip(draws(w)) {
                    o.write(v);
                }
            }
            b += BATCH as u64;
        }
        // Fewer than `BATCH` blocks are left, the last perhaps partial.
        for group in batches.into_remainder().chunks_mut(G) {
            for (o, v) in group.iter_mut().zip(draws(g.block(b))) {
                o.write(v);
            }
            b += 1;
        }
    })
}

/// The uniform `f32` in [0, 1) that one raw word gives ([`Philox::uniform_f32`]).
#[inline]
fn unit_f32(w: u32) -> f32 {
    (w >> 8) as f32 * INV_2_24
}

/// The uniform `f64` in [0, 1) that two raw words give ([`Philox::uniform_f64`]).
#[inline]
fn unit_f64(hi: u32, lo: u32) -> f64 {
    let (hi, lo) = (hi as u64, lo as u64);
    (((hi << 21) ^ (lo >> 11)) & ((1u64 << 53) - 1)) as f64 * INV_2_53
}

/// The two `f32` normals (cosine, sine) that two raw words give ([`Philox::normal_f32`]).
#[inline]
fn normal_pair_f32(w0: u32, w1: u32) -> [f32; 2] {
    let u1 = ((w0 >> 8) as f32 + 1.0) * INV_2_24;
    let u2 = (w1 >> 8) as f32 * INV_2_24;
    let r = (-2.0 * u1.ln()).sqrt();
    let theta = 2.0 * std::f32::consts::PI * u2;
    [r * theta.cos(), r * theta.sin()]
}

/// `n` uniform `f32` draws in [0, 1), each mapped through `f`.
pub fn uniform_f32<T: Copy + Send>(n: usize, seed: u64, f: impl Fn(f32) -> T + Sync) -> Vec<T> {
    generate(n, seed, |w| w.map(|w| f(unit_f32(w))))
}

/// `n` uniform `f64` draws in [0, 1), each mapped through `f`.
pub fn uniform_f64<T: Copy + Send>(n: usize, seed: u64, f: impl Fn(f64) -> T + Sync) -> Vec<T> {
    generate(n, seed, |w| {
        [f(unit_f64(w[0], w[1])), f(unit_f64(w[2], w[3]))]
    })
}

/// `n` standard normal `f32` draws, each mapped through `f`.
pub fn normal_f32<T: Copy + Send>(n: usize, seed: u64, f: impl Fn(f32) -> T + Sync) -> Vec<T> {
    generate(n, seed, |w| {
        let [a, c] = normal_pair_f32(w[0], w[1]);
        let [d, e] = normal_pair_f32(w[2], w[3]);
        [f(a), f(c), f(d), f(e)]
    })
}

/// `n` standard normal `f64` draws, each mapped through `f`.
pub fn normal_f64<T: Copy + Send>(n: usize, seed: u64, f: impl Fn(f64) -> T + Sync) -> Vec<T> {
    // Normal pair `b` uses uniform doubles 2b and 2b + 1, that is the words of block `b`.
    generate(n, seed, |w| {
        let u1 = 1.0 - unit_f64(w[0], w[1]);
        let u2 = unit_f64(w[2], w[3]);
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        [f(r * theta.cos()), f(r * theta.sin())]
    })
}

/// `n` Bernoulli draws (word `i` below `threshold`, see [`Philox::bernoulli_threshold`]),
/// each mapped through `f`.
pub fn bernoulli<T: Copy + Send>(
    n: usize,
    seed: u64,
    threshold: u64,
    f: impl Fn(bool) -> T + Sync,
) -> Vec<T> {
    generate(n, seed, |w| w.map(|w| f((w as u64) < threshold)))
}

/// `n` integers uniform in `[low, low + range)`; `range` 0 stands for 2^64.
///
/// Integer `i` takes the 64-bit word `w = word(2i) << 32 | word(2i + 1)` and returns
/// `low + (w * range) >> 64` (multiply-shift). Each value has probability
/// ⌊2^64 / range⌋ / 2^64 or ⌈2^64 / range⌉ / 2^64, a relative bias below `range / 2^64`
/// (under 2^-32 for any range of 32-bit size), in exchange for using a fixed number of
/// words per element, which keeps the stream counter-based.
pub fn uniform_int<T: Copy + Send>(
    n: usize,
    seed: u64,
    low: i64,
    range: u64,
    f: impl Fn(i64) -> T + Sync,
) -> Vec<T> {
    let pick = move |hi: u32, lo: u32| {
        let w = ((hi as u64) << 32) | lo as u64;
        let r = if range == 0 {
            w
        } else {
            ((w as u128 * range as u128) >> 64) as u64
        };
        f(low.wrapping_add(r as i64))
    };
    generate(n, seed, |w| [pick(w[0], w[1]), pick(w[2], w[3])])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Enough elements for several parallel chunks and a ragged end.
    const N: usize = 2 * CHUNK + 7;

    #[test]
    fn block_paths_equal_the_scalar_definitions() {
        let g = Philox::new(0x1234_5678_9abc_def0);
        let seed = 0x1234_5678_9abc_def0;
        let u32s = uniform_f32(N, seed, |x| x);
        let u64s = uniform_f64(N, seed, |x| x);
        let n32 = normal_f32(N, seed, |x| x);
        let n64 = normal_f64(N, seed, |x| x);
        let t = Philox::bernoulli_threshold(0.3);
        let bs = bernoulli(N, seed, t, |x| x);
        for i in 0..N {
            let j = i as u64;
            assert_eq!(
                u32s[i].to_bits(),
                g.uniform_f32(j).to_bits(),
                "uniform_f32 {i}"
            );
            assert_eq!(
                u64s[i].to_bits(),
                g.uniform_f64(j).to_bits(),
                "uniform_f64 {i}"
            );
            assert_eq!(
                n32[i].to_bits(),
                g.normal_f32(j).to_bits(),
                "normal_f32 {i}"
            );
            assert_eq!(
                n64[i].to_bits(),
                g.normal_f64(j).to_bits(),
                "normal_f64 {i}"
            );
            assert_eq!(bs[i], g.bernoulli(j, t), "bernoulli {i}");
        }
    }

    #[test]
    fn integers_use_two_words_each() {
        let g = Philox::new(9);
        let v = uniform_int(1001, 9, -5, 10, |x| x);
        for (i, &x) in v.iter().enumerate() {
            let w = ((g.word(2 * i as u64) as u64) << 32) | g.word(2 * i as u64 + 1) as u64;
            assert_eq!(x, -5 + ((w as u128 * 10) >> 64) as i64);
        }
        let full = uniform_int(8, 9, i64::MIN, 0, |x| x);
        assert_eq!(
            full[0],
            i64::MIN.wrapping_add(((g.word(0) as u64) << 32 | g.word(1) as u64) as i64)
        );
    }
}
