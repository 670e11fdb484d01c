//! Element types: the eight types a tensor may hold and the traits that say which ops suit them.
//!
//! The trait ladder is the whole policy for "an op exists only for the element types it makes
//! sense for": [`Element`] (all eight: storage, copies, casts, comparisons for equality),
//! [`Num`] (arithmetic, ordering, sums: every type but `bool`), [`Signed`] (negation and
//! absolute value) and [`Float`] (transcendental math). Half-precision types compute in `f32`
//! ([`Float::Acc`]); `f32` and `f64` compute in their own type.

use half::{bf16, f16};
use std::fmt::{Debug, Display};

/// The run-time tag of an element type, used in error messages, checkpoints and the IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// 16-bit IEEE half float.
    F16,
    /// bfloat16: 8 exponent bits, 7 mantissa bits.
    BF16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 8-bit unsigned integer.
    U8,
    /// Boolean (one byte per element).
    Bool,
}

impl DType {
    /// The PyTorch-style name (`float32`, `bfloat16`, ...), as safetensors and printing use it.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// Whether the type is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }
}

impl Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Any element a tensor can hold. Sealed: the set of element types is fixed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tensor element type",
    note = "tensors hold f32, f64, f16, bf16, i32, i64, u8 or bool"
)]
pub trait Element:
    sealed::Sealed
    + Copy
    + Send
    + Sync
    + Debug
    + Default
    + PartialEq
    + PartialOrd
    + 'static
    + crate::kernel::KernelElem
{
    /// The run-time tag of this type.
    const DTYPE: DType;
    /// Widens to `f64` (exact for every type but `i64` beyond 2^53).
    fn to_f64(self) -> f64;
    /// Narrows from `f64` with Rust's `as` semantics (round to nearest, saturate for integers).
    fn from_f64(v: f64) -> Self;
    /// Converts to `i64` (floats truncate toward zero and saturate, NaN becomes 0).
    fn to_i64(self) -> i64;
    /// Converts from `i64` (integers wrap as `as` does; floats round to nearest).
    fn from_i64(v: i64) -> Self;
    /// Casts to another element type: integer to integer goes through `i64` so it is exact,
    /// everything else through `f64`.
    #[inline]
    fn cast<T: Element>(self) -> T {
        if !Self::DTYPE.is_float() && !T::DTYPE.is_float() {
            T::from_i64(self.to_i64())
        } else {
            T::from_f64(self.to_f64())
        }
    }
}

/// Element types with arithmetic and an order: every type but `bool`.
#[diagnostic::on_unimplemented(
    message = "arithmetic is not defined for `{Self}` tensors",
    label = "`{Self}` has no arithmetic",
    note = "cast first, for example `.cast::<f32>()`; arithmetic needs f32, f64, f16, bf16, i32, i64 or u8"
)]
pub trait Num: Element + crate::kernel::KernelElem<Compute: crate::kernel::KernelNum> {
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// The lowest value (negative infinity for floats), the identity of `max`.
    const LOWEST: Self;
    /// The highest value (infinity for floats), the identity of `min`.
    const HIGHEST: Self;
    /// `a + b` (integers wrap).
    fn add(self, b: Self) -> Self;
    /// `a - b` (integers wrap).
    fn sub(self, b: Self) -> Self;
    /// `a * b` (integers wrap).
    fn mul(self, b: Self) -> Self;
    /// `a / b`; integer division truncates, and dividing an integer by zero gives 0 rather
    /// than aborting the process.
    fn div(self, b: Self) -> Self;
    /// `a` raised to `b` (integers: a negative exponent gives 0 unless `a` is 1 or -1).
    fn pow(self, b: Self) -> Self;
    /// The larger of two values; NaN wins, as in PyTorch.
    #[inline]
    fn max_of(self, b: Self) -> Self {
        // `partial_cmp` is None exactly when one side is NaN; keep `self` if it is the NaN.
        match self.partial_cmp(&b) {
            Some(std::cmp::Ordering::Less) => b,
            Some(_) => self,
            None => {
                if b.partial_cmp(&b).is_none() {
                    b
                } else {
                    self
                }
            }
        }
    }
    /// The smaller of two values; NaN wins, as in PyTorch.
    #[inline]
    fn min_of(self, b: Self) -> Self {
        match self.partial_cmp(&b) {
            Some(std::cmp::Ordering::Greater) => b,
            Some(_) => self,
            None => {
                if b.partial_cmp(&b).is_none() {
                    b
                } else {
                    self
                }
            }
        }
    }
}

