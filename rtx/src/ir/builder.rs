//! The typed graph builder: one method per tensor op, with the same shape-rule bounds as the
//! `Tensor` method it mirrors, so rustc computes every node's shape type and rejects a graph
//! the forward itself could not compute. The reductions and the composite ops made of them
//! are in `composite.rs`.
//!
//! Methods that take an axis or a target type list it first and the input's shape and element
//! type after it, to be inferred: `b.reduce::<1, _, _>(x, ReduceOp::Sum)`,
//! `b.reshape::<(Const<6>,), _, _>(x)`.
//!
//! Invariant: every node is pushed after its inputs, under the current scope and kernel, with
//! the dims of its typed result ([`dims_of`]) and the element type `E::DTYPE`.

use super::{Attrs, Dim, Graph, IrOp, Node, NodeId, Value, dims_of};
use crate::shape::rules::BroadcastShapes;
use crate::shape::{Dim as DimType, InsertAxis, PermuteAxes, ReduceAxis, Shape, SwapAxes, checks};
use crate::tensor::{MatmulShapes, Replaced};
use rtx_kernels::op::{BinaryOp, CmpOp, Op, UnaryOp};
use rtx_kernels::{DType, Element, Float, Num, Signed};
use std::marker::PhantomData;

/// Builds a [`Graph`] node by node; parameters are named under the current scope.
///
/// ```
/// use rtx::ir::Builder;
/// use rtx::shape::{Const, Dyn};
///
/// let mut b = Builder::new("Head");
/// let x = b.input::<(Dyn<'B'>, Const<10>), f32>("logits");
/// let p = b.kernel("softmax_rows", |b| b.softmax::<1, _, _>(x));
/// b.output(p);
/// let g = b.finish();
/// assert_eq!(g.nodes[p.id()].kernel.as_deref(), Some("softmax_rows"));
/// ```
pub struct Builder {
    pub(super) graph: Graph,
    scope: Vec<String>,
    kernel: Option<String>,
}

impl Builder {
    /// An empty graph for the model type `name`.
    ///
    /// ```
    /// assert_eq!(rtx::ir::Builder::new("Mlp").finish().name, "Mlp");
    /// ```
    pub fn new(name: &str) -> Self {
        Builder {
            graph: Graph {
                name: name.into(),
                ..Graph::default()
            },
            scope: Vec::new(),
            kernel: None,
        }
    }

    /// Adds a node computing `op` from `inputs`, with the result type `Value<S, E>`: the
    /// escape hatch for ops without a typed method. Nothing checks the shape; the graph's
    /// [`Graph::validate`] does.
    ///
    /// ```
    /// use rtx::ir::{Builder, IrOp};
    /// use rtx::op::{Op, UnaryOp};
    /// use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<3>,), f32>("x");
    /// let y = b.node::<(Const<3>,), f32>(IrOp::Op(Op::Unary(UnaryOp::Exp)), &[x.id()]);
    /// assert_eq!(b.finish().nodes[y.id()].inputs, vec![0]);
    /// ```
    pub fn node<S: Shape, E: Element>(&mut self, op: IrOp, inputs: &[NodeId]) -> Value<S, E> {
        self.node_with::<S, E>(op, Attrs::default(), inputs)
    }

    /// [`Builder::node`] for a primitive op that takes attributes (an axis, a geometry).
    ///
    /// ```
    /// use rtx::ir::{Attrs, Builder, IrOp};
    /// use rtx::op::Op;
    /// use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<2>, Const<3>), f32>("x");
    /// let y = b.input::<(Const<2>, Const<4>), f32>("y");
    /// let xy = b.node_with::<(Const<2>, Const<7>), f32>(
    ///     IrOp::Op(Op::Concat), Attrs::axis(1), &[x.id(), y.id()]);
    /// assert!(b.finish().validate().is_ok());
    /// # let _ = xy;
    /// ```
    pub fn node_with<S: Shape, E: Element>(
        &mut self,
        op: IrOp,
        attrs: Attrs,
        inputs: &[NodeId],
    ) -> Value<S, E> {
        let id = self.push(op, attrs, inputs, E::DTYPE, dims_of::<S>());
        typed(id)
    }

    /// Appends a node; graph inputs and parameters never belong to a kernel, since no kernel
    /// computes them.
    pub(super) fn push(
        &mut self,
        op: IrOp,
        attrs: Attrs,
        inputs: &[NodeId],
        dtype: DType,
        shape: Vec<Dim>,
    ) -> NodeId {
        let kernel = match op {
            IrOp::Input(_) | IrOp::Param(_) => None,
            _ => self.kernel.clone(),
        };
        self.graph.nodes.push(Node {
            op,
            attrs,
            inputs: inputs.to_vec(),
            dtype,
            shape,
            scope: self.scope.join("."),
            kernel,
        });
        self.graph.nodes.len() - 1
    }

