//! [`StaticForward`] for [`Conv1d`] and [`Conv2d`]. The forward is the eager convolution on
//! inputs without history; the backward is the rule `rules::conv::conv2d_back` (the
//! backend's convolution backwards, the bias's gradient summed over positions and images). A 1-d convolution runs as a 2-d one of height 1.
//!
//! The output sizes are the trait's `Out` parameter (`(HO, WO)`, or `LO`): the eager forward
//! takes them from the caller's type, and so does `StaticForward::forward_train`.

use crate::compile::{Gradients, StaticForward};
use crate::error::ok;
use crate::ir::{Attrs, Builder, ConvAttrs, IrOp, Value};
use crate::nn::{Conv1d, Conv2d};
use crate::rules::conv::conv2d_back;
use crate::shape::conv::ConvOptions;
use crate::shape::{Const, Dim, Shape};
use crate::tensor::Tensor;
use rtx_backends::Conv2dParams;
use rtx_backends::Layout;
use rtx_kernels::Float;
use rtx_kernels::op::Op;

/// The settings of a convolution over `spatial` axes (a 1-d one runs as height 1), as the
/// eager convolution sets them.
fn params<C: Dim, CG: Dim, O: ConvOptions<C, CG>>(spatial: usize) -> Conv2dParams {
    let lift = |v: usize, one: usize| if spatial == 1 { [one, v] } else { [v, v] };
    Conv2dParams {
        stride: lift(O::STRIDE, 1),
        padding: lift(O::PADDING, 0),
        dilation: lift(O::DILATION, 1),
        groups: O::GROUPS,
    }
}

/// `l` with a size-1 height axis inserted at 2 when it has rank 3 (a 1-d operand).
fn lift(l: &Layout) -> Layout {
    if l.dims().len() != 3 {
        return *l;
    }
    let (mut dims, mut strides) = (l.dims().to_vec(), l.strides().to_vec());
    dims.insert(2, 1);
    strides.insert(2, 0);
    Layout::new(&dims, &strides, l.offset())
}

/// The backward of a convolution of `x` with `weight` (and `bias`) under `p`: the input's
/// gradient when asked for, the parameters' added to `grads` when they track gradients.
#[allow(clippy::type_complexity)]
fn backward<'l, SX: Shape, SW: Shape, SY: Shape, const O: usize, E: Float>(
    x: Tensor<SX, E>,
    weight: &'l Tensor<SW, E>,
    bias: Option<&'l Tensor<(Const<O>,), E>>,
    p: Conv2dParams,
) -> impl FnOnce(Tensor<SY, E>, &mut Gradients, bool) -> (Option<Tensor<SX, E>>,)
+ use<'l, SX, SW, SY, O, E> {
    move |dy: Tensor<SY, E>, grads: &mut Gradients, need_x: bool| {
        let lg = lift(dy.layout());
        let (lx, lw) = (lift(x.layout()), lift(weight.layout()));
        let bias = bias.filter(|b| b.tracks_grad());
        let need = [need_x, weight.tracks_grad(), bias.is_some()];
        let (dx, dw, db) = ok(conv2d_back(
            (dy.storage(), &lg),
            (x.storage(), &lx),
            (weight.storage(), &lw),
            &p,
            need,
        ));
        if let Some(dw) = dw {
            grads.add(weight, Tensor::from_storage(dw, weight.shape()));
        }
        if let (Some(b), Some(db)) = (bias, db) {
            grads.add(b, Tensor::from_storage(db, b.shape()));
        }
        (dx.map(|dx| Tensor::from_storage(dx, x.shape())),)
    }
}

impl<N, C, H, W, HO, WO, const I: usize, const O: usize, const K: usize, Opt, E>
    StaticForward<(Tensor<(N, C, H, W), E>,), (HO, WO)> for Conv2d<I, O, K, Opt, E>
where
    N: Dim,
    C: Dim,
    H: Dim,
    W: Dim,
    HO: Dim,
    WO: Dim,
    Opt: ConvOptions<C, Const<I>> + Default,
    E: Float,
{
    type Output = Tensor<(N, Const<O>, HO, WO), E>;
    type ArgGrads = (Option<Tensor<(N, C, H, W), E>>,);

    fn forward_fused(&self, (x,): (Tensor<(N, C, H, W), E>,)) -> Self::Output {
        self.forward(&x)
    }

    fn forward_train(
        &self,
        (x,): (Tensor<(N, C, H, W), E>,),
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let (x, w) = (x.detach(), self.weight.detach());
        let y = match &self.bias {
            Some(b) => x.conv2d_bias(&w, &b.detach(), Opt::default()),
            None => x.conv2d(&w, Opt::default()),
        };
        let p = params::<C, Const<I>, Opt>(2);
        (y, backward(x, &self.weight, self.bias.as_ref(), p))
    }

    fn emit_ir(
        &self,
        b: &mut Builder,
        (x,): (Value<(N, C, H, W), E>,),
    ) -> Value<(N, Const<O>, HO, WO), E> {
        let w = b.param::<(Const<O>, Const<I>, Const<K>, Const<K>), E>("weight");
        let mut inputs = vec![x.id(), w.id()];
        if self.bias.is_some() {
            inputs.push(b.param::<(Const<O>,), E>("bias").id());
        }
        b.node_with(IrOp::Op(Op::Conv), conv_attrs::<Opt, C, I>(), &inputs)
    }
}

impl<N, C, L, LO, const I: usize, const O: usize, const K: usize, Opt, E>
    StaticForward<(Tensor<(N, C, L), E>,), LO> for Conv1d<I, O, K, Opt, E>
where
    N: Dim,
    C: Dim,
    L: Dim,
    LO: Dim,
    Opt: ConvOptions<C, Const<I>> + Default,
    E: Float,
{
    type Output = Tensor<(N, Const<O>, LO), E>;
    type ArgGrads = (Option<Tensor<(N, C, L), E>>,);

    fn forward_fused(&self, (x,): (Tensor<(N, C, L), E>,)) -> Self::Output {
        self.forward(&x)
    }

    fn forward_train(
        &self,
        (x,): (Tensor<(N, C, L), E>,),
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let (x, w) = (x.detach(), self.weight.detach());
        let y = match &self.bias {
            Some(b) => x.conv1d_bias(&w, &b.detach(), Opt::default()),
            None => x.conv1d(&w, Opt::default()),
        };
        let p = params::<C, Const<I>, Opt>(1);
        (y, backward(x, &self.weight, self.bias.as_ref(), p))
    }

    fn emit_ir(
        &self,
        b: &mut Builder,
        (x,): (Value<(N, C, L), E>,),
    ) -> Value<(N, Const<O>, LO), E> {
        let w = b.param::<(Const<O>, Const<I>, Const<K>), E>("weight");
        let mut inputs = vec![x.id(), w.id()];
        if self.bias.is_some() {
            inputs.push(b.param::<(Const<O>,), E>("bias").id());
        }
        b.node_with(IrOp::Op(Op::Conv), conv_attrs::<Opt, C, I>(), &inputs)
    }
}

/// A convolution's geometry as IR attributes.
fn conv_attrs<Opt: ConvOptions<C, Const<I>>, C: Dim, const I: usize>() -> Attrs {
    Attrs {
        conv: Some(ConvAttrs {
            stride: Opt::STRIDE,
            padding: Opt::PADDING,
            dilation: Opt::DILATION,
            groups: Opt::GROUPS,
        }),
        ..Attrs::default()
    }
}
