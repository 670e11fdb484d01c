//! The builder's reductions and composite ops: mean, softmax, log-softmax, layer norm, RMS
//! norm, Linear and causal attention, each one [`Composite`] node, since the compiled path
//! runs each as one kernel or library call and the executor runs that same call.
//!
//! Invariant: every node emitted carries the dims rustc worked out for the typed result.

use super::builder::binary_op;
use super::{Attrs, Builder, Composite, IrOp, NodeId, Value};
use crate::nn::CrossEntropy;
use crate::shape::{Dim as DimType, ReduceAxis, Shape};
use crate::tensor::{Kept, Reduced};
use rtx_kernels::op::{BinaryOp, Op, ReduceOp};
use rtx_kernels::{Element, Float, Num};

/// Reductions and composite ops.
impl Builder {
    /// A reduction (`Sum`, `Prod`, `Max`, `Min`) along axis `I`, removing it.
    ///
    /// # Panics
    /// For `ArgMax` and `ArgMin`, whose results are indices: use [`Builder::arg_reduce`].
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim};
    /// # use rtx::op::ReduceOp;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// let s = b.reduce::<1, _, _>(x, ReduceOp::Sum);
    /// assert_eq!(b.finish().nodes[s.id()].shape, [Dim::Sym("B".into())]);
    /// ```
    #[track_caller]
    pub fn reduce<const I: usize, S, E: Num>(
        &mut self,
        x: Value<S, E>,
        op: ReduceOp,
    ) -> Value<Reduced<S, I>, E>
    where
        S: ReduceAxis<I>,
    {
        self.reduce_node(x.id, op, I, false)
    }

    /// [`Builder::reduce`], keeping axis `I` with size 1.
    ///
    /// # Panics
    /// For `ArgMax` and `ArgMin` (see [`Builder::reduce`]).
    #[track_caller]
    pub fn reduce_keepdim<const I: usize, S, E: Num>(
        &mut self,
        x: Value<S, E>,
        op: ReduceOp,
    ) -> Value<Kept<S, I>, E>
    where
        S: ReduceAxis<I>,
    {
        self.reduce_node(x.id, op, I, true)
    }

    #[track_caller]
    fn reduce_node<T: Shape, E: Element>(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        axis: usize,
        keepdim: bool,
    ) -> Value<T, E> {
        assert!(
            !matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin),
            "Builder::reduce: {} gives indices, not values; use Builder::arg_reduce",
            Op::Reduce(op).name()
        );
        let attrs = Attrs {
            axis: Some(axis),
            keepdim,
            ..Attrs::default()
        };
        self.node_with(IrOp::Op(Op::Reduce(op)), attrs, &[x])
    }

    /// The index (`i64`) of the first maximum (`ArgMax`) or minimum (`ArgMin`) along axis `I`.
    ///
    /// # Panics
    /// For the other reductions, whose results are values: use [`Builder::reduce`].
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::op::ReduceOp;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<2>, Const<3>), f32>("x");
    /// let i = b.arg_reduce::<1, _, _>(x, ReduceOp::ArgMax);
    /// assert_eq!(b.finish().nodes[i.id()].dtype, rtx::DType::I64);
    /// ```
    #[track_caller]
    pub fn arg_reduce<const I: usize, S, E: Num>(
        &mut self,
        x: Value<S, E>,
        op: ReduceOp,
    ) -> Value<Reduced<S, I>, i64>
    where
        S: ReduceAxis<I>,
    {
        assert!(
            matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin),
            "Builder::arg_reduce: {} gives values, not indices; use Builder::reduce",
            Op::Reduce(op).name()
        );
        self.node_with(IrOp::Op(Op::Reduce(op)), Attrs::axis(I), &[x.id])
    }

    /// The mean along axis `I`: one `mean` node, the compiled path's own mean.
    ///
    /// ```
    /// # use rtx::ir::{Builder, Composite, IrOp};
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>, Dyn<'T'>), f32>("x");
    /// let m = b.mean::<1, _, _>(x);
    /// let g = b.finish();
    /// assert_eq!(g.op_count(), 1);
    /// assert_eq!(g.nodes[m.id()].op, IrOp::Composite(Composite::Mean { axis: 1, keepdim: false }));
    /// ```
    pub fn mean<const I: usize, S, E: Float>(&mut self, x: Value<S, E>) -> Value<Reduced<S, I>, E>
    where
        S: ReduceAxis<I>,
    {
        let op = Composite::Mean {
            axis: I,
            keepdim: false,
        };
        self.node(IrOp::Composite(op), &[x.id])
    }

    /// [`Builder::mean`], keeping axis `I` with size 1.
    pub fn mean_keepdim<const I: usize, S, E: Float>(
        &mut self,
        x: Value<S, E>,
    ) -> Value<Kept<S, I>, E>
    where
        S: ReduceAxis<I>,
    {
        let op = Composite::Mean {
            axis: I,
            keepdim: true,
        };
        self.node(IrOp::Composite(op), &[x.id])
    }

    /// `exp(x - max) / Σ exp(x - max)` along axis `I`: one `softmax` node, which runs the
    /// compiled path's softmax kernel.
    pub fn softmax<const I: usize, S, E: Float>(&mut self, x: Value<S, E>) -> Value<S, E>
    where
        S: ReduceAxis<I>,
    {
        self.node(IrOp::Composite(Composite::Softmax { axis: I }), &[x.id])
    }

    /// `(x - max) - ln Σ exp(x - max)` along axis `I`: one `log_softmax` node.
    pub fn log_softmax<const I: usize, S, E: Float>(&mut self, x: Value<S, E>) -> Value<S, E>
    where
        S: ReduceAxis<I>,
    {
        self.node(IrOp::Composite(Composite::LogSoftmax { axis: I }), &[x.id])
    }

    /// Layer normalization over the last axis, as `nn::LayerNorm`: `(x - mean) / sqrt(var +
    /// eps)`, times `weight` and plus `bias` where given: one `layer_norm` node (the fused
    /// norm), with a separate add for a bias without a weight.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("Norm");
    /// let x = b.input::<(Dyn<'B'>, Const<8>), f32>("x");
    /// let (w, bias) = b.scope("ln", |b| (b.param("weight"), b.param("bias")));
    /// let y = b.layer_norm(x, Some(w), Some(bias), 1e-5);
    /// b.output(y);
    /// let g = b.finish();
    /// assert_eq!(g.op_count(), 1);
    /// assert_eq!(g.nodes[y.id()].inputs, vec![x.id(), w.id(), bias.id()]);
    /// ```
    pub fn layer_norm<S: LastAxis, E: Float>(
        &mut self,
        x: Value<S, E>,
        weight: Option<Value<(S::Last,), E>>,
        bias: Option<Value<(S::Last,), E>>,
        eps: f64,
    ) -> Value<S, E> {
        let mut inputs = vec![x.id];
        inputs.extend(weight.map(|w| w.id));
        let bias_in_norm = weight.is_some();
        if bias_in_norm {
            inputs.extend(bias.map(|b| b.id));
        }
        let y: Value<S, E> = self.node(IrOp::Composite(Composite::LayerNorm { eps }), &inputs);
        match bias {
            Some(b) if !bias_in_norm => self.node(binary_op(BinaryOp::Add), &[y.id, b.id]),
            _ => y,
        }
    }

    /// RMS normalization over the last axis, as `nn::RMSNorm`: `x / sqrt(mean(x²) + eps)`,
    /// times `weight` where given: one `rms_norm` node.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("Norm");
    /// let x = b.input::<(Dyn<'B'>, Dyn<'T'>, Const<8>), f32>("x");
    /// let y = b.rms_norm(x, None, 1e-6);
    /// b.output(y);
    /// assert_eq!(b.finish().op_count(), 1);
    /// ```
    pub fn rms_norm<S: LastAxis, E: Float>(
        &mut self,
        x: Value<S, E>,
        weight: Option<Value<(S::Last,), E>>,
        eps: f64,
    ) -> Value<S, E> {
        let mut inputs = vec![x.id];
        inputs.extend(weight.map(|w| w.id));
        self.node(IrOp::Composite(Composite::RmsNorm { eps }), &inputs)
    }

    /// `x · weightᵀ (+ bias)`, as `nn::Linear` computes it: one `linear` node whose bias is
    /// added by the product (cuBLASLt's epilogue on a GPU). The output's type `Y` is the
    /// caller's (`LinearOut`), as the layer states it.
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim};
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// let w = b.param::<(Const<2>, Const<3>), f32>("weight");
    /// let y = b.linear::<(Dyn<'B'>, Const<2>), _, _, _>(x, w, None);
    /// assert_eq!(b.finish().nodes[y.id()].shape, [Dim::Sym("B".into()), Dim::Static(2)]);
    /// ```
    pub fn linear<Y: Shape, S: Shape, W: Shape, E: Float>(
        &mut self,
        x: Value<S, E>,
        weight: Value<W, E>,
        bias: Option<NodeId>,
    ) -> Value<Y, E> {
        let mut inputs = vec![x.id, weight.id];
        inputs.extend(bias);
        self.node(IrOp::Composite(Composite::Linear), &inputs)
    }

    /// Causal self-attention between a fused projection `[B, T, 3D]` and the heads' output
    /// `[B, T, D]` (the output's type `Y` is the caller's): one `causal_attention` node, which
    /// runs the compiled path's fused or composed attention.
    pub fn causal_attention<Y: Shape, S: Shape, E: Float>(
        &mut self,
        qkv: Value<S, E>,
        heads: usize,
    ) -> Value<Y, E> {
        let op = Composite::CausalAttention { heads };
        self.node(IrOp::Composite(op), &[qkv.id])
    }

    /// The mean cross entropy of `logits` `[B, C]` against class indices `targets` `[B]`,
    /// with `nn::CrossEntropy`'s options: one `cross_entropy` node (the fused kernel), a
    /// scalar.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::nn::CrossEntropy;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("Loss");
    /// let x = b.input::<(Dyn<'B'>, Const<10>), f32>("logits");
    /// let t = b.input::<(Dyn<'B'>,), i64>("targets");
    /// let loss = b.cross_entropy(x, t, CrossEntropy::default());
    /// assert!(b.finish().nodes[loss.id()].shape.is_empty());
    /// ```
    pub fn cross_entropy<B: DimType, C: DimType, E: Float>(
        &mut self,
        logits: Value<(B, C), E>,
        targets: Value<(B,), i64>,
        opts: CrossEntropy,
    ) -> Value<(), E> {
        let op = Composite::CrossEntropy {
            ignore_index: opts.ignore_index,
            label_smoothing: opts.label_smoothing,
        };
        self.node(IrOp::Composite(op), &[logits.id, targets.id])
    }
}

/// A shape with a last axis, for the ops that work along it (layer norm, RMS norm): its
/// index and its dim type, which the per-feature weight `[D]` must have.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no last axis to normalize over",
    label = "a scalar shape",
    note = "normalization works along the last axis of a shape of rank 1 to 6"
)]
pub trait LastAxis: Shape {
    /// The index of the last axis.
    const AXIS: usize;
    /// The last axis's dim type.
    type Last: DimType;
}

macro_rules! last_axis {
    ($axis:expr; $($d:ident),* ; $last:ident) => {
        impl<$($d: DimType,)* $last: DimType> LastAxis for ($($d,)* $last,) {
            const AXIS: usize = $axis;
            type Last = $last;
        }
    };
}

last_axis!(0; ; D0);
last_axis!(1; D0; D1);
last_axis!(2; D0, D1; D2);
last_axis!(3; D0, D1, D2; D3);
last_axis!(4; D0, D1, D2, D3; D4);
last_axis!(5; D0, D1, D2, D3, D4; D5);
