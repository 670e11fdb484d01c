//! The graph (IR) of a compiled forward: primitive ops with element types and shapes,
//! symbolic where a dim is only known at run time. `#[model]` on an `impl` emits code that
//! builds it once per model type through [`Builder`], whose typed [`Value`]s let rustc work
//! out every shape with the same rules as the tensor methods the forward calls.
//!
//! Invariant: a [`Graph`] lists each node after its inputs, and every graph the [`Builder`]
//! makes passes [`Graph::validate`], the check the loader runs on a file; a graph written with
//! [`Graph::to_json`] reloads with [`Graph::from_json`] to an equal graph.
//!
//! ```
//! use rtx::ir::Builder;
//! use rtx::op::{BinaryOp, UnaryOp};
//! use rtx::shape::{Const, Dyn};
//!
//! let mut b = Builder::new("Tiny");
//! let x = b.input::<(Dyn<'B'>, Const<4>), f32>("x");
//! let y = b.scope("fc", |b| {
//!     let w = b.param::<(Const<4>, Const<2>), f32>("weight");
//!     let bias = b.param::<(Const<2>,), f32>("bias");
//!     let y = b.matmul(x, w);
//!     b.binary(y, bias, BinaryOp::Add)
//! });
//! let y = b.unary(y, UnaryOp::Relu);
//! b.output(y);
//! let g = b.finish();
//! assert_eq!(g.op_count(), 3); // matmul, add, relu
//! assert_eq!(g.to_string().lines().nth(6).unwrap(), "%5 = relu(%4)        : [B, 2] f32");
//! assert_eq!(rtx::ir::Graph::from_json(&g.to_json()).unwrap(), g);
//! ```
//!
//! # The nodes
//!
//! A node's [`IrOp`] is one of: a graph input (an argument of the forward), a parameter (by
//! its full dotted name, `blocks.2.attn.qkv.weight`), a scalar constant, a primitive op from
//! the one op list ([`rtx_kernels::op::Op`], shared with eager tensors, the tape and the
//! kernels), a view (permute, reshape, expand, narrow: layout changes that copy nothing, so
//! they are not in the op list), the run-time size of an axis (version 1 files divide by it
//! for a mean), or a composite op ([`Composite`]: softmax, log-softmax, mean, layer and RMS
//! norm, Linear with its bias, causal attention). A composite op is one node because the
//! compiled path runs it as one kernel or library call (`softmax_warp`, the fused norm,
//! cuBLASLt's bias epilogue, fused attention): the graph describes what runs, and
//! [`Graph::run`] runs those very functions, so its results are bitwise the compiled
//! forward's. The fused elementwise chains are an annotation on the nodes
//! ([`Node::kernel`]): the fusion plan `#[model]` fixed when the crate compiled, which the
//! executor follows by computing each chain in the kernel's compute type.
//!
//! The parameters a primitive op needs (the axis of a reduction, convolution geometry) are in
//! [`Node::attrs`] rather than in [`IrOp::Op`]: `Op` is the shared, `Copy` name of an op
//! across all crates, and one flat [`Attrs`] struct serializes as plain fields of the node
//! that the loader checks op by op. The views' parameters are in their `IrOp` variants,
//! since those variants exist only here.
//!
//! # Serialized form, version 3
//!
//! [`Graph::to_json`] writes UTF-8 JSON, one node per line so that a changed node is a
//! one-line diff. The top-level object has, in this order:
//!
//! - `"format"`: always `"rtx-ir"`.
//! - `"version"`: the format version, an integer; this page describes version 3 (version 2
//!   had no `cross_entropy`, `ignore_index` or `label_smoothing`, and version 1 no composite
//!   ops, `eps` or `heads`; both still read).
//! - `"name"`: the model's type name (`"Mlp"`).
//! - `"nodes"`: the nodes in order; a node is referred to by its index in this list (written
//!   `%3` in summaries), and reads only nodes before it.
//! - `"outputs"`: the indices of the forward's results, in order.
//!
//! Each node is an object with these fields; a field whose value is empty, `false` or absent
//! is left out:
//!
//! - `"op"`: the op's name: `"input"`, `"param"`, `"constant"`, a primitive op's name as
//!   [`Op::name`](rtx_kernels::op::Op::name) spells it (`"matmul"`, `"add"`, `"exp"`,
//!   `"sum"`, `"max"` for the reduction and `"maximum"` for the elementwise op, ...), or a
//!   view: `"permute"`, `"reshape"` (to the node's shape), `"expand"` (broadcast to the
//!   node's shape), `"narrow"` (the node's size along `axis`, from `start`), and `"size"`
//!   (the size of the input's `axis`, as a scalar), or a composite op: `"softmax"`,
//!   `"log_softmax"` and `"mean"` (with `axis`; `mean` also `keepdim`), `"layer_norm"` and
//!   `"rms_norm"` (with `eps`), `"linear"`, `"causal_attention"` (with `heads`),
//!   `"cross_entropy"` (with `label_smoothing`, and `ignore_index` when targets are ignored).
//! - `"name"`: for `input`, the argument's name; for `param`, the parameter's dotted name.
//! - `"value"`: for `constant`, a JSON number (written as the shortest decimal that reads
//!   back to the same `f64`), or one of the strings `"inf"`, `"-inf"`, `"nan"`, which JSON
//!   numbers cannot spell (every NaN is written `"nan"` and read back as `f64::NAN`).
//! - `"perm"`: for `permute`, output axis `i` is input axis `perm[i]`.
//! - `"axis"`: for reductions, `concat`, `index_select`, `gather`, `scatter`,
//!   `scatter_add`, `narrow`, `size`, `softmax`, `log_softmax` and `mean`: the axis, counted
//!   from 0.
//! - `"start"`: for `narrow`, the first index kept.
//! - `"keepdim"`: for reductions and `mean`, `true` when the reduced axis is kept with size 1.
//! - `"eps"`: for `layer_norm` and `rms_norm`, the number added under the square root.
//! - `"heads"`: for `causal_attention`, the number of heads.
//! - `"ignore_index"`: for `cross_entropy`, the target value that adds nothing (absent: none).
//! - `"label_smoothing"`: for `cross_entropy`, the weight moved to the uniform distribution,
//!   a number as `"value"` is.
//! - `"conv"`: for `conv`, `{"stride", "padding", "dilation", "groups"}`, the same along
//!   every spatial axis.
//! - `"pool"`: for `max_pool` and `avg_pool`, `{"kernel", "stride", "padding"}`.
//! - `"inputs"`: the indices of the nodes it reads, in the op's operand order.
//! - `"dtype"`: the result's element type: `"f32"`, `"f64"`, `"f16"`, `"bf16"`, `"i32"`,
//!   `"i64"`, `"u8"` or `"bool"`.
//! - `"shape"`: the result's dims, outermost first: a number for a size known when compiling
//!   (`Const<784>` is `784`), a string for one known at run time: the name of a named dim
//!   (`Dyn<'B'>` is `"B"`) or `"?"` for a plain `usize` dim. `[]` is a scalar.
//! - `"scope"`: the dotted path of the sub-model that emitted it (`"blocks.2.attn"`).
//! - `"kernel"`: the fused kernel the node is computed in, when it is part of one.
//!
//! Compatibility: the version changes whenever the format does (a new field, a new op name
//! or a changed meaning), so a reader never misreads a file. A reader rejects versions newer
//! than it knows, saying which it reads, and keeps reading every older one. Within a version,
//! unknown fields and op names are errors, not ignored.
//!
//! The loader ([`Graph::from_json`], [`Graph::load`]) checks the format name and version,
//! every field, every op name, that inputs name earlier nodes and outputs name nodes, and
//! each node's shape and element type against its op's rule ([`Graph::validate`]); an error
//! names the file, the node and what is wrong.

