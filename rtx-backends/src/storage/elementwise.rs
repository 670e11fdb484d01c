//! Backend entry points for elementwise ops: unary math, binary arithmetic, comparisons,
//! `where`, casts and affine maps. Ops with one plain scalar operand (`binary_scalar`,
//! `cmp_scalar`) pass it as a kernel argument: nothing here uploads host data, so every entry
//! point may run while a CUDA graph is captured.
//!
//! On a GPU each is one launch of an elementwise kernel, in every element type the op exists
//! for: the kernels over `T: Num` and `T: Element` have integer (and `bool`) entries, so only
//! float math and integer `pow` are missing for integers (a `NoKernel` error names them).

use super::erased::{AnyRef, AnyStorage, ForElement, ForFloat, ForNum, ForSigned, scalar_as};
use super::{BackendBuffer, Storage, host_only, on_host, same_device};
use crate::backend::Kernel;
use crate::cpu::elementwise::{map, zip_map, zip3_map};
use crate::cuda::Arg;
use crate::cuda::ops::{self as gpu, input};
use crate::{Layout, Result};
use rtx_kernels::kernels::{
    self as k, binary_kernel, binary_scalar_kernel, cmp_kernel, cmp_scalar_code,
};
use rtx_kernels::op::markers;
use rtx_kernels::{
    BinaryOp, BinaryOpT, CmpOp, CmpOpT, DType, Element, Float, Num, Signed, UnaryOp, UnaryOpT,
    UnaryVisitor,
};
use std::any::Any;

impl<E: Element> Storage<E> {
    /// A unary float op by its marker type (`exp`, `gelu`, ...), computed in `E::Acc`.
    pub fn unary<O: UnaryOpT>(&self, l: &Layout) -> Result<Self>
    where
        E: Float,
    {
        Ok(unary_any(O::OP, AnyRef::of(self), l)?.into_typed())
    }

    /// Negation or absolute value of a signed type (integers included). Other ops are float-only
    /// and go through [`Storage::unary`].
    pub fn signed_unary(&self, op: UnaryOp, l: &Layout) -> Result<Self>
    where
        E: Signed,
    {
        Ok(signed_unary_any(op, AnyRef::of(self), l)?.into_typed())
    }

    /// A binary op; both layouts already broadcast to the same sizes.
    pub fn binary<O: BinaryOpT>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self>
    where
        E: Num,
    {
        Ok(binary_any(O::OP, (AnyRef::of(self), l), (AnyRef::of(rhs), rl))?.into_typed())
    }

    /// `x op c` for every element `x` of `self` viewed by `l`, or `c op x` when `scalar_left`:
    /// the scalar travels as a kernel argument, never as a tensor, so on a GPU this is one
    /// launch with no upload (it may run while a CUDA graph is captured), reading one input
    /// with vector loads when the view is dense. Bit for bit what [`Storage::binary`] gives
    /// against a tensor holding `c` (integer `pow` has no GPU kernel, as there).
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// use rtx_kernels::op::markers::Sub;
    /// let l = Layout::contiguous(&[3]);
    /// let x = Storage::from_vec(vec![1.0f32, 2.0, 3.0], Device::Cpu).unwrap();
    /// assert_eq!(x.binary_scalar::<Sub>(&l, 10.0, false).unwrap().to_vec(&l), [-9.0, -8.0, -7.0]);
    /// assert_eq!(x.binary_scalar::<Sub>(&l, 10.0, true).unwrap().to_vec(&l), [9.0, 8.0, 7.0]);
    /// ```
    pub fn binary_scalar<O: BinaryOpT>(&self, l: &Layout, c: E, scalar_left: bool) -> Result<Self>
    where
        E: Num,
    {
        Ok(binary_scalar_any(O::OP, AnyRef::of(self), l, &c, scalar_left)?.into_typed())
    }

