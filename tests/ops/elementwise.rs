//! Elementwise ops against float64 references: unary math, arithmetic with broadcasting,
//! comparisons, `where`, clamp, casts, strided inputs, every float type.

use crate::common::{assert_close, rounded, to_f64, tolerance};
use proptest::prelude::*;
use rtx::op::{UnaryOp, UnaryOpT, UnaryVisitor};
use rtx::prelude::*;

/// The f64 reference of a unary op: an independent formula where this file has one, and
/// otherwise the op's own formula evaluated in f64 (which still checks every other element
/// type, the strided path and the rounding against it).
fn unary_reference(op: UnaryOp, x: f64) -> f64 {
    let erf = |v: f64| {
        // Reference erf by its Taylor series (converges for |v| < 3, where the tests sample).
        let mut term = v;
        let mut sum = v;
        for n in 1..200 {
            term *= -v * v / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    };
    match op.name() {
        "exp" => x.exp(),
        "log" => x.ln(),
        "log1p" => x.ln_1p(),
        "sqrt" => x.sqrt(),
        "rsqrt" => 1.0 / x.sqrt(),
        "recip" => 1.0 / x,
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tanh" => x.tanh(),
        "erf" => erf(x),
        "relu" => x.max(0.0),
        "sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "gelu" => 0.5 * x * (1.0 + erf(x / 2f64.sqrt())),
        "gelu_tanh" => {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
        }
        "silu" => x / (1.0 + (-x).exp()),
        "softplus" => (1.0 + x.exp()).ln(),
        "neg" => -x,
        "abs" => x.abs(),
        _ => {
            struct F64(f64);
            impl UnaryVisitor for F64 {
                type Out = f64;
                fn visit<O: UnaryOpT>(self) -> f64 {
                    O::apply::<f64>(self.0)
                }
            }
            op.visit(F64(x))
        }
    }
}

/// Inputs valid for every unary op (positive where a log or root needs it).
fn domain(op: UnaryOp, x: f64) -> f64 {
    match op.name() {
        "log" | "sqrt" | "rsqrt" => x.abs() + 0.1,
        "log1p" => x.abs() - 0.5,
        "recip" => {
            if x.abs() < 0.1 {
                0.5
            } else {
                x
            }
        }
        _ => x,
    }
}

fn check_unary<E: Float>(op: UnaryOp, rows: usize, cols: usize, vals: &[f64], transposed: bool) {
    let vals: Vec<f64> = vals.iter().map(|&v| domain(op, v)).collect();
    let input = rounded::<E>(&vals[..rows * cols]);
    let data: Vec<E> = input.iter().map(|&v| E::from_f64(v)).collect();
    let t = Tensor::from_vec(data, (rows, cols), Device::Cpu);
    let (got, logical): (Vec<f64>, Vec<f64>) = if transposed {
        let tt = t.t();
        let logical = (0..cols)
            .flat_map(|c| (0..rows).map(move |r| (r, c)))
            .map(|(r, c)| input[r * cols + c])
            .collect();
        (to_f64(&tt.try_unary_op(op).unwrap()), logical)
    } else {
        (to_f64(&t.try_unary_op(op).unwrap()), input.clone())
    };
    let want: Vec<f64> = logical.iter().map(|&x| unary_reference(op, x)).collect();
    let (atol, rtol) = tolerance(E::DTYPE);
    // Outputs are rounded to E once more; f16 and bf16 allow for that, f32 allows libm's ulps.
    let (atol, rtol) = if E::DTYPE == DType::F32 {
        (atol * 4.0, rtol * 4.0)
    } else {
        (atol, rtol)
    };
    assert_close(&got, &want, atol, rtol);
}

fn values(n: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-3.0f64..3.0, n)
}

proptest! {
    #[test]
    fn unary_ops_match_reference(rows in 1usize..6, cols in 1usize..7, vals in values(42), op in 0..UnaryOp::ALL.len(), transposed: bool) {
        let op = UnaryOp::ALL[op];
        check_unary::<f32>(op, rows, cols, &vals, transposed);
        check_unary::<f64>(op, rows, cols, &vals, transposed);
        check_unary::<f16>(op, rows, cols, &vals, transposed);
        check_unary::<bf16>(op, rows, cols, &vals, transposed);
    }

    #[test]
    fn binary_ops_broadcast_a_row(rows in 1usize..5, cols in 1usize..6, a in values(30), b in values(6)) {
        check_binary::<f32>(rows, cols, &a, &b);
        check_binary::<f64>(rows, cols, &a, &b);
        check_binary::<f16>(rows, cols, &a, &b);
        check_binary::<bf16>(rows, cols, &a, &b);
    }

    #[test]
    fn integer_arithmetic_wraps_and_truncates(a in prop::collection::vec(-1000i32..1000, 12), b in prop::collection::vec(-50i32..50, 12)) {
        let x = Tensor::from_vec(a.clone(), (3usize, Const::<4>), Device::Cpu);
        let y = Tensor::from_vec(b.clone(), (3usize, Const::<4>), Device::Cpu);
        let q = (&x / &y).to_vec();
        let m = x.maximum(&y).to_vec();
        for i in 0..12 {
            prop_assert_eq!(q[i], a[i].checked_div(b[i]).unwrap_or(0));
            prop_assert_eq!(m[i], a[i].max(b[i]));
        }
        prop_assert_eq!((&x - &y).to_vec(), a.iter().zip(&b).map(|(p, q)| p - q).collect::<Vec<_>>());
    }

    #[test]
    fn comparisons_and_where_match_reference(a in values(12), b in values(12)) {
        let x = Tensor::from_vec(a.iter().map(|&v| v as f32).collect(), (Const::<3>, Const::<4>), Device::Cpu);
        let y = Tensor::from_vec(b.iter().map(|&v| v as f32).collect(), (Const::<3>, Const::<4>), Device::Cpu);
        let lt = x.lt(&y).to_vec();
        let ge = x.ge(&y).to_vec();
        let chosen = x.where_cond(&x.gt(&y), &y).to_vec();
        for i in 0..12 {
            let (p, q) = (a[i] as f32, b[i] as f32);
            prop_assert_eq!(lt[i], p < q);
            prop_assert_eq!(ge[i], p >= q);
            prop_assert_eq!(chosen[i], if p > q { p } else { q });
        }
        let clamped = x.clamp(-1.0, 1.0).to_vec();
        for i in 0..12 {
            prop_assert_eq!(clamped[i], (a[i] as f32).clamp(-1.0, 1.0));
        }
    }
}