    /// An argument of the forward.
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim};
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// assert_eq!(b.finish().nodes[0].shape, [Dim::Sym("B".into()), Dim::Static(3)]);
    /// ```
    pub fn input<S: Shape, E: Element>(&mut self, name: &str) -> Value<S, E> {
        self.node(IrOp::Input(name.into()), &[])
    }

    /// A parameter named `name` under the current scope (`fc1.weight`).
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let w = b.scope("fc1", |b| b.param::<(Const<2>, Const<3>), f32>("weight"));
    /// assert_eq!(b.finish().nodes[w.id()].op, IrOp::Param("fc1.weight".into()));
    /// ```
    pub fn param<S: Shape, E: Element>(&mut self, name: &str) -> Value<S, E> {
        let mut full = self.scope.join(".");
        if !full.is_empty() {
            full.push('.');
        }
        full.push_str(name);
        self.node(IrOp::Param(full), &[])
    }

    /// A scalar constant of element type `E`.
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// let mut b = Builder::new("M");
    /// let c = b.constant::<f32>(0.5);
    /// assert_eq!(b.finish().nodes[c.id()].op, IrOp::Constant(0.5));
    /// ```
    pub fn constant<E: Element>(&mut self, value: f64) -> Value<(), E> {
        self.node(IrOp::Constant(value), &[])
    }

    /// The current scope as a name prefix: `"blocks.2.attn."`, or `""` at the top.
    pub fn scope_prefix(&self) -> String {
        self.scope.iter().map(|s| format!("{s}.")).collect()
    }

    /// Runs `f` with `name` appended to the scope (a sub-model's field): its parameters are
    /// named `name.…` and its nodes carry the scope.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let w = b.scope("blocks", |b| b.scope("2", |b| b.param::<(Const<4>,), f32>("weight")));
    /// assert_eq!(b.finish().nodes[w.id()].scope, "blocks.2");
    /// ```
    pub fn scope<R>(&mut self, name: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        self.scope.push(name.into());
        let r = f(self);
        self.scope.pop();
        r
    }

    /// Runs `f` with its nodes assigned to the fused kernel `name` (graph inputs and
    /// parameters read inside stay outside it). A kernel inside another replaces it for its
    /// own nodes; two calls with one name make one kernel, so give each kernel its own name.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::op::UnaryOp;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>,), f32>("x");
    /// let y = b.kernel("fused_0", |b| b.unary(x, UnaryOp::Gelu));
    /// let g = b.finish();
    /// assert_eq!((g.nodes[x.id()].kernel.as_deref(), g.nodes[y.id()].kernel.as_deref()),
    ///            (None, Some("fused_0")));
    /// ```
    pub fn kernel<R>(&mut self, name: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let outer = self.kernel.replace(name.into());
        let r = f(self);
        self.kernel = outer;
        r
    }

    /// Marks `v` as a result of the forward.
    pub fn output<S: Shape, E: Element>(&mut self, v: Value<S, E>) {
        self.graph.outputs.push(v.id);
    }

    /// The finished graph.
    pub fn finish(self) -> Graph {
        self.graph
    }
}

