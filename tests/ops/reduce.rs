//! Property tests of the reductions along typed axes, the full reductions, softmax and
//! log-softmax against naive f64 references: random shapes of rank 1-4, every axis,
//! contiguous, transposed and narrowed inputs, f32/f64/f16/bf16 (and i32/i64 where the op
//! exists). Plain tests cover empty axes, NaN and infinities, error messages, long axes split
//! into blocks, and bitwise determinism across thread counts.

use crate::common::{to_f64, tolerance};
use proptest::prelude::*;
use rtx::prelude::*;
use rtx::shape::ReduceAxis;

/// How a test input sits in memory.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Dense row-major.
    Contiguous,
    /// First and last axes swapped in storage (for rank 1: every other element).
    Transposed,
    /// The last axis narrowed out of a wider buffer, so rows are not adjacent.
    Narrowed,
}

/// The storage index of every logical element when axes 0 and `r - 1` are swapped.
fn transposed_index(idx: usize, dims: &[usize]) -> usize {
    let r = dims.len();
    let mut rest = idx;
    let mut coords = vec![0; r];
    for a in (0..r).rev() {
        coords[a] = rest % dims[a];
        rest /= dims[a];
    }
    coords.swap(0, r - 1);
    let mut swapped = dims.to_vec();
    swapped.swap(0, r - 1);
    coords
        .iter()
        .zip(&swapped)
        .fold(0, |acc, (&c, &d)| acc * d + c)
}

/// Shapes of run-time dims that can build a test input in any [`Mode`].
trait TestShape: Shape {
    fn build<E: Element>(x: &[E], dims: &[usize], mode: Mode) -> Tensor<Self, E>;
}

/// Storage of `dims` with the last axis widened by 2, logical data at offset 1 of each row.
fn padded<E: Element>(x: &[E], dims: &[usize]) -> (Vec<E>, Vec<usize>) {
    let last = dims[dims.len() - 1];
    let mut wide = dims.to_vec();
    *wide.last_mut().unwrap() += 2;
    let mut data = vec![E::from_f64(99.0); wide.iter().product()];
    for (r, row) in x.chunks(last).enumerate() {
        data[r * (last + 2) + 1..r * (last + 2) + 1 + last].copy_from_slice(row);
    }
    (data, wide)
}

impl TestShape for (usize,) {
    fn build<E: Element>(x: &[E], dims: &[usize], mode: Mode) -> Tensor<Self, E> {
        let dev = Device::Cpu;
        match mode {
            Mode::Contiguous => Tensor::from_vec(x.to_vec(), (dims[0],), dev),
            Mode::Transposed => {
                let data: Vec<E> = x.iter().flat_map(|&v| [v, E::from_f64(99.0)]).collect();
                let t = Tensor::from_vec(data, (dims[0], 2usize), dev);
                t.narrow::<1, usize>(0, 1).squeeze::<1>()
            }
            Mode::Narrowed => {
                let (data, wide) = padded(x, dims);
                Tensor::from_vec(data, (wide[0],), dev).narrow::<0, usize>(1, dims[0])
            }
        }
    }
}

macro_rules! test_shape {
    ($last:literal; $($i:tt),*) => {
        impl TestShape for ($(test_shape!(@usize $i),)*) {
            fn build<E: Element>(x: &[E], dims: &[usize], mode: Mode) -> Tensor<Self, E> {
                let dev = Device::Cpu;
                match mode {
                    Mode::Contiguous => Tensor::from_vec(x.to_vec(), ($(dims[$i],)*), dev),
                    Mode::Transposed => {
                        let mut sw = dims.to_vec();
                        sw.swap(0, $last);
                        let mut data = vec![E::from_f64(0.0); x.len()];
                        for (i, &v) in x.iter().enumerate() {
                            data[transposed_index(i, dims)] = v;
                        }
                        Tensor::from_vec(data, ($(sw[$i],)*), dev).transpose::<0, $last>()
                    }
                    Mode::Narrowed => {
                        let (data, wide) = padded(x, dims);
                        let t = Tensor::from_vec(data, ($(wide[$i],)*), dev);
                        t.narrow::<$last, usize>(1, dims[$last])
                    }
                }
            }
        }
    };
    (@usize $i:tt) => { usize };
}

