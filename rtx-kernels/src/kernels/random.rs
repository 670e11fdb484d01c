//! Random tensors on the device from the Philox 4x32-10 stream of a seed
//! ([`Philox`](crate::Philox)): element `i` is draw `i`, the same draw the CPU backend makes,
//! so a seed gives the same tensor on every device. One thread computes one Philox block (four
//! 32-bit words) and writes the draws it holds, in a grid-stride loop over blocks.
//!
//! Invariant: every formula repeats `rtx_backends::cpu::random` step for step in the same
//! types: raw words, uniform, Bernoulli and integer draws are exact integer arithmetic (and one
//! rounding of an exact `f64`), so they are bitwise the CPU's; normal draws use `ln`, `sqrt`,
//! `sin` and `cos`, whose last bits differ between math libraries.

use crate::{Element, Float, Num};
use rtx_macros::kernel;

/// Philox 4x32-10 of counter `(b, 0)` under key `(seed low, seed high)`: the four words of
/// block `b` of the stream of `seed` into `c`, as [`Philox`](crate::Philox) computes them.
#[kernel(device, crate = crate)]
pub fn philox_block<T: Element>(b: usize, seed: u64, c: &mut [u32; 4]) {
    let mut c0 = b as u32;
    let mut c1 = (b >> 32) as u32;
    let mut c2: u32 = 0;
    let mut c3: u32 = 0;
    let mut k0 = seed as u32;
    let mut k1 = (seed >> 32) as u32;
    for rnd in 0..10 {
        if rnd > 0 {
            k0 = k0.wrapping_add(0x9E37_79B9u32);
            k1 = k1.wrapping_add(0xBB67_AE85u32);
        }
        let hi0 = 0xD251_1F53u32.mul_hi(c0);
        let lo0 = 0xD251_1F53u32.wrapping_mul(c0);
        let hi1 = 0xCD9E_8D57u32.mul_hi(c2);
        let lo1 = 0xCD9E_8D57u32.wrapping_mul(c2);
        let n0 = hi1 ^ c1 ^ k0;
        let n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    c[0] = c0;
    c[1] = c1;
    c[2] = c2;
    c[3] = c3;
}

/// Word `j` (0 to 3) of a Philox block from [`philox_block`], picked by comparisons so that
/// the block stays in registers whatever `j` is.
#[kernel(device, crate = crate)]
pub fn philox_word<T: Element>(c: &[u32; 4], j: usize) -> u32 {
    if j == 0 {
        c[0]
    } else if j == 1 {
        c[1]
    } else if j == 2 {
        c[2]
    } else {
        c[3]
    }
}

/// `low + u * span` for `n` uniform draws `u` in [0, 1), rounded once to `T`, and replaced by
/// `below` (the largest `T` under `high`) when that rounding reaches `high`. `wide != 0`
/// (f64 tensors) uses the stream's f64 draws (53 bits from two words, two per block);
/// otherwise its f32 draws (the top 24 bits of a word, four per block). Any grid works.
///
/// ```
/// use rtx_kernels::{Philox, kernels::random_uniform, kernel::LaunchConfig};
/// let mut out = vec![0.0f32; 6];
/// random_uniform(LaunchConfig::new(1, 32), &mut out, 6, 7, 0, 0.0, 1.0, 1.0, 1.0 - f32::EPSILON / 2.0).unwrap();
/// assert_eq!(out[5], Philox::new(7).uniform_f32(5));
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn random_uniform<T: Float>(
    out: &mut [T],
    n: usize,
    seed: u64,
    wide: u32,
    low: f64,
    span: f64,
    high: f64,
    below: T,
) {
    let per = if wide != 0 { 2 } else { 4 };
    let blocks = (n + per - 1) / per;
    let step = block_dim_x() * grid_dim_x();
    let mut b = block_idx_x() * block_dim_x() + thread_idx_x();
    while b < blocks {
        let mut c = [0u32; 4];
        philox_block(b, seed, &mut c);
        for j in 0..per {
            let i = b * per + j;
            if i < n {
                let mut u: f64 = 0.0;
                if wide != 0 {
                    // Draw j of the block takes words 2j and 2j + 1.
                    let hi: u32 = philox_word(&c, 2 * j);
                    let lo: u32 = philox_word(&c, 2 * j + 1);
                    let hi = hi as u64;
                    let lo = lo as u64;
                    u = (((hi << 21) ^ (lo >> 11)) & 9_007_199_254_740_991u64) as f64
                        * (1.0 / 9_007_199_254_740_992.0);
                } else {
                    let w: u32 = philox_word(&c, j);
                    u = (w >> 8) as f64 * (1.0 / 16_777_216.0);
                }
                out[i] = (low + u * span) as T;
                if out[i] as f64 >= high {
                    out[i] = below;
                }
            }
        }
        b += step;
    }
}

/// `mean + std_dev * z` for `n` standard normal draws `z`, computed in f64 and rounded once to
/// `T`. `wide != 0` (f64 tensors): Box-Muller in f64 on the f64 uniforms `2⌊i/2⌋` and
/// `2⌊i/2⌋ + 1` (two draws per block); otherwise Box-Muller in `T`'s compute type (f32) on
/// raw words `2⌊i/2⌋` and `2⌊i/2⌋ + 1` (four draws per block). Even `i` takes the cosine,
/// odd `i` the sine. Any grid works.
///
/// ```
/// use rtx_kernels::{Philox, kernels::random_normal, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 3];
/// random_normal(LaunchConfig::new(1, 32), &mut out, 3, 1, 1, 0.0, 1.0).unwrap();
/// assert!((out[2] - Philox::new(1).normal_f64(2)).abs() < 1e-12);
/// ```
#[kernel(crate = crate)]
pub fn random_normal<T: Float>(
    out: &mut [T],
    n: usize,
    seed: u64,
    wide: u32,
    mean: f64,
    std_dev: f64,
) {
    let per = if wide != 0 { 2 } else { 4 };
    let blocks = (n + per - 1) / per;
    let step = block_dim_x() * grid_dim_x();
    let mut b = block_idx_x() * block_dim_x() + thread_idx_x();
    while b < blocks {
        let mut c = [0u32; 4];
        philox_block(b, seed, &mut c);
        if wide != 0 {
            let bits1 = (((c[0] as u64) << 21) ^ ((c[1] as u64) >> 11)) & 9_007_199_254_740_991u64;
            let bits2 = (((c[2] as u64) << 21) ^ ((c[3] as u64) >> 11)) & 9_007_199_254_740_991u64;
            let u1 = 1.0 - bits1 as f64 * (1.0 / 9_007_199_254_740_992.0);
            let u2 = bits2 as f64 * (1.0 / 9_007_199_254_740_992.0);
            let r = (-2.0 * u1.ln()).sqrt();
            let theta = 6.283185307179586 * u2;
            let i = b * 2;
            if i < n {
                out[i] = (mean + std_dev * (r * theta.cos())) as T;
            }
            if i + 1 < n {
                out[i + 1] = (mean + std_dev * (r * theta.sin())) as T;
            }
        } else {
            for pair in 0..2 {
                let w0: u32 = philox_word(&c, 2 * pair);
                let w1: u32 = philox_word(&c, 2 * pair + 1);
                let u1 = ((w0 >> 8) as T + 1.0) * (1.0 / 16_777_216.0);
                let u2 = (w1 >> 8) as T * (1.0 / 16_777_216.0);
                let r = (-2.0 * u1.ln()).sqrt();
                let theta = 6.283185307179586 * u2;
                let i = b * 4 + pair * 2;
                if i < n {
                    out[i] = (mean + std_dev * ((r * theta.cos()) as f64)) as T;
                }
                if i + 1 < n {
                    out[i + 1] = (mean + std_dev * ((r * theta.sin()) as f64)) as T;
                }
            }
        }
        b += step;
    }
}

/// `n` Bernoulli draws: element `i` is 1 (`true`) when raw word `i` is below `threshold`
/// (`Philox::bernoulli_threshold(p)`), else 0 (`false`). Any grid works.
///
/// ```
/// use rtx_kernels::{Philox, kernels::random_bernoulli, kernel::LaunchConfig};
/// let mut out = vec![false; 9];
/// let t = Philox::bernoulli_threshold(0.5);
/// random_bernoulli(LaunchConfig::new(1, 32), &mut out, 9, 3, t).unwrap();
/// assert_eq!(out[8], Philox::new(3).bernoulli(8, t));
/// ```
#[kernel(crate = crate)]
pub fn random_bernoulli<T: Element>(out: &mut [T], n: usize, seed: u64, threshold: u64) {
    let blocks = (n + 3) / 4;
    let step = block_dim_x() * grid_dim_x();
    let mut b = block_idx_x() * block_dim_x() + thread_idx_x();
    while b < blocks {
        let mut c = [0u32; 4];
        philox_block(b, seed, &mut c);
        for j in 0..4 {
            let i = b * 4 + j;
            if i < n {
                let w: u32 = philox_word(&c, j);
                out[i] = ((w as u64) < threshold) as i64 as T;
            }
        }
        b += step;
    }
}

/// `n` integers uniform in `[low, low + range)` (`range` 0 stands for 2^64), converted to `T`
/// as `Element::from_i64` does: integer `i` takes the 64-bit word `w = word(2i) << 32 |
/// word(2i + 1)` and is `low + (w * range) >> 64` (multiply-shift). Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::random_int, kernel::LaunchConfig};
/// let mut out = vec![0i64; 100];
/// random_int(LaunchConfig::new(1, 32), &mut out, 100, 5, -3, 6).unwrap();
/// assert!(out.iter().all(|&x| (-3..3).contains(&x)));
/// ```
#[kernel(crate = crate)]
pub fn random_int<T: Num>(out: &mut [T], n: usize, seed: u64, low: i64, range: u64) {
    let blocks = (n + 1) / 2;
    let step = block_dim_x() * grid_dim_x();
    let mut b = block_idx_x() * block_dim_x() + thread_idx_x();
    while b < blocks {
        let mut c = [0u32; 4];
        philox_block(b, seed, &mut c);
        for j in 0..2 {
            let i = b * 2 + j;
            if i < n {
                let hi: u32 = philox_word(&c, 2 * j);
                let lo: u32 = philox_word(&c, 2 * j + 1);
                let hi = hi as u64;
                let lo = lo as u64;
                let w = (hi << 32) | lo;
                let mut r = w;
                if range != 0 {
                    r = w.mul_hi(range);
                }
                out[i] = low.wrapping_add(r as i64) as T;
            }
        }
        b += step;
    }
}