    /// `x cmp c` into booleans for every element `x` of `self` viewed by `l`, with the scalar
    /// as a kernel argument (no upload on a GPU); the same answers as [`Storage::cmp`] against
    /// a tensor holding `c`.
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// use rtx_kernels::op::markers::Gt;
    /// let l = Layout::contiguous(&[3]);
    /// let x = Storage::from_vec(vec![1.0f32, 2.0, f32::NAN], Device::Cpu).unwrap();
    /// assert_eq!(x.cmp_scalar::<Gt>(&l, 1.5).unwrap().to_vec(&l), [false, true, false]);
    /// ```
    pub fn cmp_scalar<O: CmpOpT>(&self, l: &Layout, c: E) -> Result<Storage<bool>> {
        Ok(cmp_scalar_any(O::OP, AnyRef::of(self), l, &c)?.into_typed())
    }

    /// A comparison into booleans; both layouts already broadcast to the same sizes.
    pub fn cmp<O: CmpOpT>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Storage<bool>> {
        Ok(cmp_any(O::OP, (AnyRef::of(self), l), (AnyRef::of(rhs), rl))?.into_typed())
    }

    /// `x * mul + add` in one pass (used for scalar arithmetic and scaling).
    pub fn affine(&self, l: &Layout, mul: E, add: E) -> Result<Self>
    where
        E: Num,
    {
        Ok(affine_any(AnyRef::of(self), l, (&mul, &add), false)?.into_typed())
    }

    /// Clamps every element into `[lo, hi]` (NaN stays NaN).
    pub fn clamp(&self, l: &Layout, lo: E, hi: E) -> Result<Self>
    where
        E: Num,
    {
        Ok(affine_any(AnyRef::of(self), l, (&lo, &hi), true)?.into_typed())
    }

    /// Converts every element to another element type.
    pub fn cast<U: Element>(&self, l: &Layout) -> Result<Storage<U>> {
        Ok(cast_any(AnyRef::of(self), l, U::DTYPE)?.into_typed())
    }

    /// The gradient of relu from the output gradient `self` (viewed by `l`) and relu's input
    /// `x` (viewed by `xl`, same sizes): `g * step(x)`, where `step` is 1 for `x > 0` and 0
    /// elsewhere (NaN included), as dense storage. One pass on the CPU; elsewhere the
    /// composition of comparison, cast and product, which gives the same values.
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// let l = Layout::contiguous(&[4]);
    /// let g = Storage::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], Device::Cpu).unwrap();
    /// let x = Storage::from_vec(vec![-1.0f32, 0.0, 5.0, f32::NAN], Device::Cpu).unwrap();
    /// let dx = g.relu_backward(&l, &x, &l).unwrap();
    /// assert_eq!(dx.to_vec(&l), vec![0.0, 0.0, 3.0, 0.0]);
    /// ```
    pub fn relu_backward(&self, l: &Layout, x: &Self, xl: &Layout) -> Result<Self>
    where
        E: Num,
    {
        Ok(relu_backward_any((AnyRef::of(self), l), (AnyRef::of(x), xl))?.into_typed())
    }

    /// `cond ? on_true : on_false`; all three layouts already broadcast to the same sizes.
    pub fn where_cond(
        cond: (&Storage<bool>, &Layout),
        on_true: (&Self, &Layout),
        on_false: (&Self, &Layout),
    ) -> Result<Self> {
        let (t, f) = (
            (AnyRef::of(on_true.0), on_true.1),
            (AnyRef::of(on_false.0), on_false.1),
        );
        Ok(where_any(cond, t, f)?.into_typed())
    }
}

// The entry points with the element type erased: not generic, so compiled once, here (see
// `erased.rs`). Each runs its body on the storage's concrete type.

/// A storage operand and its layout.
type Operand<'a> = (AnyRef<'a>, &'a Layout);