test_shape!(1; 0, 1);
test_shape!(2; 0, 1, 2);
test_shape!(3; 0, 1, 2, 3);

/// The rows of a row-major `x` along `axis`, in the reduced row-major order.
fn rows_along(x: &[f64], dims: &[usize], axis: usize) -> Vec<Vec<f64>> {
    let outer: usize = dims[..axis].iter().product();
    let k = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let mut rows = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            rows.push((0..k).map(|kk| x[(o * k + kk) * inner + i]).collect());
        }
    }
    rows
}

/// Asserts `got[i]` is within `atol * scale[i] + rtol * |want[i]|` of `want[i]` (exact for
/// integer types, NaN for NaN, equal for infinities).
#[track_caller]
fn check(what: &str, dtype: DType, got: &[f64], want: &[f64], scale: &[f64]) {
    let (atol, rtol) = tolerance(dtype);
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol * scale[i] + rtol * w.abs()
        };
        assert!(ok, "{what} ({dtype}): element {i}: got {g}, want {w}");
    }
}

/// The reduced dims with `axis` kept as 1.
fn kept(dims: &[usize], axis: usize) -> Vec<usize> {
    let mut d = dims.to_vec();
    d[axis] = 1;
    d
}

fn first_extreme(row: &[f64], max: bool) -> i64 {
    let mut best = 0;
    for (k, &v) in row.iter().enumerate() {
        if (max && v > row[best]) || (!max && v < row[best]) {
            best = k;
        }
    }
    best as i64
}

/// Sum, prod, max, min, argmax, argmin (with keepdim) and the full reductions of one input.
fn check_num<E: Num, S: TestShape + ReduceAxis<I>, const I: usize>(
    vals: &[f64],
    dims: &[usize],
    mode: Mode,
) {
    let x: Vec<E> = vals.iter().map(|&v| E::from_f64(v)).collect();
    let xr: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
    let t = S::build(&x, dims, mode);
    assert_eq!(t.to_vec(), x, "input build ({mode:?})");
    let rows = rows_along(&xr, dims, I);
    let abs_sum: Vec<f64> = rows
        .iter()
        .map(|r| 1.0 + r.iter().map(|v| v.abs()).sum::<f64>())
        .collect();
    let dt = E::DTYPE;
    let at = format!("dims {dims:?} axis {I} {mode:?}");

    let want: Vec<f64> = rows.iter().map(|r| r.iter().sum()).collect();
    check(
        &format!("sum {at}"),
        dt,
        &to_f64(&t.sum::<I>()),
        &want,
        &abs_sum,
    );
    let sk = t.sum_keepdim::<I>();
    assert_eq!(sk.dims(), kept(dims, I), "sum_keepdim dims");
    check(
        &format!("sum_keepdim {at}"),
        dt,
        &to_f64(&sk),
        &want,
        &abs_sum,
    );

    let want: Vec<f64> = rows.iter().map(|r| r.iter().product()).collect();
    let abs_prod: Vec<f64> = rows
        .iter()
        .map(|r| 1.0 + r.iter().map(|v| v.abs()).product::<f64>())
        .collect();
    check(
        &format!("prod {at}"),
        dt,
        &to_f64(&t.prod::<I>()),
        &want,
        &abs_prod,
    );
    assert_eq!(t.prod_keepdim::<I>().dims(), kept(dims, I));

    let maxes: Vec<f64> = rows
        .iter()
        .map(|r| r.iter().cloned().fold(f64::NEG_INFINITY, f64::max))
        .collect();
    let mins: Vec<f64> = rows
        .iter()
        .map(|r| r.iter().cloned().fold(f64::INFINITY, f64::min))
        .collect();
    assert_eq!(to_f64(&t.max::<I>()), maxes, "max {at}");
    assert_eq!(to_f64(&t.min::<I>()), mins, "min {at}");
    let mk = t.try_max_keepdim::<I>().unwrap();
    assert_eq!(
        (mk.dims(), to_f64(&mk)),
        (&kept(dims, I)[..], maxes.clone()),
        "max_keepdim {at}"
    );
    let mk = t.try_min_keepdim::<I>().unwrap();
    assert_eq!(
        (mk.dims(), to_f64(&mk)),
        (&kept(dims, I)[..], mins.clone()),
        "min_keepdim {at}"
    );

    let amax: Vec<i64> = rows.iter().map(|r| first_extreme(r, true)).collect();
    let amin: Vec<i64> = rows.iter().map(|r| first_extreme(r, false)).collect();
    assert_eq!(t.argmax::<I>().to_vec(), amax, "argmax {at}");
    assert_eq!(t.argmin::<I>().to_vec(), amin, "argmin {at}");
    let ak = t.argmax_keepdim::<I>();
    assert_eq!(
        (ak.dims(), ak.to_vec()),
        (&kept(dims, I)[..], amax),
        "argmax_keepdim {at}"
    );
    let ak = t.argmin_keepdim::<I>();
    assert_eq!(
        (ak.dims(), ak.to_vec()),
        (&kept(dims, I)[..], amin),
        "argmin_keepdim {at}"
    );

    let total: f64 = xr.iter().sum();
    let scale = 1.0 + xr.iter().map(|v| v.abs()).sum::<f64>();
    check(
        &format!("sum_all {at}"),
        dt,
        &[t.sum_all().item().to_f64()],
        &[total],
        &[scale],
    );
    let big = xr.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let small = xr.iter().cloned().fold(f64::INFINITY, f64::min);
    assert_eq!(t.max_all().item().to_f64(), big, "max_all {at}");
    assert_eq!(t.min_all().item().to_f64(), small, "min_all {at}");
}

