//! Shapes as tuples of dimensions, up to rank 6, and the rules that relate them.
//!
//! A shape rule is a small leaf trait with an `on_unimplemented` message (see [`rules`]), so a
//! mismatch reads as "dimension mismatch: `Const<64>` is not `Const<32>`: ..." at the user's
//! line. Dimension arithmetic (reshape, conv output sizes, concat) is *specify and verify*: the
//! caller's type states the result and an inline `const` check fires when the code is
//! monomorphized. Those checks appear on a full `cargo build`, not under `cargo check` or
//! rust-analyzer.

mod axes;
pub mod checks;
pub mod conv;
mod dim;
pub mod matmul;
mod prepend;
pub mod rules;

pub use axes::{
    Axes2, Axes3, Axes4, Axes5, Axes6, HasAxis, InsertAxis, PermuteAxes, ReduceAxis, SwapAxes,
};
pub use dim::{Const, Dim, Dyn};
pub use prepend::PrependDim;

use rtx_backends::MAX_RANK;
use std::fmt::Debug;

/// A tensor shape: a tuple of [`Dim`]s.
pub trait Shape: Copy + Debug + Send + Sync + 'static {
    /// The number of dimensions.
    const RANK: usize;
    /// Each dimension's compile-time size, where known (unused slots are `None`).
    const STATIC_DIMS: [Option<usize>; MAX_RANK];
    /// Each dimension's name, for named run-time dims.
    const NAMES: [Option<char>; MAX_RANK];
    /// The sizes.
    fn dims(&self) -> Dims;
    /// The shape with the given run-time sizes, or `None` when the rank or a static size differs.
    fn from_dims(dims: &[usize]) -> Option<Self>;
    /// The number of elements.
    fn numel(&self) -> usize {
        self.dims().iter().product()
    }
    /// The number of elements when every size is static.
    const STATIC_NUMEL: Option<usize> = static_numel(Self::STATIC_DIMS, Self::RANK);
}

/// A nested array literal whose lengths match the static shape `S` (`[[E; 3]; 2]` for
/// `Rank2<2, 3>`).
#[diagnostic::on_unimplemented(
    message = "the array literal `{Self}` does not have the shape `{S}`",
    label = "its lengths must equal the shape's dims, one nesting level per dim",
    note = "a `Rank2<2, 3>` tensor takes `[[x, x, x], [x, x, x]]`"
)]
pub trait ArrayLiteral<S: ConstShape, E: Copy> {
    /// The elements in row-major order.
    fn flatten(self) -> Vec<E>;
}

/// A shape whose every dimension is `Const`: it has exactly one value.
pub trait ConstShape: Shape + Default {}

const fn static_numel(dims: [Option<usize>; MAX_RANK], rank: usize) -> Option<usize> {
    let mut n = 1;
    let mut i = 0;
    while i < rank {
        match dims[i] {
            Some(d) => n *= d,
            None => return None,
        }
        i += 1;
    }
    Some(n)
}

/// The run-time sizes of a shape: a small inline array that derefs to `&[usize]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dims {
    len: usize,
    d: [usize; MAX_RANK],
}

impl Dims {
    /// Sizes from a slice (at most rank 6).
    pub fn new(dims: &[usize]) -> Self {
        let mut d = [0; MAX_RANK];
        d[..dims.len()].copy_from_slice(dims);
        Dims { len: dims.len(), d }
    }
}

impl std::ops::Deref for Dims {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.d[..self.len]
    }
}

impl Debug for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Debug::fmt(&**self, f)
    }
}

impl std::fmt::Display for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Debug::fmt(&**self, f)
    }
}

macro_rules! tuple_shape {
    ($rank:expr; $($d:ident $i:tt),*) => {
        impl<$($d: Dim),*> Shape for ($($d,)*) {
            const RANK: usize = $rank;
            const STATIC_DIMS: [Option<usize>; MAX_RANK] = {
                #[allow(unused_mut)]
                let mut s = [None; MAX_RANK];
                $(s[$i] = $d::STATIC;)*
                s
            };
            const NAMES: [Option<char>; MAX_RANK] = {
                #[allow(unused_mut)]
                let mut s = [None; MAX_RANK];
                $(s[$i] = $d::NAME;)*
                s
            };
            #[inline]
            fn dims(&self) -> Dims {
                Dims::new(&[$(self.$i.size()),*])
            }
            fn from_dims(dims: &[usize]) -> Option<Self> {
                if dims.len() != $rank {
                    return None;
                }
                Some(($($d::from_size(dims[$i])?,)*))
            }
        }
        impl<$(const $d: usize),*> ConstShape for ($(Const<$d>,)*) {}
    };
}