pub(crate) fn unary_any(op: UnaryOp, x: AnyRef, l: &Layout) -> Result<AnyStorage> {
    let native = |at: &BackendBuffer| {
        let x = x.on_backend()?;
        let (buffer, layout) = (&x.buffer, l);
        at.backend.launch(&Kernel::Unary {
            op,
            x: buffer,
            layout,
        })
    };
    if let Some(out) = on_host(op.name(), &[x], &native, &|h| unary_any(op, h[0], l)) {
        return out;
    }
    struct Body<'a>(UnaryOp, &'a Layout);
    impl ForFloat for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            struct Op<'a, F: Element>(&'a Storage<F>, &'a Layout);
            impl<F: Float> UnaryVisitor for Op<'_, F> {
                type Out = Result<Storage<F>>;
                fn visit<O: UnaryOpT>(self) -> Self::Out {
                    self.0.unary_body::<O>(self.1)
                }
            }
            self.0.visit(Op(s, self.1)).map(AnyStorage::from_typed)
        }
    }
    x.floats(op.name(), Body(op, l))
}

fn signed_unary_any(op: UnaryOp, x: AnyRef, l: &Layout) -> Result<AnyStorage> {
    if let Some(out) = host_only(op.name(), &[x], &|h| signed_unary_any(op, h[0], l)) {
        return out;
    }
    struct Body<'a>(UnaryOp, &'a Layout);
    impl ForSigned for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<S: Signed>(self, s: &Storage<S>) -> Self::Out {
            s.signed_unary_body(self.0, self.1)
                .map(AnyStorage::from_typed)
        }
    }
    x.signeds(op.name(), Body(op, l))
}

pub(crate) fn binary_any(op: BinaryOp, a: Operand, b: Operand) -> Result<AnyStorage> {
    let name = rtx_kernels::Op::Binary(op).name();
    let native = |at: &BackendBuffer| {
        let (lhs, rhs) = (a.0.on_backend()?, b.0.on_backend()?);
        at.backend.launch(&Kernel::Binary {
            op,
            lhs: &lhs.buffer,
            lhs_layout: a.1,
            rhs: &rhs.buffer,
            rhs_layout: b.1,
        })
    };
    let on_copies = |h: &[AnyRef]| binary_any(op, (h[0], a.1), (h[1], b.1));
    if let Some(out) = on_host(name, &[a.0, b.0], &native, &on_copies) {
        return out;
    }
    struct Body<'a>(BinaryOp, &'a Layout, Operand<'a>);
    impl ForNum for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<N: Num>(self, s: &Storage<N>) -> Self::Out {
            let (op, l, (rhs, rl)) = (self.0, self.1, self.2);
            let rhs = rhs.typed::<N>(rtx_kernels::Op::Binary(op).name())?;
            match op {
                BinaryOp::Add => s.binary_body::<markers::Add>(l, rhs, rl),
                BinaryOp::Sub => s.binary_body::<markers::Sub>(l, rhs, rl),
                BinaryOp::Mul => s.binary_body::<markers::Mul>(l, rhs, rl),
                BinaryOp::Div => s.binary_body::<markers::Div>(l, rhs, rl),
                BinaryOp::Max => s.binary_body::<markers::Max>(l, rhs, rl),
                BinaryOp::Min => s.binary_body::<markers::Min>(l, rhs, rl),
                BinaryOp::Pow => s.binary_body::<markers::Pow>(l, rhs, rl),
            }
            .map(AnyStorage::from_typed)
        }
    }
    a.0.nums(rtx_kernels::Op::Binary(op).name(), Body(op, a.1, b))
}

fn binary_scalar_any(
    op: BinaryOp,
    x: AnyRef,
    l: &Layout,
    c: &dyn Any,
    left: bool,
) -> Result<AnyStorage> {
    let name = rtx_kernels::Op::Binary(op).name();
    let on_copies = |h: &[AnyRef]| binary_scalar_any(op, h[0], l, c, left);
    if let Some(out) = host_only(name, &[x], &on_copies) {
        return out;
    }
    struct Body<'a>(BinaryOp, &'a Layout, &'a dyn Any, bool);
    impl ForNum for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<N: Num>(self, s: &Storage<N>) -> Self::Out {
            let (op, l, c, left) = (self.0, self.1, scalar_as::<N>(self.2), self.3);
            match op {
                BinaryOp::Add => s.binary_scalar_body::<markers::Add>(l, c, left),
                BinaryOp::Sub => s.binary_scalar_body::<markers::Sub>(l, c, left),
                BinaryOp::Mul => s.binary_scalar_body::<markers::Mul>(l, c, left),
                BinaryOp::Div => s.binary_scalar_body::<markers::Div>(l, c, left),
                BinaryOp::Max => s.binary_scalar_body::<markers::Max>(l, c, left),
                BinaryOp::Min => s.binary_scalar_body::<markers::Min>(l, c, left),
                BinaryOp::Pow => s.binary_scalar_body::<markers::Pow>(l, c, left),
            }
            .map(AnyStorage::from_typed)
        }
    }
    x.nums(rtx_kernels::Op::Binary(op).name(), Body(op, l, c, left))
}

