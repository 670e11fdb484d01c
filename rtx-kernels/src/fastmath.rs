//! Branch-free transcendental functions that the compiler can vectorize: the `f32` (and some
//! `f64`) `exp`, `tanh`, `ln`, `ln_1p` and `erf` behind [`FloatMath`](crate::FloatMath).
//!
//! std's `f32::exp`/`tanh`/`ln` are calls into the system libm, one element at a time, so a loop
//! over them cannot vectorize; these are plain arithmetic on floats and their bits (range
//! reduction, a polynomial, a scale by 2^n built in the exponent bits) with every special case
//! chosen by a select rather than a branch, so loops over them compile to SIMD code.
//!
//! Accuracy, checked by the tests below over every 97th `f32` bit pattern (44 million
//! arguments) plus special values against std's `f64` functions: `exp_f32` 0.97 ulp,
//! `tanh_f32` 1.31 ulp, `ln_f32` 0.79 ulp, `ln_1p_f32` 1.44 ulp, `erf_f32` 2.44 ulp (asserted: 1, 2,
//! 1, 2, 2.5). `exp_f64`
//! and `tanh_f64` are within 2 ulp of std's own results over 4 million bit patterns spread
//! over every exponent. `sin`, `cos`, `powf` and the f64 `erf` still call libm. Overflow, underflow (including
//! subnormal results), infinities, signed zeros and NaN follow IEEE/libm behaviour.
//!
//! Determinism: only `+ - * /`, comparisons and bit operations are used, never `mul_add`, and
//! Rust does not contract `a * b + c` into a fused multiply-add, so the results are bitwise the
//! same on every x86-64 (or other IEEE) machine, whatever SIMD width the loop runs at.

// The constants are the published Cephes coefficients, kept digit for digit.
#![allow(clippy::excessive_precision)]

/// 1.5 * 2^23: adding it rounds an f32 of magnitude below 2^22 to the nearest integer, which
/// then sits in the low mantissa bits.
const ROUND_F32: f32 = 12_582_912.0;
/// 1.5 * 2^52, the same for f64.
const ROUND_F64: f64 = 6_755_399_441_055_744.0;

/// 2^n for an integer `n` in [-126, 127], built in the exponent bits.
///
/// The integer steps here and in the exponentials wrap rather than check: their operands are
/// in range by the clamps, and a checked step (debug builds check) keeps the loops that call
/// them from being vectorized, which made debug-built tests of attention several times slower.
#[inline(always)]
fn pow2i_f32(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) as u32) << 23)
}

/// 2^n for an integer `n` in [-1022, 1023], built in the exponent bits.
#[inline(always)]
fn pow2i_f64(n: i64) -> f64 {
    f64::from_bits((n.wrapping_add(1023) as u64) << 52)
}

/// e^x for `f32`, within 1 ulp; inf above 88.72, 0 below -103.97, subnormal results in
/// between rounded once.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // Clamp (keeping NaN: comparisons with NaN are false) so that n below stays in [-150, 129]
    // and the result still overflows to inf / underflows to 0 on its own.
    let x = if x > 89.0 { 89.0 } else { x };
    let x = if x < -104.0 { -104.0 } else { x };
    // n = round(x / ln 2), as a float and in the low bits of `t`.
    let t = x * std::f32::consts::LOG2_E + ROUND_F32;
    let n = t - ROUND_F32;
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND_F32.to_bits() as i32);
    // r = x - n ln 2 in two steps (Cody-Waite); n * LN2_HI is exact.
    let r = x - n * 0.693_359_375 - n * -2.121_944_400_546_905_827_68e-4;
    let z = r * r;
    let p = ((((1.987_569_150_0e-4 * r + 1.398_199_950_7e-3) * r + 8.333_451_907_3e-3) * r
        + 4.166_579_589_4e-2)
        * r
        + 1.666_666_545_9e-1)
        * r
        + 5.000_000_120_1e-1;
    let p = p * z + r + 1.0;
    // Scale by 2^n in two halves so that subnormal results and overflow both come out of one
    // final rounding; an arithmetic shift keeps the halves' sum exact for negative n.
    let n1 = ni >> 1;
    let n2 = ni.wrapping_sub(n1);
    p * pow2i_f32(n1) * pow2i_f32(n2)
}