/// Mean, var, std (with keepdim), logsumexp, softmax, log-softmax and mean_all of one input.
fn check_float<E: Float, S: TestShape + ReduceAxis<I>, const I: usize>(
    vals: &[f64],
    dims: &[usize],
    mode: Mode,
) {
    let x: Vec<E> = vals.iter().map(|&v| E::from_f64(v)).collect();
    let xr: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
    let t = S::build(&x, dims, mode);
    let rows = rows_along(&xr, dims, I);
    let dt = E::DTYPE;
    let at = format!("dims {dims:?} axis {I} {mode:?}");
    let k = dims[I] as f64;

    let means: Vec<f64> = rows.iter().map(|r| r.iter().sum::<f64>() / k).collect();
    let mean_scale: Vec<f64> = rows
        .iter()
        .map(|r| 1.0 + r.iter().map(|v| v.abs()).sum::<f64>() / k)
        .collect();
    check(
        &format!("mean {at}"),
        dt,
        &to_f64(&t.mean::<I>()),
        &means,
        &mean_scale,
    );
    let mk = t.mean_keepdim::<I>();
    assert_eq!(mk.dims(), kept(dims, I));
    check(
        &format!("mean_keepdim {at}"),
        dt,
        &to_f64(&mk),
        &means,
        &mean_scale,
    );

    let sq_scale: Vec<f64> = rows
        .iter()
        .map(|r| 1.0 + r.iter().map(|v| v * v).sum::<f64>() / k)
        .collect();
    for correction in [0usize, 1] {
        let vars: Vec<f64> = rows
            .iter()
            .zip(&means)
            .map(|(r, mu)| {
                r.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / (k - correction as f64)
            })
            .map(|v| if v.is_infinite() { f64::NAN } else { v })
            .collect();
        let stds: Vec<f64> = vars.iter().map(|v| v.sqrt()).collect();
        let std_scale: Vec<f64> = sq_scale.iter().map(|s| s.sqrt()).collect();
        check(
            &format!("var({correction}) {at}"),
            dt,
            &to_f64(&t.var::<I>(correction)),
            &vars,
            &sq_scale,
        );
        check(
            &format!("std({correction}) {at}"),
            dt,
            &to_f64(&t.std::<I>(correction)),
            &stds,
            &std_scale,
        );
        let vk = t.var_keepdim::<I>(correction);
        assert_eq!(vk.dims(), kept(dims, I));
        check(
            &format!("var_keepdim {at}"),
            dt,
            &to_f64(&vk),
            &vars,
            &sq_scale,
        );
        let sk = t.std_keepdim::<I>(correction);
        assert_eq!(sk.dims(), kept(dims, I));
        check(
            &format!("std_keepdim {at}"),
            dt,
            &to_f64(&sk),
            &stds,
            &std_scale,
        );
    }

    let maxes: Vec<f64> = rows
        .iter()
        .map(|r| r.iter().cloned().fold(f64::NEG_INFINITY, f64::max))
        .collect();
    let lse: Vec<f64> = rows
        .iter()
        .zip(&maxes)
        .map(|(r, m)| m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln())
        .collect();
    let lse_scale: Vec<f64> = maxes.iter().map(|m| 1.0 + m.abs()).collect();
    check(
        &format!("logsumexp {at}"),
        dt,
        &to_f64(&t.logsumexp::<I>()),
        &lse,
        &lse_scale,
    );
    let lk = t.logsumexp_keepdim::<I>();
    assert_eq!(lk.dims(), kept(dims, I));
    check(
        &format!("logsumexp_keepdim {at}"),
        dt,
        &to_f64(&lk),
        &lse,
        &lse_scale,
    );

    // Softmax references in the input's logical order.
    let outer: usize = dims[..I].iter().product();
    let inner: usize = dims[I + 1..].iter().product();
    let row_of = |p: usize| p / (dims[I] * inner) * inner + p % inner;
    debug_assert_eq!(rows.len(), outer * inner);
    let soft: Vec<f64> = xr
        .iter()
        .enumerate()
        .map(|(p, v)| (v - lse[row_of(p)]).exp())
        .collect();
    let logsoft: Vec<f64> = xr
        .iter()
        .enumerate()
        .map(|(p, v)| v - lse[row_of(p)])
        .collect();
    let log_scale: Vec<f64> = xr
        .iter()
        .enumerate()
        .map(|(p, v)| 1.0 + (v - maxes[row_of(p)]).abs())
        .collect();
    let sm = t.softmax::<I>();
    assert_eq!(sm.dims(), dims);
    check(
        &format!("softmax {at}"),
        dt,
        &to_f64(&sm),
        &soft,
        &vec![1.0; soft.len()],
    );
    check(
        &format!("log_softmax {at}"),
        dt,
        &to_f64(&t.log_softmax::<I>()),
        &logsoft,
        &log_scale,
    );

    let n = xr.len() as f64;
    let mean_all = xr.iter().sum::<f64>() / n;
    let scale = 1.0 + xr.iter().map(|v| v.abs()).sum::<f64>() / n;
    check(
        &format!("mean_all {at}"),
        dt,
        &[t.mean_all().item().to_f64()],
        &[mean_all],
        &[scale],
    );
}