fn cmp_scalar_any(op: CmpOp, x: AnyRef, l: &Layout, c: &dyn Any) -> Result<AnyStorage> {
    if let Some(out) = host_only("compare", &[x], &|h| cmp_scalar_any(op, h[0], l, c)) {
        return out;
    }
    struct Body<'a>(CmpOp, &'a Layout, &'a dyn Any);
    impl ForElement for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
            let (l, c) = (self.1, scalar_as::<E>(self.2));
            match self.0 {
                CmpOp::Eq => s.cmp_scalar_body::<markers::Eq>(l, c),
                CmpOp::Ne => s.cmp_scalar_body::<markers::Ne>(l, c),
                CmpOp::Lt => s.cmp_scalar_body::<markers::Lt>(l, c),
                CmpOp::Le => s.cmp_scalar_body::<markers::Le>(l, c),
                CmpOp::Gt => s.cmp_scalar_body::<markers::Gt>(l, c),
                CmpOp::Ge => s.cmp_scalar_body::<markers::Ge>(l, c),
            }
            .map(AnyStorage::from_typed)
        }
    }
    x.elements(Body(op, l, c))
}

fn cmp_any(op: CmpOp, a: Operand, b: Operand) -> Result<AnyStorage> {
    let on_copies = |h: &[AnyRef]| cmp_any(op, (h[0], a.1), (h[1], b.1));
    if let Some(out) = host_only("compare", &[a.0, b.0], &on_copies) {
        return out;
    }
    struct Body<'a>(CmpOp, &'a Layout, Operand<'a>);
    impl ForElement for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
            let (l, (rhs, rl)) = (self.1, self.2);
            let rhs = rhs.typed::<E>("compare")?;
            match self.0 {
                CmpOp::Eq => s.cmp_body::<markers::Eq>(l, rhs, rl),
                CmpOp::Ne => s.cmp_body::<markers::Ne>(l, rhs, rl),
                CmpOp::Lt => s.cmp_body::<markers::Lt>(l, rhs, rl),
                CmpOp::Le => s.cmp_body::<markers::Le>(l, rhs, rl),
                CmpOp::Gt => s.cmp_body::<markers::Gt>(l, rhs, rl),
                CmpOp::Ge => s.cmp_body::<markers::Ge>(l, rhs, rl),
            }
            .map(AnyStorage::from_typed)
        }
    }
    a.0.elements(Body(op, a.1, b))
}

/// `x * a + b`, or `x` clamped into `[a, b]` when `clamp`.
fn affine_any(
    x: AnyRef,
    l: &Layout,
    (a, b): (&dyn Any, &dyn Any),
    clamp: bool,
) -> Result<AnyStorage> {
    if let Some(out) = host_only("affine", &[x], &|h| affine_any(h[0], l, (a, b), clamp)) {
        return out;
    }
    struct Body<'a>(&'a Layout, &'a dyn Any, &'a dyn Any, bool);
    impl ForNum for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<N: Num>(self, s: &Storage<N>) -> Self::Out {
            let (a, b) = (scalar_as::<N>(self.1), scalar_as::<N>(self.2));
            match self.3 {
                true => s.clamp_body(self.0, a, b),
                false => s.affine_body(self.0, a, b),
            }
            .map(AnyStorage::from_typed)
        }
    }
    x.nums(if clamp { "clamp" } else { "affine" }, Body(l, a, b, clamp))
}

