//! Ops between a tensor and a plain scalar (`&x * 2.0`, `2.0 - &x`, `x.maximum(0.0)`,
//! `x.pow(2.0)`, `x.gt(0.5)`): the scalar is a kernel argument, and every result and every
//! gradient is bit for bit what the same op gives against a tensor of shape `()` holding the
//! scalar (the general broadcasting path), in one dispatch per op.

use rtx::op::BinaryOpT;
use rtx::op::markers::{Add, Div, Max, Min, Mul, Pow, Sub};
use rtx::prelude::*;

/// Inputs with the specials of `E`, and values equal to each scalar (ties of max and min).
fn inputs<E: Num>(scalars: &[f64], positive: bool) -> Vec<E> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.75,
        3.0,
        7.0,
        -100.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    v.extend_from_slice(scalars);
    v.extend((0..40).map(|i| i as f64 * 0.37 - 7.0));
    if positive {
        v = v.into_iter().map(|x| x.abs() + 0.25).collect();
    }
    v.into_iter().map(E::from_f64).collect()
}

/// Bit patterns through f64, so NaN equals NaN and zeros keep their sign.
fn bits<S: Shape, E: Element>(t: &Tensor<S, E>) -> Vec<u64> {
    t.to_vec()
        .into_iter()
        .map(|x| x.to_f64().to_bits())
        .collect()
}

