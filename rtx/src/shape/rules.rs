//! Shape rules that relate two shapes: equal dimensions and broadcasting.
//!
//! Each rule is a leaf trait with an `on_unimplemented` message naming both sides and the rule.
//! Rule traits are implemented through [`DimEq`] with `#[diagnostic::do_not_recommend]`, so
//! rustc reports the rule the user broke rather than the helper bound inside it.
//!
//! `Const<N>` equals only `Const<N>`; `Dyn<'B'>` equals only `Dyn<'B'>`; a plain `usize`
//! equals anything but is checked at run time (the op's `try_` form returns the error).

use super::{Const, Dim, Dyn, ReduceAxis, Shape};

/// Two dimensions that must be equal.
#[diagnostic::on_unimplemented(
    message = "dimension mismatch: `{Self}` is not `{D}`",
    label = "these dimensions must be equal",
    note = "named run-time dims (`Dyn<'B'>`) only match the same name; a plain `usize` matches anything and is checked at run time"
)]
pub trait DimEq<D: Dim>: Dim {}

// Every dim equals itself: one blanket impl, so a generic dim (`B` in `fn forward<B: Dim>`)
// equals itself too, as concrete ones do.
#[diagnostic::do_not_recommend]
impl<D: Dim> DimEq<D> for D {}
#[diagnostic::do_not_recommend]
impl<const N: usize> DimEq<usize> for Const<N> {}
#[diagnostic::do_not_recommend]
impl<const N: usize> DimEq<Const<N>> for usize {}
#[diagnostic::do_not_recommend]
impl<const C: char> DimEq<usize> for Dyn<C> {}
#[diagnostic::do_not_recommend]
impl<const C: char> DimEq<Dyn<C>> for usize {}

/// The inner dimensions of a matrix product.
#[diagnostic::on_unimplemented(
    message = "dimension mismatch: `{Self}` is not `{D}`: the inner dimensions of a matmul must agree",
    label = "the left operand's columns must equal the right operand's rows"
)]
pub trait MatmulInner<D: Dim>: Dim {}
#[diagnostic::do_not_recommend]
impl<A: DimEq<B>, B: Dim> MatmulInner<B> for A {}

/// The batch dimensions of a batched matrix product.
#[diagnostic::on_unimplemented(
    message = "dimension mismatch: `{Self}` is not `{D}`: the batch dimensions of a batched matmul must agree",
    label = "batch dimensions must be equal (expand size-1 batch dims explicitly)"
)]
pub trait BatchDimsAgree<D: Dim>: Dim {}
#[diagnostic::do_not_recommend]
impl<A: DimEq<B>, B: Dim> BatchDimsAgree<B> for A {}

/// Dimensions that must agree when joining tensors (concat, stack) or combining them
/// elementwise (`where`).
#[diagnostic::on_unimplemented(
    message = "dimension mismatch: `{Self}` is not `{D}`: tensors joined or combined must agree outside the joined axis",
    label = "these dimensions must be equal"
)]
pub trait JoinDimsAgree<D: Dim>: Dim {}
#[diagnostic::do_not_recommend]
impl<A: DimEq<B>, B: Dim> JoinDimsAgree<B> for A {}

