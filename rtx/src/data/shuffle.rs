//! The seeded permutation behind [`DataLoader::shuffle`](super::DataLoader::shuffle).
//!
//! Invariant: the order of an epoch is a pure function of `(n, seed, epoch)`, computed with
//! integer arithmetic only, so it is the same on every machine and thread count.

use rtx_kernels::philox::philox4x32_10;

/// The order of `0..n` for one epoch: a Fisher-Yates shuffle driven by Philox 4x32-10.
///
/// The stream: the key is `seed` (low word, high word); random word `w` is word `w % 4` of the
/// block at counter `[b as u32, (b >> 32) as u32, epoch as u32, (epoch >> 32) as u32]` with
/// `b = w / 4`, so each epoch has its own stream and epoch 0 is the stream of
/// `Philox::new(seed)`. Starting from the identity, for `i` from `n - 1` down to `1`, `j` is
/// drawn uniformly from `0..=i` and elements `i` and `j` are swapped. A draw takes the next two
/// words as a 64-bit `x` (first word high) and uses Lemire's method: `m = x * (i + 1)` as a
/// 128-bit product, and the draw is `m >> 64` unless the low 64 bits of `m` fall below
/// `2^64 mod (i + 1)`, in which case the next two words are tried (exactly uniform).
///
/// ```
/// use rtx::data::permutation;
/// let p = permutation(10, 42, 0);
/// let mut sorted = p.clone();
/// sorted.sort();
/// assert_eq!(sorted, (0..10).collect::<Vec<_>>());
/// assert_eq!(p, permutation(10, 42, 0));
/// assert_ne!(p, permutation(10, 42, 1));
/// ```
pub fn permutation(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut words = Words::new(seed, epoch);
    for i in (1..n).rev() {
        let j = words.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    order
}

/// The Philox words of one (seed, epoch) stream, read in order.
struct Words {
    key: [u32; 2],
    epoch: [u32; 2],
    block: u64,
    buf: [u32; 4],
    next: usize,
}

impl Words {
    fn new(seed: u64, epoch: u64) -> Self {
        Words {
            key: [seed as u32, (seed >> 32) as u32],
            epoch: [epoch as u32, (epoch >> 32) as u32],
            block: 0,
            buf: [0; 4],
            next: 4,
        }
    }

    fn word(&mut self) -> u32 {
        if self.next == 4 {
            let b = self.block;
            self.buf = philox4x32_10(
                [b as u32, (b >> 32) as u32, self.epoch[0], self.epoch[1]],
                self.key,
            );
            self.block += 1;
            self.next = 0;
        }
        self.next += 1;
        self.buf[self.next - 1]
    }

    /// A uniform draw from `0..range` (`range >= 1`).
    fn below(&mut self, range: u64) -> u64 {
        // 2^64 mod range, the count of low values that would make some draws more likely.
        let threshold = range.wrapping_neg() % range;
        loop {
            let x = ((self.word() as u64) << 32) | self.word() as u64;
            let m = x as u128 * range as u128;
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtx_kernels::philox::Philox;

    #[test]
    fn epoch_zero_reads_the_plain_philox_stream() {
        let mut w = Words::new(0x1234_5678_9abc_def0, 0);
        let p = Philox::new(0x1234_5678_9abc_def0);
        for i in 0..9 {
            assert_eq!(w.word(), p.word(i));
        }
    }

    #[test]
    fn draws_cover_the_range_roughly_evenly() {
        let mut w = Words::new(3, 5);
        let mut counts = [0usize; 6];
        for _ in 0..60_000 {
            counts[w.below(6) as usize] += 1;
        }
        // Each count is Binomial(60000, 1/6): mean 10000, sd about 91.
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn every_position_is_reachable() {
        // Across seeds, item 0 should land in every slot of a 5-permutation.
        let mut seen = [false; 5];
        for seed in 0..200 {
            let p = permutation(5, seed, 0);
            seen[p.iter().position(|&x| x == 0).unwrap()] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert!(permutation(0, 1, 1).is_empty());
        assert_eq!(permutation(1, 1, 1), vec![0]);
    }
}