/// Calls `$f::<$e, S, I>(args)` for the tuple shape of `$rank` usize dims and axis `$axis`.
macro_rules! dispatch {
    ($f:ident::<$e:ty>, $rank:expr, $axis:expr, $($arg:expr),*) => {
        match ($rank, $axis) {
            (1, 0) => $f::<$e, (usize,), 0>($($arg),*),
            (2, 0) => $f::<$e, (usize, usize), 0>($($arg),*),
            (2, 1) => $f::<$e, (usize, usize), 1>($($arg),*),
            (3, 0) => $f::<$e, (usize, usize, usize), 0>($($arg),*),
            (3, 1) => $f::<$e, (usize, usize, usize), 1>($($arg),*),
            (3, 2) => $f::<$e, (usize, usize, usize), 2>($($arg),*),
            (4, 0) => $f::<$e, (usize, usize, usize, usize), 0>($($arg),*),
            (4, 1) => $f::<$e, (usize, usize, usize, usize), 1>($($arg),*),
            (4, 2) => $f::<$e, (usize, usize, usize, usize), 2>($($arg),*),
            (4, 3) => $f::<$e, (usize, usize, usize, usize), 3>($($arg),*),
            other => panic!("no dispatch for rank and axis {other:?}"),
        }
    };
}

/// Random dims (rank 1-4, sizes 1-5), an axis, a layout mode, values in [-4, 4) and whether to
/// round them to halves (which makes ties for max and argmax likely).
fn case() -> impl Strategy<Value = (Vec<usize>, usize, Mode, Vec<f64>)> {
    (1usize..=4)
        .prop_flat_map(|rank| {
            (
                prop::collection::vec(1usize..=5, rank),
                0..rank,
                prop_oneof![
                    Just(Mode::Contiguous),
                    Just(Mode::Transposed),
                    Just(Mode::Narrowed)
                ],
                prop::collection::vec(-4.0f64..4.0, 625),
                any::<bool>(),
            )
        })
        .prop_map(|(dims, axis, mode, mut vals, halves)| {
            vals.truncate(dims.iter().product());
            if halves {
                vals.iter_mut().for_each(|v| *v = (*v * 2.0).round() / 2.0);
            }
            (dims, axis, mode, vals)
        })
}

