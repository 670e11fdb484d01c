//! The CPU backend: loops over host memory, parallel over all cores with rayon.
//!
//! Invariant: work is split into fixed-size chunks of the output, never by how rayon happens
//! to steal, so every result (float sums included) is the same run to run and on any number
//! of threads.

pub mod conv;
pub mod elementwise;
pub mod index;
pub mod matmul;
pub mod optim;
pub mod random;
pub mod reduce;

/// Elements per parallel task. Fixed, so chunk boundaries never depend on the thread count.
pub const CHUNK: usize = 1 << 14;
