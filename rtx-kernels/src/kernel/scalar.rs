//! The compute types of all eight element types, for the native side of kernels over
//! `T: Num` or `T: Element` (`#[kernel]` emits calls to these traits; kernels over
//! `T: Float` use [`Float`](crate::Float) and [`FloatMath`] instead).
//!
//! Invariant: each operation is the CPU backend's for that type, so a kernel's native run
//! computes what the CPU backend does: [`KernelNum`] arithmetic is [`Num`](crate::Num)'s
//! (integers wrap; integer division by zero, or of the minimum by -1, gives 0), and the
//! conversions are [`Element`](crate::Element)'s. The CUDA side (`prelude_num.cu`) implements
//! the same operations.
//!
//! ```
//! use rtx_kernels::kernel::{KernelElem, KernelNum, KernelScalar};
//! use rtx_kernels::f16;
//! assert_eq!(KernelNum::add(250u8, 10), 4);
//! assert_eq!(KernelNum::div(7i32, 0), 0);
//! let h: f32 = KernelElem::to_compute(f16::from_f32(1.5));
//! assert_eq!(h, 1.5);
//! assert_eq!(<i64 as KernelScalar>::LOWEST, i64::MIN);
//! ```

use super::block::Word;
use crate::FloatMath;
use half::{bf16, f16};

/// An element type with its compute type: floats as [`Float::Acc`](crate::Float::Acc), every
/// other type itself.
pub trait KernelElem: Copy {
    /// The type `T` values are held in inside a kernel.
    type Compute: KernelScalar;
    /// Widens to the compute type (exactly).
    fn to_compute(self) -> Self::Compute;
    /// Rounds back from the compute type.
    fn from_compute(v: Self::Compute) -> Self;
}

/// A compute type: literals, conversions and the identities of max and min.
pub trait KernelScalar: Copy + PartialEq + PartialOrd + Word {
    /// The lowest value (negative infinity for floats).
    const LOWEST: Self;
    /// The highest value (infinity for floats).
    const HIGHEST: Self;
    /// A literal constant, converted as `Element::from_f64` converts.
    fn c(v: f64) -> Self;
    /// Widens to `f64`.
    fn to_f64(self) -> f64;
    /// To `i64` (floats truncate and saturate, NaN becomes 0).
    fn to_i64(self) -> i64;
    /// From `f64` with Rust's `as` semantics.
    fn from_f64(v: f64) -> Self;
    /// From `i64` (integers wrap, floats round to nearest).
    fn from_i64(v: i64) -> Self;
}

/// Arithmetic of a compute type, with [`Num`](crate::Num)'s semantics.
pub trait KernelNum: KernelScalar {
    /// `a + b` (integers wrap).
    fn add(self, b: Self) -> Self;
    /// `a - b` (integers wrap).
    fn sub(self, b: Self) -> Self;
    /// `a * b` (integers wrap).
    fn mul(self, b: Self) -> Self;
    /// `a / b` (integer division by zero, or of the minimum by -1, gives 0).
    fn div(self, b: Self) -> Self;
    /// `-a` (integers wrap).
    fn neg(self) -> Self;
    /// `|a|` (integers wrap at the minimum).
    fn abs(self) -> Self;
    /// The larger value; a NaN operand is ignored, as C's `fmax` (and CUDA's) does.
    fn max(self, b: Self) -> Self;
    /// The smaller value; a NaN operand is ignored.
    fn min(self, b: Self) -> Self;
}

macro_rules! float_scalar {
    ($t:ty) => {
        impl KernelScalar for $t {
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline(always)]
            fn c(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
        impl KernelNum for $t {
            #[inline(always)]
            fn add(self, b: Self) -> Self {
                self + b
            }
            #[inline(always)]
            fn sub(self, b: Self) -> Self {
                self - b
            }
            #[inline(always)]
            fn mul(self, b: Self) -> Self {
                self * b
            }
            #[inline(always)]
            fn div(self, b: Self) -> Self {
                self / b
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn abs(self) -> Self {
                FloatMath::abs(self)
            }
            #[inline(always)]
            fn max(self, b: Self) -> Self {
                FloatMath::max(self, b)
            }
            #[inline(always)]
            fn min(self, b: Self) -> Self {
                FloatMath::min(self, b)
            }
        }
    };
}
float_scalar!(f32);
float_scalar!(f64);

macro_rules! int_scalar {
    ($t:ty) => {
        impl KernelScalar for $t {
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn c(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
        impl KernelNum for $t {
            #[inline(always)]
            fn add(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(self, b: Self) -> Self {
                self.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            #[inline(always)]
            fn div(self, b: Self) -> Self {
                self.checked_div(b).unwrap_or(0)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn abs(self) -> Self {
                #[allow(unused_comparisons)]
                if self < 0 { self.wrapping_neg() } else { self }
            }
            #[inline(always)]
            fn max(self, b: Self) -> Self {
                Ord::max(self, b)
            }
            #[inline(always)]
            fn min(self, b: Self) -> Self {
                Ord::min(self, b)
            }
        }
    };
}
int_scalar!(i32);
int_scalar!(i64);
int_scalar!(u8);

impl KernelScalar for bool {
    const LOWEST: Self = false;
    const HIGHEST: Self = true;
    #[inline(always)]
    fn c(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

macro_rules! elem_is_compute {
    ($($t:ty),*) => {$(
        impl KernelElem for $t {
            type Compute = $t;
            #[inline(always)]
            fn to_compute(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_compute(v: $t) -> $t {
                v
            }
        }
    )*};
}
elem_is_compute!(f32, f64, i32, i64, u8, bool);

impl KernelElem for f16 {
    type Compute = f32;
    #[inline(always)]
    fn to_compute(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_compute(v: f32) -> f16 {
        f16::from_f32(v)
    }
}

impl KernelElem for bf16 {
    type Compute = f32;
    #[inline(always)]
    fn to_compute(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_compute(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_arithmetic_wraps_like_num() {
        assert_eq!(KernelNum::mul(i32::MAX, 2), -2);
        assert_eq!(KernelNum::div(i32::MIN, -1), 0);
        assert_eq!(KernelNum::div(i64::MIN, -1), 0);
        assert_eq!(KernelNum::neg(i64::MIN), i64::MIN);
        assert_eq!(KernelNum::abs(i32::MIN), i32::MIN);
        assert_eq!(KernelNum::sub(3u8, 5), 254);
        assert_eq!(<u8 as KernelScalar>::from_f64(300.0), 255);
        assert_eq!(<i32 as KernelScalar>::from_f64(f64::NAN), 0);
        assert_eq!(<u8 as KernelScalar>::from_i64(300), 44);
        assert!(KernelNum::max(f32::NAN, 1.0) == 1.0);
    }
}