fn ok<T>(r: rtx::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// `x op c` and `c op x` against the tensor path, on a dense and a transposed input.
fn forward_case<O: BinaryOpT, E: Num>(scalars: &[f64], positive: bool) {
    let mut v = inputs::<E>(scalars, positive);
    v.truncate(v.len() / 2 * 2);
    let n = v.len();
    let x = Tensor::from_vec(v.clone(), (n,), Device::Cpu);
    let xt = Tensor::from_vec(v, (2usize, n / 2), Device::Cpu).t();
    for &c in scalars {
        let c = E::from_f64(c);
        let ct: Tensor<(), E> = Tensor::full((), c, Device::Cpu);
        for left in [false, true] {
            let what = format!("{:?} {:?} c = {c:?} left {left}", O::OP, E::DTYPE);
            let got = ok(x.try_binary_scalar::<O>(c, left));
            let want = if left {
                ok(ct.try_binary::<O, _>(&x))
            } else {
                ok(x.try_binary::<O, _>(&ct))
            };
            assert_eq!(bits(&got), bits(&want), "{what}");
            let got = ok(xt.try_binary_scalar::<O>(c, left));
            let want = if left {
                ok(ct.try_binary::<O, _>(&xt))
            } else {
                ok(xt.try_binary::<O, _>(&ct))
            };
            assert_eq!(bits(&got), bits(&want), "{what} transposed");
        }
        // The `Operand` path: a plain scalar on the right goes through `binary_scalar`.
        let by_operand = ok(x.try_binary::<O, E>(c));
        assert_eq!(bits(&by_operand), bits(&ok(x.try_binary::<O, _>(&ct))));
    }
}

fn every_op<E: Num>(pow: bool) {
    let scalars = [2.0, -0.5, 0.0, -0.0, 3.0, f64::NAN, f64::INFINITY];
    forward_case::<Add, E>(&scalars, false);
    forward_case::<Sub, E>(&scalars, false);
    forward_case::<Mul, E>(&scalars, false);
    forward_case::<Div, E>(&scalars, false);
    forward_case::<Max, E>(&scalars, false);
    forward_case::<Min, E>(&scalars, false);
    if pow {
        forward_case::<Pow, E>(&[2.0, 0.5, -1.5, 3.0, 0.0], true);
    }
}

#[test]
fn scalar_ops_equal_the_tensor_path_bit_for_bit() {
    every_op::<f32>(true);
    every_op::<f64>(true);
    every_op::<f16>(true);
    every_op::<bf16>(true);
    every_op::<i32>(true);
    every_op::<u8>(false);
}

#[test]
fn operators_with_scalars_on_either_side_take_the_scalar_path() {
    let x: Tensor<Rank2<2, 3>> =
        Tensor::from_array([[1.0, -2.0, 3.5], [0.0, 4.0, -0.25]], Device::Cpu);
    let c: Tensor<(), f32> = Tensor::full((), 2.0, Device::Cpu);
    let pairs = [
        (&x + 2.0, &x + &c),
        (&x - 2.0, &x - &c),
        (&x * 2.0, &x * &c),
        (&x / 2.0, &x / &c),
        (2.0 + &x, &c + &x),
        (2.0 - &x, &c - &x),
        (2.0 * &x, &c * &x),
        (2.0 / &x, &c / &x),
        (2.0 - x.clone(), &c - &x),
        (x.maximum(2.0), x.maximum(&c)),
        (x.minimum(2.0), x.minimum(&c)),
        (x.abs().pow(2.0), x.abs().pow(&c)),
    ];
    for (i, (got, want)) in pairs.iter().enumerate() {
        assert_eq!(bits(got), bits(want), "pair {i}");
    }
    assert_eq!(
        x.gt(0.5).to_vec(),
        x.gt(&Tensor::full((), 0.5, Device::Cpu)).to_vec()
    );
    assert_eq!(
        x.le(-0.25).to_vec(),
        [false, true, false, false, false, true]
    );
}

/// The tape's gradient of `x op c` (or `c op x`) for `x` against that of the tensor path.
fn gradient_case<O: BinaryOpT, E: Float>(c: f64, left: bool, positive: bool) {
    let v = inputs::<E>(&[c], positive)
        .into_iter()
        .filter(|x| x.to_f64().is_finite())
        .collect::<Vec<_>>();
    let n = v.len();
    let w: Tensor<(usize,), E> = Tensor::from_vec(
        (0..n).map(|i| E::from_f64(i as f64 * 0.1 - 1.3)).collect(),
        (n,),
        Device::Cpu,
    );
    let c = E::from_f64(c);
    let ct: Tensor<(), E> = Tensor::full((), c, Device::Cpu);
    type V<E> = Tensor<(usize,), E>;
    let grad = |f: &dyn Fn(&V<E>) -> V<E>| {
        let x = Tensor::from_vec(v.clone(), (n,), Device::Cpu).requires_grad();
        let g = (f(&x) * &w).sum_all().backward();
        g.get(&x).unwrap_or_else(|| panic!("a gradient for x"))
    };
    let got = grad(&|x| ok(x.try_binary_scalar::<O>(c, left)));
    let want = grad(&|x| {
        if left {
            ok(ct.try_binary::<O, _>(x))
        } else {
            ok(x.try_binary::<O, _>(&ct))
        }
    });
    assert_eq!(
        bits(&got),
        bits(&want),
        "{:?} {:?} c = {c:?} left {left}",
        O::OP,
        E::DTYPE
    );
}

fn every_gradient<E: Float>() {
    for c in [2.0, -0.5, 0.0, 3.0] {
        for left in [false, true] {
            gradient_case::<Add, E>(c, left, false);
            gradient_case::<Sub, E>(c, left, false);
            gradient_case::<Mul, E>(c, left, false);
            gradient_case::<Div, E>(c, left, false);
            // The inputs hold `c` itself, so ties are checked too.
            gradient_case::<Max, E>(c, left, false);
            gradient_case::<Min, E>(c, left, false);
        }
    }
    for c in [2.0, 0.5, -1.5, 3.0] {
        gradient_case::<Pow, E>(c, false, true);
    }
    for c in [2.0, 0.5, 3.0] {
        gradient_case::<Pow, E>(c, true, true);
    }
}

#[test]
fn scalar_op_gradients_equal_the_tensor_path_bit_for_bit() {
    every_gradient::<f32>();
    every_gradient::<f64>();
    every_gradient::<f16>();
    every_gradient::<bf16>();
}

/// Dispatches `f` makes on the CPU.
fn dispatches<T>(f: impl FnOnce() -> T) -> u64 {
    let before = rtx::launch_count(Device::Cpu);
    let _ = f();
    rtx::launch_count(Device::Cpu) - before
}

#[test]
fn each_scalar_op_is_one_dispatch() {
    let x: Tensor<(usize,)> = Tensor::full((1000,), 0.5, Device::Cpu);
    assert_eq!(dispatches(|| &x * 2.0), 1);
    assert_eq!(dispatches(|| 1.0 - &x), 1);
    assert_eq!(dispatches(|| x.maximum(0.0)), 1);
    assert_eq!(dispatches(|| x.pow(2.0)), 1);
    assert_eq!(dispatches(|| x.gt(0.0)), 1);
    assert_eq!(dispatches(|| (&x * 1.5 + 0.25).gelu_tanh()), 3);
    // Backward: the scalar gets no gradient, so `x * c` costs one product (`g * c`) on top
    // of what the rest of the graph costs.
    let base = dispatches(|| x.clone().requires_grad().sum_all().backward());
    let scaled = dispatches(|| (x.clone().requires_grad() * 2.0).sum_all().backward());
    assert_eq!(scaled - base, 2, "the forward product and its backward");
}
