//! The shape rule of matrix products: which shapes multiply, and the shape of the result.
//!
//! One impl per pair of ranks, as PyTorch's `matmul` defines them: a vector on the left is a
//! row, a vector on the right a column (and its axis is dropped from the result); leading
//! batch dims either appear on one side only (and broadcast) or must agree on both sides.
//! Inner dims are checked by [`MatmulInner`] and batch dims by [`BatchDimsAgree`], so a wrong
//! inner dim reads "dimension mismatch: `Const<64>` is not `Const<32>`: the inner dimensions
//! of a matmul must agree"; a pair of ranks with no rule reads "cannot multiply ...".
//!
//! The per-rank impls belong to [`MatmulRanks`], which only names the dims that must agree
//! (and the product's shape) and has no conditions; [`MatmulShapes`] has one blanket impl
//! over it that holds the agreement rules. The split is about the error a wrong dim gives:
//! rustc reports the failing leaf rule (naming both dims) and, under it, lists the impls of
//! the trait whose impl carried the failing condition. Carried by a blanket impl, there is
//! nothing to list; carried by the rank impls, an error reached through a projection such as
//! [`crate::nn::LinearOut`] listed all nine of them.

use super::rules::{BatchDimsAgree, MatmulInner};
use super::{Const, Dim, Shape};

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

impl<S: MatmulRanks<R>, R: Shape> MatmulShapes<R> for S
where
    S::Inner: MatmulInner<S::RhsInner>,
    S::Batch0: BatchDimsAgree<S::RhsBatch0>,
    S::Batch1: BatchDimsAgree<S::RhsBatch1>,
{
    type Output = <S as MatmulRanks<R>>::Output;
}

/// The matmul rule of one pair of ranks: the product's shape and the dims that must agree
/// (use [`MatmulShapes`], which checks them).
#[diagnostic::on_unimplemented(
    message = "cannot multiply `{Self}` by `{Rhs}`: no matmul rule for these ranks",
    label = "these shapes cannot be multiplied",
    note = "matmul takes [K]x[K, N], [M, K]x[K], [M, K]x[K, N], and batched [.., M, K]x[.., K, N] with 1 or 2 batch dims on either side (equal when on both)"
)]
pub trait MatmulRanks<Rhs: Shape>: Shape {
    /// The shape of the product.
    type Output: Shape;
    /// The left operand's inner dim (its columns).
    type Inner: Dim;
    /// The right operand's inner dim (its rows).
    type RhsInner: Dim;
    /// The left operand's first batch dim where both sides have batch dims (else `Const<1>`).
    type Batch0: Dim;
    /// The right operand's first batch dim where both sides have batch dims (else `Const<1>`).
    type RhsBatch0: Dim;
    /// The left operand's second batch dim where both sides have two (else `Const<1>`).
    type Batch1: Dim;
    /// The right operand's second batch dim where both sides have two (else `Const<1>`).
    type RhsBatch1: Dim;
}

/// The rank rule of a product without batch dims on both sides: only the inner dims agree.
macro_rules! no_shared_batch {
    ($k:ident, $k2:ident) => {
        type Inner = $k;
        type RhsInner = $k2;
        type Batch0 = Const<1>;
        type RhsBatch0 = Const<1>;
        type Batch1 = Const<1>;
        type RhsBatch1 = Const<1>;
    };
}

// [K] x [K, N] -> [N]
impl<K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (K,) {
    type Output = (N,);
    no_shared_batch!(K, K2);
}

// [M, K] x [K] -> [M]
impl<M: Dim, K: Dim, K2: Dim> MatmulRanks<(K2,)> for (M, K) {
    type Output = (M,);
    no_shared_batch!(K, K2);
}

// [M, K] x [K, N] -> [M, N]
impl<M: Dim, K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (M, K) {
    type Output = (M, N);
    no_shared_batch!(K, K2);
}

// [B, M, K] x [K, N] -> [B, M, N]
impl<B: Dim, M: Dim, K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (B, M, K) {
    type Output = (B, M, N);
    no_shared_batch!(K, K2);
}

// [M, K] x [B, K, N] -> [B, M, N]
impl<M: Dim, K: Dim, B: Dim, K2: Dim, N: Dim> MatmulRanks<(B, K2, N)> for (M, K) {
    type Output = (B, M, N);
    no_shared_batch!(K, K2);
}

// [B, M, K] x [B, K, N] -> [B, M, N]
impl<B: Dim, M: Dim, K: Dim, B2: Dim, K2: Dim, N: Dim> MatmulRanks<(B2, K2, N)> for (B, M, K) {
    type Output = (B, M, N);
    type Inner = K;
    type RhsInner = K2;
    type Batch0 = B;
    type RhsBatch0 = B2;
    type Batch1 = Const<1>;
    type RhsBatch1 = Const<1>;
}

// [B1, B2, M, K] x [K, N] -> [B1, B2, M, N]
impl<B1: Dim, B2: Dim, M: Dim, K: Dim, K2: Dim, N: Dim> MatmulRanks<(K2, N)> for (B1, B2, M, K) {
    type Output = (B1, B2, M, N);
    no_shared_batch!(K, K2);
}

// [M, K] x [B1, B2, K, N] -> [B1, B2, M, N]
impl<M: Dim, K: Dim, B1: Dim, B2: Dim, K2: Dim, N: Dim> MatmulRanks<(B1, B2, K2, N)> for (M, K) {
    type Output = (B1, B2, M, N);
    no_shared_batch!(K, K2);
}

// [B1, B2, M, K] x [B1, B2, K, N] -> [B1, B2, M, N]
impl<B1: Dim, B2: Dim, M: Dim, K: Dim, C1: Dim, C2: Dim, K2: Dim, N: Dim>
    MatmulRanks<(C1, C2, K2, N)> for (B1, B2, M, K)
{
    type Output = (B1, B2, M, N);
    type Inner = K;
    type RhsInner = K2;
    type Batch0 = B1;
    type RhsBatch0 = C1;
    type Batch1 = B2;
    type RhsBatch1 = C2;
}
