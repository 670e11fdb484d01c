//! The marker traits `#[kernel]` implements, so a kernel can be applied to tensors on any
//! device: each kernel's module holds a unit struct `Op` (`gelu_affine::Op`) implementing
//! [`Elementwise`], [`Reduce`] or [`Simt`], which carries the kernel's CUDA source as a
//! constant and its native function as a method (ARCHITECTURE.md: an op is a marker type with its
//! kernel as a constant). `rtx::kernel` applies them; a backend picks the CUDA entry for the
//! tensor's element type from `KERNEL`, the CPU runs the native code.
//!
//! Invariant: a marker's native functions take the inputs and uniforms in the same order as
//! the entries of its `KERNEL`, so both devices compute the same function of the same values.
//!
//! ```
//! use rtx_kernels::kernel::{Elementwise, elementwise_uniforms};
//! use rtx_kernels::kernels::leaky_relu;
//! let f = <leaky_relu::Op as Elementwise<1>>::scalar::<f32>(&[0.1]);
//! assert_eq!(f(&[-2.0]), -0.2);
//! let u = elementwise_uniforms(leaky_relu::Op::KERNEL);
//! assert_eq!(u[0].name, "slope");
//! ```

use super::{KernelParam, KernelSource, LaunchConfig, LaunchError, ParamType, Variant};
use crate::Float;

/// An elementwise `#[kernel]` with `N` tensor inputs (its parameters not marked
/// `#[uniform]`), as the marker type `name::Op` that the macro emits.
///
/// Generated for kernels whose inputs and result all have the element type `T` (not for
/// `bool` masks or predicates, nor for casts).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an elementwise kernel with {N} tensor input(s)",
    label = "expected the `Op` of a `#[kernel(elementwise)]` function with {N} non-uniform input(s)",
    note = "`#[kernel(elementwise)]` on `fn name<T: Float>(..) -> T` generates `name::Op`; \
            its tensor inputs are the parameters not marked `#[uniform]`: apply it with \
            `rtx::kernel::map` for one, `map2` for two, `map3` for three"
)]
pub trait Elementwise<const N: usize>: Copy + Send + Sync + 'static {
    /// The kernel's CUDA source and entry points.
    const KERNEL: &'static KernelSource;
    /// For each input, the derived kernel `name_grad_<input>` computing `grad * d out / d
    /// input` (it takes the inputs, then the upstream gradient, and the same uniforms), or
    /// `None` where `#[kernel]` derived no derivative.
    const GRADS: [Option<&'static KernelSource>; N];

    /// The scalar function with its uniforms bound: it takes one element of each input, in
    /// order (`inputs.len() == N`). `uniforms` holds one value per `#[uniform]` parameter, in
    /// order, as [`elementwise_uniforms`] lists them: a `T` uniform is rounded to `T`, an
    /// integer one converted with `as` (callers check that it is integral and in range).
    fn scalar<T: Float>(uniforms: &[f64]) -> impl Fn(&[T]) -> T + Copy + Send + Sync + 'static;

    /// The derivative with respect to input `wrt` times an upstream gradient, with the
    /// uniforms bound: it takes one element of each input and then the gradient
    /// (`inputs.len() == N + 1`). NaN where `GRADS[wrt]` is `None`.
    fn scalar_grad<T: Float>(
        wrt: usize,
        uniforms: &[f64],
    ) -> impl Fn(&[T]) -> T + Copy + Send + Sync + 'static;
}

/// A `#[kernel(reduce(..))]` as the marker type `name::Op`: a reduction along one axis of a
/// row-major tensor seen as `[outer, axis, inner]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a reduce kernel",
    label = "expected the `Op` of a `#[kernel(reduce(..))]` function",
    note = "`#[kernel(reduce(identity = ..))]` on a combine function `fn name<T: Float>(acc: T, \
            x: T) -> T` generates `name::Op`"
)]
pub trait Reduce: Copy + Send + Sync + 'static {
    /// The kernel's CUDA source and entry points.
    const KERNEL: &'static KernelSource;

    /// Reduces `x` (`outer * axis * inner` elements, row-major) along the middle axis into
    /// `out` (`outer * inner` elements), natively.
    fn run<T: Float>(
        x: &[T],
        outer: usize,
        axis: usize,
        inner: usize,
        out: &mut [T],
    ) -> Result<(), LaunchError>;
}

