//! A fused chain of elementwise ops: one `#[kernel(elementwise)]` that `#[model]` generated
//! from the chain, applied to the chain's input tensors, with a backward through the
//! derivative kernels `#[kernel]` derived (one launch per input, then a sum over the dims
//! the input was broadcast along).
//!
//! `fusedN` runs a chain of N tensor inputs for inference (recording on the tape when an
//! input does, as [`crate::kernel::map`] does); `fusedN_train` runs it for a static backward
//! and returns the backward as a closure, which computes the gradients of the inputs marked
//! in its `need` flags (a chain's input that is data needs none).

use crate::autograd::sum_to_storage;
use crate::error::{Error, Result, ok};
use crate::kernel::Broadcast3;
use crate::shape::rules::BroadcastShapes;
use crate::shape::{Shape, describe};
use crate::tensor::Tensor;
use crate::tensor::kernel::{ErasedKernel, broadcast_all, check_uniforms, erase_kernel};
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

/// A chain's kernel and its operands, ready to run forward and backward; no shape type and
/// no kernel type, so the code on it is compiled once per element type.
struct Chain<E: Float> {
    kernel: ErasedKernel<E>,
    ops: Vec<Operand<E>>,
    uniforms: Vec<f64>,
}

/// Broadcasts the inputs' layouts to the output's sizes and checks they fit the output's
/// shape type `O`.
fn operands<O: Shape, E: Float>(
    name: &'static str,
    inputs: Vec<(&Arc<Storage<E>>, &Layout, String)>,
) -> Result<(O, Vec<Operand<E>>)> {
    let (dims, ops) = broadcast_operands(name, inputs)?;
    let out = O::from_dims(&dims).ok_or_else(|| Error::BadArgument {
        op: name,
        msg: format!("the broadcast sizes {dims:?} do not fit the output's shape type"),
    })?;
    Ok((out, ops))
}

/// The work of [`operands`]: the output's sizes and the operands.
fn broadcast_operands<E: Float>(
    name: &'static str,
    inputs: Vec<(&Arc<Storage<E>>, &Layout, String)>,
) -> Result<(Vec<usize>, Vec<Operand<E>>)> {
    let described: Vec<(&Layout, String)> =
        inputs.iter().map(|(_, l, d)| (*l, d.clone())).collect();
    let (dims, layouts) = broadcast_all(name, &described)?;
    let ops = inputs
        .into_iter()
        .zip(layouts)
        .map(|((s, _, _), layout)| Operand {
            storage: s.clone(),
            layout,
        })
        .collect();
    Ok((dims, ops))
}

impl<E: Float> Chain<E> {
    /// Runs the kernel over the operands into fresh storage of the output's sizes.
    fn run(&self) -> Result<Storage<E>> {
        check_uniforms(self.kernel.src, &self.uniforms)?;
        let ins: Vec<(&Storage<E>, &Layout)> =
            self.ops.iter().map(|o| (&*o.storage, &o.layout)).collect();
        (self.kernel.forward)(&ins, &self.uniforms)
    }

    /// The gradient of input `i` at the output's sizes: `dy * d out / d input_i`.
    fn grad_at_output(&self, dy: (&Storage<E>, &Layout), i: usize) -> Result<Storage<E>> {
        let k = self.kernel;
        let src = k.grads[i].ok_or_else(|| Error::BadArgument {
            op: k.src.name,
            msg: format!("`#[kernel]` derived no derivative with respect to input {i}"),
        })?;
        let mut ins: Vec<(&Storage<E>, &Layout)> =
            self.ops.iter().map(|o| (&*o.storage, &o.layout)).collect();
        ins.push(dy);
        (k.grad)(src, i, &ins, &self.uniforms)
    }

    /// The gradient of input `i`, summed to that input's `dims`: dense storage.
    fn grad_to(&self, dy: (&Storage<E>, &Layout), i: usize, dims: &[usize]) -> Result<Storage<E>> {
        let g = self.grad_at_output(dy, i)?;
        sum_to_storage(&g, &Layout::contiguous(dy.1.dims()), dims)
    }
}

/// Runs a chain forward: its output of shape `O`, and the chain for the backward.
fn run<K: Elementwise<N>, const N: usize, O: Shape, E: Float>(
    inputs: Vec<(&Arc<Storage<E>>, &Layout, String)>,
    uniforms: &[f64],
) -> (Tensor<O, E>, Chain<E>) {
    let (out, ops) = ok(operands::<O, E>(K::KERNEL.name, inputs));
    let chain = Chain {
        kernel: erase_kernel::<K, N, E>(),
        ops,
        uniforms: uniforms.to_vec(),
    };
    let y = Tensor::from_storage(ok(chain.run()), out);
    (y, chain)
}

/// The gradient of input `i`, summed to that input's shape, when `need[i]`.
fn grad_of<O: Shape, S: Shape, E: Float>(
    chain: &Chain<E>,
    dy: &Tensor<O, E>,
    need: &[bool],
    i: usize,
    shape: S,
) -> Option<Tensor<S, E>> {
    if !need[i] {
        return None;
    }
    let g = ok(chain.grad_to((dy.storage(), dy.layout()), i, &shape.dims()));
    Some(Tensor::from_storage(g, shape))
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
    let (y, chain) = run::<K, 1, A, E>(vec![input(a)], uniforms);
    let sa = a.shape();
    (y, move |dy: &Tensor<A, E>, need: [bool; 1]| {
        (grad_of(&chain, dy, &need, 0, sa),)
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
    let (y, chain) = run::<K, 2, O<A, B>, E>(vec![input(a), input(b)], uniforms);
    let (sa, sb) = (a.shape(), b.shape());
    (y, move |dy: &Tensor<O<A, B>, E>, need: [bool; 2]| {
        (
            grad_of(&chain, dy, &need, 0, sa),
            grad_of(&chain, dy, &need, 1, sb),
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
    let (y, chain) =
        run::<K, 3, Broadcast3<A, B, C>, E>(vec![input(a), input(b), input(c)], uniforms);
    let (sa, sb, sc) = (a.shape(), b.shape(), c.shape());
    (
        y,
        move |dy: &Tensor<Broadcast3<A, B, C>, E>, need: [bool; 3]| {
            (
                grad_of(&chain, dy, &need, 0, sa),
                grad_of(&chain, dy, &need, 1, sb),
                grad_of(&chain, dy, &need, 2, sc),
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
    let (y, chain) = run::<K, 4, Broadcast4<A, B, C, D>, E>(
        vec![input(a), input(b), input(c), input(d)],
        uniforms,
    );
    let (sa, sb, sc, sd) = (a.shape(), b.shape(), c.shape(), d.shape());
    (
        y,
        move |dy: &Tensor<Broadcast4<A, B, C, D>, E>, need: [bool; 4]| {
            (
                grad_of(&chain, dy, &need, 0, sa),
                grad_of(&chain, dy, &need, 1, sb),
                grad_of(&chain, dy, &need, 2, sc),
                grad_of(&chain, dy, &need, 3, sd),
            )
        },
    )
}