/// Numeric types with a sign: negation and absolute value.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no sign: neg and abs need a signed element type",
    note = "cast to i32, i64 or a float type first"
)]
pub trait Signed: Num {
    /// `-a` (integers wrap).
    fn neg(self) -> Self;
    /// `|a|` (integers wrap at the minimum).
    fn abs(self) -> Self;
}

/// The two types floating-point math is computed in: `f32` and `f64`.
pub trait FloatMath:
    Copy
    + Send
    + Sync
    + 'static
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    /// Converts a literal constant.
    fn c(v: f64) -> Self;
    /// e^x.
    fn exp(self) -> Self;
    /// 2^x. On a GPU it is one hardware instruction for `f32` (about 2 ulp, results below
    /// 2^-126 flushed to zero), so kernels that need an exponential fold `log2(e)` into their
    /// scale and use it.
    fn exp2(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// ln(1 + x), accurate near zero.
    fn ln_1p(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// `self` to the power `e`.
    fn powf(self, e: Self) -> Self;
    /// `self * a + b` rounded once (a fused multiply-add, exact on every device).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Widens to `f64` (exact for both compute types).
    fn to_f64(self) -> f64;
    /// The larger of two values; a NaN operand is ignored, as in C's `fmax` (and CUDA's).
    fn max(self, o: Self) -> Self;
    /// The smaller of two values; a NaN operand is ignored, as in C's `fmin` (and CUDA's).
    fn min(self, o: Self) -> Self;
}

impl FloatMath for f32 {
    #[inline(always)]
    fn c(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn exp(self) -> Self {
        crate::fastmath::exp_f32(self)
    }
    #[inline(always)]
    fn exp2(self) -> Self {
        f32::exp2(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        crate::fastmath::ln_f32(self)
    }
    #[inline(always)]
    fn ln_1p(self) -> Self {
        crate::fastmath::ln_1p_f32(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn sin(self) -> Self {
        f32::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> Self {
        f32::cos(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        crate::fastmath::tanh_f32(self)
    }
    #[inline(always)]
    fn erf(self) -> Self {
        crate::fastmath::erf_f32(self)
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f32::abs(self)
    }
    #[inline(always)]
    fn powf(self, e: Self) -> Self {
        f32::powf(self, e)
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        f32::max(self, o)
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        f32::min(self, o)
    }
}

impl FloatMath for f64 {
    #[inline(always)]
    fn c(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn exp(self) -> Self {
        crate::fastmath::exp_f64(self)
    }
    #[inline(always)]
    fn exp2(self) -> Self {
        f64::exp2(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f64::ln(self)
    }
    #[inline(always)]
    fn ln_1p(self) -> Self {
        f64::ln_1p(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn sin(self) -> Self {
        f64::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> Self {
        f64::cos(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        crate::fastmath::tanh_f64(self)
    }
    #[inline(always)]
    fn erf(self) -> Self {
        libm::erf(self)
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f64::abs(self)
    }
    #[inline(always)]
    fn powf(self, e: Self) -> Self {
        f64::powf(self, e)
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        f64::max(self, o)
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        f64::min(self, o)
    }
}

/// Floating-point element types: f32, f64, f16 and bf16.
#[diagnostic::on_unimplemented(
    message = "this op needs a floating-point tensor, not `{Self}`",
    label = "`{Self}` is not a float type",
    note = "cast first, for example `.cast::<f32>()`"
)]
pub trait Float: Signed {
    /// The type math is computed in: `f32` for f16, bf16 and f32; `f64` for f64.
    type Acc: FloatMath;
    /// Widens to the compute type.
    fn to_acc(self) -> Self::Acc;
    /// Rounds back from the compute type.
    fn from_acc(v: Self::Acc) -> Self;
    /// Not-a-number.
    const NAN: Self;
    /// Machine epsilon: the gap between 1 and the next value.
    const EPSILON: Self;
}

macro_rules! element_common {
    ($t:ty, $dtype:ident) => {
        impl sealed::Sealed for $t {}
    };
}

element_common!(f32, F32);
element_common!(f64, F64);
element_common!(f16, F16);
element_common!(bf16, BF16);
element_common!(i32, I32);
element_common!(i64, I64);
element_common!(u8, U8);
element_common!(bool, Bool);

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v as f64
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline]
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    #[inline]
    fn to_i64(self) -> i64 {
        f16::to_f32(self) as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        f16::from_f64(v as f64)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    #[inline]
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    #[inline]
    fn to_i64(self) -> i64 {
        bf16::to_f32(self) as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        bf16::from_f64(v as f64)
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as i32
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v as i32
    }
}

impl Element for i64 {
    const DTYPE: DType = DType::I64;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v
    }
}

impl Element for u8 {
    const DTYPE: DType = DType::U8;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as u8
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v as u8
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline]
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

macro_rules! num_int {
    ($t:ty) => {
        #[diagnostic::do_not_recommend]
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline]
            fn add(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            #[inline]
            fn sub(self, b: Self) -> Self {
                self.wrapping_sub(b)
            }
            #[inline]
            fn mul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            #[inline]
            fn div(self, b: Self) -> Self {
                self.checked_div(b).unwrap_or(0)
            }
            #[inline]
            fn pow(self, b: Self) -> Self {
                #[allow(unused_comparisons)]
                if b < 0 {
                    return if self == 1 { 1 } else { 0 };
                }
                self.wrapping_pow(b.to_i64().min(u32::MAX as i64) as u32)
            }
        }
    };
}
num_int!(i32);
num_int!(i64);
num_int!(u8);

macro_rules! signed_int {
    ($t:ty) => {
        #[diagnostic::do_not_recommend]
        impl Signed for $t {
            #[inline]
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline]
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
        }
    };
}
signed_int!(i32);
signed_int!(i64);

macro_rules! num_float {
    ($t:ty, $acc:ty, $to:expr, $from:expr, $zero:expr, $one:expr, $eps:expr) => {
        #[diagnostic::do_not_recommend]
        impl Num for $t {
            const ZERO: Self = $zero;
            const ONE: Self = $one;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline]
            fn add(self, b: Self) -> Self {
                self + b
            }
            #[inline]
            fn sub(self, b: Self) -> Self {
                self - b
            }
            #[inline]
            fn mul(self, b: Self) -> Self {
                self * b
            }
            #[inline]
            fn div(self, b: Self) -> Self {
                self / b
            }
            #[inline]
            fn pow(self, b: Self) -> Self {
                Self::from_acc(self.to_acc().powf(b.to_acc()))
            }
        }
        #[diagnostic::do_not_recommend]
        impl Signed for $t {
            #[inline]
            fn neg(self) -> Self {
                -self
            }
            #[inline]
            fn abs(self) -> Self {
                Self::from_acc(FloatMath::abs(self.to_acc()))
            }
        }
        #[diagnostic::do_not_recommend]
        impl Float for $t {
            type Acc = $acc;
            #[inline]
            fn to_acc(self) -> $acc {
                let f: fn($t) -> $acc = $to;
                f(self)
            }
            #[inline]
            fn from_acc(v: $acc) -> Self {
                let f: fn($acc) -> $t = $from;
                f(v)
            }
            const NAN: Self = <$t>::NAN;
            const EPSILON: Self = $eps;
        }
    };
}
num_float!(f32, f32, |x| x, |x| x, 0.0, 1.0, f32::EPSILON);
num_float!(f64, f64, |x| x, |x| x, 0.0, 1.0, f64::EPSILON);
num_float!(
    f16,
    f32,
    f16::to_f32,
    f16::from_f32,
    f16::ZERO,
    f16::ONE,
    f16::EPSILON
);
num_float!(
    bf16,
    f32,
    bf16::to_f32,
    bf16::from_f32,
    bf16::ZERO,
    bf16::ONE,
    bf16::EPSILON
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_between_integers_are_exact() {
        let big: i64 = (1 << 60) + 1;
        assert_eq!(big.cast::<i64>(), big);
        assert_eq!(300i32.cast::<u8>(), 44);
        assert_eq!((-1.7f32).cast::<i32>(), -1);
        assert!(2u8.cast::<bool>());
        assert_eq!(true.cast::<f32>(), 1.0);
        assert_eq!(1.5f64.cast::<bf16>(), bf16::from_f32(1.5));
    }

    #[test]
    fn integer_division_by_zero_gives_zero() {
        assert_eq!(7i32.div(0), 0);
        assert_eq!(i32::MIN.div(-1), 0);
        assert_eq!(7i64.div(2), 3);
    }

    #[test]
    fn max_propagates_nan() {
        assert!(f32::NAN.max_of(1.0).is_nan());
        assert!(1.0f32.max_of(f32::NAN).is_nan());
        assert_eq!(2.0f32.min_of(3.0), 2.0);
    }
}
