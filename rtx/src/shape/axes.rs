//! Axis-indexed shape rules: which dim sits at axis `I`, a shape with an axis removed, kept as
//! 1, inserted, swapped or permuted.
//!
//! The impls are written out per rank and axis (rank 6 at most, so 21 axis positions): rustc
//! cannot compute "the tuple with element I removed" from a const parameter on stable Rust.
//! Each trait's `on_unimplemented` message names the axis and the shape, so an out-of-range
//! axis is a compile error that says so.

use super::{Const, Dim, Shape};

/// Marks each impl `#[diagnostic::do_not_recommend]`, which keeps it out of rustc's "the
/// following other types implement trait" lists under an error.
macro_rules! not_listed {
    ($($item:item)*) => {
        $(#[diagnostic::do_not_recommend] $item)*
    };
}

/// The dimension at axis `I`.
#[diagnostic::on_unimplemented(
    message = "axis {I} is out of range for a tensor of shape `{Self}`",
    label = "this tensor has no axis {I}",
    note = "axes count from 0; a rank-r tensor has axes 0..r"
)]
pub trait HasAxis<const I: usize>: Shape {
    /// The dimension type at axis `I`.
    type Dim: Dim;
    /// The dimension value at axis `I`.
    fn axis_dim(&self) -> Self::Dim;
}

/// The shape after reducing axis `I`, without and with `keepdim`.
#[diagnostic::on_unimplemented(
    message = "axis {I} is out of range for a tensor of shape `{Self}`",
    label = "this tensor has no axis {I}",
    note = "axes count from 0; a rank-r tensor has axes 0..r"
)]
pub trait ReduceAxis<const I: usize>: HasAxis<I> {
    /// The shape with axis `I` removed.
    type Reduced: Shape;
    /// The shape with axis `I` set to `Const<1>`.
    type Kept: Shape;
}

/// The shape with a new dimension `D` inserted before axis `I` (`I == rank` appends).
#[diagnostic::on_unimplemented(
    message = "cannot insert an axis at position {I} into a tensor of shape `{Self}`",
    label = "position {I} is past the end",
    note = "a new axis may go at positions 0..=rank"
)]
pub trait InsertAxis<const I: usize, D: Dim>: Shape {
    /// The shape with the new axis.
    type Output: Shape;
}

/// The shape with axes `A` and `B` exchanged.
#[diagnostic::on_unimplemented(
    message = "cannot swap axes {A} and {B} of a tensor of shape `{Self}`",
    label = "an axis is out of range, or the two axes are the same",
    note = "axes count from 0; a rank-r tensor has axes 0..r"
)]
pub trait SwapAxes<const A: usize, const B: usize>: Shape {
    /// The shape after the swap.
    type Output: Shape;
}

/// A permutation of the axes of a shape, such as `Axes3<0, 2, 1>`.
#[diagnostic::on_unimplemented(
    message = "`{P}` is not a permutation of the axes of a tensor of shape `{Self}`",
    label = "wrong number of axes, or an axis out of range",
    note = "give one axis index per dimension, each once: `Axes3<2, 0, 1>` for a rank-3 tensor"
)]
pub trait PermuteAxes<P>: Shape {
    /// The permuted shape.
    type Output: Shape;
    /// Output axis `i` is input axis `PERM[i]`.
    const PERM: &'static [usize];
}

