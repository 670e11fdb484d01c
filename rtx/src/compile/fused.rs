//! A fused chain of elementwise ops: one `#[kernel(elementwise)]` that `#[model]` generated
//! from the chain, applied to the chain's input tensors, with a backward through the
//! derivative kernels `#[kernel]` derived (one launch per input, then a sum over the dims
//! the input was broadcast along).
//!
//! `fusedN` runs a chain of N tensor inputs for inference (recording on the tape when an
//! input does, as [`crate::kernel::map`] does); `fusedN_train` runs it for a static backward
//! and returns the backward as a closure, which computes the gradients of the inputs marked
//! in its `need` flags (a chain's input that is data needs none).

use crate::autograd::sum_to;
use crate::error::{Error, Result, ok};
use crate::kernel::Broadcast3;
use crate::shape::rules::BroadcastShapes;
use crate::shape::{Shape, describe};
use crate::tensor::Tensor;
use crate::tensor::kernel::{broadcast_all, check_uniforms};
use rtx_backends::{Layout, Storage};
use rtx_kernels::Float;
use rtx_kernels::kernel::Elementwise;
use std::sync::Arc;

/// The shape of four broadcast operands.
pub type Broadcast4<A, B, C, D> = <Broadcast3<A, B, C> as BroadcastShapes<D>>::Output;

/// A kernel input with its shape type erased: its storage and its layout broadcast to the
/// output's sizes.
struct Operand<E: Float> {
    storage: Arc<Storage<E>>,
    layout: Layout,
}

/// Broadcasts the inputs' layouts to the output's sizes and checks they fit the output's
/// shape type `O`.
fn operands<O: Shape, E: Float, const N: usize>(
    name: &'static str,
    inputs: [(&Arc<Storage<E>>, &Layout, String); N],
) -> Result<(O, [Operand<E>; N])> {
    let described: Vec<(&Layout, String)> =
        inputs.iter().map(|(_, l, d)| (*l, d.clone())).collect();
    let (dims, layouts) = broadcast_all(name, &described)?;
    let out = O::from_dims(&dims).ok_or_else(|| Error::BadArgument {
        op: name,
        msg: format!("the broadcast sizes {dims:?} do not fit the output's shape type"),
    })?;
    let mut layouts = layouts.into_iter();
    let ops = inputs.map(|(s, _, _)| Operand {
        storage: s.clone(),
        layout: layouts.next().unwrap_or_else(|| Layout::contiguous(&[])),
    });
    Ok((out, ops))
}

/// Runs the kernel `K` over `ops` into a fresh tensor of shape `out`.
fn run<K: Elementwise<N>, const N: usize, O: Shape, E: Float>(
    ops: &[Operand<E>; N],
    out: O,
    uniforms: &[f64],
) -> Result<Tensor<O, E>> {
    check_uniforms(K::KERNEL, uniforms)?;
    let ins: Vec<(&Storage<E>, &Layout)> = ops.iter().map(|o| (&*o.storage, &o.layout)).collect();
    let storage = Storage::map_kernel::<N>(K::KERNEL, &ins, uniforms, K::scalar::<E>(uniforms))?;
    Ok(Tensor::from_storage(storage, out))
}

/// The gradient of input `i` at the output's shape: `dy * d out / d input_i`.
fn grad_at_output<K: Elementwise<N>, const N: usize, O: Shape, E: Float>(
    ops: &[Operand<E>; N],
    dy: &Tensor<O, E>,
    i: usize,
    uniforms: &[f64],
) -> Result<Tensor<O, E>> {
    let src = K::GRADS[i].ok_or_else(|| Error::BadArgument {
        op: K::KERNEL.name,
        msg: format!("`#[kernel]` derived no derivative with respect to input {i}"),
    })?;
    let mut ins: Vec<(&Storage<E>, &Layout)> =
        ops.iter().map(|o| (&*o.storage, &o.layout)).collect();
    ins.push((dy.storage(), dy.layout()));
    let f = K::scalar_grad::<E>(i, uniforms);
    let storage = Storage::map_kernel_grad::<N>(src, &ins, uniforms, f)?;
    Ok(Tensor::from_storage(storage, dy.shape()))
}

/// The gradient of input `i`, summed to that input's shape, when `need[i]`.
fn grad_of<K: Elementwise<N>, const N: usize, O: Shape, S: Shape, E: Float>(
    ops: &[Operand<E>; N],
    dy: &Tensor<O, E>,
    need: [bool; N],
    i: usize,
    uniforms: &[f64],
    shape: S,
) -> Option<Tensor<S, E>> {
    if !need[i] {
        return None;
    }
    let g = ok(grad_at_output::<K, N, O, E>(ops, dy, i, uniforms));
    Some(ok(sum_to(&g, shape)))
}

