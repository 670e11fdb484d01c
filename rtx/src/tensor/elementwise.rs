//! Elementwise math: float functions, arithmetic with broadcasting, comparisons, `where`, and
//! the operator traits.
//!
//! Broadcasting (ARCHITECTURE.md): implicit when the smaller shape equals the trailing dims of
//! the larger (or is a scalar), explicit (`broadcast_to`) for size-1 dims. Run-time dims are
//! held to the same rule when the op runs.

use super::Tensor;
use crate::autograd::{self, rules};
use crate::error::{Error, Result, bail, ok};
use crate::shape::rules::BroadcastShapes;
use crate::shape::{Shape, describe};
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::kernel::Elementwise;
use rtx_kernels::op::markers;
use rtx_kernels::{
    BinaryOpT, CmpOpT, Element, Float, Num, Op, Signed, UnaryOp, UnaryOpT, UnaryVisitor,
};

/// A right-hand operand: a tensor (by value or reference) or a plain scalar, which broadcasts
/// to anything. Ops pass a plain scalar to their kernel as an argument ([`Operand::scalar`]),
/// so it never becomes a tensor: on a GPU nothing is uploaded, and `&x * 2.0` can be part of a
/// captured CUDA graph.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot combine with a tensor of `{E}`: the element types differ",
    label = "expected a `{E}` tensor or a `{E}` scalar",
    note = "element types never mix implicitly; convert one side with `.cast::<{E}>()`"
)]
pub trait Operand<E: Element> {
    /// The operand's shape (`()` for a scalar).
    type Shape: Shape;
    /// The operand as a tensor on `device`.
    fn into_tensor(self, device: Device) -> Result<Tensor<Self::Shape, E>>;
    /// The operand's value when it is a plain scalar (`None` for a tensor, even one of shape
    /// `()`, which may carry gradient history).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<2>> = Tensor::from_array([1.0, 2.0], Device::Cpu);
    /// assert_eq!(Operand::<f32>::scalar(&2.5f32), Some(2.5));
    /// assert_eq!(Operand::<f32>::scalar(&&t), None);
    /// ```
    fn scalar(&self) -> Option<E> {
        None
    }
}

#[diagnostic::do_not_recommend]
impl<E: Element> Operand<E> for E {
    type Shape = ();
    fn into_tensor(self, device: Device) -> Result<Tensor<(), E>> {
        Tensor::try_full((), self, device)
    }
    fn scalar(&self) -> Option<E> {
        Some(*self)
    }
}

#[diagnostic::do_not_recommend]
impl<S: Shape, E: Element> Operand<E> for &Tensor<S, E> {
    type Shape = S;
    fn into_tensor(self, _: Device) -> Result<Tensor<S, E>> {
        Ok(self.clone())
    }
}

#[diagnostic::do_not_recommend]
impl<S: Shape, E: Element> Operand<E> for Tensor<S, E> {
    type Shape = S;
    fn into_tensor(self, _: Device) -> Result<Tensor<S, E>> {
        Ok(self)
    }
}

/// The result shape of an op between `a` and a plain scalar: `a`'s dims, typed as the
/// broadcast result `O` (which a scalar never changes).
fn broadcast_scalar<A: Shape, O: Shape, E: Element>(
    op: &'static str,
    a: &Tensor<A, E>,
) -> Result<O> {
    O::from_dims(a.dims()).ok_or_else(|| Error::ShapeMismatch {
        op,
        lhs: describe(&a.shape()),
        rhs: describe(&()),
        rule: "a scalar broadcasts to any shape",
    })
}