mod builder;
mod composite;
mod dot;
mod exec;
mod json;
mod summary;
#[cfg(test)]
mod tests;
mod validate;

pub use builder::Builder;
pub use composite::LastAxis;
pub use exec::{Backward, DynTensor, Params};

use crate::shape::{HasAxis, Shape};
use crate::tensor::Tensor;
use rtx_kernels::op::Op;
use rtx_kernels::{DType, Element};
use std::collections::BTreeMap;
use std::marker::PhantomData;

/// The index of a node in its [`Graph`].
pub type NodeId = usize;

/// One dimension of a value's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// Known when compiling.
    Static(usize),
    /// Known at run time: a named dim (`Dyn<'B'>` is `"B"`) or an anonymous `usize` (`"?"`).
    Sym(String),
}

impl std::fmt::Display for Dim {
    /// `784` or `B`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

/// What a node computes.
#[derive(Clone, Debug)]
pub enum IrOp {
    /// An argument of the forward, by name.
    Input(String),
    /// A parameter, by its full dotted name.
    Param(String),
    /// A scalar operand (shape `[]`), in the node's element type.
    Constant(f64),
    /// A primitive op (the one op list, [`rtx_kernels::op::Op`]); its parameters are in
    /// [`Node::attrs`].
    Op(Op),
    /// A view with its axes permuted: output axis `i` is input axis `perm[i]`.
    Permute(Vec<usize>),
    /// A view of the input with the node's shape and the same elements in row-major order.
    Reshape,
    /// A view of the input broadcast to the node's shape (size-1 and leading axes repeat).
    Expand,
    /// A view of the entries `start..start + len` of `axis`, `len` being the node's size there.
    Narrow {
        /// The axis narrowed.
        axis: usize,
        /// The first entry kept.
        start: usize,
    },
    /// The run-time size of the input's `axis`, as a scalar of the node's element type.
    Size {
        /// The axis measured.
        axis: usize,
    },
    /// A composite op: one node for what the compiled path runs as one kernel or library
    /// call, so the graph describes what runs and the executor runs the same function.
    Composite(Composite),
}

/// The composite ops: each is one node whose executor calls the function the compiled
/// forward calls for it (`softmax_warp`, the fused norm, the product with its bias epilogue,
/// fused or composed attention), so a graph's result is bitwise the compiled forward's.
#[derive(Clone, Copy, Debug)]
pub enum Composite {
    /// `exp(x - max) / Σ exp(x - max)` along `axis`; reads `[x]`.
    Softmax {
        /// The axis normalized over.
        axis: usize,
    },
    /// `(x - max) - ln Σ exp(x - max)` along `axis`; reads `[x]`.
    LogSoftmax {
        /// The axis normalized over.
        axis: usize,
    },
    /// The mean along `axis`; reads `[x]`.
    Mean {
        /// The axis averaged over.
        axis: usize,
        /// Whether the axis stays, with size 1.
        keepdim: bool,
    },
    /// Layer normalization over the last axis, as `nn::LayerNorm`; reads `[x]`, `[x, weight]`
    /// or `[x, weight, bias]`, the parameters `[D]`.
    LayerNorm {
        /// Added to the variance.
        eps: f64,
    },
    /// RMS normalization over the last axis, as `nn::RMSNorm`; reads `[x]` or `[x, weight]`.
    RmsNorm {
        /// Added to the mean square.
        eps: f64,
    },
    /// `x · weightᵀ (+ bias)`, as `nn::Linear`: reads `[x, weight]` or `[x, weight, bias]`
    /// (`x` `[.., I]`, `weight` `[O, I]`, `bias` `[O]`); the bias is added by the product
    /// (cuBLASLt's epilogue on a GPU).
    Linear,
    /// Causal self-attention from a fused projection: reads `qkv` `[B, T, 3D]` (queries, keys
    /// and values side by side) and gives the heads' output `[B, T, D]`, scaled by
    /// `1/sqrt(D/heads)`, as `nn::CausalSelfAttention` computes between its projections.
    CausalAttention {
        /// The number of heads.
        heads: usize,
    },
    /// The mean cross entropy of logits `[B, C]` against class indices `[B]` (`i64`), as
    /// `nn::cross_entropy_with` computes it in one fused kernel: reads `[logits, targets]` and
    /// gives a scalar of the logits' element type.
    CrossEntropy {
        /// Targets equal to this add nothing and are not counted in the mean.
        ignore_index: Option<i64>,
        /// In [0, 1]: the weight moved from the target class to a uniform distribution.
        label_smoothing: f64,
    },
}

impl PartialEq for Composite {
    /// `eps` compares by bits, as constants do.
    fn eq(&self, other: &Self) -> bool {
        use Composite::*;
        match (self, other) {
            (Softmax { axis: a }, Softmax { axis: b })
            | (LogSoftmax { axis: a }, LogSoftmax { axis: b })
            | (CausalAttention { heads: a }, CausalAttention { heads: b }) => a == b,
            (
                Mean {
                    axis: a,
                    keepdim: k,
                },
                Mean {
                    axis: b,
                    keepdim: l,
                },
            ) => a == b && k == l,
            (LayerNorm { eps: a }, LayerNorm { eps: b })
            | (RmsNorm { eps: a }, RmsNorm { eps: b }) => a.to_bits() == b.to_bits(),
            (Linear, Linear) => true,
            (
                CrossEntropy {
                    ignore_index: a,
                    label_smoothing: s,
                },
                CrossEntropy {
                    ignore_index: b,
                    label_smoothing: t,
                },
            ) => a == b && s.to_bits() == t.to_bits(),
            _ => false,
        }
    }
}

impl Composite {
    /// Every composite op's name, as [`Composite::name`] spells it.
    pub const NAMES: [&'static str; 8] = [
        "softmax",
        "log_softmax",
        "mean",
        "layer_norm",
        "rms_norm",
        "linear",
        "causal_attention",
        "cross_entropy",
    ];