/// An input as [`operands`] takes it.
fn input<S: Shape, E: Float>(t: &Tensor<S, E>) -> (&Arc<Storage<E>>, &Layout, String) {
    (t.storage_arc(), t.layout(), describe(&t.shape()))
}

/// A one-input chain for inference.
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
pub fn fused1<K: Elementwise<1>, A: Shape, E: Float>(
    kernel: K,
    a: &Tensor<A, E>,
    uniforms: &[f64],
) -> Tensor<A, E> {
    a.map(kernel, uniforms)
}

/// A one-input chain for a static backward: its output, and the backward from the output's
/// gradient to the input's.
///
/// ```
/// use rtx::prelude::*;
///
/// #[rtx::kernel(elementwise)]
/// fn cube<T: Float>(x: T) -> T {
///     x * x * x
/// }
///
/// fn main() {
///     let x: Tensor<Rank1<2>> = Tensor::from_array([1.0, 2.0], Device::Cpu);
///     let (y, backward) = rtx::compile::fused::fused1_train(cube::Op, &x, &[]);
///     assert_eq!(y.to_vec(), vec![1.0, 8.0]);
///     let (dx,) = backward(&y.ones_like(), [true]);
///     let dx = dx.unwrap();
///     assert_eq!(dx.to_vec(), vec![3.0, 12.0]);
/// }
/// ```
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn fused1_train<K: Elementwise<1>, A: Shape, E: Float>(
    kernel: K,
    a: &Tensor<A, E>,
    uniforms: &[f64],
) -> (
    Tensor<A, E>,
    impl FnOnce(&Tensor<A, E>, [bool; 1]) -> (Option<Tensor<A, E>>,) + use<K, A, E>,
) {
    let _ = kernel;
    let (out, ops) = ok(operands::<A, E, 1>(K::KERNEL.name, [input(a)]));
    let y = ok(run::<K, 1, A, E>(&ops, out, uniforms));
    let u = uniforms.to_vec();
    let sa = a.shape();
    (y, move |dy: &Tensor<A, E>, need: [bool; 1]| {
        (grad_of::<K, 1, A, A, E>(&ops, dy, need, 0, &u, sa),)
    })
}

/// A two-input chain for inference, the inputs broadcast together.
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
pub fn fused2<K, A, B, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    uniforms: &[f64],
) -> Tensor<<A as BroadcastShapes<B>>::Output, E>
where
    K: Elementwise<2>,
    A: BroadcastShapes<B>,
    B: Shape,
    E: Float,
{
    crate::kernel::map2(kernel, a, b, uniforms)
}

/// A two-input chain for a static backward.
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn fused2_train<K, A, B, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    uniforms: &[f64],
) -> (
    Tensor<<A as BroadcastShapes<B>>::Output, E>,
    impl FnOnce(
        &Tensor<<A as BroadcastShapes<B>>::Output, E>,
        [bool; 2],
    ) -> (Option<Tensor<A, E>>, Option<Tensor<B, E>>)
    + use<K, A, B, E>,
)
where
    K: Elementwise<2>,
    A: BroadcastShapes<B>,
    B: Shape,
    E: Float,
{
    type O<A, B> = <A as BroadcastShapes<B>>::Output;
    let _ = kernel;
    let (out, ops) = ok(operands::<O<A, B>, E, 2>(
        K::KERNEL.name,
        [input(a), input(b)],
    ));
    let y = ok(run::<K, 2, O<A, B>, E>(&ops, out, uniforms));
    let u = uniforms.to_vec();
    let (sa, sb) = (a.shape(), b.shape());
    (y, move |dy: &Tensor<O<A, B>, E>, need: [bool; 2]| {
        (
            grad_of::<K, 2, _, A, E>(&ops, dy, need, 0, &u, sa),
            grad_of::<K, 2, _, B, E>(&ops, dy, need, 1, &u, sb),
        )
    })
}

/// A three-input chain for inference, the inputs broadcast together.
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
pub fn fused3<K, A, B, C, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    c: &Tensor<C, E>,
    uniforms: &[f64],
) -> Tensor<Broadcast3<A, B, C>, E>
where
    K: Elementwise<3>,
    A: BroadcastShapes<B>,
    <A as BroadcastShapes<B>>::Output: BroadcastShapes<C>,
    B: Shape,
    C: Shape,
    E: Float,
{
    crate::kernel::map3(kernel, a, b, c, uniforms)
}