/// Elementwise ops and matrix products.
impl Builder {
    /// A float function applied elementwise (`exp`, `relu`, `gelu`, ...).
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// # use rtx::op::{Op, UnaryOp};
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>,), f32>("x");
    /// let y = b.unary(x, UnaryOp::Tanh);
    /// assert_eq!(b.finish().nodes[y.id()].op, IrOp::Op(Op::Unary(UnaryOp::Tanh)));
    /// ```
    pub fn unary<S: Shape, E: Float>(&mut self, x: Value<S, E>, op: UnaryOp) -> Value<S, E> {
        self.node(IrOp::Op(Op::Unary(op)), &[x.id])
    }

    /// `-x` for any signed element type (floats can also use [`Builder::unary`]).
    pub fn neg<S: Shape, E: Signed>(&mut self, x: Value<S, E>) -> Value<S, E> {
        self.node(IrOp::Op(Op::Unary(UnaryOp::Neg)), &[x.id])
    }

    /// `|x|` for any signed element type.
    pub fn abs<S: Shape, E: Signed>(&mut self, x: Value<S, E>) -> Value<S, E> {
        self.node(IrOp::Op(Op::Unary(UnaryOp::Abs)), &[x.id])
    }

    /// `a op b`, broadcasting as the tensor operators do (`[B, N] + [N]`).
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim};
    /// # use rtx::op::BinaryOp;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// let bias = b.param::<(Const<3>,), f32>("bias");
    /// let y = b.binary(x, bias, BinaryOp::Add); // Value<(Dyn<'B'>, Const<3>), f32>
    /// assert_eq!(b.finish().nodes[y.id()].shape, [Dim::Sym("B".into()), Dim::Static(3)]);
    /// ```
    pub fn binary<A, B: Shape, E: Num>(
        &mut self,
        a: Value<A, E>,
        b: Value<B, E>,
        op: BinaryOp,
    ) -> Value<<A as BroadcastShapes<B>>::Output, E>
    where
        A: BroadcastShapes<B>,
    {
        self.node(IrOp::Op(Op::Binary(op)), &[a.id, b.id])
    }

    /// `x op c` (or `c op x` when `scalar_on_left`), the scalar `c` a constant node.
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// # use rtx::op::BinaryOp;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>,), f32>("x");
    /// let y = b.binary_scalar(x, 1.0, BinaryOp::Sub, true); // 1 - x
    /// let g = b.finish();
    /// assert_eq!(g.nodes[y.id()].inputs, vec![1, 0]);
    /// assert_eq!(g.nodes[1].op, IrOp::Constant(1.0));
    /// ```
    pub fn binary_scalar<S: Shape, E: Num>(
        &mut self,
        x: Value<S, E>,
        c: f64,
        op: BinaryOp,
        scalar_on_left: bool,
    ) -> Value<S, E> {
        let c = self.constant::<E>(c);
        let inputs = if scalar_on_left {
            [c.id, x.id]
        } else {
            [x.id, c.id]
        };
        self.node(IrOp::Op(Op::Binary(op)), &inputs)
    }

    /// `a op b` compared elementwise into booleans, broadcasting.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::op::CmpOp;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>,), f32>("x");
    /// let zero = b.constant::<f32>(0.0);
    /// let mask = b.compare(x, zero, CmpOp::Gt);
    /// assert_eq!(b.finish().nodes[mask.id()].dtype, rtx::DType::Bool);
    /// ```
    pub fn compare<A, B: Shape, E: Element>(
        &mut self,
        a: Value<A, E>,
        b: Value<B, E>,
        op: CmpOp,
    ) -> Value<<A as BroadcastShapes<B>>::Output, bool>
    where
        A: BroadcastShapes<B>,
    {
        self.node(IrOp::Op(Op::Cmp(op)), &[a.id, b.id])
    }

    /// `cond ? x : other`, elementwise; `cond` and `other` broadcast to `x`'s shape, as in
    /// `Tensor::where_cond`. The node's inputs are `[cond, x, other]`.
    pub fn where_cond<S: Shape, C, R, E: Element>(
        &mut self,
        x: Value<S, E>,
        cond: Value<C, bool>,
        other: Value<R, E>,
    ) -> Value<S, E>
    where
        C: BroadcastShapes<S, Output = S>,
        R: BroadcastShapes<S, Output = S>,
    {
        self.node(IrOp::Op(Op::Where), &[cond.id, x.id, other.id])
    }

    /// The matrix product, with `Tensor::matmul`'s rule for ranks and batch dims.
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim};
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Dyn<'B'>, Const<784>), f32>("x");
    /// let w = b.param::<(Const<784>, Const<256>), f32>("w");
    /// let y = b.matmul(x, w);
    /// assert_eq!(b.finish().nodes[y.id()].shape, [Dim::Sym("B".into()), Dim::Static(256)]);
    /// ```
    pub fn matmul<A, B: Shape, E: Num>(
        &mut self,
        a: Value<A, E>,
        b: Value<B, E>,
    ) -> Value<<A as MatmulShapes<B>>::Output, E>
    where
        A: MatmulShapes<B>,
    {
        self.node(IrOp::Op(Op::MatMul), &[a.id, b.id])
    }

    /// The elements converted to element type `U`.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>,), f32>("x");
    /// let h = b.cast::<rtx::bf16, _, _>(x);
    /// assert_eq!(b.finish().nodes[h.id()].dtype, rtx::DType::BF16);
    /// ```
    pub fn cast<U: Element, S: Shape, E: Element>(&mut self, x: Value<S, E>) -> Value<S, U> {
        self.node(IrOp::Op(Op::Cast), &[x.id])
    }
}

