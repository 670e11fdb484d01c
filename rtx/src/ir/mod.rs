//! The graph (IR) of a compiled forward: primitive ops with element types and shapes,
//! symbolic where a dim is only known at run time. `#[model]` on an `impl` emits code that
//! builds it once per model type through [`Builder`], whose typed [`Value`]s let rustc work
//! out every shape.
//!
//! Skeleton: the serialized form, loader, DOT export and summary are being written.

use crate::shape::Shape;
use crate::shape::rules::BroadcastShapes;
use crate::tensor::Tensor;
use rtx_kernels::op::{BinaryOp, Op, UnaryOp};
use rtx_kernels::{DType, Element};
use std::marker::PhantomData;

/// The index of a node in its [`Graph`].
pub type NodeId = usize;

/// One dimension of a value's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// Known when compiling.
    Static(usize),
    /// Known at run time: a named dim (`Dyn<'B'>` is `"B"`) or an anonymous `usize` (`"?"`).
    Sym(String),
}

/// What a node computes.
#[derive(Clone, Debug, PartialEq)]
pub enum IrOp {
    /// An argument of the forward, by name.
    Input(String),
    /// A parameter, by its dotted name.
    Param(String),
    /// A primitive op (the one op list, [`rtx_kernels::op::Op`]).
    Op(rtx_kernels::op::Op),
    /// A view with its axes permuted.
    Permute(Vec<usize>),
    /// A number.
    Constant(f64),
}

/// One node: an op, its inputs, and the type of its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What the node computes.
    pub op: IrOp,
    /// The nodes it reads.
    pub inputs: Vec<NodeId>,
    /// The element type of its result.
    pub dtype: DType,
    /// The shape of its result.
    pub shape: Vec<Dim>,
}

/// A model's forward as a graph of primitive ops.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Graph {
    /// The nodes, each after its inputs.
    pub nodes: Vec<Node>,
    /// The forward's results.
    pub outputs: Vec<NodeId>,
}

/// A node's result with its shape and element type as types, so the code that builds a graph
/// is type-checked like the forward it mirrors.
pub struct Value<S: Shape, E: Element> {
    id: NodeId,
    _ty: PhantomData<fn() -> (S, E)>,
}

impl<S: Shape, E: Element> Clone for Value<S, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Shape, E: Element> Copy for Value<S, E> {}

impl<S: Shape, E: Element> Value<S, E> {
    /// The node this value is the result of.
    pub fn id(self) -> NodeId {
        self.id
    }
}

/// The dims of the shape type `S`, symbolic where only known at run time.
pub fn dims_of<S: Shape>() -> Vec<Dim> {
    (0..S::RANK)
        .map(|i| match (S::STATIC_DIMS[i], S::NAMES[i]) {
            (Some(n), _) => Dim::Static(n),
            (None, Some(c)) => Dim::Sym(c.to_string()),
            (None, None) => Dim::Sym("?".into()),
        })
        .collect()
}

/// Builds a [`Graph`] node by node; parameters are named under the current scope.
#[derive(Default)]
pub struct Builder {
    graph: Graph,
    scope: Vec<String>,
}

impl Builder {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node computing `op` from `inputs`, with the result type `Value<S, E>`.
    pub fn node<S: Shape, E: Element>(&mut self, op: IrOp, inputs: &[NodeId]) -> Value<S, E> {
        self.graph.nodes.push(Node {
            op,
            inputs: inputs.to_vec(),
            dtype: E::DTYPE,
            shape: dims_of::<S>(),
        });
        Value {
            id: self.graph.nodes.len() - 1,
            _ty: PhantomData,
        }
    }

    /// An argument of the forward.
    pub fn input<S: Shape, E: Element>(&mut self, name: &str) -> Value<S, E> {
        self.node(IrOp::Input(name.into()), &[])
    }

    /// A parameter named `name` under the current scope (`fc1.weight`).
    pub fn param<S: Shape, E: Element>(&mut self, name: &str) -> Value<S, E> {
        let mut full = self.scope.join(".");
        if !full.is_empty() {
            full.push('.');
        }
        full.push_str(name);
        self.node(IrOp::Param(full), &[])
    }

    /// Runs `f` with `name` appended to the scope (a sub-model's field).
    pub fn scope<R>(&mut self, name: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        self.scope.push(name.into());
        let r = f(self);
        self.scope.pop();
        r
    }

    /// Runs `f`; the nodes it adds belong to the fused kernel `name`.
    pub fn kernel<R>(&mut self, name: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let _ = name;
        f(self)
    }

    /// An elementwise op of one input.
    pub fn unary<S: Shape, E: Element>(&mut self, x: Value<S, E>, op: UnaryOp) -> Value<S, E> {
        self.node(IrOp::Op(Op::Unary(op)), &[x.id])
    }

    /// An elementwise op of two inputs broadcast together.
    pub fn binary<A, B, E>(
        &mut self,
        a: Value<A, E>,
        b: Value<B, E>,
        op: BinaryOp,
    ) -> Value<<A as BroadcastShapes<B>>::Output, E>
    where
        A: BroadcastShapes<B>,
        B: Shape,
        E: Element,
    {
        self.node(IrOp::Op(Op::Binary(op)), &[a.id, b.id])
    }

    /// An elementwise op of a tensor and a number.
    pub fn binary_scalar<S: Shape, E: Element>(
        &mut self,
        x: Value<S, E>,
        c: f64,
        op: BinaryOp,
        scalar_on_left: bool,
    ) -> Value<S, E> {
        let k = self.node::<(), E>(IrOp::Constant(c), &[]);
        let ins = if scalar_on_left {
            [k.id, x.id]
        } else {
            [x.id, k.id]
        };
        self.node(IrOp::Op(Op::Binary(op)), &ins)
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

/// A forward's result type as a value in a graph: `Tensor<S, E>` is `Value<S, E>`.
pub trait IrValue {
    /// The value type.
    type Value;
}

impl<S: Shape, E: Element> IrValue for Tensor<S, E> {
    type Value = Value<S, E>;
}

/// A forward's argument tuple as values in a graph: `(Tensor<S, E>,)` is `(Value<S, E>,)`.
pub trait IrArgs {
    /// The values, one per argument.
    type Values;
}

impl<A: Shape, EA: Element> IrArgs for (Tensor<A, EA>,) {
    type Values = (Value<A, EA>,);
}

impl<A: Shape, EA: Element, B: Shape, EB: Element> IrArgs for (Tensor<A, EA>, Tensor<B, EB>) {
    type Values = (Value<A, EA>, Value<B, EB>);
}

impl<A: Shape, EA: Element, B: Shape, EB: Element, C: Shape, EC: Element> IrArgs
    for (Tensor<A, EA>, Tensor<B, EB>, Tensor<C, EC>)
{
    type Values = (Value<A, EA>, Value<B, EB>, Value<C, EC>);
}