/// A general SIMT `#[kernel]` as the marker type `name::Op`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a SIMT kernel",
    label = "expected the `Op` of a `#[kernel]` function without a kind",
    note = "`#[kernel]` on `fn name<T: Float>(..)` taking `&[T]` / `&mut [T]` buffers generates \
            `name::Op`"
)]
pub trait Simt: Copy + Send + Sync + 'static {
    /// The kernel's CUDA source and entry points.
    const KERNEL: &'static KernelSource;

    /// Runs the kernel natively on the block emulation, with one argument per parameter of
    /// the kernel, in order. A wrong count or kind of argument is an error naming the
    /// parameter.
    fn run<T: Float>(launch: LaunchConfig, args: &mut [SimtArg<'_, T>]) -> Result<(), LaunchError>;
}

/// One argument of a native SIMT run through [`Simt::run`].
#[derive(Debug)]
pub enum SimtArg<'a, T> {
    /// A `&[T]` buffer.
    In(&'a [T]),
    /// A `&mut [T]` buffer.
    Out(&'a mut [T]),
    /// A `T` scalar.
    Elem(T),
    /// A `usize` scalar.
    Usize(usize),
    /// An `i32` scalar.
    I32(i32),
    /// A `u32` scalar.
    U32(u32),
    /// An `i64` scalar.
    I64(i64),
    /// A [`TensorMap`](super::TensorMap): a 2-D view that `tma_load_2d` copies boxes of.
    TensorMap(super::TensorMap),
    /// A `&[i32]` buffer: words of packed data (a quantized weight's blocks).
    Words(&'a [i32]),
}

impl<T: Copy> SimtArg<'_, T> {
    fn kind(&self) -> &'static str {
        match self {
            SimtArg::In(_) => "an input buffer (&[T])",
            SimtArg::Out(_) => "an output buffer (&mut [T])",
            SimtArg::Elem(_) => "a T scalar",
            SimtArg::Usize(_) => "a usize",
            SimtArg::I32(_) => "an i32",
            SimtArg::U32(_) => "a u32",
            SimtArg::I64(_) => "an i64",
            SimtArg::TensorMap(_) => "a TensorMap",
            SimtArg::Words(_) => "a buffer of words (&[i32])",
        }
    }

    fn mismatch(&self, kernel: &str, name: &str, want: &str) -> LaunchError {
        LaunchError::new(format!(
            "kernel `{kernel}`: parameter `{name}` is {want}, the argument given is {}",
            self.kind()
        ))
    }

    /// The buffer of a `&[T]` parameter (an output buffer may be read too).
    pub fn input(&self, kernel: &str, name: &str) -> Result<&[T], LaunchError> {
        match self {
            SimtArg::In(s) => Ok(s),
            SimtArg::Out(s) => Ok(s),
            other => Err(other.mismatch(kernel, name, "an input buffer (&[T])")),
        }
    }

    /// The buffer of a `&mut [T]` parameter.
    pub fn output(&mut self, kernel: &str, name: &str) -> Result<&mut [T], LaunchError> {
        match self {
            SimtArg::Out(s) => Ok(s),
            other => Err(other.mismatch(kernel, name, "an output buffer (&mut [T])")),
        }
    }

    /// The value of a `T` parameter.
    pub fn elem(&self, kernel: &str, name: &str) -> Result<T, LaunchError> {
        match self {
            SimtArg::Elem(v) => Ok(*v),
            other => Err(other.mismatch(kernel, name, "a T scalar")),
        }
    }

    /// The value of a `usize` parameter.
    pub fn usize(&self, kernel: &str, name: &str) -> Result<usize, LaunchError> {
        match self {
            SimtArg::Usize(v) => Ok(*v),
            other => Err(other.mismatch(kernel, name, "a usize")),
        }
    }

    /// The value of an `i32` parameter.
    pub fn i32(&self, kernel: &str, name: &str) -> Result<i32, LaunchError> {
        match self {
            SimtArg::I32(v) => Ok(*v),
            other => Err(other.mismatch(kernel, name, "an i32")),
        }
    }

    /// The value of a `u32` parameter.
    pub fn u32(&self, kernel: &str, name: &str) -> Result<u32, LaunchError> {
        match self {
            SimtArg::U32(v) => Ok(*v),
            other => Err(other.mismatch(kernel, name, "a u32")),
        }
    }

    /// The value of an `i64` parameter.
    pub fn i64(&self, kernel: &str, name: &str) -> Result<i64, LaunchError> {
        match self {
            SimtArg::I64(v) => Ok(*v),
            other => Err(other.mismatch(kernel, name, "an i64")),
        }
    }

    /// The buffer of a `&[i32]` parameter.
    pub fn words(&self, kernel: &str, name: &str) -> Result<&[i32], LaunchError> {
        match self {
            SimtArg::Words(s) => Ok(s),
            other => Err(other.mismatch(kernel, name, "a buffer of words (&[i32])")),
        }
    }

    /// The value of a `TensorMap` parameter.
    pub fn tensor_map(&self, kernel: &str, name: &str) -> Result<super::TensorMap, LaunchError> {
        match self {
            SimtArg::TensorMap(v) => Ok(*v),
            other => Err(other.mismatch(kernel, name, "a TensorMap")),
        }
    }
}

/// The error of a native SIMT run given `got` arguments for a kernel of `want` parameters.
pub fn simt_arity(kernel: &str, params: &[&str], got: usize) -> LaunchError {
    LaunchError::new(format!(
        "kernel `{kernel}` takes {} argument(s) ({}), {got} given",
        params.len(),
        params.join(", ")
    ))
}

/// The error for a SIMT parameter whose type `rtx::kernel::launch` cannot pass yet.
pub fn simt_unsupported(kernel: &str, name: &str, ty: &str) -> LaunchError {
    LaunchError::new(format!(
        "kernel `{kernel}`: parameter `{name}` is a `{ty}`, which a launch over tensors cannot \
         pass yet (buffers of the element type `T` and scalars can)"
    ))
}

/// The `#[uniform]` parameters of an elementwise kernel, in order, as its entries take them
/// (`ParamType::Value` of the compute type `Acc` for a `T` uniform, or an integer type).
///
/// ```
/// use rtx_kernels::kernel::{elementwise_uniforms, ParamType, ScalarType};
/// let u = elementwise_uniforms(&rtx_kernels::kernels::affine::KERNEL);
/// assert_eq!(u.iter().map(|p| p.name).collect::<Vec<_>>(), ["mul", "add"]);
/// assert_eq!(u[0].ty, ParamType::Value(ScalarType::Acc));
/// ```
pub fn elementwise_uniforms(src: &KernelSource) -> Vec<KernelParam> {
    let Some(entry) = src
        .entries
        .iter()
        .find(|e| e.variant == Variant::Contiguous)
    else {
        return Vec::new();
    };
    // The contiguous entry takes the inputs and uniforms in declaration order, then `out`
    // and the element count `n`.
    let last = entry.params.len().saturating_sub(1);
    entry
        .params
        .iter()
        .enumerate()
        .filter(|&(i, p)| i != last && matches!(p.ty, ParamType::Value(_)))
        .map(|(_, p)| *p)
        .collect()
}

/// The names of an elementwise kernel's tensor inputs, in order.
///
/// ```
/// let names = rtx_kernels::kernel::elementwise_inputs(&rtx_kernels::kernels::huber::KERNEL);
/// assert_eq!(names, ["x", "y"]);
/// ```
pub fn elementwise_inputs(src: &KernelSource) -> Vec<&'static str> {
    let Some(entry) = src
        .entries
        .iter()
        .find(|e| e.variant == Variant::Contiguous)
    else {
        return Vec::new();
    };
    entry
        .params
        .iter()
        .filter(|p| matches!(p.ty, ParamType::Ptr { mutable: false, .. }))
        .map(|p| p.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{axpy, gelu_tanh, gelu_tanh_grad_x, huber, sum};

    #[test]
    fn elementwise_markers_run_the_native_function() {
        let f = <huber::Op as Elementwise<2>>::scalar::<f64>(&[1.0]);
        assert_eq!(f(&[3.0, 1.0]), crate::kernels::huber(3.0, 1.0, 1.0));
        let g = <huber::Op as Elementwise<2>>::scalar_grad::<f64>(1, &[1.0]);
        assert_eq!(
            g(&[3.0, 1.0, 2.0]),
            crate::kernels::huber_grad_y(3.0, 1.0, 1.0, 2.0)
        );
        let grads = <gelu_tanh::Op as Elementwise<1>>::GRADS;
        assert!(grads[0].is_some_and(|k| std::ptr::eq(k, &gelu_tanh_grad_x::KERNEL)));
        // A derivative kernel is an elementwise kernel too, with no derivatives of its own.
        assert!(
            <gelu_tanh_grad_x::Op as Elementwise<2>>::GRADS
                .iter()
                .all(Option::is_none)
        );
        assert_eq!(
            elementwise_inputs(gelu_tanh_grad_x::Op::KERNEL),
            ["x", "grad"]
        );
    }

    #[test]
    fn simt_markers_check_their_arguments() {
        let x = [1.0f32, 2.0];
        let mut y = vec![10.0f32, 20.0];
        let mut args = [
            SimtArg::Elem(2.0),
            SimtArg::In(&x),
            SimtArg::Out(&mut y),
            SimtArg::Usize(2),
        ];
        axpy::Op::run(LaunchConfig::new(1, 32), &mut args).unwrap();
        assert_eq!(y, vec![12.0, 24.0]);
        let mut swapped = [
            SimtArg::Elem(2.0),
            SimtArg::Usize(2),
            SimtArg::In(&x),
            SimtArg::In(&x),
        ];
        let err = axpy::Op::run(LaunchConfig::new(1, 32), &mut swapped).unwrap_err();
        assert!(err.message().contains("`x`"), "{err}");
        let err = axpy::Op::run::<f32>(LaunchConfig::new(1, 32), &mut []).unwrap_err();
        assert!(err.message().contains("takes 4"), "{err}");
    }

    #[test]
    fn reduce_markers_run_the_native_reduction() {
        let mut out = [0.0f32; 2];
        sum::Op::run(&[1.0, 2.0, 3.0, 4.0], 2, 2, 1, &mut out).unwrap();
        assert_eq!(out, [3.0, 7.0]);
    }
}