/// Views: layout changes that copy nothing.
impl Builder {
    /// The axes reordered by `P` (`Axes3<2, 0, 1>`), as `Tensor::permute`.
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// # use rtx::shape::{Axes3, Const};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<2>, Const<3>, Const<4>), f32>("x");
    /// let y = b.permute::<Axes3<2, 0, 1>, _, _>(x);
    /// assert_eq!(b.finish().nodes[y.id()].op, IrOp::Permute(vec![2, 0, 1]));
    /// ```
    pub fn permute<P, S, E: Element>(
        &mut self,
        x: Value<S, E>,
    ) -> Value<<S as PermuteAxes<P>>::Output, E>
    where
        S: PermuteAxes<P>,
    {
        const { checks::permutation(<S as PermuteAxes<P>>::PERM) };
        let perm = <S as PermuteAxes<P>>::PERM.to_vec();
        self.node(IrOp::Permute(perm), &[x.id])
    }

    /// Axes `A` and `B` swapped, as `Tensor::transpose`.
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<2>, Const<3>, Const<4>), f32>("x");
    /// let y = b.transpose::<0, 2, _, _>(x);
    /// assert_eq!(b.finish().nodes[y.id()].op, IrOp::Permute(vec![2, 1, 0]));
    /// ```
    pub fn transpose<const A: usize, const B: usize, S, E: Element>(
        &mut self,
        x: Value<S, E>,
    ) -> Value<<S as SwapAxes<A, B>>::Output, E>
    where
        S: SwapAxes<A, B>,
    {
        let mut perm: Vec<usize> = (0..S::RANK).collect();
        perm.swap(A, B);
        self.node(IrOp::Permute(perm), &[x.id])
    }

    /// The transpose of a matrix, as `Tensor::t`.
    pub fn t<A: DimType, B: DimType, E: Element>(
        &mut self,
        x: Value<(A, B), E>,
    ) -> Value<(B, A), E> {
        self.node(IrOp::Permute(vec![1, 0]), &[x.id])
    }

    /// The same elements as shape `T` (specify and verify: static element counts must agree,
    /// checked when the code is monomorphized, as `Tensor::reshape`).
    ///
    /// ```
    /// # use rtx::ir::{Builder, IrOp};
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<2>, Const<3>), f32>("x");
    /// let y = b.reshape::<(Const<6>,), _, _>(x);
    /// assert_eq!(b.finish().nodes[y.id()].op, IrOp::Reshape);
    /// ```
    pub fn reshape<T: Shape, S: Shape, E: Element>(&mut self, x: Value<S, E>) -> Value<T, E> {
        const { checks::reshape::<S, T>() };
        self.node(IrOp::Reshape, &[x.id])
    }

    /// `x` broadcast to shape `T` (leading axes added, size-1 axes repeated; specify and
    /// verify, as `Tensor::broadcast_to`).
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim};
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Dyn<'B'>, Const<1>), f32>("x");
    /// let y = b.broadcast_to::<(Dyn<'B'>, Const<5>), _, _>(x);
    /// assert_eq!(b.finish().nodes[y.id()].shape[1], Dim::Static(5));
    /// ```
    pub fn broadcast_to<T: Shape, S: Shape, E: Element>(&mut self, x: Value<S, E>) -> Value<T, E> {
        const { checks::broadcast::<S, T>() };
        self.node(IrOp::Expand, &[x.id])
    }

    /// PyTorch's name for [`Builder::broadcast_to`].
    pub fn expand<T: Shape, S: Shape, E: Element>(&mut self, x: Value<S, E>) -> Value<T, E> {
        self.broadcast_to::<T, S, E>(x)
    }

    /// Entries `start..start + len` of axis `I`, the length being the dim type `D`, as
    /// `Tensor::narrow`.
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim, IrOp};
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<4>, Const<10>), f32>("x");
    /// let y = b.narrow::<1, Const<3>, _, _>(x, 2);
    /// let g = b.finish();
    /// assert_eq!(g.nodes[y.id()].op, IrOp::Narrow { axis: 1, start: 2 });
    /// assert_eq!(g.nodes[y.id()].shape, [Dim::Static(4), Dim::Static(3)]);
    /// ```
    pub fn narrow<const I: usize, D: DimType, S, E: Element>(
        &mut self,
        x: Value<S, E>,
        start: usize,
    ) -> Value<Replaced<S, I, D>, E>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        self.node(IrOp::Narrow { axis: I, start }, &[x.id])
    }
}

pub(super) fn binary_op(op: BinaryOp) -> IrOp {
    IrOp::Op(Op::Binary(op))
}

/// The typed handle of node `id`.
pub(super) fn typed<S: Shape, E: Element>(id: NodeId) -> Value<S, E> {
    Value {
        id,
        _ty: PhantomData,
    }
}