/// Two shapes of one rank whose dims agree pairwise by [`JoinDimsAgree`] (the shapes left once
/// the joined axis is removed).
///
/// Unlike the leaf rules, this conjunction and [`ConcatWith`] carry no `do_not_recommend`: rustc
/// then reports the leaf that failed ("dimension mismatch: `Const<2>` is not `Const<3>`: tensors
/// joined ... must agree outside the joined axis"), naming both dims, with these as notes.
#[diagnostic::on_unimplemented(
    message = "cannot join `{Self}` with `{T}`: the shapes must have the same rank and agree outside the joined axis",
    label = "these shapes must agree"
)]
pub trait JoinShapesAgree<T: Shape>: Shape {}
impl JoinShapesAgree<()> for () {}
impl<A0: JoinDimsAgree<B0>, B0: Dim> JoinShapesAgree<(B0,)> for (A0,) {}
impl<A0: JoinDimsAgree<B0>, A1: JoinDimsAgree<B1>, B0: Dim, B1: Dim> JoinShapesAgree<(B0, B1)>
    for (A0, A1)
{
}
impl<A0: JoinDimsAgree<B0>, A1: JoinDimsAgree<B1>, A2: JoinDimsAgree<B2>, B0: Dim, B1: Dim, B2: Dim>
    JoinShapesAgree<(B0, B1, B2)> for (A0, A1, A2)
{
}
impl<
    A0: JoinDimsAgree<B0>,
    A1: JoinDimsAgree<B1>,
    A2: JoinDimsAgree<B2>,
    A3: JoinDimsAgree<B3>,
    B0: Dim,
    B1: Dim,
    B2: Dim,
    B3: Dim,
> JoinShapesAgree<(B0, B1, B2, B3)> for (A0, A1, A2, A3)
{
}
impl<
    A0: JoinDimsAgree<B0>,
    A1: JoinDimsAgree<B1>,
    A2: JoinDimsAgree<B2>,
    A3: JoinDimsAgree<B3>,
    A4: JoinDimsAgree<B4>,
    B0: Dim,
    B1: Dim,
    B2: Dim,
    B3: Dim,
    B4: Dim,
> JoinShapesAgree<(B0, B1, B2, B3, B4)> for (A0, A1, A2, A3, A4)
{
}

/// A shape that can be concatenated after a tensor of shape `S` along axis `I`: same rank,
/// and every dim but axis `I` agrees with `S`'s (a mismatch names both dims).
#[diagnostic::on_unimplemented(
    message = "cannot concatenate a tensor of shape `{Self}` onto one of shape `{S}` along axis {I}",
    label = "the shapes must have the same rank and agree outside axis {I}"
)]
pub trait ConcatWith<S: Shape, const I: usize>: Shape {}
impl<S, T, const I: usize> ConcatWith<S, I> for T
where
    S: ReduceAxis<I>,
    T: ReduceAxis<I>,
    S::Reduced: JoinShapesAgree<T::Reduced>,
{
}

/// Channel counts of a convolution: input channels must equal the weight's input channels
/// times the groups.
#[diagnostic::on_unimplemented(
    message = "dimension mismatch: `{Self}` is not `{D}`: a convolution's weight must match the input channels",
    label = "these channel counts must be equal"
)]
pub trait ChannelsAgree<D: Dim, G = super::conv::Ungrouped>: Dim {}
#[diagnostic::do_not_recommend]
impl<A: DimEq<B>, B: Dim> ChannelsAgree<B, super::conv::Ungrouped> for A {}
// Grouped channels are a quotient the types cannot state: `const` checks and run-time checks
// verify them.
#[diagnostic::do_not_recommend]
impl<A: Dim, B: Dim> ChannelsAgree<B, super::conv::Grouped> for A {}

/// Two shapes that broadcast together, and the shape of the result.
///
/// Broadcasting is implicit only where it can be typed without overlapping impls: the smaller
/// shape's dims must equal the trailing dims of the larger (`[B, N] + [N]`), and a scalar `()`
/// goes with anything. A size-1 dim is expanded explicitly with `broadcast_to`.
#[diagnostic::on_unimplemented(
    message = "cannot broadcast `{Self}` with `{Rhs}`: trailing dimensions must be equal",
    label = "shapes do not broadcast",
    note = "implicit broadcasting adds leading dims only; expand size-1 dims explicitly with `.broadcast_to()`"
)]
pub trait BroadcastShapes<Rhs: Shape>: Shape {
    /// The shape of the result.
    type Output: Shape;
}