fn check_binary<E: Float>(rows: usize, cols: usize, a: &[f64], b: &[f64]) {
    let a = rounded::<E>(&a[..rows * cols]);
    let b: Vec<f64> = rounded::<E>(&b[..cols]).iter().map(|v| v + 3.5).collect();
    let b = rounded::<E>(&b);
    let x = Tensor::from_vec(
        a.iter().map(|&v| E::from_f64(v)).collect(),
        (rows, cols),
        Device::Cpu,
    );
    let y = Tensor::from_vec(
        b.iter().map(|&v| E::from_f64(v)).collect(),
        (cols,),
        Device::Cpu,
    );
    let (atol, rtol) = tolerance(E::DTYPE);
    let reference = |f: fn(f64, f64) -> f64| -> Vec<f64> {
        (0..rows * cols).map(|i| f(a[i], b[i % cols])).collect()
    };
    assert_close(&to_f64(&(&x + &y)), &reference(|p, q| p + q), atol, rtol);
    assert_close(&to_f64(&(&x - &y)), &reference(|p, q| p - q), atol, rtol);
    assert_close(&to_f64(&(&x * &y)), &reference(|p, q| p * q), atol, rtol);
    assert_close(&to_f64(&(&x / &y)), &reference(|p, q| p / q), atol, rtol);
    assert_close(&to_f64(&x.maximum(&y)), &reference(f64::max), 0.0, 0.0);
    assert_close(&to_f64(&x.minimum(&y)), &reference(f64::min), 0.0, 0.0);
    assert_close(
        &to_f64(&y.pow(&x)),
        &reference(|p, q| q.powf(p)),
        atol * 10.0,
        rtol * 10.0,
    );
    // Scalars on either side.
    let two = E::from_f64(2.0);
    assert_close(&to_f64(&(&x * two)), &reference(|p, _| p * 2.0), atol, rtol);
    assert_close(
        &to_f64(&(y.clone() - x.clone())),
        &reference(|p, q| q - p),
        atol,
        rtol,
    );
}

#[test]
fn run_time_broadcast_mismatch_names_both_shapes() {
    let x: Tensor<(usize, usize)> = Tensor::zeros((2, 3), Device::Cpu);
    let y: Tensor<(usize,)> = Tensor::zeros((4,), Device::Cpu);
    let err = x.try_binary::<rtx::op::markers::Add, _>(&y).err().unwrap();
    assert_eq!(
        err.to_string(),
        "add: shape mismatch: [2, 3] vs [4]: trailing dimensions must be equal (expand size-1 dims explicitly with broadcast_to)"
    );
}

#[test]
#[should_panic(expected = "mul: shape mismatch: [B=2, 3] vs [B=5, 3]")]
fn operators_panic_with_the_same_message() {
    let x: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::zeros((Dyn(2), Const), Device::Cpu);
    let y: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::zeros((Dyn(5), Const), Device::Cpu);
    let _ = x * y;
}

#[test]
fn views_share_storage_and_ops_do_not() {
    let x: Tensor<Rank2<2, 3>> = Tensor::ones((Const, Const), Device::Cpu);
    assert!(x.t().shares_storage_with(&x));
    assert!(x.unsqueeze::<0>().shares_storage_with(&x));
    assert!(!(x.clone() + 1.0).shares_storage_with(&x));
}

#[test]
fn casts_between_all_types() {
    let x: Tensor<Rank1<4>> = Tensor::from_array([-1.5, 0.0, 2.7, 300.0], Device::Cpu);
    assert_eq!(x.cast::<i32>().to_vec(), vec![-1, 0, 2, 300]);
    assert_eq!(x.cast::<u8>().to_vec(), vec![0, 0, 2, 255]);
    assert_eq!(x.cast::<bool>().to_vec(), vec![true, false, true, true]);
    assert_eq!(
        x.cast::<bf16>().cast::<f64>().to_vec(),
        vec![-1.5, 0.0, 2.703125, 300.0]
    );
    assert_eq!(
        x.cast::<f16>().cast::<f64>().to_vec(),
        vec![-1.5, 0.0, 2.69921875, 300.0]
    );
}
