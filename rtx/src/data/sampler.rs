//! `DistributedSampler`: each rank's share of a data set's items, for data-parallel training.
//!
//! Invariant: for one epoch, the shares of ranks `0..world_size` are the order of that epoch
//! (the same seeded [`permutation`] on every rank) dealt out round-robin, padded or cut so
//! every rank gets the same count: rank `r` takes positions `r, r + world_size, ...`.

use super::permutation;
use crate::error::{Error, Result};

/// The indices of the items one rank visits each epoch, as PyTorch's
/// `torch.utils.data.DistributedSampler`: shuffled with a seed (0 unless set) shared by all
/// ranks, with a new order each epoch ([`DistributedSampler::set_epoch`]), and the same count
/// on every rank. When the data set does not divide evenly, the order is padded by repeating
/// its first indices (so a few items are seen twice per epoch), or, with
/// [`DistributedSampler::drop_last`], its tail is left out.
///
/// Give it to a loader with [`DataLoader::distributed`](super::DataLoader::distributed), or use
/// [`DistributedSampler::indices`] directly. The order comes from rtx's [`permutation`], not
/// from PyTorch's generator, so the shares differ from PyTorch's for the same seed.
///
/// ```
/// use rtx::data::DistributedSampler;
/// let mut rank1 = DistributedSampler::new(10, 1, 4).unwrap().seed(7);
/// assert_eq!(rank1.num_samples(), 3); // 10 items padded to 12, 3 per rank
/// let first = rank1.indices();
/// rank1.set_epoch(1);
/// assert_ne!(rank1.indices(), first);
/// let kept = DistributedSampler::new(10, 1, 4).unwrap().drop_last(true);
/// assert_eq!(kept.num_samples(), 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributedSampler {
    len: usize,
    rank: usize,
    world_size: usize,
    seed: Option<u64>,
    drop_last: bool,
    epoch: u64,
}

impl DistributedSampler {
    /// Rank `rank`'s share of a data set of `len` items split among `world_size` ranks,
    /// shuffled with seed 0, padded, at epoch 0 (PyTorch's defaults).
    ///
    /// # Errors
    /// [`Error::BadArgument`] when `world_size` is 0 or `rank` is not below it.
    pub fn new(len: usize, rank: usize, world_size: usize) -> Result<Self> {
        if rank >= world_size {
            return Err(Error::BadArgument {
                op: "DistributedSampler",
                msg: format!("rank {rank} is not below the world size {world_size}"),
            });
        }
        Ok(DistributedSampler {
            len,
            rank,
            world_size,
            seed: Some(0),
            drop_last: false,
            epoch: 0,
        })
    }

    /// This rank's share in `group`.
    pub fn for_group(len: usize, group: &crate::dist::ProcessGroup) -> Self {
        DistributedSampler::new(len, group.rank(), group.world_size())
            .expect("a group's rank is below its world size")
    }

    /// Shuffles with `seed` (the same on every rank, or the shares overlap).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Keeps the data set's own order (PyTorch's `shuffle=False`).
    pub fn no_shuffle(mut self) -> Self {
        self.seed = None;
        self
    }

    /// Leaves out the tail that does not divide evenly instead of padding (`drop_last=True`).
    pub fn drop_last(mut self, drop: bool) -> Self {
        self.drop_last = drop;
        self
    }

    /// Sets the epoch whose order [`DistributedSampler::indices`] gives: call it at the start
    /// of every epoch, or every epoch repeats the same order.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// The epoch set last.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many items each rank visits per epoch.
    pub fn num_samples(&self) -> usize {
        if self.drop_last {
            self.len / self.world_size
        } else {
            self.len.div_ceil(self.world_size)
        }
    }

    /// How many items all ranks together visit per epoch (padded or cut).
    pub fn total_size(&self) -> usize {
        self.num_samples() * self.world_size
    }

    /// This rank's indices for the current epoch.
    pub fn indices(&self) -> Vec<usize> {
        self.indices_for(self.epoch)
    }

    /// This rank's indices for epoch `epoch`.
    pub fn indices_for(&self, epoch: u64) -> Vec<usize> {
        let mut order = match self.seed {
            Some(seed) => permutation(self.len, seed, epoch),
            None => (0..self.len).collect(),
        };
        let total = self.total_size();
        if order.is_empty() {
            return Vec::new();
        }
        // Pad with the order's first indices, cycling if more padding than items is needed.
        let mut i = 0;
        while order.len() < total {
            order.push(order[i]);
            i += 1;
        }
        order.truncate(total);
        order
            .into_iter()
            .skip(self.rank)
            .step_by(self.world_size)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(len: usize, world: usize, drop: bool, epoch: u64) -> Vec<Vec<usize>> {
        (0..world)
            .map(|r| {
                let mut s = DistributedSampler::new(len, r, world)
                    .unwrap()
                    .seed(3)
                    .drop_last(drop);
                s.set_epoch(epoch);
                s.indices()
            })
            .collect()
    }

    #[test]
    fn padding_repeats_the_first_indices_of_the_order() {
        let s = shares(10, 4, false, 2);
        assert!(s.iter().all(|x| x.len() == 3));
        let order = permutation(10, 3, 2);
        // Positions 10 and 11 of the padded order are positions 0 and 1 again: ranks 2 and 3.
        assert_eq!(s[2][2], order[0]);
        assert_eq!(s[3][2], order[1]);
        // Fewer items than ranks: the order cycles.
        let tiny = shares(2, 5, false, 0);
        assert!(tiny.iter().all(|x| x.len() == 1));
        assert!(shares(0, 3, false, 0).iter().all(Vec::is_empty));
    }

    #[test]
    fn bad_ranks_are_refused() {
        assert!(DistributedSampler::new(5, 2, 2).is_err());
        assert!(DistributedSampler::new(5, 0, 0).is_err());
    }
}