#[diagnostic::do_not_recommend]
impl BroadcastShapes<()> for () {
    type Output = ();
}
#[diagnostic::do_not_recommend]
impl<B0: Dim> BroadcastShapes<(B0,)> for () {
    type Output = (B0,);
}
#[diagnostic::do_not_recommend]
impl<B0: Dim, B1: Dim> BroadcastShapes<(B0, B1)> for () {
    type Output = (B0, B1);
}
#[diagnostic::do_not_recommend]
impl<B0: Dim, B1: Dim, B2: Dim> BroadcastShapes<(B0, B1, B2)> for () {
    type Output = (B0, B1, B2);
}
#[diagnostic::do_not_recommend]
impl<B0: Dim, B1: Dim, B2: Dim, B3: Dim> BroadcastShapes<(B0, B1, B2, B3)> for () {
    type Output = (B0, B1, B2, B3);
}
#[diagnostic::do_not_recommend]
impl<B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim> BroadcastShapes<(B0, B1, B2, B3, B4)> for () {
    type Output = (B0, B1, B2, B3, B4);
}
#[diagnostic::do_not_recommend]
impl<B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim, B5: Dim> BroadcastShapes<(B0, B1, B2, B3, B4, B5)>
    for ()
{
    type Output = (B0, B1, B2, B3, B4, B5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim> BroadcastShapes<()> for (A0,) {
    type Output = (A0,);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, B0: Dim> BroadcastShapes<(B0,)> for (A0,)
where
    A0: DimEq<B0>,
{
    type Output = (A0,);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, B0: Dim, B1: Dim> BroadcastShapes<(B0, B1)> for (A0,)
where
    A0: DimEq<B1>,
{
    type Output = (B0, B1);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, B0: Dim, B1: Dim, B2: Dim> BroadcastShapes<(B0, B1, B2)> for (A0,)
where
    A0: DimEq<B2>,
{
    type Output = (B0, B1, B2);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim> BroadcastShapes<(B0, B1, B2, B3)> for (A0,)
where
    A0: DimEq<B3>,
{
    type Output = (B0, B1, B2, B3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim> BroadcastShapes<(B0, B1, B2, B3, B4)>
    for (A0,)
where
    A0: DimEq<B4>,
{
    type Output = (B0, B1, B2, B3, B4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim, B5: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4, B5)> for (A0,)
where
    A0: DimEq<B5>,
{
    type Output = (B0, B1, B2, B3, B4, B5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim> BroadcastShapes<()> for (A0, A1) {
    type Output = (A0, A1);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, B0: Dim> BroadcastShapes<(B0,)> for (A0, A1)
where
    A1: DimEq<B0>,
{
    type Output = (A0, A1);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, B0: Dim, B1: Dim> BroadcastShapes<(B0, B1)> for (A0, A1)
where
    A0: DimEq<B0>,
    A1: DimEq<B1>,
{
    type Output = (A0, A1);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, B0: Dim, B1: Dim, B2: Dim> BroadcastShapes<(B0, B1, B2)> for (A0, A1)
where
    A0: DimEq<B1>,
    A1: DimEq<B2>,
{
    type Output = (B0, B1, B2);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim> BroadcastShapes<(B0, B1, B2, B3)>
    for (A0, A1)
where
    A0: DimEq<B2>,
    A1: DimEq<B3>,
{
    type Output = (B0, B1, B2, B3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4)> for (A0, A1)
where
    A0: DimEq<B3>,
    A1: DimEq<B4>,
{
    type Output = (B0, B1, B2, B3, B4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim, B5: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4, B5)> for (A0, A1)
where
    A0: DimEq<B4>,
    A1: DimEq<B5>,
{
    type Output = (B0, B1, B2, B3, B4, B5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim> BroadcastShapes<()> for (A0, A1, A2) {
    type Output = (A0, A1, A2);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, B0: Dim> BroadcastShapes<(B0,)> for (A0, A1, A2)
where
    A2: DimEq<B0>,
{
    type Output = (A0, A1, A2);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, B0: Dim, B1: Dim> BroadcastShapes<(B0, B1)> for (A0, A1, A2)
where
    A1: DimEq<B0>,
    A2: DimEq<B1>,
{
    type Output = (A0, A1, A2);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, B0: Dim, B1: Dim, B2: Dim> BroadcastShapes<(B0, B1, B2)>
    for (A0, A1, A2)
where
    A0: DimEq<B0>,
    A1: DimEq<B1>,
    A2: DimEq<B2>,
{
    type Output = (A0, A1, A2);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim>
    BroadcastShapes<(B0, B1, B2, B3)> for (A0, A1, A2)
where
    A0: DimEq<B1>,
    A1: DimEq<B2>,
    A2: DimEq<B3>,
{
    type Output = (B0, B1, B2, B3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4)> for (A0, A1, A2)
where
    A0: DimEq<B2>,
    A1: DimEq<B3>,
    A2: DimEq<B4>,
{
    type Output = (B0, B1, B2, B3, B4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim, B5: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4, B5)> for (A0, A1, A2)
where
    A0: DimEq<B3>,
    A1: DimEq<B4>,
    A2: DimEq<B5>,
{
    type Output = (B0, B1, B2, B3, B4, B5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim> BroadcastShapes<()> for (A0, A1, A2, A3) {
    type Output = (A0, A1, A2, A3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, B0: Dim> BroadcastShapes<(B0,)> for (A0, A1, A2, A3)
where
    A3: DimEq<B0>,
{
    type Output = (A0, A1, A2, A3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, B0: Dim, B1: Dim> BroadcastShapes<(B0, B1)>
    for (A0, A1, A2, A3)
where
    A2: DimEq<B0>,
    A3: DimEq<B1>,
{
    type Output = (A0, A1, A2, A3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, B0: Dim, B1: Dim, B2: Dim> BroadcastShapes<(B0, B1, B2)>
    for (A0, A1, A2, A3)
where
    A1: DimEq<B0>,
    A2: DimEq<B1>,
    A3: DimEq<B2>,
{
    type Output = (A0, A1, A2, A3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim>
    BroadcastShapes<(B0, B1, B2, B3)> for (A0, A1, A2, A3)
where
    A0: DimEq<B0>,
    A1: DimEq<B1>,
    A2: DimEq<B2>,
    A3: DimEq<B3>,
{
    type Output = (A0, A1, A2, A3);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4)> for (A0, A1, A2, A3)
where
    A0: DimEq<B1>,
    A1: DimEq<B2>,
    A2: DimEq<B3>,
    A3: DimEq<B4>,
{
    type Output = (B0, B1, B2, B3, B4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim, B5: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4, B5)> for (A0, A1, A2, A3)
where
    A0: DimEq<B2>,
    A1: DimEq<B3>,
    A2: DimEq<B4>,
    A3: DimEq<B5>,
{
    type Output = (B0, B1, B2, B3, B4, B5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim> BroadcastShapes<()> for (A0, A1, A2, A3, A4) {
    type Output = (A0, A1, A2, A3, A4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, B0: Dim> BroadcastShapes<(B0,)>
    for (A0, A1, A2, A3, A4)
where
    A4: DimEq<B0>,
{
    type Output = (A0, A1, A2, A3, A4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, B0: Dim, B1: Dim> BroadcastShapes<(B0, B1)>
    for (A0, A1, A2, A3, A4)
where
    A3: DimEq<B0>,
    A4: DimEq<B1>,
{
    type Output = (A0, A1, A2, A3, A4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, B0: Dim, B1: Dim, B2: Dim>
    BroadcastShapes<(B0, B1, B2)> for (A0, A1, A2, A3, A4)
where
    A2: DimEq<B0>,
    A3: DimEq<B1>,
    A4: DimEq<B2>,
{
    type Output = (A0, A1, A2, A3, A4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim>
    BroadcastShapes<(B0, B1, B2, B3)> for (A0, A1, A2, A3, A4)
where
    A1: DimEq<B0>,
    A2: DimEq<B1>,
    A3: DimEq<B2>,
    A4: DimEq<B3>,
{
    type Output = (A0, A1, A2, A3, A4);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim, B4: Dim>
    BroadcastShapes<(B0, B1, B2, B3, B4)> for (A0, A1, A2, A3, A4)
where
    A0: DimEq<B0>,
    A1: DimEq<B1>,
    A2: DimEq<B2>,
    A3: DimEq<B3>,
    A4: DimEq<B4>,
{
    type Output = (A0, A1, A2, A3, A4);
}
#[diagnostic::do_not_recommend]
impl<
    A0: Dim,
    A1: Dim,
    A2: Dim,
    A3: Dim,
    A4: Dim,
    B0: Dim,
    B1: Dim,
    B2: Dim,
    B3: Dim,
    B4: Dim,
    B5: Dim,
> BroadcastShapes<(B0, B1, B2, B3, B4, B5)> for (A0, A1, A2, A3, A4)
where
    A0: DimEq<B1>,
    A1: DimEq<B2>,
    A2: DimEq<B3>,
    A3: DimEq<B4>,
    A4: DimEq<B5>,
{
    type Output = (B0, B1, B2, B3, B4, B5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, A5: Dim> BroadcastShapes<()>
    for (A0, A1, A2, A3, A4, A5)
{
    type Output = (A0, A1, A2, A3, A4, A5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, A5: Dim, B0: Dim> BroadcastShapes<(B0,)>
    for (A0, A1, A2, A3, A4, A5)
where
    A5: DimEq<B0>,
{
    type Output = (A0, A1, A2, A3, A4, A5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, A5: Dim, B0: Dim, B1: Dim>
    BroadcastShapes<(B0, B1)> for (A0, A1, A2, A3, A4, A5)
where
    A4: DimEq<B0>,
    A5: DimEq<B1>,
{
    type Output = (A0, A1, A2, A3, A4, A5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, A5: Dim, B0: Dim, B1: Dim, B2: Dim>
    BroadcastShapes<(B0, B1, B2)> for (A0, A1, A2, A3, A4, A5)
where
    A3: DimEq<B0>,
    A4: DimEq<B1>,
    A5: DimEq<B2>,
{
    type Output = (A0, A1, A2, A3, A4, A5);
}
#[diagnostic::do_not_recommend]
impl<A0: Dim, A1: Dim, A2: Dim, A3: Dim, A4: Dim, A5: Dim, B0: Dim, B1: Dim, B2: Dim, B3: Dim>
    BroadcastShapes<(B0, B1, B2, B3)> for (A0, A1, A2, A3, A4, A5)
where
    A2: DimEq<B0>,
    A3: DimEq<B1>,
    A4: DimEq<B2>,
    A5: DimEq<B3>,
{
    type Output = (A0, A1, A2, A3, A4, A5);
}
#[diagnostic::do_not_recommend]
impl<
    A0: Dim,
    A1: Dim,
    A2: Dim,
    A3: Dim,
    A4: Dim,
    A5: Dim,
    B0: Dim,
    B1: Dim,
    B2: Dim,
    B3: Dim,
    B4: Dim,
> BroadcastShapes<(B0, B1, B2, B3, B4)> for (A0, A1, A2, A3, A4, A5)
where
    A1: DimEq<B0>,
    A2: DimEq<B1>,
    A3: DimEq<B2>,
    A4: DimEq<B3>,
    A5: DimEq<B4>,
{
    type Output = (A0, A1, A2, A3, A4, A5);
}
#[diagnostic::do_not_recommend]
impl<
    A0: Dim,
    A1: Dim,
    A2: Dim,
    A3: Dim,
    A4: Dim,
    A5: Dim,
    B0: Dim,
    B1: Dim,
    B2: Dim,
    B3: Dim,
    B4: Dim,
    B5: Dim,
> BroadcastShapes<(B0, B1, B2, B3, B4, B5)> for (A0, A1, A2, A3, A4, A5)
where
    A0: DimEq<B0>,
    A1: DimEq<B1>,
    A2: DimEq<B2>,
    A3: DimEq<B3>,
    A4: DimEq<B4>,
    A5: DimEq<B5>,
{
    type Output = (A0, A1, A2, A3, A4, A5);
}
