//! The primitive-op list: one enum that eager ops, backends, the tape, the kernels and the IR
//! all name ops by, plus a marker type per elementwise op that carries its name and scalar
//! function.
//!
//! Invariant: a unary op's scalar function lives in exactly one place, its
//! `#[kernel(elementwise)]` function in `kernels/` (the registry in `rtx-macros/src/ops.rs`
//! lists the ops and generates [`UnaryOp`] and the unary markers from it); the CPU backend runs
//! that kernel's native code in a loop, the GPU backend its CUDA, and `#[model]`'s fused kernels
//! call it. Composite math (gelu, softplus, logsumexp, softmax, variance...) is an op only
//! where a one-pass fused scalar function pays off; the rest is composed in `rtx` from these.

use crate::dtype::Num;

/// Every operation a backend executes. Views (reshape, permute, expand, narrow) are layout
/// changes, not ops, and copy nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// One input, one output, elementwise.
    Unary(UnaryOp),
    /// Two inputs broadcast together, elementwise.
    Binary(BinaryOp),
    /// Two inputs compared elementwise into a boolean tensor.
    Cmp(CmpOp),
    /// `cond ? a : b`, elementwise.
    Where,
    /// Reduction along one axis.
    Reduce(ReduceOp),
    /// Element-type conversion.
    Cast,
    /// Copy of a strided layout into a fresh contiguous buffer.
    Copy,
    /// (Batched) matrix product.
    MatMul,
    /// Convolution over 1 or 2 spatial dims.
    Conv,
    /// 2-d pooling.
    Pool(PoolOp),
    /// Select slices along an axis by an index vector.
    IndexSelect,
    /// Pick elements along an axis by an index tensor.
    Gather,
    /// Write (or add) elements along an axis at an index tensor's positions.
    Scatter(ScatterOp),
    /// Join tensors along an axis.
    Concat,
    /// Counter-based random numbers.
    Random(RandomOp),
}

rtx_macros::unary_op_registry!();

/// Elementwise functions of two arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b
    Div,
    /// max(a, b), NaN-propagating
    Max,
    /// min(a, b), NaN-propagating
    Min,
    /// a ^ b
    Pow,
}

/// Elementwise comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// a == b
    Eq,
    /// a != b
    Ne,
    /// a < b
    Lt,
    /// a <= b
    Le,
    /// a > b
    Gt,
    /// a >= b
    Ge,
}

/// Reductions along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum (NaN-propagating).
    Max,
    /// Minimum (NaN-propagating).
    Min,
    /// Index of the first maximum.
    ArgMax,
    /// Index of the first minimum.
    ArgMin,
}

/// Pooling kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolOp {
    /// Maximum over the window.
    Max,
    /// Mean over the window (padding counted, as PyTorch's default `count_include_pad`).
    Avg,
}

/// Scatter kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterOp {
    /// Overwrite.
    Set,
    /// Accumulate.
    Add,
}

/// Random distributions, all drawn from the Philox 4x32-10 counter stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RandomOp {
    /// Uniform in [low, high).
    Uniform,
    /// Normal (Box-Muller).
    Normal,
    /// 1 with probability p.
    Bernoulli,
}

impl BinaryOp {
    /// Every binary op, in declaration order.
    pub const ALL: [BinaryOp; 7] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Pow,
    ];
}

impl Op {
    /// The op's name as errors, the IR and counters print it (`exp`, `add`, `matmul`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Op::Unary(u) => u.name(),
            Op::Binary(b) => match b {
                BinaryOp::Add => "add",
                BinaryOp::Sub => "sub",
                BinaryOp::Mul => "mul",
                BinaryOp::Div => "div",
                BinaryOp::Max => "maximum",
                BinaryOp::Min => "minimum",
                BinaryOp::Pow => "pow",
            },
            Op::Cmp(c) => match c {
                CmpOp::Eq => "eq",
                CmpOp::Ne => "ne",
                CmpOp::Lt => "lt",
                CmpOp::Le => "le",
                CmpOp::Gt => "gt",
                CmpOp::Ge => "ge",
            },
            Op::Where => "where",
            Op::Reduce(r) => match r {
                ReduceOp::Sum => "sum",
                ReduceOp::Prod => "prod",
                ReduceOp::Max => "max",
                ReduceOp::Min => "min",
                ReduceOp::ArgMax => "argmax",
                ReduceOp::ArgMin => "argmin",
            },
            Op::Cast => "cast",
            Op::Copy => "copy",
            Op::MatMul => "matmul",
            Op::Conv => "conv",
            Op::Pool(PoolOp::Max) => "max_pool",
            Op::Pool(PoolOp::Avg) => "avg_pool",
            Op::IndexSelect => "index_select",
            Op::Gather => "gather",
            Op::Scatter(ScatterOp::Set) => "scatter",
            Op::Scatter(ScatterOp::Add) => "scatter_add",
            Op::Concat => "concat",
            Op::Random(RandomOp::Uniform) => "uniform",
            Op::Random(RandomOp::Normal) => "normal",
            Op::Random(RandomOp::Bernoulli) => "bernoulli",
        }
    }
}

