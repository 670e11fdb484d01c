//! A shape with one more dimension in front: the shape of a batch of samples of that shape.
//!
//! [`InsertAxis<0, B>`](super::InsertAxis) names the same shapes, but it takes the new dim as a
//! trait parameter, so "for every batch dim `B`" cannot be written as a bound on it. This trait
//! takes the dim as a generic associated type instead, which is what the data loader's
//! [`Collate`](crate::data::Collate) needs for its `Batch<B>` type. One impl per rank 0..=5.

use super::{Dim, Shape};

/// The shape with a new leading dimension: `(Const<28>, Const<28>)` becomes `(B, Const<28>,
/// Const<28>)`.
///
/// ```
/// use rtx::shape::{Const, PrependDim, Shape};
/// let s = (Const::<28>, Const::<28>).prepend(32usize);
/// assert_eq!(&*s.dims(), &[32, 28, 28]);
/// ```
#[diagnostic::on_unimplemented(
    message = "a tensor of shape `{Self}` cannot take a leading batch dimension",
    label = "shapes have rank 6 at most",
    note = "a sample batched by the data loader has rank 5 at most"
)]
pub trait PrependDim: Shape {
    /// The shape with `B` in front.
    type Prepended<B: Dim>: Shape;
    /// The shape value with `dim` in front.
    fn prepend<B: Dim>(self, dim: B) -> Self::Prepended<B>;
}

// `do_not_recommend`: a rank-6 sample then reads as the trait's own message, without rustc
// listing the six ranks that do take a batch dim.
macro_rules! prepend {
    ($($d:ident $i:tt),*) => {
        #[diagnostic::do_not_recommend]
        impl<$($d: Dim),*> PrependDim for ($($d,)*) {
            type Prepended<B: Dim> = (B, $($d,)*);
            #[inline]
            fn prepend<B: Dim>(self, dim: B) -> Self::Prepended<B> {
                (dim, $(self.$i,)*)
            }
        }
    };
}

prepend!();
prepend!(D0 0);
prepend!(D0 0, D1 1);
prepend!(D0 0, D1 1, D2 2);
prepend!(D0 0, D1 1, D2 2, D3 3);
prepend!(D0 0, D1 1, D2 2, D3 3, D4 4);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{Const, Dyn, InsertAxis};

    /// Compiles only when both traits name the same shape.
    fn same<T>(_: T, _: T) {}

    #[test]
    fn agrees_with_insert_axis_zero() {
        let s = (Const::<3>, Dyn::<'T'>(5));
        let a = s.prepend(Const::<8>);
        let b: <(Const<3>, Dyn<'T'>) as InsertAxis<0, Const<8>>>::Output = (Const, Const, Dyn(5));
        same(a, b);
        assert_eq!(&*a.dims(), &[8, 3, 5]);
        assert_eq!(&*().prepend(4usize).dims(), &[4]);
    }
}
