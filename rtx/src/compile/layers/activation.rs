//! [`StaticForward`] for the activation layers (`ReLU`, `GELU`, `SiLU`, `Sigmoid`, `Tanh`):
//! the eager op on an input without history, and the backward through the tape's rule for
//! that op (`autograd::rules::unary`).

use super::op;
use crate::autograd::rules;
use crate::compile::{Gradients, StaticForward};
use crate::error::ok;
use crate::ir::{Builder, Value};
use crate::nn::{GELU, ReLU, SiLU, Sigmoid, Tanh};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Float;
use rtx_kernels::op::{Op, UnaryOp};

/// `y`, the activation `kind` of `x`, with its backward.
#[allow(clippy::type_complexity)]
fn train<S: Shape, E: Float>(
    x: &Tensor<S, E>,
    y: Tensor<S, E>,
    kind: UnaryOp,
) -> (
    Tensor<S, E>,
    impl FnOnce(Tensor<S, E>, &mut Gradients, bool) -> (Option<Tensor<S, E>>,) + use<S, E>,
) {
    let x = x.detach();
    let backward = move |dy: Tensor<S, E>, _: &mut Gradients, need_x: bool| {
        (need_x.then(|| ok(rules::unary(kind, &x, &dy))),)
    };
    (y, backward)
}

/// The elementwise op `layer` applies.
trait Activation {
    /// The op.
    fn kind(&self) -> UnaryOp;
}

macro_rules! activation {
    ($($layer:ty),*) => {$(
        impl<S: Shape, E: Float> StaticForward<(Tensor<S, E>,)> for $layer {
            type Output = Tensor<S, E>;
            type ArgGrads = (Option<Tensor<S, E>>,);

            fn forward_fused(&self, (x,): (Tensor<S, E>,)) -> Tensor<S, E> {
                self.forward(&x)
            }

            fn forward_train(
                &self,
                (x,): (Tensor<S, E>,),
            ) -> (
                Tensor<S, E>,
                impl FnOnce(Tensor<S, E>, &mut Gradients, bool) -> Self::ArgGrads,
            ) {
                train(&x, self.forward(&x.detach()), self.kind())
            }

            fn emit_ir(&self, b: &mut Builder, (x,): (Value<S, E>,)) -> Value<S, E> {
                op(b, Op::Unary(self.kind()), &[x.id()])
            }
        }
    )*};
}

activation!(ReLU, SiLU, Sigmoid, Tanh, GELU);

macro_rules! fixed {
    ($($layer:ty => $kind:ident),*) => {$(
        impl Activation for $layer {
            fn kind(&self) -> UnaryOp {
                UnaryOp::$kind
            }
        }
    )*};
}

fixed!(ReLU => Relu, SiLU => Silu, Sigmoid => Sigmoid, Tanh => Tanh);

impl Activation for GELU {
    fn kind(&self) -> UnaryOp {
        if self.tanh {
            UnaryOp::GeluTanh
        } else {
            UnaryOp::Gelu
        }
    }
}