/// A unary op as a marker type: its place in [`UnaryOp`], the kernel that defines it, and
/// its scalar function in the compute type (`f32` for f16, bf16 and f32; `f64` for f64),
/// which is that kernel's own (`kernels::<name>::scalar`).
pub trait UnaryOpT: 'static {
    /// The op this marker stands for.
    const OP: UnaryOp;
    /// The kernel's marker: its CUDA source, and its derived derivative kernel.
    type Kernel: crate::kernel::Elementwise<1>;
    /// The scalar function.
    fn apply<E: crate::Float>(x: E::Acc) -> E::Acc;
}

/// Code generic over a unary op's marker type, reached from an op held as a value through
/// [`UnaryOp::visit`].
pub trait UnaryVisitor {
    /// What the visit returns.
    type Out;
    /// Runs with the op's marker type.
    fn visit<O: UnaryOpT>(self) -> Self::Out;
}

/// A binary op: its place in [`BinaryOp`] and its scalar function over any numeric type.
pub trait BinaryOpT: 'static {
    /// The op this marker stands for.
    const OP: BinaryOp;
    /// The scalar function.
    fn apply<E: Num>(a: E, b: E) -> E;
}

/// A comparison: its place in [`CmpOp`] and its predicate.
pub trait CmpOpT: 'static {
    /// The op this marker stands for.
    const OP: CmpOp;
    /// The predicate.
    fn apply<E: PartialOrd>(a: E, b: E) -> bool;
}

/// Marker types for the elementwise ops, one per enum variant.
pub mod markers {
    use super::*;

    pub use super::unary_markers::*;

    macro_rules! binary {
        ($(#[$doc:meta])* $name:ident, |$a:ident, $b:ident| $body:expr) => {
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name;
            impl BinaryOpT for $name {
                const OP: BinaryOp = BinaryOp::$name;
                #[inline(always)]
                fn apply<E: Num>($a: E, $b: E) -> E {
                    $body
                }
            }
        };
    }

    binary!(/// a + b
        Add, |a, b| a.add(b));
    binary!(/// a - b
        Sub, |a, b| a.sub(b));
    binary!(/// a * b
        Mul, |a, b| a.mul(b));
    binary!(/// a / b
        Div, |a, b| a.div(b));
    binary!(/// max(a, b)
        Max, |a, b| a.max_of(b));
    binary!(/// min(a, b)
        Min, |a, b| a.min_of(b));
    binary!(/// a ^ b
        Pow, |a, b| a.pow(b));

    macro_rules! cmp {
        ($(#[$doc:meta])* $name:ident, $op:tt) => {
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name;
            impl CmpOpT for $name {
                const OP: CmpOp = CmpOp::$name;
                #[inline(always)]
                fn apply<E: PartialOrd>(a: E, b: E) -> bool {
                    a $op b
                }
            }
        };
    }

    cmp!(/// a == b
        Eq, ==);
    cmp!(/// a != b
        Ne, !=);
    cmp!(/// a < b
        Lt, <);
    cmp!(/// a <= b
        Le, <=);
    cmp!(/// a > b
        Gt, >);
    cmp!(/// a >= b
        Ge, >=);
}

#[cfg(test)]
mod tests {
    use super::markers::*;
    use super::*;

    #[test]
    fn the_primitive_list_is_small() {
        // A number worth watching (ARCHITECTURE.md): unary ops are a line in the registry
        // each, so the ceiling, not an exact count, makes growth past it a conscious choice.
        let elementwise = UnaryOp::ALL.len() + BinaryOp::ALL.len() + 6;
        println!("elementwise ops: {elementwise}");
        assert!(elementwise <= 40, "{elementwise} elementwise ops");
    }

    #[test]
    fn scalar_functions_match_their_definitions() {
        assert!((Gelu::apply::<f64>(1.0) - 0.841_344_746_068_542_9).abs() < 1e-12);
        assert!((GeluTanh::apply::<f64>(1.0) - 0.841_191_990_607_477_2).abs() < 1e-12);
        assert!((Silu::apply::<f64>(2.0) - 2.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
        assert_eq!(Softplus::apply::<f32>(30.0), 30.0);
        assert!(Relu::apply::<f32>(f32::NAN).is_nan());
        assert_eq!(Neg::apply::<f64>(2.0), -2.0);
        assert_eq!(Abs::apply::<f32>(-3.0), 3.0);
        assert_eq!(Div::apply(7i32, 2), 3);
        assert!(Lt::apply(1, 2));
    }
}
