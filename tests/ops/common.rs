//! Shared helpers for the op property tests: tolerances per element type and comparisons.

#![allow(dead_code)]

use rtx::prelude::*;

/// Absolute and relative tolerance for comparing an op computed in `E` with a float64
/// reference: f32 to a few ulps of its 24-bit mantissa, f16 (11 bits) and bf16 (8 bits) to
/// their rounding of inputs and output.
pub fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F64 => (1e-12, 1e-12),
        DType::F32 => (1e-5, 1e-5),
        DType::F16 => (2e-3, 2e-3),
        DType::BF16 => (1.6e-2, 1.6e-2),
        _ => (0.0, 0.0),
    }
}

/// Asserts `got` matches `want` elementwise within `|g - w| <= atol + rtol * |w|`; NaNs must
/// match NaNs.
#[track_caller]
pub fn assert_close(got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "element {i}: got {g}, want NaN");
            continue;
        }
        if w.is_infinite() {
            assert_eq!(g, w, "element {i}");
            continue;
        }
        assert!(
            (g - w).abs() <= atol + rtol * w.abs(),
            "element {i}: got {g}, want {w} (atol {atol}, rtol {rtol})"
        );
    }
}

/// The elements of a tensor widened to f64.
pub fn to_f64<S: Shape, E: Element>(t: &Tensor<S, E>) -> Vec<f64> {
    t.to_vec().into_iter().map(|x| x.to_f64()).collect()
}

/// Values rounded to `E` and back, so a reference sees exactly the inputs the op saw.
pub fn rounded<E: Element>(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| E::from_f64(x).to_f64()).collect()
}