/// The layouts of two operands broadcast to their common sizes, and the result shape.
pub(crate) fn broadcast_pair<A: Shape, B: Shape, O: Shape, E1: Element, E2: Element>(
    op: &'static str,
    a: &Tensor<A, E1>,
    b: &Tensor<B, E2>,
) -> Result<(Layout, Layout, O)> {
    let (da, db) = (a.dims(), b.dims());
    let big = if da.len() >= db.len() { da } else { db };
    let small = if da.len() >= db.len() { db } else { da };
    let mismatch = || Error::ShapeMismatch {
        op,
        lhs: describe(&a.shape()),
        rhs: describe(&b.shape()),
        rule: "trailing dimensions must be equal (expand size-1 dims explicitly with broadcast_to)",
    };
    if big[big.len() - small.len()..] != *small {
        return Err(mismatch());
    }
    let out = O::from_dims(big).ok_or_else(mismatch)?;
    let la = a.layout().broadcast_to(big).ok_or_else(mismatch)?;
    let lb = b.layout().broadcast_to(big).ok_or_else(mismatch)?;
    Ok((la, lb, out))
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Applies a unary float op given by its marker type; the named methods below call this.
    pub fn try_unary<O: UnaryOpT>(&self) -> Result<Self>
    where
        E: Float,
    {
        let out = Tensor::from_storage(self.storage().unary::<O>(self.layout())?, self.shape());
        if !autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        // The derivative is computed from the input alone: the output is not kept.
        let x = self.detach();
        Ok(out.record(vec![self.node().cloned()], move |g| {
            Ok(vec![autograd::erase(rules::unary(O::OP, &x, g)?)])
        }))
    }

    fn unary<O: UnaryOpT>(&self) -> Self
    where
        E: Float,
    {
        ok(self.try_unary::<O>())
    }

    /// Applies a unary float op held as a value (`UnaryOp::Gelu`), as its named method does.
    ///
    /// ```
    /// use rtx::prelude::*;
    /// use rtx::op::UnaryOp;
    /// let x: Tensor<Rank1<2>> = Tensor::from_array([0.0, 1.0], Device::Cpu);
    /// assert_eq!(x.try_unary_op(UnaryOp::Exp).unwrap().to_vec(), x.exp().to_vec());
    /// ```
    pub fn try_unary_op(&self, op: UnaryOp) -> Result<Self>
    where
        E: Float,
    {
        struct Apply<'a, S: Shape, E: Element>(&'a Tensor<S, E>);
        impl<S: Shape, E: Float> UnaryVisitor for Apply<'_, S, E> {
            type Out = Result<Tensor<S, E>>;
            fn visit<O: UnaryOpT>(self) -> Self::Out {
                self.0.try_unary::<O>()
            }
        }
        op.visit(Apply(self))
    }

    /// `g * d op(x) / dx` through the derivative `#[kernel]` derived from the op's formula:
    /// the tape's rule for a unary op without a rule of its own.
    pub(crate) fn try_derived_grad(&self, op: UnaryOp, g: &Self) -> Result<Self>
    where
        E: Float,
    {
        struct Grad<'a, S: Shape, E: Element>(&'a Tensor<S, E>, &'a Tensor<S, E>);
        impl<S: Shape, E: Float> UnaryVisitor for Grad<'_, S, E> {
            type Out = Result<Tensor<S, E>>;
            fn visit<O: UnaryOpT>(self) -> Self::Out {
                let (x, g) = (self.0, self.1);
                let Some(src) = <O::Kernel as Elementwise<1>>::GRADS[0] else {
                    bail!(
                        O::OP.name(),
                        "`#[kernel]` derived no derivative of this op's formula: give it a \
                         rule in rtx/src/autograd/rules.rs"
                    );
                };
                let f = <O::Kernel as Elementwise<1>>::scalar_grad::<E>(0, &[]);
                let ins = [(x.storage(), x.layout()), (g.storage(), g.layout())];
                let st = Storage::map_kernel_grad::<1>(src, &ins, &[], f)?;
                Ok(Tensor::from_storage(st, x.shape()))
            }
        }
        op.visit(Grad(self, g))
    }

    rtx_macros::unary_op_methods!();
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// -x, elementwise (integers wrap).
    pub fn neg(&self) -> Self
    where
        E: Signed,
    {
        ok(self.try_signed(UnaryOp::Neg))
    }

    /// |x|, elementwise.
    pub fn abs(&self) -> Self
    where
        E: Signed,
    {
        ok(self.try_signed(UnaryOp::Abs))
    }

    /// [`Tensor::neg`], returning device errors (backward rules use it).
    pub(crate) fn try_neg(&self) -> Result<Self>
    where
        E: Signed,
    {
        self.try_signed(UnaryOp::Neg)
    }

    fn try_signed(&self, op: UnaryOp) -> Result<Self>
    where
        E: Signed,
    {
        let out = Tensor::from_storage(
            self.storage().signed_unary(op, self.layout())?,
            self.shape(),
        );
        if !autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        let x = self.detach();
        Ok(out.record(vec![self.node().cloned()], move |g| {
            let dx = if op == UnaryOp::Abs {
                g.try_same::<markers::Mul>(&x.try_sign()?)?
            } else {
                g.try_neg()?
            };
            Ok(vec![autograd::erase(dx)])
        }))
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// A binary op given by its marker type, broadcasting per ARCHITECTURE.md; the operators and
    /// the named methods call this.
    pub fn try_binary<O: BinaryOpT, R: Operand<E>>(
        &self,
        rhs: R,
    ) -> Result<Tensor<<S as BroadcastShapes<R::Shape>>::Output, E>>
    where
        E: Num,
        S: BroadcastShapes<R::Shape>,
    {
        if let Some(c) = rhs.scalar() {
            let shape = broadcast_scalar(Op::Binary(O::OP).name(), self)?;
            return self.scalar_op::<O, _>(c, false, shape);
        }
        let rhs = rhs.into_tensor(self.device())?;
        let (la, lb, shape) = broadcast_pair(Op::Binary(O::OP).name(), self, &rhs)?;
        let out = Tensor::from_storage(self.storage().binary::<O>(&la, rhs.storage(), &lb)?, shape);
        if !autograd::must_record(&[self.node(), rhs.node()]) {
            return Ok(out);
        }
        let (a, b, y) = (self.detach(), rhs.detach(), out.detach());
        let inputs = vec![self.node().cloned(), rhs.node().cloned()];
        Ok(out.record(inputs, move |g| {
            let (ab, bb) = (a.view(la, g.shape()), b.view(lb, g.shape()));
            let (ga, gb) = rules::binary(O::OP, &ab, &bb, &y, g)?;
            Ok(vec![
                autograd::erase(autograd::sum_to(&ga, a.shape())?),
                autograd::erase(autograd::sum_to(&gb, b.shape())?),
            ])
        }))
    }

    /// `self op c`, or `c op self` when `scalar_left`, for a binary op given by its marker
    /// type: one pass with `c` as a kernel argument (no tensor is made of it, so a GPU uploads
    /// nothing). Bit for bit the op against a tensor holding `c`, gradients included.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// use rtx::op::markers::Sub;
    /// let t: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
    /// assert_eq!(t.try_binary_scalar::<Sub>(1.0, true)?.to_vec(), vec![0.0, -1.0, -2.0]);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn try_binary_scalar<O: BinaryOpT>(&self, c: E, scalar_left: bool) -> Result<Self>
    where
        E: Num,
    {
        self.scalar_op::<O, S>(c, scalar_left, self.shape())
    }

    /// `self op c` (or `c op self`) with the result typed as `shape`, which has `self`'s dims.
    fn scalar_op<O: BinaryOpT, T: Shape>(
        &self,
        c: E,
        scalar_left: bool,
        shape: T,
    ) -> Result<Tensor<T, E>>
    where
        E: Num,
    {
        let out = self
            .storage()
            .binary_scalar::<O>(self.layout(), c, scalar_left)?;
        let out = Tensor::from_storage(out, shape);
        if !autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        let (x, y, l) = (self.detach(), out.detach(), *self.layout());
        Ok(out.record(vec![self.node().cloned()], move |g| {
            let xb = x.view(l, g.shape());
            let gx = rules::binary_scalar(O::OP, &xb, c, scalar_left, &y, g);
            Ok(vec![autograd::erase(autograd::sum_to(&gx, x.shape())?)])
        }))
    }

    /// The larger of each pair of elements (NaN wins), broadcasting.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<3>> = Tensor::from_array([-1.0, 0.5, 2.0], Device::Cpu);
    /// assert_eq!(t.maximum(0.0).to_vec(), vec![0.0, 0.5, 2.0]);
    /// ```
    #[track_caller]
    pub fn maximum<R: Operand<E>>(
        &self,
        rhs: R,
    ) -> Tensor<<S as BroadcastShapes<R::Shape>>::Output, E>
    where
        E: Num,
        S: BroadcastShapes<R::Shape>,
    {
        ok(self.try_binary::<markers::Max, R>(rhs))
    }

    /// The smaller of each pair of elements (NaN wins), broadcasting.
    #[track_caller]
    pub fn minimum<R: Operand<E>>(
        &self,
        rhs: R,
    ) -> Tensor<<S as BroadcastShapes<R::Shape>>::Output, E>
    where
        E: Num,
        S: BroadcastShapes<R::Shape>,
    {
        ok(self.try_binary::<markers::Min, R>(rhs))
    }

    /// Each element raised to the power of the matching element of `rhs` (or of a scalar).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
    /// assert_eq!(t.pow(2.0).to_vec(), vec![1.0, 4.0, 9.0]);
    /// ```
    #[track_caller]
    pub fn pow<R: Operand<E>>(&self, rhs: R) -> Tensor<<S as BroadcastShapes<R::Shape>>::Output, E>
    where
        E: Num,
        S: BroadcastShapes<R::Shape>,
    {
        ok(self.try_binary::<markers::Pow, R>(rhs))
    }

    /// Clamps every element into `[min, max]`; NaN stays NaN. The gradient passes where the
    /// element is within the bounds (bounds included) and is 0 where it was clamped.
    pub fn clamp(&self, min: E, max: E) -> Self
    where
        E: Num,
    {
        ok(self.try_clamp(min, max))
    }

    /// [`Tensor::clamp`], returning an error when `min > max`.
    pub fn try_clamp(&self, min: E, max: E) -> Result<Self>
    where
        E: Num,
    {
        if min > max {
            crate::error::bail!("clamp", "min {min:?} is greater than max {max:?}");
        }
        let out =
            Tensor::from_storage(self.storage().clamp(self.layout(), min, max)?, self.shape());
        if !autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        let (x, y) = (self.detach(), out.detach());
        Ok(out.record(vec![self.node().cloned()], move |g| {
            Ok(vec![autograd::erase(rules::clamp(&x, &y, g)?)])
        }))
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// A comparison given by its marker type, broadcasting; the named methods call this.
    pub fn try_compare<O: CmpOpT, R: Operand<E>>(
        &self,
        rhs: R,
    ) -> Result<Tensor<<S as BroadcastShapes<R::Shape>>::Output, bool>>
    where
        S: BroadcastShapes<R::Shape>,
    {
        if let Some(c) = rhs.scalar() {
            let shape = broadcast_scalar(Op::Cmp(O::OP).name(), self)?;
            let out = self.storage().cmp_scalar::<O>(self.layout(), c)?;
            return Ok(Tensor::from_storage(out, shape));
        }
        let rhs = rhs.into_tensor(self.device())?;
        let (la, lb, shape) = broadcast_pair(Op::Cmp(O::OP).name(), self, &rhs)?;
        let out = self.storage().cmp::<O>(&la, rhs.storage(), &lb)?;
        Ok(Tensor::from_storage(out, shape))
    }

    /// Elements chosen from `self` where `cond` holds and from `other` elsewhere (PyTorch's
    /// `self.where(cond, other)`); `cond` and `other` broadcast to `self`'s shape.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<3>> = Tensor::from_array([1.0, -2.0, 3.0], Device::Cpu);
    /// assert_eq!(x.where_cond(&x.gt(0.0), 0.0).to_vec(), vec![1.0, 0.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn where_cond<C, R: Operand<E>>(&self, cond: &Tensor<C, bool>, other: R) -> Self
    where
        C: BroadcastShapes<S, Output = S>,
        R::Shape: BroadcastShapes<S, Output = S>,
    {
        ok(self.try_where_cond(cond, other))
    }

    /// [`Tensor::where_cond`], returning run-time shape errors.
    pub fn try_where_cond<C, R: Operand<E>>(&self, cond: &Tensor<C, bool>, other: R) -> Result<Self>
    where
        C: BroadcastShapes<S, Output = S>,
        R::Shape: BroadcastShapes<S, Output = S>,
    {
        let other = other.into_tensor(self.device())?;
        let (lc, _, _) = broadcast_pair::<C, S, S, bool, E>("where", cond, self)?;
        let (lo, _, _) = broadcast_pair::<R::Shape, S, S, E, E>("where", &other, self)?;
        let out = Storage::where_cond(
            (cond.storage(), &lc),
            (self.storage(), self.layout()),
            (other.storage(), &lo),
        )?;
        let out = Tensor::from_storage(out, self.shape());
        if !autograd::must_record(&[self.node(), other.node()]) {
            return Ok(out);
        }
        let (mask, other_shape) = (cond.view(lc, self.shape()), other.shape());
        // Each side's gradient is a pass over the output's: only those wanted are computed.
        Ok(out.record_needs(
            vec![self.node().cloned(), other.node().cloned()],
            move |g, need| {
                let to_self = if need[0] {
                    autograd::erase(g.try_where_grad(&mask, true)?)
                } else {
                    None
                };
                let to_other = if need[1] {
                    let m = g.try_where_grad(&mask, false)?;
                    autograd::erase(autograd::sum_to(&m, other_shape)?)
                } else {
                    None
                };
                Ok(vec![to_self, to_other])
            },
        ))
    }

    /// `value` where `mask` holds, the element of `self` elsewhere.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<3>, i32> = Tensor::from_array([1, 2, 3], Device::Cpu);
    /// let mask: Tensor<Rank1<3>, bool> = Tensor::from_array([false, true, false], Device::Cpu);
    /// assert_eq!(x.masked_fill(&mask, -1).to_vec(), vec![1, -1, 3]);
    /// ```
    #[track_caller]
    pub fn masked_fill<C>(&self, mask: &Tensor<C, bool>, value: E) -> Self
    where
        C: BroadcastShapes<S, Output = S>,
    {
        ok(self.try_masked_fill(mask, value))
    }

    /// [`Tensor::masked_fill`], returning run-time shape errors.
    pub fn try_masked_fill<C>(&self, mask: &Tensor<C, bool>, value: E) -> Result<Self>
    where
        C: BroadcastShapes<S, Output = S>,
    {
        let fill = Tensor::try_full((), value, self.device())?;
        let lf = fill
            .layout()
            .broadcast_to(self.dims())
            .expect("a scalar broadcasts");
        let (lm, _, _) = broadcast_pair::<C, S, S, bool, E>("masked_fill", mask, self)?;
        let out = Storage::where_cond(
            (mask.storage(), &lm),
            (fill.storage(), &lf),
            (self.storage(), self.layout()),
        )?;
        let out = Tensor::from_storage(out, self.shape());
        if !autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        let mask = mask.view(lm, self.shape());
        Ok(out.record(vec![self.node().cloned()], move |g| {
            Ok(vec![autograd::erase(g.try_where_grad(&mask, false)?)])
        }))
    }
}

macro_rules! comparisons {
    ($($(#[$doc:meta])* $name:ident => $marker:ident),*) => {
        impl<S: Shape, E: Element> Tensor<S, E> {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name<R: Operand<E>>(&self, rhs: R) -> Tensor<<S as BroadcastShapes<R::Shape>>::Output, bool>
                where
                    S: BroadcastShapes<R::Shape>,
                {
                    ok(self.try_compare::<markers::$marker, R>(rhs))
                }
            )*
        }
    };
}

comparisons!(
    /// `self == rhs`, elementwise, broadcasting.
    eq => Eq,
    /// `self != rhs`, elementwise, broadcasting.
    ne => Ne,
    /// `self < rhs`, elementwise, broadcasting.
    lt => Lt,
    /// `self <= rhs`, elementwise, broadcasting.
    le => Le,
    /// `self > rhs`, elementwise, broadcasting.
    gt => Gt,
    /// `self >= rhs`, elementwise, broadcasting.
    ge => Ge
);

/// `+ - * /` between tensors (owned or borrowed) and with scalars on either side. The result
/// has the broadcast shape; a run-time size mismatch panics with the shapes (use
/// `try_binary` for an error instead).
macro_rules! operator {
    ($trait:ident, $method:ident, $marker:ident) => {
        impl<S: Shape, E: Num, R: Operand<E>> std::ops::$trait<R> for Tensor<S, E>
        where
            S: BroadcastShapes<R::Shape>,
        {
            type Output = Tensor<<S as BroadcastShapes<R::Shape>>::Output, E>;
            #[track_caller]
            fn $method(self, rhs: R) -> Self::Output {
                ok(self.try_binary::<markers::$marker, R>(rhs))
            }
        }

        impl<S: Shape, E: Num, R: Operand<E>> std::ops::$trait<R> for &Tensor<S, E>
        where
            S: BroadcastShapes<R::Shape>,
        {
            type Output = Tensor<<S as BroadcastShapes<R::Shape>>::Output, E>;
            #[track_caller]
            fn $method(self, rhs: R) -> Self::Output {
                ok(self.try_binary::<markers::$marker, R>(rhs))
            }
        }

        scalar_lhs!($trait, $method, $marker; f32 f64 rtx_kernels::f16 rtx_kernels::bf16 i32 i64 u8);
    };
}

/// `scalar op tensor` for each concrete numeric type (a blanket impl over `E` is not allowed
/// on a foreign left-hand type).
macro_rules! scalar_lhs {
    ($trait:ident, $method:ident, $marker:ident; $($t:ty)*) => {$(
        impl<S: Shape> std::ops::$trait<Tensor<S, $t>> for $t
        where
            (): BroadcastShapes<S, Output = S>,
        {
            type Output = Tensor<S, $t>;
            #[track_caller]
            fn $method(self, rhs: Tensor<S, $t>) -> Tensor<S, $t> {
                std::ops::$trait::$method(self, &rhs)
            }
        }

        impl<S: Shape> std::ops::$trait<&Tensor<S, $t>> for $t
        where
            (): BroadcastShapes<S, Output = S>,
        {
            type Output = Tensor<S, $t>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<S, $t>) -> Tensor<S, $t> {
                ok(rhs.try_binary_scalar::<markers::$marker>(self, true))
            }
        }
    )*};
}

operator!(Add, add, Add);
operator!(Sub, sub, Sub);
operator!(Mul, mul, Mul);
operator!(Div, div, Div);

impl<S: Shape, E: Signed> std::ops::Neg for Tensor<S, E> {
    type Output = Tensor<S, E>;
    fn neg(self) -> Self::Output {
        Tensor::neg(&self)
    }
}

impl<S: Shape, E: Signed> std::ops::Neg for &Tensor<S, E> {
    type Output = Tensor<S, E>;
    fn neg(self) -> Self::Output {
        Tensor::neg(self)
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The gradient `self` of a selection by `mask` (`self`'s shape) handed to one branch:
    /// `self` where `mask` is `taken`, zero elsewhere (`crate::rules::index::where_back`, the
    /// one rule of `where_cond` and `masked_fill`). Records nothing (backward rules use it).
    pub(crate) fn try_where_grad(
        &self,
        mask: &Tensor<S, bool>,
        taken: bool,
    ) -> Result<Tensor<S, E>> {
        let g = (self.storage(), self.layout());
        let out = crate::rules::index::where_back(g, (mask.storage(), mask.layout()), taken)?;
        Ok(Tensor::from_storage(out, self.shape()))
    }
}

/// Same-shape helpers for code that is generic over the shape (backward rules), where the
/// broadcasting rule traits cannot be proven; they never record. They return device errors,
/// so that a backward that runs out of memory reports it (see [`Tensor::try_backward`]).
impl<S: Shape, E: Num> Tensor<S, E> {
    /// A binary op between two tensors of the same shape.
    pub(crate) fn try_same<O: BinaryOpT>(&self, rhs: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        debug_assert_eq!(self.dims(), rhs.dims());
        let out = self
            .storage()
            .binary::<O>(self.layout(), rhs.storage(), rhs.layout())?;
        Ok(Tensor::from_storage(out, self.shape()))
    }

    /// [`Tensor::try_same`], panicking on a device error.
    pub(crate) fn same<O: BinaryOpT>(&self, rhs: &Tensor<S, E>) -> Tensor<S, E> {
        ok(self.try_same::<O>(rhs))
    }

    /// A binary op with a scalar right-hand side.
    pub(crate) fn try_scalar<O: BinaryOpT>(&self, c: E) -> Result<Tensor<S, E>> {
        self.try_scalar_on::<O>(c, false)
    }

    /// [`Tensor::try_scalar`], panicking on a device error.
    pub(crate) fn scalar<O: BinaryOpT>(&self, c: E) -> Tensor<S, E> {
        ok(self.try_scalar::<O>(c))
    }

    /// A binary op with a scalar on the left (`scalar_left`) or right, as a kernel argument.
    pub(crate) fn try_scalar_on<O: BinaryOpT>(
        &self,
        c: E,
        scalar_left: bool,
    ) -> Result<Tensor<S, E>> {
        let out = self
            .storage()
            .binary_scalar::<O>(self.layout(), c, scalar_left)?;
        Ok(Tensor::from_storage(out, self.shape()))
    }

    /// [`Tensor::try_scalar_on`], panicking on a device error.
    pub(crate) fn scalar_on<O: BinaryOpT>(&self, c: E, scalar_left: bool) -> Tensor<S, E> {
        ok(self.try_scalar_on::<O>(c, scalar_left))
    }

    /// 1 where `self cmp c` holds, 0 elsewhere.
    pub(crate) fn try_mask_scalar<O: CmpOpT>(&self, c: E) -> Result<Tensor<S, E>> {
        let m = self.storage().cmp_scalar::<O>(self.layout(), c)?;
        let dense = Layout::contiguous(self.dims());
        Ok(Tensor::from_storage(m.cast::<E>(&dense)?, self.shape()))
    }

    /// [`Tensor::try_mask_scalar`], panicking on a device error.
    pub(crate) fn mask_scalar<O: CmpOpT>(&self, c: E) -> Tensor<S, E> {
        ok(self.try_mask_scalar::<O>(c))
    }

    /// 1 where the element is positive, 0 elsewhere (the derivative of relu).
    pub(crate) fn try_step(&self) -> Result<Tensor<S, E>> {
        self.try_mask_scalar::<markers::Gt>(E::ZERO)
    }

    /// `g * self.step()` in one pass: relu's backward rule, fused because it runs on every
    /// activation of every step.
    pub(crate) fn try_relu_grad(&self, g: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        let s = g
            .storage()
            .relu_backward(g.layout(), self.storage(), self.layout())?;
        Ok(Tensor::from_storage(s, self.shape()))
    }

    /// 1 where `self > other`, 0 elsewhere.
    pub(crate) fn try_above(&self, other: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        let m =
            self.storage()
                .cmp::<markers::Gt>(self.layout(), other.storage(), other.layout())?;
        let dense = Layout::contiguous(self.dims());
        Ok(Tensor::from_storage(m.cast::<E>(&dense)?, self.shape()))
    }

    /// 1 where `self == other`, 0 elsewhere.
    pub(crate) fn try_equal(&self, other: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        let m =
            self.storage()
                .cmp::<markers::Eq>(self.layout(), other.storage(), other.layout())?;
        let dense = Layout::contiguous(self.dims());
        Ok(Tensor::from_storage(m.cast::<E>(&dense)?, self.shape()))
    }

    /// -1, 0 or 1 by the sign of each element.
    pub(crate) fn try_sign(&self) -> Result<Tensor<S, E>>
    where
        E: Signed,
    {
        self.try_step()?
            .try_same::<markers::Sub>(&self.try_neg()?.try_step()?)
    }
}

/// Sums `storage` (seen through `layout`) over the dims `target` was broadcast along (missing
/// leading dims, and dims where `target` has size 1): dense storage of `target`'s dims. It
/// needs only the dims, so it is compiled once per element type.
pub(crate) fn sum_to_num<E: Num>(
    storage: &Storage<E>,
    layout: &Layout,
    target: &[usize],
) -> Result<Storage<E>> {
    use rtx_kernels::op::ReduceOp;
    let dims = layout.dims();
    let lead = dims.len() - target.len();
    // A dense gradient is taken as it is (on a GPU a handle, no copy); only a strided one is
    // copied first.
    let mut storage = match layout.is_contiguous() {
        true => storage.clone(),
        false => storage.contiguous(layout)?,
    };
    let mut now: Vec<usize> = dims[lead..].to_vec();
    if lead > 0 {
        let outer: usize = dims[..lead].iter().product();
        let mut flat = vec![outer];
        flat.extend_from_slice(&now);
        let l = Layout::contiguous(&flat);
        storage = storage.reduce(&l, 0, ReduceOp::Sum)?;
    }
    for i in 0..now.len() {
        if target[i] == 1 && now[i] != 1 {
            let l = Layout::contiguous(&now);
            storage = storage.reduce(&l, i, ReduceOp::Sum)?;
            now[i] = 1;
        }
    }
    Ok(storage)
}