tuple_shape!(0;);
tuple_shape!(1; D0 0);
tuple_shape!(2; D0 0, D1 1);
tuple_shape!(3; D0 0, D1 1, D2 2);
tuple_shape!(4; D0 0, D1 1, D2 2, D3 3);
tuple_shape!(5; D0 0, D1 1, D2 2, D3 3, D4 4);
tuple_shape!(6; D0 0, D1 1, D2 2, D3 3, D4 4, D5 5);

/// A scalar shape.
pub type Rank0 = ();
/// A static vector shape.
pub type Rank1<const A: usize> = (Const<A>,);
/// A static matrix shape.
pub type Rank2<const A: usize, const B: usize> = (Const<A>, Const<B>);
/// A static rank-3 shape.
pub type Rank3<const A: usize, const B: usize, const C: usize> = (Const<A>, Const<B>, Const<C>);
/// A static rank-4 shape.
pub type Rank4<const A: usize, const B: usize, const C: usize, const D: usize> =
    (Const<A>, Const<B>, Const<C>, Const<D>);
/// A static rank-5 shape.
pub type Rank5<const A: usize, const B: usize, const C: usize, const D: usize, const E: usize> =
    (Const<A>, Const<B>, Const<C>, Const<D>, Const<E>);
/// A static rank-6 shape.
pub type Rank6<
    const A: usize,
    const B: usize,
    const C: usize,
    const D: usize,
    const E: usize,
    const F: usize,
> = (Const<A>, Const<B>, Const<C>, Const<D>, Const<E>, Const<F>);

/// Describes a shape for messages: `[2, 3]`, with names for named dims (`[B=32, 784]`).
pub fn describe<S: Shape>(s: &S) -> String {
    // A shell: the formatting is compiled once, not once per shape type.
    describe_dims(&s.dims(), &S::NAMES)
}

/// Describes dims for messages, `names[i]` naming dim `i` where it is `Some`.
pub(crate) fn describe_dims(dims: &[usize], names: &[Option<char>]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .zip(names)
        .map(|(d, name)| match name {
            Some(c) => format!("{c}={d}"),
            None => d.to_string(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

use rtx_kernels::Element;

#[diagnostic::do_not_recommend]
impl<E: Element> ArrayLiteral<(), E> for E {
    fn flatten(self) -> Vec<E> {
        vec![self]
    }
}

#[diagnostic::do_not_recommend]
impl<E: Element, const A: usize> ArrayLiteral<Rank1<A>, E> for [E; A] {
    fn flatten(self) -> Vec<E> {
        self.to_vec()
    }
}

#[diagnostic::do_not_recommend]
impl<E: Element, const A: usize, const B: usize> ArrayLiteral<Rank2<A, B>, E> for [[E; B]; A] {
    fn flatten(self) -> Vec<E> {
        self.into_iter().flatten().collect()
    }
}

#[diagnostic::do_not_recommend]
impl<E: Element, const A: usize, const B: usize, const C: usize> ArrayLiteral<Rank3<A, B, C>, E>
    for [[[E; C]; B]; A]
{
    fn flatten(self) -> Vec<E> {
        self.into_iter().flatten().flatten().collect()
    }
}

#[diagnostic::do_not_recommend]
impl<E: Element, const A: usize, const B: usize, const C: usize, const D: usize>
    ArrayLiteral<Rank4<A, B, C, D>, E> for [[[[E; D]; C]; B]; A]
{
    fn flatten(self) -> Vec<E> {
        self.into_iter().flatten().flatten().flatten().collect()
    }
}

#[diagnostic::do_not_recommend]
impl<E: Element, const A: usize, const B: usize, const C: usize, const D: usize, const F: usize>
    ArrayLiteral<Rank5<A, B, C, D, F>, E> for [[[[[E; F]; D]; C]; B]; A]
{
    fn flatten(self) -> Vec<E> {
        self.into_iter()
            .flatten()
            .flatten()
            .flatten()
            .flatten()
            .collect()
    }
}

#[diagnostic::do_not_recommend]
impl<
    E: Element,
    const A: usize,
    const B: usize,
    const C: usize,
    const D: usize,
    const F: usize,
    const G: usize,
> ArrayLiteral<Rank6<A, B, C, D, F, G>, E> for [[[[[[E; G]; F]; D]; C]; B]; A]
{
    fn flatten(self) -> Vec<E> {
        self.into_iter()
            .flatten()
            .flatten()
            .flatten()
            .flatten()
            .flatten()
            .collect()
    }
}