fn cast_any(x: AnyRef, l: &Layout, to: DType) -> Result<AnyStorage> {
    if let Some(out) = host_only("cast", &[x], &|h| cast_any(h[0], l, to)) {
        return out;
    }
    struct Body<'a>(&'a Layout, DType);
    impl ForElement for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
            let l = self.0;
            Ok(match self.1 {
                DType::F32 => AnyStorage::F32(s.cast_body(l)?),
                DType::F64 => AnyStorage::F64(s.cast_body(l)?),
                DType::F16 => AnyStorage::F16(s.cast_body(l)?),
                DType::BF16 => AnyStorage::BF16(s.cast_body(l)?),
                DType::I32 => AnyStorage::I32(s.cast_body(l)?),
                DType::I64 => AnyStorage::I64(s.cast_body(l)?),
                DType::U8 => AnyStorage::U8(s.cast_body(l)?),
                DType::Bool => AnyStorage::Bool(s.cast_body(l)?),
            })
        }
    }
    x.elements(Body(l, to))
}

fn relu_backward_any(g: Operand, x: Operand) -> Result<AnyStorage> {
    let on_copies = |h: &[AnyRef]| relu_backward_any((h[0], g.1), (h[1], x.1));
    if let Some(out) = host_only("relu_backward", &[g.0, x.0], &on_copies) {
        return out;
    }
    struct Body<'a>(&'a Layout, Operand<'a>);
    impl ForNum for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<N: Num>(self, s: &Storage<N>) -> Self::Out {
            let (x, xl) = self.1;
            let x = x.typed::<N>("relu_backward")?;
            s.relu_backward_body(self.0, x, xl)
                .map(AnyStorage::from_typed)
        }
    }
    g.0.nums("relu_backward", Body(g.1, x))
}

fn where_any(
    cond: (&Storage<bool>, &Layout),
    on_true: Operand,
    on_false: Operand,
) -> Result<AnyStorage> {
    let args = [AnyRef::Bool(cond.0), on_true.0, on_false.0];
    let on_copies = |h: &[AnyRef]| {
        let c = h[0].typed::<bool>("where")?;
        where_any((c, cond.1), (h[1], on_true.1), (h[2], on_false.1))
    };
    if let Some(out) = host_only("where", &args, &on_copies) {
        return out;
    }
    struct Body<'a>((&'a Storage<bool>, &'a Layout), &'a Layout, Operand<'a>);
    impl ForElement for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
            let (b, bl) = self.2;
            let b = b.typed::<E>("where")?;
            Storage::where_cond_body(self.0, (s, self.1), (b, bl)).map(AnyStorage::from_typed)
        }
    }
    on_true.0.elements(Body(cond, on_true.1, on_false))
}

