//! [`StaticForward`] for [`Embedding`], on `[B]` ids (`forward`) and on `[B, T]` ids
//! (`forward_seq`). The ids take no gradient: their entry in `ArgGrads` is `()`, as the
//! trait's docs say for indices. The table's gradient is the tape's: the output's gradient
//! rows added into zeros at the ids (`index_select`'s backward).

use crate::autograd::index::index_select_back;
use crate::compile::{Gradients, StaticForward};
use crate::error::ok;
use crate::ir::{Attrs, Builder, IrOp, Value};
use crate::nn::Embedding;
use crate::shape::{Const, Dim};
use crate::tensor::Tensor;
use rtx_kernels::Float;
use rtx_kernels::op::Op;

impl<B: Dim, const V: usize, const D: usize, E: Float> StaticForward<(Tensor<(B,), i64>,)>
    for Embedding<V, D, E>
{
    type Output = Tensor<(B, Const<D>), E>;
    type ArgGrads = ((),);

    fn forward_fused(&self, (ids,): (Tensor<(B,), i64>,)) -> Self::Output {
        self.forward(&ids)
    }

    fn forward_train(
        &self,
        (ids,): (Tensor<(B,), i64>,),
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let y = self.weight.detach().index_select::<0, B>(&ids);
        let ids = ids.clone();
        let backward = move |dy: Self::Output, grads: &mut Gradients, _: bool| {
            if self.weight.tracks_grad() {
                let shape = self.weight.shape();
                let dw = index_select_back::<0, _, B, E>(&dy, shape, &ids);
                grads.add(&self.weight, ok(dw));
            }
            ((),)
        };
        (y, backward)
    }

    fn emit_ir(&self, b: &mut Builder, (ids,): (Value<(B,), i64>,)) -> Value<(B, Const<D>), E> {
        let w = b.param::<(Const<V>, Const<D>), E>("weight");
        b.node_with(
            IrOp::Op(Op::IndexSelect),
            Attrs::axis(0),
            &[w.id(), ids.id()],
        )
    }
}

impl<B: Dim, T: Dim, const V: usize, const D: usize, E: Float> StaticForward<(Tensor<(B, T), i64>,)>
    for Embedding<V, D, E>
{
    type Output = Tensor<(B, T, Const<D>), E>;
    type ArgGrads = ((),);

    fn forward_fused(&self, (ids,): (Tensor<(B, T), i64>,)) -> Self::Output {
        self.forward_seq(&ids)
    }

    fn forward_train(
        &self,
        (ids,): (Tensor<(B, T), i64>,),
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        // As `forward_seq`: the ids flattened, their rows picked, the result viewed [B, T, D].
        let flat = ids.reshape((ids.numel(),));
        let rows = self.weight.detach().index_select::<0, usize>(&flat);
        let y = rows.reshape((ids.dim::<0>(), ids.dim::<1>(), Const::<D>));
        let rows = rows.shape();
        let backward = move |dy: Self::Output, grads: &mut Gradients, _: bool| {
            if self.weight.tracks_grad() {
                let dy = ok(dy.reshape_unchecked(rows));
                let shape = self.weight.shape();
                let dw = index_select_back::<0, _, usize, E>(&dy, shape, &flat);
                grads.add(&self.weight, ok(dw));
            }
            ((),)
        };
        (y, backward)
    }

    fn emit_ir(
        &self,
        b: &mut Builder,
        (ids,): (Value<(B, T), i64>,),
    ) -> Value<(B, T, Const<D>), E> {
        let w = b.param::<(Const<V>, Const<D>), E>("weight");
        let flat = b.node::<(usize,), i64>(IrOp::Reshape, &[ids.id()]);
        let select = IrOp::Op(Op::IndexSelect);
        let rows =
            b.node_with::<(usize, Const<D>), E>(select, Attrs::axis(0), &[w.id(), flat.id()]);
        b.node(IrOp::Reshape, &[rows.id()])
    }
}