    /// The op's name in the serialized form (`"layer_norm"`).
    ///
    /// ```
    /// assert_eq!(rtx::ir::Composite::Linear.name(), "linear");
    /// ```
    pub fn name(&self) -> &'static str {
        let i = match self {
            Composite::Softmax { .. } => 0,
            Composite::LogSoftmax { .. } => 1,
            Composite::Mean { .. } => 2,
            Composite::LayerNorm { .. } => 3,
            Composite::RmsNorm { .. } => 4,
            Composite::Linear => 5,
            Composite::CausalAttention { .. } => 6,
            Composite::CrossEntropy { .. } => 7,
        };
        Self::NAMES[i]
    }
}

impl PartialEq for IrOp {
    /// Constants compare by bits, so a NaN constant equals itself and `-0.0` is not `0.0`:
    /// what a round trip through the serialized form must preserve.
    fn eq(&self, other: &Self) -> bool {
        use IrOp::*;
        match (self, other) {
            (Input(a), Input(b)) | (Param(a), Param(b)) => a == b,
            (Constant(a), Constant(b)) => a.to_bits() == b.to_bits(),
            (Op(a), Op(b)) => a == b,
            (Permute(a), Permute(b)) => a == b,
            (Reshape, Reshape) | (Expand, Expand) => true,
            (Narrow { axis: a, start: s }, Narrow { axis: b, start: t }) => a == b && s == t,
            (Size { axis: a }, Size { axis: b }) => a == b,
            (Composite(a), Composite(b)) => a == b,
            _ => false,
        }
    }
}