impl<E: Element> Storage<E> {
    /// The body of [`Storage::unary`] for one element type.
    fn unary_body<O: UnaryOpT>(&self, l: &Layout) -> Result<Self>
    where
        E: Float,
    {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, unary_fn::<E, O>))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::map(
                c.ordinal(),
                O::OP.kernel(),
                E::DTYPE,
                l.dims(),
                &[input(c, l)],
                &[],
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::signed_unary`] for one element type.
    fn signed_unary_body(&self, op: UnaryOp, l: &Layout) -> Result<Self>
    where
        E: Signed,
    {
        let f: fn(E) -> E = match op {
            UnaryOp::Abs => Signed::abs,
            _ => Signed::neg,
        };
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, f))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::map(
                c.ordinal(),
                op.kernel(),
                E::DTYPE,
                l.dims(),
                &[input(c, l)],
                &[],
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::binary`] for one element type.
    fn binary_body<O: BinaryOpT>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self>
    where
        E: Num,
    {
        same_device(O::name(), self, rhs)?;
        crate::dispatch::on_cpu(self.device());
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Ok(Storage::Cpu(zip_map(a, l, b, rl, O::apply))),
            (Storage::Cuda(a), Storage::Cuda(b)) => Ok(Storage::Cuda(gpu::map(
                a.ordinal(),
                binary_kernel(O::OP),
                E::DTYPE,
                l.dims(),
                &[input(a, l), input(b, rl)],
                &[],
            )?)),
            _ => Err(super::no_kernel(O::name(), self.device())),
        }
    }

    /// The body of [`Storage::binary_scalar`] for one element type.
    fn binary_scalar_body<O: BinaryOpT>(&self, l: &Layout, c: E, scalar_left: bool) -> Result<Self>
    where
        E: Num,
    {
        crate::dispatch::on_cpu(self.device());
        match self {
            // Two loops rather than a branch per element, so each vectorizes as `map` does.
            Storage::Cpu(v) if scalar_left => Ok(Storage::Cpu(map(v, l, move |x| O::apply(c, x)))),
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, move |x| O::apply(x, c)))),
            Storage::Cuda(s) => {
                let (src, code) = binary_scalar_kernel(O::OP);
                let mut uniforms = vec![uniform(c)];
                uniforms.extend(code.map(Arg::U32));
                uniforms.push(Arg::U32(scalar_left as u32));
                Ok(Storage::Cuda(gpu::map_with(
                    s.ordinal(),
                    src,
                    E::DTYPE,
                    l.dims(),
                    &[input(s, l)],
                    &uniforms,
                )?))
            }
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::cmp_scalar`] for one element type.
    fn cmp_scalar_body<O: CmpOpT>(&self, l: &Layout, c: E) -> Result<Storage<bool>> {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, move |x| O::apply(x, c)))),
            Storage::Cuda(s) => Ok(Storage::Cuda(gpu::map_with(
                s.ordinal(),
                &k::cmp_scalar::KERNEL,
                E::DTYPE,
                l.dims(),
                &[input(s, l)],
                &[uniform(c), Arg::U32(cmp_scalar_code(O::OP))],
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::cmp`] for one element type.
    fn cmp_body<O: CmpOpT>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Storage<bool>> {
        same_device("compare", self, rhs)?;
        crate::dispatch::on_cpu(self.device());
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => {
                Ok(Storage::Cpu(zip_map(a, l, b, rl, O::apply::<E>)))
            }
            (Storage::Cuda(a), Storage::Cuda(b)) => Ok(Storage::Cuda(gpu::map(
                a.ordinal(),
                cmp_kernel(O::OP),
                E::DTYPE,
                l.dims(),
                &[input(a, l), input(b, rl)],
                &[],
            )?)),
            _ => Err(super::no_kernel("compare", self.device())),
        }
    }

    /// The body of [`Storage::affine`] for one element type.
    fn affine_body(&self, l: &Layout, mul: E, add: E) -> Result<Self>
    where
        E: Num,
    {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, |x: E| x.mul(mul).add(add)))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::map_with(
                c.ordinal(),
                &k::affine::KERNEL,
                E::DTYPE,
                l.dims(),
                &[input(c, l)],
                &[uniform(mul), uniform(add)],
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::clamp`] for one element type.
    fn clamp_body(&self, l: &Layout, lo: E, hi: E) -> Result<Self>
    where
        E: Num,
    {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, |x: E| {
                if x < lo {
                    lo
                } else if x > hi {
                    hi
                } else {
                    x
                }
            }))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::map_with(
                c.ordinal(),
                &k::clamp::KERNEL,
                E::DTYPE,
                l.dims(),
                &[input(c, l)],
                &[uniform(lo), uniform(hi)],
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::cast`] for one element type.
    fn cast_body<U: Element>(&self, l: &Layout) -> Result<Storage<U>> {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, |x: E| x.cast::<U>()))),
            // Every pair of element types has an entry (`Element::cast`'s conversion); the
            // same type is a copy.
            Storage::Cuda(c) => {
                let kernel = if E::DTYPE == U::DTYPE {
                    &k::copy::KERNEL
                } else {
                    &k::cast::KERNEL
                };
                Ok(Storage::Cuda(gpu::map(
                    c.ordinal(),
                    kernel,
                    E::DTYPE,
                    l.dims(),
                    &[input(c, l)],
                    &[],
                )?))
            }
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::relu_backward`] for one element type.
    fn relu_backward_body(&self, l: &Layout, x: &Self, xl: &Layout) -> Result<Self>
    where
        E: Num,
    {
        same_device("relu_backward", self, x)?;
        match (self, x) {
            (Storage::Cpu(g), Storage::Cpu(xv)) => {
                crate::dispatch::cpu();
                Ok(Storage::Cpu(zip_map(g, l, xv, xl, relu_grad::<E>)))
            }
            _ => {
                // The zero is a kernel argument, not an uploaded tensor, so this can be captured.
                let dense = Layout::contiguous(xl.dims());
                let step = x
                    .cmp_scalar::<markers::Gt>(xl, E::ZERO)?
                    .cast::<E>(&dense)?;
                self.binary::<markers::Mul>(l, &step, &dense)
            }
        }
    }

    /// The body of [`Storage::where_cond`] for one element type.
    fn where_cond_body(
        cond: (&Storage<bool>, &Layout),
        on_true: (&Self, &Layout),
        on_false: (&Self, &Layout),
    ) -> Result<Self> {
        same_device("where", cond.0, on_true.0)?;
        same_device("where", on_true.0, on_false.0)?;
        crate::dispatch::on_cpu(cond.0.device());
        match (cond.0, on_true.0, on_false.0) {
            (Storage::Cpu(c), Storage::Cpu(a), Storage::Cpu(b)) => Ok(Storage::Cpu(zip3_map(
                (c, cond.1),
                (a, on_true.1),
                (b, on_false.1),
                |c, a, b| if c { a } else { b },
            ))),
            (Storage::Cuda(c), Storage::Cuda(a), Storage::Cuda(b)) => Ok(Storage::Cuda(gpu::map(
                c.ordinal(),
                &k::select::KERNEL,
                E::DTYPE,
                on_true.1.dims(),
                &[input(c, cond.1), input(a, on_true.1), input(b, on_false.1)],
                &[],
            )?)),
            _ => Err(super::no_kernel("where", cond.0.device())),
        }
    }
}

/// A `#[uniform]` scalar of a kernel over `E`: integers exactly (an `f64` holds an `i64` only
/// up to 2^53), floats in their compute type.
fn uniform<E: Element>(v: E) -> Arg {
    if E::DTYPE.is_float() {
        Arg::Acc(v.to_f64())
    } else {
        Arg::I64(v.to_i64())
    }
}

