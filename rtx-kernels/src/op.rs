//! The primitive-op list: one enum that eager ops, backends, and later the tape, the kernels
//! and the IR all name ops by, plus a marker type per elementwise op that carries its name and
//! scalar function.
//!
//! Invariant: an op's scalar function lives in exactly one place, its marker's `apply`; the CPU
//! backend runs it in a loop and the GPU backend will run the same definition as a kernel.
//! Composite math (gelu, softplus, logsumexp, softmax, variance...) is a marker here only where
//! a one-pass fused scalar function pays off; the rest is composed in `rtx` from these ops.

use crate::dtype::{FloatMath, Num};

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

/// Elementwise functions of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// -x
    Neg,
    /// |x|
    Abs,
    /// e^x
    Exp,
    /// ln x
    Log,
    /// ln(1 + x)
    Log1p,
    /// sqrt x
    Sqrt,
    /// 1 / sqrt x
    Rsqrt,
    /// 1 / x
    Recip,
    /// sin x
    Sin,
    /// cos x
    Cos,
    /// tanh x
    Tanh,
    /// erf x
    Erf,
    /// max(x, 0)
    Relu,
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// x * Φ(x), the exact (erf) form.
    Gelu,
    /// The tanh approximation of gelu.
    GeluTanh,
    /// x * sigmoid(x)
    Silu,
    /// ln(1 + e^x), linear above 20 as PyTorch does.
    Softplus,
}

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

impl UnaryOp {
    /// Every unary op, in declaration order.
    pub const ALL: [UnaryOp; 18] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Recip,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Erf,
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Softplus,
    ];
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
            Op::Unary(u) => match u {
                UnaryOp::Neg => "neg",
                UnaryOp::Abs => "abs",
                UnaryOp::Exp => "exp",
                UnaryOp::Log => "log",
                UnaryOp::Log1p => "log1p",
                UnaryOp::Sqrt => "sqrt",
                UnaryOp::Rsqrt => "rsqrt",
                UnaryOp::Recip => "recip",
                UnaryOp::Sin => "sin",
                UnaryOp::Cos => "cos",
                UnaryOp::Tanh => "tanh",
                UnaryOp::Erf => "erf",
                UnaryOp::Relu => "relu",
                UnaryOp::Sigmoid => "sigmoid",
                UnaryOp::Gelu => "gelu",
                UnaryOp::GeluTanh => "gelu_tanh",
                UnaryOp::Silu => "silu",
                UnaryOp::Softplus => "softplus",
            },
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

/// A unary float op: its place in [`UnaryOp`] and its scalar function, written once for both
/// compute types (`f32` for f16, bf16 and f32; `f64` for f64).
pub trait UnaryOpT: 'static {
    /// The op this marker stands for.
    const OP: UnaryOp;
    /// The scalar function.
    fn apply<A: FloatMath>(x: A) -> A;
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

    macro_rules! unary {
        ($(#[$doc:meta])* $name:ident, |$x:ident| $body:expr) => {
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name;
            impl UnaryOpT for $name {
                const OP: UnaryOp = UnaryOp::$name;
                #[inline(always)]
                fn apply<A: FloatMath>($x: A) -> A {
                    $body
                }
            }
        };
    }

    unary!(/// -x
        Neg, |x| -x);
    unary!(/// |x|
        Abs, |x| x.abs());
    unary!(/// e^x
        Exp, |x| x.exp());
    unary!(/// ln x
        Log, |x| x.ln());
    unary!(/// ln(1 + x)
        Log1p, |x| x.ln_1p());
    unary!(/// sqrt x
        Sqrt, |x| x.sqrt());
    unary!(/// 1 / sqrt x
        Rsqrt, |x| A::c(1.0) / x.sqrt());
    unary!(/// 1 / x
        Recip, |x| A::c(1.0) / x);
    unary!(/// sin x
        Sin, |x| x.sin());
    unary!(/// cos x
        Cos, |x| x.cos());
    unary!(/// tanh x
        Tanh, |x| x.tanh());
    unary!(/// erf x
        Erf, |x| x.erf());
    unary!(/// max(x, 0); NaN stays NaN
        Relu, |x| if x < A::c(0.0) { A::c(0.0) } else { x });
    unary!(/// 1 / (1 + e^-x)
        Sigmoid, |x| A::c(1.0) / (A::c(1.0) + (-x).exp()));
    unary!(/// x/2 * (1 + erf(x / sqrt 2))
        Gelu, |x| A::c(0.5) * x * (A::c(1.0) + (x * A::c(std::f64::consts::FRAC_1_SQRT_2)).erf()));
    unary!(/// x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    GeluTanh, |x| {
        let inner = A::c(0.797_884_560_802_865_4) * (x + A::c(0.044715) * x * x * x);
        A::c(0.5) * x * (A::c(1.0) + inner.tanh())
    });
    unary!(/// x / (1 + e^-x)
        Silu, |x| x / (A::c(1.0) + (-x).exp()));
    unary!(/// ln(1 + e^x), and x itself above 20 where the two agree to rounding
        Softplus, |x| if x > A::c(20.0) { x } else { x.exp().ln_1p() });

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
        // A number worth watching (ARCHITECTURE.md): growth here should be a conscious choice.
        let elementwise = UnaryOp::ALL.len() + BinaryOp::ALL.len() + 6;
        println!("elementwise ops: {elementwise}");
        assert_eq!(elementwise, 31);
    }

    #[test]
    fn scalar_functions_match_their_definitions() {
        assert!((Gelu::apply(1.0f64) - 0.841_344_746_068_542_9).abs() < 1e-12);
        assert!((GeluTanh::apply(1.0f64) - 0.841_191_990_607_477_2).abs() < 1e-12);
        assert!((Silu::apply(2.0f64) - 2.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
        assert_eq!(Softplus::apply(30.0f32), 30.0);
        assert!(Relu::apply(f32::NAN).is_nan());
        assert_eq!(Div::apply(7i32, 2), 3);
        assert!(Lt::apply(1, 2));
    }
}