/// erf x for `f32`, within 2.5 ulp: the Taylor series (to x^19) below 0.9 in magnitude, so tiny
/// arguments keep their relative accuracy; above, `1 - erfc |x|` with the sign of x, where
/// erfc z is `t e^(-z^2 + P(t))`, `t = 1 / (1 + z/2)`, with P the published nine-term
/// Chebyshev fit of Numerical Recipes' `erfcc` (fractional error below 1.2e-7). Where z^2
/// rounds badly (large z) erfc is far below an ulp of erf, so that error never shows.
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let x2 = x * x;
    // 2/sqrt(pi) * sum over n of (-1)^n x^2n / (n! (2n + 1)), to n = 9.
    let series = x
        * (std::f32::consts::FRAC_2_SQRT_PI
            + x2 * (-0.376_126_389_031_837_54
                + x2 * (0.112_837_916_709_551_26
                    + x2 * (-0.026_866_170_645_131_252
                        + x2 * (0.005_223_977_625_442_188
                            + x2 * (-0.000_854_832_702_345_085_2
                                + x2 * (0.000_120_553_329_817_896_64
                                    + x2 * (-1.492_565_035_840_625e-5
                                        + x2 * (1.646_211_436_588_924_6e-6
                                            + x2 * -1.636_584_469_123_492_4e-7)))))))));
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * exp_f32(-z * z + p);
    let tail = (1.0 - erfc).copysign(x);
    if z < 0.9 { series } else { tail }
}

/// tanh x for `f32`, within 2 ulp; a polynomial below 0.625 in magnitude (so tiny arguments
/// keep their relative accuracy), `1 - 2 / (e^2|x| + 1)` with the sign of x above.
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let ax = x.abs();
    let z = x * x;
    let small = ((((-5.704_988_727_45e-3 * z + 2.063_908_879_54e-2) * z - 5.373_971_555_31e-2)
        * z
        + 1.333_144_220_36e-1)
        * z
        - 3.333_328_194_22e-1)
        * z
        * x
        + x;
    // tanh is odd; the copy also keeps -0 (x + x * 0 would give +0).
    let small = small.copysign(x);
    let big = (1.0 - 2.0 / (exp_f32(2.0 * ax) + 1.0)).copysign(x);
    // NaN fails the comparison and takes the `big` side, which is NaN too.
    if ax < 0.625 { small } else { big }
}

/// The natural logarithm for `f32`, within 1 ulp; -inf at ±0, NaN below 0, subnormal
/// arguments handled.
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    // Subnormals are scaled into the normal range first, and the exponent corrected.
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let e = ((bits >> 23) & 0xff) as i32 - 126 - if sub { 23 } else { 0 };
    // m in [0.5, 1); shifted to [sqrt(1/2), sqrt 2) - 1 so the polynomial sees |f| < 0.42.
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m < std::f32::consts::FRAC_1_SQRT_2;
    let e = (e - low as i32) as f32;
    let f = if low { m + m - 1.0 } else { m - 1.0 };
    let z = f * f;
    let p = ((((((((7.037_683_629_2e-2 * f - 1.151_461_031_0e-1) * f + 1.167_699_874_0e-1)
        * f
        - 1.242_014_084_6e-1)
        * f
        + 1.424_932_278_7e-1)
        * f
        - 1.666_805_766_5e-1)
        * f
        + 2.000_071_476_5e-1)
        * f
        - 2.499_999_399_3e-1)
        * f
        + 3.333_333_117_4e-1)
        * f
        * z;
    let y = p + e * -2.121_944_400_546_905_827_68e-4 - 0.5 * z;
    let r = f + y + e * 0.693_359_375;
    let r = if x == f32::INFINITY { x } else { r };
    let r = if x == 0.0 { f32::NEG_INFINITY } else { r };
    if x < 0.0 || x.is_nan() { f32::NAN } else { r }
}

/// ln(1 + x) for `f32`, within 2 ulp and accurate near 0: ln of the rounded `u = 1 + x`, plus
/// the first-order correction for the rounding of `u`.
#[inline(always)]
pub fn ln_1p_f32(x: f32) -> f32 {
    let u = 1.0 + x;
    let finite_pos = u > 0.0 && u < f32::INFINITY;
    let corr = if finite_pos { (x - (u - 1.0)) / u } else { 0.0 };
    ln_f32(u) + corr
}