/// A unary op on one element through its compute type: the op's kernel function, natively. A
/// named `#[inline(always)]` function rather than a closure: the CPU loop is compiled twice
/// (baseline and AVX2) and a large closure called from both would not be inlined, so the loop
/// would not vectorize.
#[inline(always)]
pub(super) fn unary_fn<E: Float, O: UnaryOpT>(x: E) -> E {
    E::from_acc(O::apply::<E>(x.to_acc()))
}

/// `g * step(x)`, the product computed as the `Mul` op computes it, so the fused pass gives
/// the composition's bits (`g * 0` keeps its sign, and NaN or infinite `g` gives NaN).
#[inline(always)]
fn relu_grad<E: Num>(g: E, x: E) -> E {
    markers::Mul::apply(g, if x > E::ZERO { E::ONE } else { E::ZERO })
}

/// The op name of a binary marker, for errors.
trait OpName {
    fn name() -> &'static str;
}

impl<O: BinaryOpT> OpName for O {
    fn name() -> &'static str {
        rtx_kernels::Op::Binary(O::OP).name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;
    use crate::cpu::CHUNK;
    use markers::{Add, Div, Eq, Ge, Gt, Le, Lt, Max, Min, Mul, Ne, Pow, Sub};
    use rtx_kernels::{bf16, f16};

