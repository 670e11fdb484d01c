//! Dimensions as types: `Const<N>` (known when compiling), `usize` (known at run time) and
//! `Dyn<'B'>` (a named run-time dimension; two `Dyn` of different names never unify, so a
//! batch length cannot stand in for a sequence length).

use std::fmt::Debug;

/// One dimension of a shape.
pub trait Dim: Copy + Debug + Send + Sync + 'static {
    /// The size when it is known at compile time.
    const STATIC: Option<usize>;
    /// The name of a named run-time dimension.
    const NAME: Option<char>;
    /// The size.
    fn size(&self) -> usize;
    /// This dimension with run-time size `n`, or `None` when the type fixes another size.
    fn from_size(n: usize) -> Option<Self>;
}

/// A dimension whose size `N` is part of the type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Const<const N: usize>;

/// A named run-time dimension: `Dyn<'B'>(32)` is a batch of 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dyn<const NAME: char>(pub usize);

impl<const N: usize> Dim for Const<N> {
    const STATIC: Option<usize> = Some(N);
    const NAME: Option<char> = None;
    #[inline]
    fn size(&self) -> usize {
        N
    }
    #[inline]
    fn from_size(n: usize) -> Option<Self> {
        (n == N).then_some(Const)
    }
}

impl Dim for usize {
    const STATIC: Option<usize> = None;
    const NAME: Option<char> = None;
    #[inline]
    fn size(&self) -> usize {
        *self
    }
    #[inline]
    fn from_size(n: usize) -> Option<Self> {
        Some(n)
    }
}

impl<const C: char> Dim for Dyn<C> {
    const STATIC: Option<usize> = None;
    const NAME: Option<char> = Some(C);
    #[inline]
    fn size(&self) -> usize {
        self.0
    }
    #[inline]
    fn from_size(n: usize) -> Option<Self> {
        Some(Dyn(n))
    }
}
