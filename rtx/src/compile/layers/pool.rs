//! [`StaticForward`] for [`MaxPool2d`] and [`AvgPool2d`]: the eager pooling on an input
//! without history, and the rule `rules::conv::pool2d_back` (the backend's pooling backward)
//! as its backward. The output sizes are the trait's `Out` parameter, `(HO, WO)`, taken
//! from the caller's type as the eager forward takes them.

use crate::compile::{Gradients, StaticForward};
use crate::error::ok;
use crate::ir::{Attrs, Builder, IrOp, PoolAttrs, Value};
use crate::nn::{AvgPool2d, MaxPool2d};
use crate::rules::conv::pool2d_back;
use crate::shape::{Dim, Shape};
use crate::tensor::Tensor;
use rtx_backends::Pool2dParams;
use rtx_kernels::Float;
use rtx_kernels::op::{Op, PoolOp};

/// The pooling `kind` of `x` over `K x K` windows (stride `S`, padding `P`) and its backward.
#[allow(clippy::type_complexity)]
fn train<SX: Shape, SY: Shape, E: Float, const K: usize, const S: usize, const P: usize>(
    x: &Tensor<SX, E>,
    y: Tensor<SY, E>,
    kind: PoolOp,
) -> (
    Tensor<SY, E>,
    impl FnOnce(Tensor<SY, E>, &mut Gradients, bool) -> (Option<Tensor<SX, E>>,)
    + use<SX, SY, E, K, S, P>,
) {
    let x = x.detach();
    let p = Pool2dParams {
        kernel: [K, K],
        stride: [S, S],
        padding: [P, P],
    };
    let backward = move |dy: Tensor<SY, E>, _: &mut Gradients, need_x: bool| {
        let dx = need_x.then(|| {
            let s = pool2d_back(
                (dy.storage(), dy.layout()),
                (x.storage(), x.layout()),
                kind,
                &p,
            );
            Tensor::from_storage(ok(s), x.shape())
        });
        (dx,)
    };
    (y, backward)
}

macro_rules! pool {
    ($layer:ident, $kind:ident) => {
        impl<N, C, H, W, HO, WO, E, const K: usize, const S: usize, const P: usize>
            StaticForward<(Tensor<(N, C, H, W), E>,), (HO, WO)> for $layer<K, S, P>
        where
            N: Dim,
            C: Dim,
            H: Dim,
            W: Dim,
            HO: Dim,
            WO: Dim,
            E: Float,
        {
            type Output = Tensor<(N, C, HO, WO), E>;
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
                let y = self.forward(&x.detach());
                train::<_, _, E, K, S, P>(&x, y, PoolOp::$kind)
            }

            fn emit_ir(
                &self,
                b: &mut Builder,
                (x,): (Value<(N, C, H, W), E>,),
            ) -> Value<(N, C, HO, WO), E> {
                let attrs = Attrs {
                    pool: Some(PoolAttrs {
                        kernel: K,
                        stride: S,
                        padding: P,
                    }),
                    ..Attrs::default()
                };
                b.node_with(IrOp::Op(Op::Pool(PoolOp::$kind)), attrs, &[x.id()])
            }
        }
    };
}

pool!(MaxPool2d, Max);
pool!(AvgPool2d, Avg);
