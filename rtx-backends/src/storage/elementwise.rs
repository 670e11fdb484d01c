//! Backend entry points for elementwise ops: unary math, binary arithmetic, comparisons,
//! `where`, casts and affine maps.
//!
//! On a GPU each is one launch of an elementwise kernel, in every element type the op exists
//! for: the kernels over `T: Num` and `T: Element` have integer (and `bool`) entries, so only
//! float math and integer `pow` are missing for integers (a `NoKernel` error names them).

use super::{Storage, same_device};
use crate::cpu::elementwise::{map, zip_map, zip3_map};
use crate::cuda::Arg;
use crate::cuda::ops::{self as gpu, input};
use crate::{Layout, Result};
use rtx_kernels::kernels::{self as k, binary_kernel, cmp_kernel, unary_kernel};
use rtx_kernels::op::markers;
use rtx_kernels::{BinaryOpT, CmpOpT, Element, Float, Num, Signed, UnaryOp, UnaryOpT};

impl<E: Element> Storage<E> {
    /// A unary float op by its marker type (`exp`, `gelu`, ...), computed in `E::Acc`.
    pub fn unary<O: UnaryOpT>(&self, l: &Layout) -> Result<Self>
    where
        E: Float,
    {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(map(v, l, unary_fn::<E, O>))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::map(
                c.ordinal(),
                unary_kernel(O::OP),
                E::DTYPE,
                l.dims(),
                &[input(c, l)],
                &[],
            )?)),
        }
    }

    /// Negation or absolute value of a signed type (integers included). Other ops are float-only
    /// and go through [`Storage::unary`].
    pub fn signed_unary(&self, op: UnaryOp, l: &Layout) -> Result<Self>
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
                unary_kernel(op),
                E::DTYPE,
                l.dims(),
                &[input(c, l)],
                &[],
            )?)),
        }
    }

    /// A binary op; both layouts already broadcast to the same sizes.
    pub fn binary<O: BinaryOpT>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self>
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

    /// A comparison into booleans; both layouts already broadcast to the same sizes.
    pub fn cmp<O: CmpOpT>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Storage<bool>> {
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

    /// `x * mul + add` in one pass (used for scalar arithmetic and scaling).
    pub fn affine(&self, l: &Layout, mul: E, add: E) -> Result<Self>
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
        }
    }

    /// Clamps every element into `[lo, hi]` (NaN stays NaN).
    pub fn clamp(&self, l: &Layout, lo: E, hi: E) -> Result<Self>
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
        }
    }

    /// Converts every element to another element type.
    pub fn cast<U: Element>(&self, l: &Layout) -> Result<Storage<U>> {
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
        }
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
        same_device("relu_backward", self, x)?;
        match (self, x) {
            (Storage::Cpu(g), Storage::Cpu(xv)) => {
                crate::dispatch::cpu();
                Ok(Storage::Cpu(zip_map(g, l, xv, xl, relu_grad::<E>)))
            }
            _ => {
                let zero = Storage::from_vec(vec![E::ZERO], x.device())?;
                let lz = Layout::contiguous(&[])
                    .broadcast_to(xl.dims())
                    .ok_or_else(|| super::no_kernel("relu_backward", x.device()))?;
                let dense = Layout::contiguous(xl.dims());
                let step = x.cmp::<markers::Gt>(xl, &zero, &lz)?.cast::<E>(&dense)?;
                self.binary::<markers::Mul>(l, &step, &dense)
            }
        }
    }

    /// `cond ? on_true : on_false`; all three layouts already broadcast to the same sizes.
    pub fn where_cond(
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

/// A unary op on one element through its compute type. A named `#[inline(always)]` function
/// rather than a closure: the CPU loop is compiled twice (baseline and AVX2) and a large
/// closure called from both would not be inlined, so the loop would not vectorize.
#[inline(always)]
fn unary_fn<E: Float, O: UnaryOpT>(x: E) -> E {
    E::from_acc(O::apply(x.to_acc()))
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