proptest! {
    #[test]
    fn num_reductions_match_reference((dims, axis, mode, vals) in case()) {
        let r = dims.len();
        dispatch!(check_num::<f32>, r, axis, &vals, &dims, mode);
        dispatch!(check_num::<f64>, r, axis, &vals, &dims, mode);
        dispatch!(check_num::<f16>, r, axis, &vals, &dims, mode);
        dispatch!(check_num::<bf16>, r, axis, &vals, &dims, mode);
        dispatch!(check_num::<i32>, r, axis, &vals, &dims, mode);
        dispatch!(check_num::<i64>, r, axis, &vals, &dims, mode);
    }

    #[test]
    fn float_reductions_match_reference((dims, axis, mode, vals) in case()) {
        let r = dims.len();
        dispatch!(check_float::<f32>, r, axis, &vals, &dims, mode);
        dispatch!(check_float::<f64>, r, axis, &vals, &dims, mode);
        dispatch!(check_float::<f16>, r, axis, &vals, &dims, mode);
        dispatch!(check_float::<bf16>, r, axis, &vals, &dims, mode);
    }
}

/// The message of an expected error.
#[track_caller]
fn err<T>(r: Result<T>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error"),
    }
}

#[test]
fn empty_axes_give_identities_or_errors() {
    let x: Tensor<(usize, usize)> = Tensor::zeros((2, 0), Device::Cpu);
    assert_eq!(x.sum::<1>().to_vec(), vec![0.0, 0.0]);
    assert_eq!(x.prod::<1>().to_vec(), vec![1.0, 1.0]);
    assert!(x.mean::<1>().to_vec().iter().all(|v| v.is_nan()));
    assert_eq!(x.logsumexp::<1>().to_vec(), vec![f32::NEG_INFINITY; 2]);
    assert_eq!(x.sum::<0>().dims(), &[0]);
    assert_eq!(x.max::<0>().dims(), &[0]);
    assert_eq!(x.softmax::<1>().dims(), &[2, 0]);
    assert_eq!(x.sum_all().item(), 0.0);
    assert_eq!(x.prod_all().item(), 1.0);
    assert_eq!(
        err(x.try_max::<1>()),
        "max: cannot reduce axis 1 of shape [2, 0]: the axis is empty"
    );
    assert_eq!(
        err(x.try_min_keepdim::<1>()),
        "min: cannot reduce axis 1 of shape [2, 0]: the axis is empty"
    );
    assert_eq!(
        err(x.try_argmax::<1>()),
        "argmax: cannot reduce axis 1 of shape [2, 0]: the axis is empty"
    );
    assert_eq!(
        err(x.try_argmin_keepdim::<1>()),
        "argmin: cannot reduce axis 1 of shape [2, 0]: the axis is empty"
    );
    assert_eq!(
        err(x.try_max_all()),
        "max_all: cannot reduce a tensor of shape [2, 0]: it has no elements"
    );
    assert_eq!(
        err(x.try_min_all()),
        "min_all: cannot reduce a tensor of shape [2, 0]: it has no elements"
    );
    let named: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::zeros((Dyn(0), Const), Device::Cpu);
    assert_eq!(
        err(named.try_argmax::<0>()),
        "argmax: cannot reduce axis 0 of shape [B=0, 3]: the axis is empty"
    );
}

