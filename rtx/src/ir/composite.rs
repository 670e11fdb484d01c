//! The builder's reductions and the composite ops made of them: mean, softmax, log-softmax,
//! layer norm and RMS norm, each emitted as primitive ops (ARCHITECTURE.md: a small primitive
//! core), never as one op.
//!
//! Invariant: a composition computes what the eager op's docs define (`Tensor::softmax`'s
//! max-shifted exponentials, `nn::LayerNorm`'s two-pass population variance), and every
//! node it emits carries the dims rustc worked out for the typed result.

use super::builder::{binary_op, typed};
use super::{Attrs, Builder, Dim, IrOp, NodeId, Value, dims_of};
use crate::shape::{Dim as DimType, ReduceAxis, Shape};
use crate::tensor::{Kept, Reduced};
use rtx_kernels::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use rtx_kernels::{DType, Element, Float, Num};

/// Reductions, and the composite ops built from them.
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

    /// The number of entries along `axis` of `x` (dims `dims`), as a scalar: a constant when
    /// the dim is static, a `size` node when it is only known at run time.
    fn count(&mut self, x: NodeId, axis: usize, dims: &[Dim], dtype: DType) -> NodeId {
        match dims[axis] {
            Dim::Static(n) => self.push(
                IrOp::Constant(n as f64),
                Attrs::default(),
                &[],
                dtype,
                vec![],
            ),
            Dim::Sym(_) => self.push(IrOp::Size { axis }, Attrs::default(), &[x], dtype, vec![]),
        }
    }

    /// The sum along `axis` divided by the axis's size: two primitive ops.
    fn mean_node(&mut self, x: NodeId, axis: usize, keepdim: bool, dtype: DType) -> NodeId {
        let dims = self.graph.nodes[x].shape.clone();
        let mut out = dims.clone();
        if keepdim {
            out[axis] = Dim::Static(1);
        } else {
            out.remove(axis);
        }
        let attrs = Attrs {
            axis: Some(axis),
            keepdim,
            ..Attrs::default()
        };
        let sum = self.push(
            IrOp::Op(Op::Reduce(ReduceOp::Sum)),
            attrs,
            &[x],
            dtype,
            out.clone(),
        );
        let n = self.count(x, axis, &dims, dtype);
        self.push(
            binary_op(BinaryOp::Div),
            Attrs::default(),
            &[sum, n],
            dtype,
            out,
        )
    }

    /// The mean along axis `I`: a sum, then a division by the axis's size (a constant, or a
    /// `size` node for a run-time dim).
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>, Dyn<'T'>), f32>("x");
    /// let m = b.mean::<1, _, _>(x);
    /// let g = b.finish();
    /// assert_eq!(g.op_count(), 2);
    /// assert_eq!(g.nodes[2].op, IrOp::Size { axis: 1 });
    /// # let _ = m;
    /// ```
    pub fn mean<const I: usize, S, E: Float>(&mut self, x: Value<S, E>) -> Value<Reduced<S, I>, E>
    where
        S: ReduceAxis<I>,
    {
        typed(self.mean_node(x.id, I, false, E::DTYPE))
    }

    /// [`Builder::mean`], keeping axis `I` with size 1.
    pub fn mean_keepdim<const I: usize, S, E: Float>(
        &mut self,
        x: Value<S, E>,
    ) -> Value<Kept<S, I>, E>
    where
        S: ReduceAxis<I>,
    {
        typed(self.mean_node(x.id, I, true, E::DTYPE))
    }

    /// `exp(x - max) / Σ exp(x - max)` along axis `I`, composed of five primitive ops (max,
    /// sub, exp, sum, div) and two broadcasts.
    pub fn softmax<const I: usize, S, E: Float>(&mut self, x: Value<S, E>) -> Value<S, E>
    where
        S: ReduceAxis<I>,
    {
        let e = self.shifted_exp::<I, S, E>(x).1;
        let s = self.reduce_keepdim::<I, S, E>(e, ReduceOp::Sum);
        let s = self.broadcast_to::<S, Kept<S, I>, E>(s);
        self.node(binary_op(BinaryOp::Div), &[e.id, s.id])
    }

    /// `(x - max) - ln Σ exp(x - max)` along axis `I`, composed of six primitive ops (max,
    /// sub, exp, sum, log, sub) and two broadcasts.
    pub fn log_softmax<const I: usize, S, E: Float>(&mut self, x: Value<S, E>) -> Value<S, E>
    where
        S: ReduceAxis<I>,
    {
        let (d, e) = self.shifted_exp::<I, S, E>(x);
        let s = self.reduce_keepdim::<I, S, E>(e, ReduceOp::Sum);
        let l = self.unary(s, UnaryOp::Log);
        let l = self.broadcast_to::<S, Kept<S, I>, E>(l);
        self.node(binary_op(BinaryOp::Sub), &[d.id, l.id])
    }

    /// `x - max` along axis `I` and its exponential: the common start of softmax and
    /// log-softmax.
    fn shifted_exp<const I: usize, S, E: Float>(
        &mut self,
        x: Value<S, E>,
    ) -> (Value<S, E>, Value<S, E>)
    where
        S: ReduceAxis<I>,
    {
        let m = self.reduce_keepdim::<I, S, E>(x, ReduceOp::Max);
        let m = self.broadcast_to::<S, Kept<S, I>, E>(m);
        let d: Value<S, E> = self.node(binary_op(BinaryOp::Sub), &[x.id, m.id]);
        let e = self.unary(d, UnaryOp::Exp);
        (d, e)
    }

    /// Layer normalization over the last axis, as `nn::LayerNorm`: the mean and the
    /// population variance of each row, `(x - mean) / sqrt(var + eps)`, then times `weight`
    /// and plus `bias` where given. Nine primitive ops, plus one per affine term.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("Norm");
    /// let x = b.input::<(Dyn<'B'>, Const<8>), f32>("x");
    /// let (w, bias) = b.scope("ln", |b| (b.param("weight"), b.param("bias")));
    /// let y = b.layer_norm(x, Some(w), Some(bias), 1e-5);
    /// b.output(y);
    /// assert_eq!(b.finish().op_count(), 11);
    /// ```
    pub fn layer_norm<S: LastAxis, E: Float>(
        &mut self,
        x: Value<S, E>,
        weight: Option<Value<(S::Last,), E>>,
        bias: Option<Value<(S::Last,), E>>,
        eps: f64,
    ) -> Value<S, E> {
        let dtype = E::DTYPE;
        let dims = dims_of::<S>();
        let axis = S::AXIS;
        let mean = self.mean_node(x.id, axis, true, dtype);
        let mean = self.push(IrOp::Expand, Attrs::default(), &[mean], dtype, dims.clone());
        let xc = self.push(
            binary_op(BinaryOp::Sub),
            Attrs::default(),
            &[x.id, mean],
            dtype,
            dims.clone(),
        );
        let sq = self.push(
            binary_op(BinaryOp::Mul),
            Attrs::default(),
            &[xc, xc],
            dtype,
            dims.clone(),
        );
        let var = self.mean_node(sq, axis, true, dtype);
        let y = self.scale_by_rsqrt(xc, var, eps, &dims, dtype);
        self.affine(y, weight.map(|w| w.id), bias.map(|b| b.id), dims)
    }

    /// RMS normalization over the last axis, as `nn::RMSNorm`: `x / sqrt(mean(x²) + eps)`,
    /// times `weight` where given. Six primitive ops, plus one for the weight.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("Norm");
    /// let x = b.input::<(Dyn<'B'>, Dyn<'T'>, Const<8>), f32>("x");
    /// let y = b.rms_norm(x, None, 1e-6);
    /// b.output(y);
    /// assert_eq!(b.finish().op_count(), 6);
    /// ```
    pub fn rms_norm<S: LastAxis, E: Float>(
        &mut self,
        x: Value<S, E>,
        weight: Option<Value<(S::Last,), E>>,
        eps: f64,
    ) -> Value<S, E> {
        let dtype = E::DTYPE;
        let dims = dims_of::<S>();
        let sq = self.push(
            binary_op(BinaryOp::Mul),
            Attrs::default(),
            &[x.id, x.id],
            dtype,
            dims.clone(),
        );
        let ms = self.mean_node(sq, S::AXIS, true, dtype);
        let y = self.scale_by_rsqrt(x.id, ms, eps, &dims, dtype);
        self.affine(y, weight.map(|w| w.id), None, dims)
    }

    /// `x * rsqrt(v + eps)`, `v` broadcast from its kept axis to `dims`.
    fn scale_by_rsqrt(
        &mut self,
        x: NodeId,
        v: NodeId,
        eps: f64,
        dims: &[Dim],
        dtype: DType,
    ) -> NodeId {
        let none = Attrs::default();
        let kept = self.graph.nodes[v].shape.clone();
        let eps = self.push(IrOp::Constant(eps), none, &[], dtype, vec![]);
        let v = self.push(
            binary_op(BinaryOp::Add),
            none,
            &[v, eps],
            dtype,
            kept.clone(),
        );
        let inv = self.push(IrOp::Op(Op::Unary(UnaryOp::Rsqrt)), none, &[v], dtype, kept);
        let inv = self.push(IrOp::Expand, none, &[inv], dtype, dims.to_vec());
        self.push(
            binary_op(BinaryOp::Mul),
            none,
            &[x, inv],
            dtype,
            dims.to_vec(),
        )
    }

    /// `y * weight + bias`, each where given.
    fn affine<S: Shape, E: Element>(
        &mut self,
        mut y: NodeId,
        weight: Option<NodeId>,
        bias: Option<NodeId>,
        dims: Vec<Dim>,
    ) -> Value<S, E> {
        let none = Attrs::default();
        if let Some(w) = weight {
            y = self.push(
                binary_op(BinaryOp::Mul),
                none,
                &[y, w],
                E::DTYPE,
                dims.clone(),
            );
        }
        if let Some(b) = bias {
            y = self.push(binary_op(BinaryOp::Add), none, &[y, b], E::DTYPE, dims);
        }
        typed(y)
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
