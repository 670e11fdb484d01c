//! Dropout in one launch: the keep mask is drawn from the Philox 4x32-10 stream of a seed
//! (element `i` keeps when raw word `i` is below a threshold, exactly
//! [`random_bernoulli`](super::random_bernoulli())'s draw) and applied with the scale in the
//! same pass. The backward is the same kernel on the output gradient with the same seed: the
//! mask is regenerated from the counter instead of being stored.
//!
//! Invariant: `out[i] = (x[i] * keep_i) * scale` in the compute type, rounded once to `T`;
//! the mask is integer arithmetic, so it is bitwise the CPU's for the same seed, and so are
//! the values (`x * 0` and `x * 1` are exact, leaving one rounded product).

use super::random::{philox_block, philox_word};
use crate::Float;
use rtx_macros::kernel;

/// `out[i] = x[i] * keep_i * scale` over the first `n` elements of dense `x`, where `keep_i`
/// is 1 when word `i` of the stream of `seed` is below `threshold`
/// (`Philox::bernoulli_threshold(1 - p)`), else 0. One thread per Philox block of four words,
/// in a grid-stride loop: any grid works.
///
/// ```
/// use rtx_kernels::{Philox, kernels::random_dropout, kernel::LaunchConfig};
/// let t = Philox::bernoulli_threshold(0.5);
/// let mut out = vec![0.0f32; 9];
/// random_dropout(LaunchConfig::new(1, 32), &[3.0; 9], &mut out, 9, 5, t, 2.0).unwrap();
/// let g = Philox::new(5);
/// assert!((0..9).all(|i| out[i] == if g.bernoulli(i as u64, t) { 6.0 } else { 0.0 }));
/// ```
#[kernel(crate = crate)]
pub fn random_dropout<T: Float>(
    x: &[T],
    out: &mut [T],
    n: usize,
    seed: u64,
    threshold: u64,
    scale: T,
) {
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
                let k = ((w as u64) < threshold) as i64 as T;
                out[i] = (x[i] * k) * scale;
            }
        }
        b += step;
    }
}