#[test]
#[should_panic(expected = "max: cannot reduce axis 0 of shape [0]: the axis is empty")]
fn max_of_an_empty_axis_panics_with_the_message() {
    let x: Tensor<(usize,)> = Tensor::zeros((0,), Device::Cpu);
    let _ = x.max::<0>();
}

#[test]
fn nan_propagates_and_wins_the_arg_ops() {
    let x: Tensor<Rank2<2, 4>> = Tensor::from_array(
        [[1.0, f32::NAN, 5.0, f32::NAN], [3.0, 1.0, 3.0, 1.0]],
        Device::Cpu,
    );
    assert!(x.max::<1>().to_vec()[0].is_nan());
    assert!(x.min::<1>().to_vec()[0].is_nan());
    assert_eq!(x.argmax::<1>().to_vec(), vec![1, 0]);
    assert_eq!(x.argmin::<1>().to_vec(), vec![1, 1]);
    assert!(x.max_all().item().is_nan());
    assert!(x.sum::<1>().to_vec()[0].is_nan());
    let h = x.cast::<f16>();
    assert_eq!(h.argmax::<1>().to_vec(), vec![1, 0]);
    assert!(h.max::<1>().to_vec()[0].is_nan());
}

#[test]
fn infinities_in_logsumexp_and_softmax() {
    let ninf = f32::NEG_INFINITY;
    let x: Tensor<Rank2<3, 3>> = Tensor::from_array(
        [
            [ninf, ninf, ninf],
            [f32::INFINITY, 1.0, 2.0],
            [ninf, 0.0, ninf],
        ],
        Device::Cpu,
    );
    let lse = x.logsumexp::<1>().to_vec();
    assert_eq!(lse, vec![ninf, f32::INFINITY, 0.0]);
    // The same along a strided axis, where single steps rescale online.
    let xt = x.t().contiguous();
    assert_eq!(xt.logsumexp::<0>().to_vec(), lse);
    let sm = x.softmax::<1>().to_vec();
    assert_eq!(&sm[6..], &[0.0, 1.0, 0.0]);
    assert_eq!(xt.softmax::<0>().t().to_vec()[6..], sm[6..]);
    let ls = x.log_softmax::<1>().to_vec();
    assert_eq!(&ls[6..], &[ninf, 0.0, ninf]);
}

#[test]
fn half_sums_accumulate_in_f32() {
    // f16 counts exactly only to 2048 in steps of one; an f16 accumulator would stop there.
    let x: Tensor<(usize,), f16> = Tensor::ones((4096,), Device::Cpu);
    assert_eq!(x.sum::<0>().item().to_f64(), 4096.0);
    assert_eq!(x.sum_all().item().to_f64(), 4096.0);
    assert_eq!(x.mean::<0>().item().to_f64(), 1.0);
    let big: Tensor<(usize,), f16> = Tensor::full((10_000,), f16::from_f32(100.0), Device::Cpu);
    // The sum (1e6) overflows f16, but the mean is computed before rounding.
    assert_eq!(big.mean_all().item().to_f64(), 100.0);
    assert_eq!(big.var::<0>(1).item().to_f64(), 0.0);
}

#[test]
fn integer_sums_wrap() {
    let x: Tensor<Rank1<2>, i32> = Tensor::from_array([i32::MAX, 1], Device::Cpu);
    assert_eq!(x.sum::<0>().item(), i32::MIN);
    let y: Tensor<Rank1<3>, u8> = Tensor::from_array([200, 100, 3], Device::Cpu);
    assert_eq!(y.sum_all().item(), 47);
    assert_eq!(y.argmax::<0>().item(), 0);
}

#[test]
fn variance_is_not_lost_to_a_large_offset() {
    // A one-pass E[x^2] - E[x]^2 in f32 loses everything here; two passes keep it.
    let x: Tensor<Rank1<4>> =
        Tensor::from_array([1e4 + 1.0, 1e4 + 2.0, 1e4 + 3.0, 1e4 + 4.0], Device::Cpu);
    assert_eq!(x.var::<0>(1).item(), 5.0 / 3.0);
    assert_eq!(x.std::<0>(0).item(), 1.25f32.sqrt());
}

