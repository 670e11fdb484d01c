//! The shape rule of matrix products: which shapes multiply, and the shape of the result.
//!
//! One impl per pair of ranks, as PyTorch's `matmul` defines them: a vector on the left is a
//! row, a vector on the right a column (and its axis is dropped from the result); leading
//! batch dims either appear on one side only (and broadcast) or must agree on both sides.
//! Inner dims are checked by [`MatmulInner`] and batch dims by [`BatchDimsAgree`], so a wrong
//! inner dim reads "dimension mismatch: `Const<64>` is not `Const<32>`: the inner dimensions
//! of a matmul must agree"; a pair of ranks with no rule reads "cannot multiply ...".
//!
//! The per-rank impls belong to [`MatmulRanks`], and [`MatmulShapes`] has one blanket impl
//! over it. Two reasons, both about the error a wrong dim gives:
//! - the rank impls are *not* `#[diagnostic::do_not_recommend]`: with it, rustc (1.95,
//!   checked) reports the outer "cannot multiply" message even when only the inner dims
//!   differ, hiding which dims are wrong. Each pair of ranks has exactly one impl, so rustc
//!   picks it and reports the failing leaf rule;
//! - under a failing leaf rule rustc lists the impls of the trait the user's bound names. With
//!   the rank impls on `MatmulShapes` itself that was nine impls under every matmul error; with
//!   one blanket impl there is nothing to list.

use super::rules::{BatchDimsAgree, MatmulInner};
use super::{Dim, Shape};

/// Two shapes that can be multiplied as matrices, and the shape of the product.
#[diagnostic::on_unimplemented(
    message = "cannot multiply `{Self}` by `{Rhs}`: no matmul rule for these ranks",
    label = "these shapes cannot be multiplied",
    note = "matmul takes [K]x[K, N], [M, K]x[K], [M, K]x[K, N], and batched [.., M, K]x[.., K, N] with 1 or 2 batch dims on either side (equal when on both)"
)]
pub trait MatmulShapes<Rhs: Shape>: Shape {
    /// The shape of the product.
    type Output: Shape;
}

impl<S: MatmulRanks<R>, R: Shape> MatmulShapes<R> for S {
    type Output = <S as MatmulRanks<R>>::Output;
}

/// The matmul rule of one pair of ranks; use [`MatmulShapes`], which every pair implements.
#[diagnostic::on_unimplemented(
    message = "cannot multiply `{Self}` by `{Rhs}`: no matmul rule for these ranks",
    label = "these shapes cannot be multiplied",
    note = "matmul takes [K]x[K, N], [M, K]x[K], [M, K]x[K, N], and batched [.., M, K]x[.., K, N] with 1 or 2 batch dims on either side (equal when on both)"
)]
pub trait MatmulRanks<Rhs: Shape>: Shape {
    /// The shape of the product.
    type Output: Shape;
}

// [K] x [K, N] -> [N]
impl<K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (K,)
where
    K: MatmulInner<K2>,
{
    type Output = (N,);
}

// [M, K] x [K] -> [M]
impl<M: Dim, K: Dim, K2: Dim> MatmulRanks<(K2,)> for (M, K)
where
    K: MatmulInner<K2>,
{
    type Output = (M,);
}

// [M, K] x [K, N] -> [M, N]
impl<M: Dim, K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (M, K)
where
    K: MatmulInner<K2>,
{
    type Output = (M, N);
}

// [B, M, K] x [K, N] -> [B, M, N]
impl<B: Dim, M: Dim, K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (B, M, K)
where
    K: MatmulInner<K2>,
{
    type Output = (B, M, N);
}

// [M, K] x [B, K, N] -> [B, M, N]
impl<M: Dim, K: Dim, B: Dim, K2: Dim, N: Dim> MatmulRanks<(B, K2, N)> for (M, K)
where
    K: MatmulInner<K2>,
{
    type Output = (B, M, N);
}

// [B, M, K] x [B, K, N] -> [B, M, N]
impl<B: Dim, M: Dim, K: Dim, B2: Dim, K2: Dim, N: Dim> MatmulRanks<(B2, K2, N)> for (B, M, K)
where
    B: BatchDimsAgree<B2>,
    K: MatmulInner<K2>,
{
    type Output = (B, M, N);
}

// [B1, B2, M, K] x [K, N] -> [B1, B2, M, N]
impl<B1: Dim, B2: Dim, M: Dim, K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (B1, B2, M, K)
where
    K: MatmulInner<K2>,
{
    type Output = (B1, B2, M, N);
}

// [M, K] x [B1, B2, K, N] -> [B1, B2, M, N]
impl<M: Dim, K: Dim, B1: Dim, B2: Dim, K2: Dim, N: Dim> MatmulRanks<(B1, B2, K2, N)> for (M, K)
where
    K: MatmulInner<K2>,
{
    type Output = (B1, B2, M, N);
}

// [B1, B2, M, K] x [B1, B2, K, N] -> [B1, B2, M, N]
impl<B1: Dim, B2: Dim, M: Dim, K: Dim, C1: Dim, C2: Dim, K2: Dim, N: Dim>
    MatmulRanks<(C1, C2, K2, N)> for (B1, B2, M, K)
where
    B1: BatchDimsAgree<C1>,
    B2: BatchDimsAgree<C2>,
    K: MatmulInner<K2>,
{
    type Output = (B1, B2, M, N);
}