/// e^x for `f64`, within 1 ulp (Cephes' rational form); inf above 709.78, 0 below -745.13.
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    let x = if x > 710.0 { 710.0 } else { x };
    let x = if x < -746.0 { -746.0 } else { x };
    let t = x * std::f64::consts::LOG2_E + ROUND_F64;
    let n = t - ROUND_F64;
    let ni = (t.to_bits() as i64).wrapping_sub(ROUND_F64.to_bits() as i64);
    let r = x - n * 6.931_457_519_531_25e-1 - n * 1.428_606_820_309_417_232_12e-6;
    let z = r * r;
    let p = r
        * ((1.261_771_930_748_105_908_78e-4 * z + 3.029_944_077_074_419_613_00e-2) * z
            + 9.999_999_999_999_999_999_10e-1);
    let q = ((3.001_985_051_386_644_550_42e-6 * z + 2.524_483_403_496_841_041_92e-3) * z
        + 2.272_655_482_081_550_287_66e-1)
        * z
        + 2.000_000_000_000_000_000_09;
    let e = 1.0 + 2.0 * (p / (q - p));
    let n1 = ni >> 1;
    let n2 = ni.wrapping_sub(n1);
    e * pow2i_f64(n1) * pow2i_f64(n2)
}

/// tanh x for `f64`, within 2 ulp (Cephes' rational form below 0.625 in magnitude).
#[inline(always)]
pub fn tanh_f64(x: f64) -> f64 {
    let ax = x.abs();
    let z = x * x;
    let p = (-9.643_991_794_250_522_386_28e-1 * z - 9.928_772_310_019_185_865_64e1) * z
        - 1.614_687_684_417_084_479_52e3;
    let q = ((z + 1.128_116_784_916_329_314_02e2) * z + 2.235_488_390_601_004_485_83e3) * z
        + 4.844_063_053_251_254_860_48e3;
    let small = (x + x * z * (p / q)).copysign(x);
    let big = (1.0 - 2.0 / (exp_f64(2.0 * ax) + 1.0)).copysign(x);
    if ax < 0.625 { small } else { big }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance from `got` to the exact `want`, in units of the last place of `want`
    /// rounded to f32 (the subnormal spacing below the normal range).
    fn ulps_f32(got: f32, want: f64) -> f64 {
        if want.is_nan() {
            return if got.is_nan() { 0.0 } else { f64::INFINITY };
        }
        let w = want as f32;
        if w.is_infinite() || got.is_infinite() {
            return if got == w { 0.0 } else { f64::INFINITY };
        }
        let exp = if w == 0.0 {
            -126
        } else {
            ((w.abs().to_bits() >> 23) as i32 - 127).max(-126)
        };
        (got as f64 - want).abs() / 2f64.powi(exp - 23)
    }

    /// The same in f64 ulps, against a reference that is itself within 1 ulp (std's).
    fn ulps_f64(got: f64, want: f64) -> f64 {
        if want.is_nan() {
            return if got.is_nan() { 0.0 } else { f64::INFINITY };
        }
        if want.is_infinite() || got.is_infinite() {
            return if got == want { 0.0 } else { f64::INFINITY };
        }
        let exp = if want == 0.0 {
            -1022
        } else {
            ((want.abs().to_bits() >> 52) as i64 - 1023).max(-1022)
        };
        // 2^(exp - 52), a subnormal below the normal range.
        let unit = if exp - 52 >= -1022 {
            f64::from_bits(((exp - 52 + 1023) as u64) << 52)
        } else {
            f64::from_bits(1u64 << (exp - 52 + 1074))
        };
        (got - want).abs() / unit
    }

    const SPECIALS: [f32; 14] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-45,
        f32::MAX,
        f32::MIN,
        88.72,
        -103.9,
        -87.4,
    ];

    /// The worst ulp error of `f` against `reference` over every 97th bit pattern and the
    /// special values, with the argument where it happens.
    fn sweep(f: impl Fn(f32) -> f32, reference: impl Fn(f64) -> f64) -> (f64, f32) {
        let mut worst = (0.0, 0.0);
        let patterns = (0..u32::MAX / 97).map(|i| f32::from_bits(i * 97));
        for x in patterns.chain(SPECIALS) {
            let e = ulps_f32(f(x), reference(x as f64));
            if e > worst.0 || e.is_nan() {
                worst = (e, x);
            }
        }
        worst
    }

    #[test]
    fn exp_f32_is_within_one_ulp() {
        let (e, at) = sweep(exp_f32, f64::exp);
        println!("exp_f32: {e} ulp at {at:e}");
        assert!(e <= 1.0, "{e} ulp at {at:e}");
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(-104.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    #[test]
    fn erf_f32_is_within_two_and_a_half_ulp() {
        let (e, at) = sweep(erf_f32, libm::erf);
        println!("erf_f32: {e} ulp at {at:e}");
        assert!(e <= 2.5, "{e} ulp at {at:e}");
        assert_eq!(erf_f32(1e-30), 1.128_379_2e-30);
        assert_eq!(erf_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(-10.0), -1.0);
        assert!(erf_f32(f32::NAN).is_nan());
    }

    #[test]
    fn tanh_f32_is_within_two_ulp() {
        let (e, at) = sweep(tanh_f32, f64::tanh);
        println!("tanh_f32: {e} ulp at {at:e}");
        assert!(e <= 2.0, "{e} ulp at {at:e}");
        assert_eq!(tanh_f32(1e-30), 1e-30);
        assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(-20.0), -1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
    }

    #[test]
    fn ln_f32_is_within_one_ulp() {
        let (e, at) = sweep(ln_f32, f64::ln);
        println!("ln_f32: {e} ulp at {at:e}");
        assert!(e <= 1.0, "{e} ulp at {at:e}");
        assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(1.0), 0.0);
        assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
        assert!(ln_f32(-1.0).is_nan());
    }

    #[test]
    fn ln_1p_f32_is_within_two_ulp() {
        let (e, at) = sweep(ln_1p_f32, f64::ln_1p);
        println!("ln_1p_f32: {e} ulp at {at:e}");
        assert!(e <= 2.0, "{e} ulp at {at:e}");
        assert_eq!(ln_1p_f32(1e-30), 1e-30);
        assert_eq!(ln_1p_f32(-1.0), f32::NEG_INFINITY);
        assert_eq!(ln_1p_f32(f32::INFINITY), f32::INFINITY);
        assert!(ln_1p_f32(-2.0).is_nan());
    }

    /// f64 sweep: every (2^64 / 2^22)-th bit pattern, against std (itself within 1 ulp, so the
    /// bound checked is ours plus std's).
    fn sweep_f64(f: impl Fn(f64) -> f64, reference: impl Fn(f64) -> f64) -> (f64, f64) {
        let mut worst = (0.0, 0.0);
        let step = 1u64 << 42;
        let patterns = (0..1u64 << 22).map(|i| f64::from_bits(i * step + i));
        let specials = [
            0.0,
            -0.0,
            1.0,
            f64::INFINITY,
            -f64::INFINITY,
            f64::NAN,
            709.7,
            -745.0,
        ];
        for x in patterns.chain(specials) {
            let e = ulps_f64(f(x), reference(x));
            if e > worst.0 || e.is_nan() {
                worst = (e, x);
            }
        }
        worst
    }

    #[test]
    fn exp_f64_is_within_two_ulp() {
        let (e, at) = sweep_f64(exp_f64, f64::exp);
        println!("exp_f64: {e} ulp at {at:e}");
        assert!(e <= 2.0, "{e} ulp at {at:e}");
        assert_eq!(exp_f64(710.0), f64::INFINITY);
        assert_eq!(exp_f64(-746.0), 0.0);
        assert!(exp_f64(f64::NAN).is_nan());
    }

    #[test]
    fn tanh_f64_is_within_two_ulp() {
        let (e, at) = sweep_f64(tanh_f64, f64::tanh);
        println!("tanh_f64: {e} ulp at {at:e}");
        assert!(e <= 2.0, "{e} ulp at {at:e}");
        assert_eq!(tanh_f64(1e-300), 1e-300);
        assert_eq!(tanh_f64(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(tanh_f64(f64::NEG_INFINITY), -1.0);
        assert!(tanh_f64(f64::NAN).is_nan());
    }
}