impl IrOp {
    /// The op's name as the serialized form and summaries spell it (`"matmul"`, `"permute"`).
    ///
    /// ```
    /// use rtx::ir::IrOp;
    /// use rtx::op::{Op, ReduceOp};
    /// assert_eq!(IrOp::Op(Op::Reduce(ReduceOp::Sum)).name(), "sum");
    /// assert_eq!(IrOp::Permute(vec![1, 0]).name(), "permute");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            IrOp::Input(_) => "input",
            IrOp::Param(_) => "param",
            IrOp::Constant(_) => "constant",
            IrOp::Op(op) => op.name(),
            IrOp::Permute(_) => "permute",
            IrOp::Reshape => "reshape",
            IrOp::Expand => "expand",
            IrOp::Narrow { .. } => "narrow",
            IrOp::Size { .. } => "size",
            IrOp::Composite(c) => c.name(),
        }
    }

    /// Whether this op computes (what [`Graph::op_count`] counts): a primitive or a composite
    /// op, not an input, parameter, constant, view or size.
    pub fn is_primitive(&self) -> bool {
        matches!(self, IrOp::Op(_) | IrOp::Composite(_))
    }
}

/// The parameters of a primitive op; each op uses the fields its docs name and no others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attrs {
    /// The axis of a reduction, `concat`, `index_select`, `gather` or `scatter`.
    pub axis: Option<usize>,
    /// For a reduction: the reduced axis stays, with size 1.
    pub keepdim: bool,
    /// The geometry of a convolution.
    pub conv: Option<ConvAttrs>,
    /// The window of a pooling op.
    pub pool: Option<PoolAttrs>,
}