/// A three-input chain for a static backward.
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn fused3_train<K, A, B, C, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    c: &Tensor<C, E>,
    uniforms: &[f64],
) -> (
    Tensor<Broadcast3<A, B, C>, E>,
    impl FnOnce(
        &Tensor<Broadcast3<A, B, C>, E>,
        [bool; 3],
    ) -> (
        Option<Tensor<A, E>>,
        Option<Tensor<B, E>>,
        Option<Tensor<C, E>>,
    ) + use<K, A, B, C, E>,
)
where
    K: Elementwise<3>,
    A: BroadcastShapes<B>,
    <A as BroadcastShapes<B>>::Output: BroadcastShapes<C>,
    B: Shape,
    C: Shape,
    E: Float,
{
    let _ = kernel;
    let (out, ops) = ok(operands::<Broadcast3<A, B, C>, E, 3>(
        K::KERNEL.name,
        [input(a), input(b), input(c)],
    ));
    let y = ok(run::<K, 3, _, E>(&ops, out, uniforms));
    let u = uniforms.to_vec();
    let (sa, sb, sc) = (a.shape(), b.shape(), c.shape());
    (
        y,
        move |dy: &Tensor<Broadcast3<A, B, C>, E>, need: [bool; 3]| {
            (
                grad_of::<K, 3, _, A, E>(&ops, dy, need, 0, &u, sa),
                grad_of::<K, 3, _, B, E>(&ops, dy, need, 1, &u, sb),
                grad_of::<K, 3, _, C, E>(&ops, dy, need, 2, &u, sc),
            )
        },
    )
}

/// A four-input chain for inference, the inputs broadcast together.
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
pub fn fused4<K, A, B, C, D, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    c: &Tensor<C, E>,
    d: &Tensor<D, E>,
    uniforms: &[f64],
) -> Tensor<Broadcast4<A, B, C, D>, E>
where
    K: Elementwise<4>,
    A: BroadcastShapes<B>,
    <A as BroadcastShapes<B>>::Output: BroadcastShapes<C>,
    Broadcast3<A, B, C>: BroadcastShapes<D>,
    B: Shape,
    C: Shape,
    D: Shape,
    E: Float,
{
    fused4_train(kernel, a, b, c, d, uniforms).0
}

/// A four-input chain for a static backward.
///
/// # Panics
/// When the kernel or the device fails, with the kernel's name.
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn fused4_train<K, A, B, C, D, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    c: &Tensor<C, E>,
    d: &Tensor<D, E>,
    uniforms: &[f64],
) -> (
    Tensor<Broadcast4<A, B, C, D>, E>,
    impl FnOnce(
        &Tensor<Broadcast4<A, B, C, D>, E>,
        [bool; 4],
    ) -> (
        Option<Tensor<A, E>>,
        Option<Tensor<B, E>>,
        Option<Tensor<C, E>>,
        Option<Tensor<D, E>>,
    ) + use<K, A, B, C, D, E>,
)
where
    K: Elementwise<4>,
    A: BroadcastShapes<B>,
    <A as BroadcastShapes<B>>::Output: BroadcastShapes<C>,
    Broadcast3<A, B, C>: BroadcastShapes<D>,
    B: Shape,
    C: Shape,
    D: Shape,
    E: Float,
{
    let _ = kernel;
    let (out, ops) = ok(operands::<Broadcast4<A, B, C, D>, E, 4>(
        K::KERNEL.name,
        [input(a), input(b), input(c), input(d)],
    ));
    let y = ok(run::<K, 4, _, E>(&ops, out, uniforms));
    let u = uniforms.to_vec();
    let (sa, sb, sc, sd) = (a.shape(), b.shape(), c.shape(), d.shape());
    (
        y,
        move |dy: &Tensor<Broadcast4<A, B, C, D>, E>, need: [bool; 4]| {
            (
                grad_of::<K, 4, _, A, E>(&ops, dy, need, 0, &u, sa),
                grad_of::<K, 4, _, B, E>(&ops, dy, need, 1, &u, sb),
                grad_of::<K, 4, _, C, E>(&ops, dy, need, 2, &u, sc),
                grad_of::<K, 4, _, D, E>(&ops, dy, need, 3, &u, sd),
            )
        },
    )
}