// Every rule impl is `do_not_recommend`: an out-of-range axis then reads as the trait's own
// message alone, without rustc listing the dozens of (shape, axis) pairs that do exist.
not_listed! {
    impl<D0: Dim> HasAxis<0> for (D0,) {
        type Dim = D0;
        fn axis_dim(&self) -> D0 {
            self.0
        }
    }
    impl<D0: Dim> ReduceAxis<0> for (D0,) {
        type Reduced = ();
        type Kept = (Const<1>,);
    }
    impl<D0: Dim, D1: Dim> HasAxis<0> for (D0, D1) {
        type Dim = D0;
        fn axis_dim(&self) -> D0 {
            self.0
        }
    }
    impl<D0: Dim, D1: Dim> HasAxis<1> for (D0, D1) {
        type Dim = D1;
        fn axis_dim(&self) -> D1 {
            self.1
        }
    }
    impl<D0: Dim, D1: Dim> ReduceAxis<0> for (D0, D1) {
        type Reduced = (D1,);
        type Kept = (Const<1>, D1);
    }
    impl<D0: Dim, D1: Dim> ReduceAxis<1> for (D0, D1) {
        type Reduced = (D0,);
        type Kept = (D0, Const<1>);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> HasAxis<0> for (D0, D1, D2) {
        type Dim = D0;
        fn axis_dim(&self) -> D0 {
            self.0
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim> HasAxis<1> for (D0, D1, D2) {
        type Dim = D1;
        fn axis_dim(&self) -> D1 {
            self.1
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim> HasAxis<2> for (D0, D1, D2) {
        type Dim = D2;
        fn axis_dim(&self) -> D2 {
            self.2
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim> ReduceAxis<0> for (D0, D1, D2) {
        type Reduced = (D1, D2);
        type Kept = (Const<1>, D1, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> ReduceAxis<1> for (D0, D1, D2) {
        type Reduced = (D0, D2);
        type Kept = (D0, Const<1>, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> ReduceAxis<2> for (D0, D1, D2) {
        type Reduced = (D0, D1);
        type Kept = (D0, D1, Const<1>);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> HasAxis<0> for (D0, D1, D2, D3) {
        type Dim = D0;
        fn axis_dim(&self) -> D0 {
            self.0
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> HasAxis<1> for (D0, D1, D2, D3) {
        type Dim = D1;
        fn axis_dim(&self) -> D1 {
            self.1
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> HasAxis<2> for (D0, D1, D2, D3) {
        type Dim = D2;
        fn axis_dim(&self) -> D2 {
            self.2
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> HasAxis<3> for (D0, D1, D2, D3) {
        type Dim = D3;
        fn axis_dim(&self) -> D3 {
            self.3
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> ReduceAxis<0> for (D0, D1, D2, D3) {
        type Reduced = (D1, D2, D3);
        type Kept = (Const<1>, D1, D2, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> ReduceAxis<1> for (D0, D1, D2, D3) {
        type Reduced = (D0, D2, D3);
        type Kept = (D0, Const<1>, D2, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> ReduceAxis<2> for (D0, D1, D2, D3) {
        type Reduced = (D0, D1, D3);
        type Kept = (D0, D1, Const<1>, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> ReduceAxis<3> for (D0, D1, D2, D3) {
        type Reduced = (D0, D1, D2);
        type Kept = (D0, D1, D2, Const<1>);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> HasAxis<0> for (D0, D1, D2, D3, D4) {
        type Dim = D0;
        fn axis_dim(&self) -> D0 {
            self.0
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> HasAxis<1> for (D0, D1, D2, D3, D4) {
        type Dim = D1;
        fn axis_dim(&self) -> D1 {
            self.1
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> HasAxis<2> for (D0, D1, D2, D3, D4) {
        type Dim = D2;
        fn axis_dim(&self) -> D2 {
            self.2
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> HasAxis<3> for (D0, D1, D2, D3, D4) {
        type Dim = D3;
        fn axis_dim(&self) -> D3 {
            self.3
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> HasAxis<4> for (D0, D1, D2, D3, D4) {
        type Dim = D4;
        fn axis_dim(&self) -> D4 {
            self.4
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> ReduceAxis<0> for (D0, D1, D2, D3, D4) {
        type Reduced = (D1, D2, D3, D4);
        type Kept = (Const<1>, D1, D2, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> ReduceAxis<1> for (D0, D1, D2, D3, D4) {
        type Reduced = (D0, D2, D3, D4);
        type Kept = (D0, Const<1>, D2, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> ReduceAxis<2> for (D0, D1, D2, D3, D4) {
        type Reduced = (D0, D1, D3, D4);
        type Kept = (D0, D1, Const<1>, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> ReduceAxis<3> for (D0, D1, D2, D3, D4) {
        type Reduced = (D0, D1, D2, D4);
        type Kept = (D0, D1, D2, Const<1>, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> ReduceAxis<4> for (D0, D1, D2, D3, D4) {
        type Reduced = (D0, D1, D2, D3);
        type Kept = (D0, D1, D2, D3, Const<1>);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> HasAxis<0> for (D0, D1, D2, D3, D4, D5) {
        type Dim = D0;
        fn axis_dim(&self) -> D0 {
            self.0
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> HasAxis<1> for (D0, D1, D2, D3, D4, D5) {
        type Dim = D1;
        fn axis_dim(&self) -> D1 {
            self.1
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> HasAxis<2> for (D0, D1, D2, D3, D4, D5) {
        type Dim = D2;
        fn axis_dim(&self) -> D2 {
            self.2
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> HasAxis<3> for (D0, D1, D2, D3, D4, D5) {
        type Dim = D3;
        fn axis_dim(&self) -> D3 {
            self.3
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> HasAxis<4> for (D0, D1, D2, D3, D4, D5) {
        type Dim = D4;
        fn axis_dim(&self) -> D4 {
            self.4
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> HasAxis<5> for (D0, D1, D2, D3, D4, D5) {
        type Dim = D5;
        fn axis_dim(&self) -> D5 {
            self.5
        }
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> ReduceAxis<0>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Reduced = (D1, D2, D3, D4, D5);
        type Kept = (Const<1>, D1, D2, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> ReduceAxis<1>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Reduced = (D0, D2, D3, D4, D5);
        type Kept = (D0, Const<1>, D2, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> ReduceAxis<2>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Reduced = (D0, D1, D3, D4, D5);
        type Kept = (D0, D1, Const<1>, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> ReduceAxis<3>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Reduced = (D0, D1, D2, D4, D5);
        type Kept = (D0, D1, D2, Const<1>, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> ReduceAxis<4>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Reduced = (D0, D1, D2, D3, D5);
        type Kept = (D0, D1, D2, D3, Const<1>, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> ReduceAxis<5>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Reduced = (D0, D1, D2, D3, D4);
        type Kept = (D0, D1, D2, D3, D4, Const<1>);
    }
    impl<N: Dim> InsertAxis<0, N> for () {
        type Output = (N,);
    }
    impl<D0: Dim, N: Dim> InsertAxis<0, N> for (D0,) {
        type Output = (N, D0);
    }
    impl<D0: Dim, N: Dim> InsertAxis<1, N> for (D0,) {
        type Output = (D0, N);
    }
    impl<D0: Dim, D1: Dim, N: Dim> InsertAxis<0, N> for (D0, D1) {
        type Output = (N, D0, D1);
    }
    impl<D0: Dim, D1: Dim, N: Dim> InsertAxis<1, N> for (D0, D1) {
        type Output = (D0, N, D1);
    }
    impl<D0: Dim, D1: Dim, N: Dim> InsertAxis<2, N> for (D0, D1) {
        type Output = (D0, D1, N);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, N: Dim> InsertAxis<0, N> for (D0, D1, D2) {
        type Output = (N, D0, D1, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, N: Dim> InsertAxis<1, N> for (D0, D1, D2) {
        type Output = (D0, N, D1, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, N: Dim> InsertAxis<2, N> for (D0, D1, D2) {
        type Output = (D0, D1, N, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, N: Dim> InsertAxis<3, N> for (D0, D1, D2) {
        type Output = (D0, D1, D2, N);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, N: Dim> InsertAxis<0, N> for (D0, D1, D2, D3) {
        type Output = (N, D0, D1, D2, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, N: Dim> InsertAxis<1, N> for (D0, D1, D2, D3) {
        type Output = (D0, N, D1, D2, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, N: Dim> InsertAxis<2, N> for (D0, D1, D2, D3) {
        type Output = (D0, D1, N, D2, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, N: Dim> InsertAxis<3, N> for (D0, D1, D2, D3) {
        type Output = (D0, D1, D2, N, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, N: Dim> InsertAxis<4, N> for (D0, D1, D2, D3) {
        type Output = (D0, D1, D2, D3, N);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, N: Dim> InsertAxis<0, N>
        for (D0, D1, D2, D3, D4)
    {
        type Output = (N, D0, D1, D2, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, N: Dim> InsertAxis<1, N>
        for (D0, D1, D2, D3, D4)
    {
        type Output = (D0, N, D1, D2, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, N: Dim> InsertAxis<2, N>
        for (D0, D1, D2, D3, D4)
    {
        type Output = (D0, D1, N, D2, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, N: Dim> InsertAxis<3, N>
        for (D0, D1, D2, D3, D4)
    {
        type Output = (D0, D1, D2, N, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, N: Dim> InsertAxis<4, N>
        for (D0, D1, D2, D3, D4)
    {
        type Output = (D0, D1, D2, D3, N, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, N: Dim> InsertAxis<5, N>
        for (D0, D1, D2, D3, D4)
    {
        type Output = (D0, D1, D2, D3, D4, N);
    }
    // A vector "transposed" onto its one axis is itself, as `transpose(0, 0)` is in PyTorch.
    // Without a rank-1 impl rustc would also answer a wrong axis of a vector with "method not
    // found" (E0599) instead of this trait's message.
    impl<D0: Dim> SwapAxes<0, 0> for (D0,) {
        type Output = (D0,);
    }
    impl<D0: Dim, D1: Dim> SwapAxes<0, 1> for (D0, D1) {
        type Output = (D1, D0);
    }
    impl<D0: Dim, D1: Dim> SwapAxes<1, 0> for (D0, D1) {
        type Output = (D1, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> SwapAxes<0, 1> for (D0, D1, D2) {
        type Output = (D1, D0, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> SwapAxes<0, 2> for (D0, D1, D2) {
        type Output = (D2, D1, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> SwapAxes<1, 0> for (D0, D1, D2) {
        type Output = (D1, D0, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> SwapAxes<1, 2> for (D0, D1, D2) {
        type Output = (D0, D2, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> SwapAxes<2, 0> for (D0, D1, D2) {
        type Output = (D2, D1, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim> SwapAxes<2, 1> for (D0, D1, D2) {
        type Output = (D0, D2, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<0, 1> for (D0, D1, D2, D3) {
        type Output = (D1, D0, D2, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<0, 2> for (D0, D1, D2, D3) {
        type Output = (D2, D1, D0, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<0, 3> for (D0, D1, D2, D3) {
        type Output = (D3, D1, D2, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<1, 0> for (D0, D1, D2, D3) {
        type Output = (D1, D0, D2, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<1, 2> for (D0, D1, D2, D3) {
        type Output = (D0, D2, D1, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<1, 3> for (D0, D1, D2, D3) {
        type Output = (D0, D3, D2, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<2, 0> for (D0, D1, D2, D3) {
        type Output = (D2, D1, D0, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<2, 1> for (D0, D1, D2, D3) {
        type Output = (D0, D2, D1, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<2, 3> for (D0, D1, D2, D3) {
        type Output = (D0, D1, D3, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<3, 0> for (D0, D1, D2, D3) {
        type Output = (D3, D1, D2, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<3, 1> for (D0, D1, D2, D3) {
        type Output = (D0, D3, D2, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim> SwapAxes<3, 2> for (D0, D1, D2, D3) {
        type Output = (D0, D1, D3, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<0, 1> for (D0, D1, D2, D3, D4) {
        type Output = (D1, D0, D2, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<0, 2> for (D0, D1, D2, D3, D4) {
        type Output = (D2, D1, D0, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<0, 3> for (D0, D1, D2, D3, D4) {
        type Output = (D3, D1, D2, D0, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<0, 4> for (D0, D1, D2, D3, D4) {
        type Output = (D4, D1, D2, D3, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<1, 0> for (D0, D1, D2, D3, D4) {
        type Output = (D1, D0, D2, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<1, 2> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D2, D1, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<1, 3> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D3, D2, D1, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<1, 4> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D4, D2, D3, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<2, 0> for (D0, D1, D2, D3, D4) {
        type Output = (D2, D1, D0, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<2, 1> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D2, D1, D3, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<2, 3> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D1, D3, D2, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<2, 4> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D1, D4, D3, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<3, 0> for (D0, D1, D2, D3, D4) {
        type Output = (D3, D1, D2, D0, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<3, 1> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D3, D2, D1, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<3, 2> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D1, D3, D2, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<3, 4> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D1, D2, D4, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<4, 0> for (D0, D1, D2, D3, D4) {
        type Output = (D4, D1, D2, D3, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<4, 1> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D4, D2, D3, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<4, 2> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D1, D4, D3, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim> SwapAxes<4, 3> for (D0, D1, D2, D3, D4) {
        type Output = (D0, D1, D2, D4, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<0, 1>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D1, D0, D2, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<0, 2>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D2, D1, D0, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<0, 3>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D3, D1, D2, D0, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<0, 4>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D4, D1, D2, D3, D0, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<0, 5>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D5, D1, D2, D3, D4, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<1, 0>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D1, D0, D2, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<1, 2>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D2, D1, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<1, 3>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D3, D2, D1, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<1, 4>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D4, D2, D3, D1, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<1, 5>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D5, D2, D3, D4, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<2, 0>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D2, D1, D0, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<2, 1>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D2, D1, D3, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<2, 3>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D3, D2, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<2, 4>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D4, D3, D2, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<2, 5>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D5, D3, D4, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<3, 0>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D3, D1, D2, D0, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<3, 1>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D3, D2, D1, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<3, 2>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D3, D2, D4, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<3, 4>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D2, D4, D3, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<3, 5>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D2, D5, D4, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<4, 0>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D4, D1, D2, D3, D0, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<4, 1>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D4, D2, D3, D1, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<4, 2>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D4, D3, D2, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<4, 3>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D2, D4, D3, D5);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<4, 5>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D2, D3, D5, D4);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<5, 0>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D5, D1, D2, D3, D4, D0);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<5, 1>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D5, D2, D3, D4, D1);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<5, 2>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D5, D3, D4, D2);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<5, 3>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D2, D5, D4, D3);
    }
    impl<D0: Dim, D1: Dim, D2: Dim, D3: Dim, D4: Dim, D5: Dim> SwapAxes<5, 4>
        for (D0, D1, D2, D3, D4, D5)
    {
        type Output = (D0, D1, D2, D3, D5, D4);
    }
}

/// A permutation of 2 axes: output axis `i` takes input axis number `i` of the list.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes2<const A: usize, const B: usize>;
#[diagnostic::do_not_recommend]
impl<D0: Dim, D1: Dim, const A: usize, const B: usize> PermuteAxes<Axes2<A, B>> for (D0, D1)
where
    Self: HasAxis<A> + HasAxis<B>,
{
    type Output = (<Self as HasAxis<A>>::Dim, <Self as HasAxis<B>>::Dim);
    const PERM: &'static [usize] = &[A, B];
}
/// A permutation of 3 axes: output axis `i` takes input axis number `i` of the list.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes3<const A: usize, const B: usize, const C: usize>;
#[diagnostic::do_not_recommend]
impl<D0: Dim, D1: Dim, D2: Dim, const A: usize, const B: usize, const C: usize>
    PermuteAxes<Axes3<A, B, C>> for (D0, D1, D2)
where
    Self: HasAxis<A> + HasAxis<B> + HasAxis<C>,
{
    type Output = (
        <Self as HasAxis<A>>::Dim,
        <Self as HasAxis<B>>::Dim,
        <Self as HasAxis<C>>::Dim,
    );
    const PERM: &'static [usize] = &[A, B, C];
}
/// A permutation of 4 axes: output axis `i` takes input axis number `i` of the list.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes4<const A: usize, const B: usize, const C: usize, const D: usize>;
#[diagnostic::do_not_recommend]
impl<
    D0: Dim,
    D1: Dim,
    D2: Dim,
    D3: Dim,
    const A: usize,
    const B: usize,
    const C: usize,
    const D: usize,
> PermuteAxes<Axes4<A, B, C, D>> for (D0, D1, D2, D3)
where
    Self: HasAxis<A> + HasAxis<B> + HasAxis<C> + HasAxis<D>,
{
    type Output = (
        <Self as HasAxis<A>>::Dim,
        <Self as HasAxis<B>>::Dim,
        <Self as HasAxis<C>>::Dim,
        <Self as HasAxis<D>>::Dim,
    );
    const PERM: &'static [usize] = &[A, B, C, D];
}
/// A permutation of 5 axes: output axis `i` takes input axis number `i` of the list.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes5<const A: usize, const B: usize, const C: usize, const D: usize, const E: usize>;
#[diagnostic::do_not_recommend]
impl<
    D0: Dim,
    D1: Dim,
    D2: Dim,
    D3: Dim,
    D4: Dim,
    const A: usize,
    const B: usize,
    const C: usize,
    const D: usize,
    const E: usize,
> PermuteAxes<Axes5<A, B, C, D, E>> for (D0, D1, D2, D3, D4)
where
    Self: HasAxis<A> + HasAxis<B> + HasAxis<C> + HasAxis<D> + HasAxis<E>,
{
    type Output = (
        <Self as HasAxis<A>>::Dim,
        <Self as HasAxis<B>>::Dim,
        <Self as HasAxis<C>>::Dim,
        <Self as HasAxis<D>>::Dim,
        <Self as HasAxis<E>>::Dim,
    );
    const PERM: &'static [usize] = &[A, B, C, D, E];
}
/// A permutation of 6 axes: output axis `i` takes input axis number `i` of the list.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes6<
    const A: usize,
    const B: usize,
    const C: usize,
    const D: usize,
    const E: usize,
    const F: usize,
>;
#[diagnostic::do_not_recommend]
impl<
    D0: Dim,
    D1: Dim,
    D2: Dim,
    D3: Dim,
    D4: Dim,
    D5: Dim,
    const A: usize,
    const B: usize,
    const C: usize,
    const D: usize,
    const E: usize,
    const F: usize,
> PermuteAxes<Axes6<A, B, C, D, E, F>> for (D0, D1, D2, D3, D4, D5)
where
    Self: HasAxis<A> + HasAxis<B> + HasAxis<C> + HasAxis<D> + HasAxis<E> + HasAxis<F>,
{
    type Output = (
        <Self as HasAxis<A>>::Dim,
        <Self as HasAxis<B>>::Dim,
        <Self as HasAxis<C>>::Dim,
        <Self as HasAxis<D>>::Dim,
        <Self as HasAxis<E>>::Dim,
        <Self as HasAxis<F>>::Dim,
    );
    const PERM: &'static [usize] = &[A, B, C, D, E, F];
}