impl Attrs {
    /// Attributes with only an axis.
    ///
    /// ```
    /// assert_eq!(rtx::ir::Attrs::axis(1).axis, Some(1));
    /// ```
    pub fn axis(axis: usize) -> Self {
        Attrs {
            axis: Some(axis),
            ..Attrs::default()
        }
    }

    /// Whether no field is set (the attributes of every op but the ones that take some).
    pub fn is_empty(&self) -> bool {
        *self == Attrs::default()
    }
}

/// A convolution's geometry, the same along every spatial axis (as [`crate::shape::conv`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvAttrs {
    /// The step between windows.
    pub stride: usize,
    /// Zeros added on both sides.
    pub padding: usize,
    /// The spacing of the kernel's taps.
    pub dilation: usize,
    /// Independent channel groups (1 for a plain convolution).
    pub groups: usize,
}

/// A pooling window, the same along both spatial axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolAttrs {
    /// The window's size.
    pub kernel: usize,
    /// The step between windows.
    pub stride: usize,
    /// Padding on both sides.
    pub padding: usize,
}

/// One node: an op, its inputs, and the type of its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What the node computes.
    pub op: IrOp,
    /// The primitive op's parameters (empty for every other node).
    pub attrs: Attrs,
    /// The nodes it reads.
    pub inputs: Vec<NodeId>,
    /// The element type of its result.
    pub dtype: DType,
    /// The shape of its result.
    pub shape: Vec<Dim>,
    /// The dotted path of the sub-model that emitted it (`"blocks.2.attn"`; empty at the top).
    pub scope: String,
    /// The fused kernel the node is computed in, if any: the fusion plan, node by node.
    pub kernel: Option<String>,
}

/// A model's forward as a graph of primitive ops.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Graph {
    /// The model's type name.
    pub name: String,
    /// The nodes, each after its inputs.
    pub nodes: Vec<Node>,
    /// The forward's results.
    pub outputs: Vec<NodeId>,
}

impl Graph {
    /// The number of nodes that compute (primitive and composite ops): inputs, parameters,
    /// constants, views and sizes are not counted (ARCHITECTURE.md, a small primitive core: a number worth watching).
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("Softmax");
    /// let x = b.input::<(Const<2>, Const<3>), f32>("x");
    /// let y = b.softmax::<1, _, _>(x);
    /// b.output(y);
    /// assert_eq!(b.finish().op_count(), 1); // one softmax
    /// ```
    pub fn op_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.op.is_primitive()).count()
    }

    /// How many nodes of each computing op the graph has, by op name.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("LogSoftmax");
    /// let x = b.input::<(Const<2>, Const<3>), f32>("x");
    /// let y = b.log_softmax::<1, _, _>(x);
    /// let y = b.unary(y, rtx::op::UnaryOp::Exp);
    /// b.output(y);
    /// let h = b.finish().op_histogram();
    /// assert_eq!((h["log_softmax"], h["exp"]), (1, 1));
    /// ```
    pub fn op_histogram(&self) -> BTreeMap<&'static str, usize> {
        let mut h = BTreeMap::new();
        for n in self.nodes.iter().filter(|n| n.op.is_primitive()) {
            *h.entry(n.op.name()).or_insert(0) += 1;
        }
        h
    }

    /// The parameters' nodes with their dotted names, in graph order.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// b.scope("fc", |b| b.param::<(Const<2>,), f32>("bias"));
    /// assert_eq!(b.finish().params(), vec![(0, "fc.bias")]);
    /// ```
    pub fn params(&self) -> Vec<(NodeId, &str)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match &n.op {
                IrOp::Param(name) => Some((i, name.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The graph inputs' nodes with their names, in graph order.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// assert_eq!(b.finish().inputs(), vec![(0, "x")]);
    /// ```
    pub fn inputs(&self) -> Vec<(NodeId, &str)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match &n.op {
                IrOp::Input(name) => Some((i, name.as_str())),
                _ => None,
            })
            .collect()
    }
}

