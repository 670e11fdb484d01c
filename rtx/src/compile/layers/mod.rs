//! [`StaticForward`](super::StaticForward) for rtx's own layers, so a `#[model]` forward that
//! calls them compiles; one file per layer family.
//!
//! Each layer's static backward computes what the tape's rules for its eager forward compute,
//! through the same functions (`MatmulGrad`'s saved operands, the fused norm, convolution,
//! pooling and dropout backwards of the backend, the elementwise rules of
//! `autograd::rules`). A layer's work is a function whose backward borrows the layer but not
//! its input, so a layer built of others (attention) can call it on a tensor of its own and
//! still return the backward.
//!
//! `emit_ir` adds the ops a layer computes, with their real shape types: a composite node
//! (`linear`, `layer_norm`, `causal_attention`) where the static forward runs one kernel or
//! library call, which the IR executor then runs too (`rtx/src/ir/exec/`).

mod activation;
pub(crate) mod attention;
mod batch_norm;
mod conv;
mod dropout;
mod embedding;
pub(crate) mod linear;
pub(crate) mod norm;
mod pool;

use crate::ir::{Builder, IrOp, NodeId, Value};
use crate::shape::Shape;
use rtx_kernels::Element;
use rtx_kernels::op::Op;

/// A node of the primitive op `op` on `inputs`, its result typed `Value<S, E>`.
fn op<S: Shape, E: Element>(b: &mut Builder, op: Op, inputs: &[NodeId]) -> Value<S, E> {
    b.node(IrOp::Op(op), inputs)
}

/// A gradient a step's backward was asked for: always computed for a float tensor.
fn asked<T>(grad: Option<T>) -> T {
    grad.unwrap_or_else(|| unreachable!("a float gradient that was asked for is computed"))
}

/// The input's gradient from a one-input step's backward, given the output's `g`.
///
/// Calling the step's backward through this function (rather than as `backward(&g, ..)` in
/// place) keeps Clippy 0.1.95's `needless_borrow` from reading the closure's signature, on
/// which it crashes with an internal compiler error.
fn back1<T, R>(backward: impl FnOnce(&T, [bool; 1]) -> Option<R>, g: &T) -> R {
    asked(backward(g, [true]))
}

/// The inputs' gradients asked for in `need` from a two-input step's backward (see
/// [`back1`]).
fn back2<T, A, B>(
    backward: impl FnOnce(&T, [bool; 2]) -> (Option<A>, Option<B>),
    g: &T,
    need: [bool; 2],
) -> (Option<A>, Option<B>) {
    backward(g, need)
}