    /// Values with the specials of `E` (zeros of both signs, NaN and infinities for floats,
    /// the range ends and -1 for integers), more than two chunks of them so the parallel path
    /// runs, and the scalars to combine them with.
    fn values<E: Num>() -> (Vec<E>, Vec<E>) {
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -2.75,
            3.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let mut v: Vec<E> = (0..2 * CHUNK + 37)
            .map(|i| match i % 13 {
                0..=9 => E::from_f64(specials[i % 13]),
                10 => E::LOWEST,
                11 => E::HIGHEST,
                _ => E::from_f64((i % 97) as f64 * 0.37 - 17.0),
            })
            .collect();
        v[1] = E::from_f64(1e-3);
        let scalars = [0.0, -0.0, 2.0, -1.0, 0.3, f64::NAN, f64::INFINITY, 200.0]
            .map(E::from_f64)
            .into_iter()
            .chain([E::LOWEST, E::HIGHEST])
            .collect();
        (v, scalars)
    }

    /// Bit patterns, so NaNs compare equal and zeros keep their sign.
    fn bits<E: Element>(v: &[E]) -> Vec<u64> {
        v.iter().map(|x| x.to_f64().to_bits()).collect()
    }

    /// `x op c` and `c op x` equal the tensor-tensor op against a broadcast scalar, on a dense
    /// view and on a transposed one, with one dispatch each.
    fn against_binary<O: BinaryOpT, E: Num>() {
        let (v, scalars) = values::<E>();
        let n = v.len();
        let x = Storage::from_vec(v, Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
        let rows = n / 7;
        let views = [
            Layout::contiguous(&[n]),
            Layout::contiguous(&[rows, 7]).transpose(0, 1),
        ];
        for c in scalars {
            let cs = Storage::from_vec(vec![c], Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
            for l in &views {
                let lc = Layout::contiguous(&[])
                    .broadcast_to(l.dims())
                    .unwrap_or_else(|| panic!("a scalar broadcasts"));
                let dense = Layout::contiguous(l.dims());
                for left in [false, true] {
                    let before = crate::launch_count(Device::Cpu);
                    let got = x
                        .binary_scalar::<O>(l, c, left)
                        .unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(crate::launch_count(Device::Cpu) - before, 1);
                    let want = if left {
                        cs.binary::<O>(&lc, &x, l)
                    } else {
                        x.binary::<O>(l, &cs, &lc)
                    }
                    .unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(
                        bits(&got.to_vec(&dense)),
                        bits(&want.to_vec(&dense)),
                        "{:?} {:?} c = {c:?} left {left} view {:?}",
                        O::OP,
                        E::DTYPE,
                        l.strides()
                    );
                }
            }
        }
    }

    fn every_op<E: Num>() {
        against_binary::<Add, E>();
        against_binary::<Sub, E>();
        against_binary::<Mul, E>();
        against_binary::<Div, E>();
        against_binary::<Max, E>();
        against_binary::<Min, E>();
        against_binary::<Pow, E>();
    }

    #[test]
    fn scalar_ops_match_the_tensor_ops_bit_for_bit() {
        every_op::<f32>();
        every_op::<f64>();
        every_op::<f16>();
        every_op::<bf16>();
        every_op::<i32>();
        every_op::<i64>();
        every_op::<u8>();
    }

    fn cmp_against_tensor<O: CmpOpT, E: Num>() {
        let (v, scalars) = values::<E>();
        let l = Layout::contiguous(&[v.len()]);
        let x = Storage::from_vec(v, Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
        for c in scalars {
            let cs = Storage::from_vec(vec![c], Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
            let lc = Layout::contiguous(&[])
                .broadcast_to(l.dims())
                .unwrap_or_else(|| panic!("a scalar broadcasts"));
            let got = x.cmp_scalar::<O>(&l, c).unwrap_or_else(|e| panic!("{e}"));
            let want = x.cmp::<O>(&l, &cs, &lc).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got.to_vec(&l), want.to_vec(&l), "{:?} c = {c:?}", O::OP);
        }
    }

    #[test]
    fn scalar_comparisons_match_the_tensor_comparisons() {
        fn all<E: Num>() {
            cmp_against_tensor::<Eq, E>();
            cmp_against_tensor::<Ne, E>();
            cmp_against_tensor::<Lt, E>();
            cmp_against_tensor::<Le, E>();
            cmp_against_tensor::<Gt, E>();
            cmp_against_tensor::<Ge, E>();
        }
        all::<f32>();
        all::<bf16>();
        all::<i64>();
        all::<u8>();
    }
}