/// The element count of `shape` when every dim is static.
///
/// ```
/// use rtx::ir::{Dim, static_numel};
/// assert_eq!(static_numel(&[Dim::Static(3), Dim::Static(4)]), Some(12));
/// assert_eq!(static_numel(&[Dim::Sym("B".into()), Dim::Static(4)]), None);
/// ```
pub fn static_numel(shape: &[Dim]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, d| match d {
        Dim::Static(k) => n.checked_mul(*k),
        Dim::Sym(_) => None,
    })
}

/// The short name of an element type as the IR spells it (`f32`, `bf16`, `bool`).
///
/// ```
/// assert_eq!(rtx::ir::dtype_name(rtx::DType::BF16), "bf16");
/// ```
pub fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::Bool => "bool",
    }
}

/// Every element type, for parsing [`dtype_name`]'s names back.
const DTYPES: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

/// The element type [`dtype_name`] spells `name`.
fn dtype_from_name(name: &str) -> Option<DType> {
    DTYPES.into_iter().find(|&d| dtype_name(d) == name)
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

impl<S: Shape, E: Element> std::fmt::Debug for Value<S, E> {
    /// `%3: [B, 256] f32`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = dims_of::<S>().iter().map(Dim::to_string).collect();
        let dtype = dtype_name(E::DTYPE);
        write!(f, "%{}: [{}] {dtype}", self.id, dims.join(", "))
    }
}

impl<S: Shape, E: Element> Value<S, E> {
    /// The node this value is the result of.
    pub fn id(self) -> NodeId {
        self.id
    }

    /// Axis `I`'s dim, as `Tensor::dim` gives it, so a forward's shape arguments
    /// (`x.reshape((x.dim::<0>(), Const::<64>))`) build its graph too. A graph has no
    /// run-time sizes: a dim known only at run time reads as size 0 here; only its type
    /// matters to the graph.
    pub fn dim<const I: usize>(&self) -> <S as HasAxis<I>>::Dim
    where
        S: HasAxis<I>,
    {
        let d = <<S as HasAxis<I>>::Dim as crate::shape::Dim>::STATIC.unwrap_or(0);
        <<S as HasAxis<I>>::Dim as crate::shape::Dim>::from_size(d)
            .unwrap_or_else(|| unreachable!("a dim takes its own static size"))
    }
}

/// The dims of the shape type `S`, symbolic where only known at run time.
///
/// ```
/// use rtx::ir::{Dim, dims_of};
/// use rtx::shape::{Const, Dyn};
/// assert_eq!(
///     dims_of::<(Dyn<'B'>, usize, Const<3>)>(),
///     vec![Dim::Sym("B".into()), Dim::Sym("?".into()), Dim::Static(3)]
/// );
/// ```
pub fn dims_of<S: Shape>() -> Vec<Dim> {
    (0..S::RANK)
        .map(|i| match (S::STATIC_DIMS[i], S::NAMES[i]) {
            (Some(n), _) => Dim::Static(n),
            (None, Some(c)) => Dim::Sym(c.to_string()),
            (None, None) => Dim::Sym("?".into()),
        })
        .collect()
}

/// A forward's result type as a value in a graph: `Tensor<S, E>` is `Value<S, E>`.
pub trait IrValue {
    /// The value type.
    type Value;
}

impl<S: Shape, E: Element> IrValue for Tensor<S, E> {
    type Value = Value<S, E>;
}

/// A forward's argument tuple as values in a graph: `(&Tensor<S, E>,)` is `(Value<S, E>,)`.
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