/// A deterministic pseudo-random sequence in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn long_axes_are_split_into_blocks_and_still_match() {
    // Longer than one block (2^14) so the blocked, parallel row loop runs.
    let k = 3 * (1 << 14) + 123;
    let mut vals = noise(2 * k, 7);
    vals[k + 20_000] = 5.0; // a maximum in a later block of row 1...
    vals[k + 40_000] = 5.0; // ...tied with one in an even later block
    let x: Tensor<(usize, usize)> = Tensor::from_vec(
        vals.iter().map(|&v| v as f32).collect(),
        (2, k),
        Device::Cpu,
    );
    let xr: Vec<f64> = x.to_vec().iter().map(|&v| v as f64).collect();
    let rows = [&xr[..k], &xr[k..]];
    let sums: Vec<f64> = rows.iter().map(|r| r.iter().sum()).collect();
    check(
        "long sum",
        DType::F32,
        &to_f64(&x.sum::<1>()),
        &sums,
        &[k as f64; 2],
    );
    assert_eq!(x.argmax::<1>().to_vec()[1], 20_000);
    assert_eq!(x.max::<1>().to_vec()[1], 5.0);
    let lse: Vec<f64> = rows
        .iter()
        .map(|r| {
            let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
        })
        .collect();
    check(
        "long logsumexp",
        DType::F32,
        &to_f64(&x.logsumexp::<1>()),
        &lse,
        &[10.0; 2],
    );
    let vars: Vec<f64> = rows
        .iter()
        .zip(&sums)
        .map(|(r, s)| {
            let mu = s / k as f64;
            r.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / (k - 1) as f64
        })
        .collect();
    check(
        "long var",
        DType::F32,
        &to_f64(&x.var::<1>(1)),
        &vars,
        &[10.0; 2],
    );
    let sm = x.softmax::<1>().sum::<1>().to_vec();
    assert!(
        sm.iter().all(|s| (s - 1.0).abs() < 1e-4),
        "softmax rows sum to {sm:?}"
    );
}

#[test]
fn many_outputs_along_a_strided_axis() {
    // Axis 0 of a row-major matrix: the tile loop, with runs longer than one tile.
    let (r, c) = (7, 200);
    let vals = noise(r * c, 3);
    let x: Tensor<(usize, usize), f64> = Tensor::from_vec(vals.clone(), (r, c), Device::Cpu);
    let cols: Vec<Vec<f64>> = (0..c)
        .map(|j| (0..r).map(|i| vals[i * c + j]).collect())
        .collect();
    let sums: Vec<f64> = cols.iter().map(|col| col.iter().sum()).collect();
    check(
        "column sums",
        DType::F64,
        &x.sum::<0>().to_vec(),
        &sums,
        &[10.0; 200],
    );
    let amax: Vec<i64> = cols.iter().map(|col| first_extreme(col, true)).collect();
    assert_eq!(x.argmax::<0>().to_vec(), amax);
    assert_eq!(x.t().contiguous().argmax::<1>().to_vec(), amax);
    let sm = x.softmax::<0>();
    let sm_t = x.t().contiguous().softmax::<1>().t().contiguous();
    check(
        "softmax axis 0",
        DType::F64,
        &sm.to_vec(),
        &sm_t.to_vec(),
        &[1.0; 1400],
    );
}

#[test]
fn sums_are_bitwise_equal_on_any_number_of_threads() {
    let n = 1 << 22;
    let vals: Vec<f32> = noise(n, 11).into_iter().map(|v| v as f32).collect();
    let x: Tensor<(usize,)> = Tensor::from_vec(vals, (n,), Device::Cpu);
    let m: Tensor<(usize, usize)> = x.reshape((4, n / 4));
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            (
                x.sum_all().item().to_bits(),
                m.sum::<1>()
                    .to_vec()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
                x.mean_all().item().to_bits(),
                m.logsumexp::<1>()
                    .to_vec()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
            )
        })
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(3));
    let exact: f64 = x.to_vec().iter().map(|&v| v as f64).sum();
    assert!(
        (f32::from_bits(one.0) as f64 - exact).abs() < 1e-3,
        "sum_all {} vs {exact}",
        f32::from_bits(one.0)
    );
}
