//! Elementwise ops on every device: unary, binary with broadcasting, ops with a plain scalar
//! on either side, comparisons, `where`, casts, clamp, affine maps and strided copies.

use super::*;
use rtx::op::markers::{Add, Div, Gt, Max, Min, Mul, Pow, Sub};
use rtx::op::{BinaryOpT, UnaryOp};
use rtx_backends::Layout;

/// Unary op `op` of `t`: every op of the registry, with no list of its own here.
pub(super) fn apply<S: Shape, E: Float>(op: UnaryOp, t: &Tensor<S, E>) -> Tensor<S, E> {
    t.try_unary_op(op).unwrap()
}

fn unary_case<E: Float>() {
    // 37 x 29 = 1073 elements: vector loads and a scalar tail on the contiguous path.
    let (r, c) = (37usize, 29usize);
    for op in UnaryOp::ALL {
        let name = op.name();
        // Positive inputs where a log or a root needs them; both signs elsewhere.
        let (lo, hi) = match name {
            "log" | "sqrt" | "rsqrt" | "recip" => (0.1, 4.0),
            "log1p" => (-0.5, 4.0),
            _ => (-4.0, 4.0),
        };
        let data = values::<E>(r * c, 11, lo, hi);
        on_every_device::<E>(name, |dev| {
            let x = Tensor::from_vec(data.clone(), (r, c), dev);
            vec![
                (format!("{name} contiguous"), f64s(&apply(op, &x))),
                (format!("{name} transposed"), f64s(&apply(op, &x.t()))),
            ]
        });
    }
}

#[test]
fn unary_ops_match_the_cpu() {
    every_float!(unary_case);
}

fn binary_case<E: Float>() {
    let (r, c) = (19usize, 53usize);
    let a = values::<E>(r * c, 1, -3.0, 3.0);
    let b = values::<E>(r * c, 2, 0.5, 3.0);
    let row = values::<E>(c, 3, 0.5, 3.0);
    on_every_device::<E>("binary", |dev| {
        let x = Tensor::from_vec(a.clone(), (r, c), dev);
        let y = Tensor::from_vec(b.clone(), (r, c), dev);
        let v = Tensor::from_vec(row.clone(), (c,), dev);
        let two = E::from_f64(2.0);
        let base = y.clone();
        vec![
            ("add".into(), f64s(&(&x + &y))),
            ("sub".into(), f64s(&(&x - &y))),
            ("mul".into(), f64s(&(&x * &y))),
            ("div".into(), f64s(&(&x / &y))),
            ("maximum".into(), f64s(&x.maximum(&y))),
            ("minimum".into(), f64s(&x.minimum(&y))),
            ("pow".into(), f64s(&base.pow(&x))),
            ("add row".into(), f64s(&(&x + &v))),
            ("div row".into(), f64s(&(&x / &v))),
            ("maximum row".into(), f64s(&x.maximum(&v))),
            ("sub transposed".into(), f64s(&(&x.t() - &y.t()))),
            ("mul scalar".into(), f64s(&(&x * two))),
            ("add scalar".into(), f64s(&(&x + two))),
        ]
    });
}

#[test]
fn binary_ops_broadcast_and_match_the_cpu() {
    every_float!(binary_case);
}

/// `x op c` and `c op x` for every binary op, through the scalar path, on a dense and a
/// transposed input; on each device they must be the broadcast path's bits exactly (the same
/// scalar function of the same values), each costing one dispatch.
fn scalar_ops<E: Num>(dev: Device, x: &Matrix<E>, c: E, with_pow: bool) -> Exact {
    fn one<O: BinaryOpT, E: Num>(dev: Device, x: &Matrix<E>, c: E, out: &mut Exact) {
        let ct: Tensor<(), E> = Tensor::full((), c, dev);
        for left in [false, true] {
            let name = format!("{:?} left {left} {:?}", O::OP, x.dims());
            let before = rtx::launch_count(dev);
            let got = x
                .try_binary_scalar::<O>(c, left)
                .unwrap_or_else(|e| panic!("{name} on {dev}: {e}"));
            assert_eq!(rtx::launch_count(dev) - before, 1, "{name} on {dev}");
            let want = if left {
                ct.try_binary::<O, _>(x)
            } else {
                x.try_binary::<O, _>(&ct)
            }
            .unwrap_or_else(|e| panic!("{name} on {dev}: {e}"));
            assert_eq!(
                bits(&got),
                bits(&want),
                "{name} on {dev}: scalar against tensor path"
            );
            out.push((name, bits(&got)));
        }
    }
    let mut out = Vec::new();
    one::<Add, E>(dev, x, c, &mut out);
    one::<Sub, E>(dev, x, c, &mut out);
    one::<Mul, E>(dev, x, c, &mut out);
    one::<Div, E>(dev, x, c, &mut out);
    one::<Max, E>(dev, x, c, &mut out);
    one::<Min, E>(dev, x, c, &mut out);
    if with_pow {
        one::<Pow, E>(dev, x, c, &mut out);
    }
    let gt = x.gt(c);
    assert_eq!(
        bits(&gt),
        bits(&x.gt(&Tensor::full((), c, dev))),
        "gt on {dev}"
    );
    out.push(("gt".into(), bits(&gt)));
    out
}

/// A matrix with run-time sizes, as the scalar cases use.
type Matrix<E> = Tensor<(usize, usize), E>;

/// The outputs of [`scalar_ops`] as f64 values, for a comparison within float tolerance.
fn as_values(v: Exact) -> Outputs {
    v.into_iter()
        .map(|(n, b)| (n, b.into_iter().map(f64::from_bits).collect()))
        .collect()
}

fn scalar_case<E: Float>() {
    // 37 x 29 = 1073 elements: vector loads and a scalar tail; positive for `pow`.
    let (r, c) = (37usize, 29usize);
    let mut data = values::<E>(r * c, 12, 0.1, 3.0);
    // Ties with the scalar, and the specials.
    data[..4].copy_from_slice(&[1.5, f64::NAN, f64::INFINITY, 0.0].map(E::from_f64));
    let signed = values::<E>(r * c, 13, -3.0, 3.0);
    on_every_device::<E>("scalar ops", |dev| {
        let x = Tensor::from_vec(data.clone(), (r, c), dev);
        let s = Tensor::from_vec(signed.clone(), (r, c), dev);
        let k = E::from_f64(1.5);
        let mut out = scalar_ops(dev, &x, k, true);
        out.extend(scalar_ops(dev, &x.t(), k, true));
        out.extend(scalar_ops(dev, &s, E::from_f64(-0.5), false));
        let mut out = as_values(out);
        out.extend(scalar_grads(&x, k));
        out
    });
}

/// The tape's gradient of `x op c` and `c op x` for every binary op (the scalar rules, with
/// ties of max and min where `x` holds `c`).
fn scalar_grads<E: Float>(x: &Matrix<E>, c: E) -> Outputs {
    fn one<O: BinaryOpT, E: Float>(x: &Matrix<E>, c: E, out: &mut Outputs) {
        let w = x.cos();
        for left in [false, true] {
            let leaf = x.clone().requires_grad();
            let y = leaf
                .try_binary_scalar::<O>(c, left)
                .unwrap_or_else(|e| panic!("{e}"));
            let grads = (y * &w).sum_all().backward();
            let g = grads.get(&leaf).unwrap_or_else(|| panic!("a gradient"));
            out.push((format!("d {:?} left {left}", O::OP), f64s(&g)));
        }
    }
    let mut out = Vec::new();
    one::<Add, E>(x, c, &mut out);
    one::<Sub, E>(x, c, &mut out);
    one::<Mul, E>(x, c, &mut out);
    one::<Div, E>(x, c, &mut out);
    one::<Max, E>(x, c, &mut out);
    one::<Min, E>(x, c, &mut out);
    one::<Pow, E>(x, c, &mut out);
    out
}

#[test]
fn scalar_ops_on_either_side_match_the_tensor_path_and_the_cpu() {
    every_float!(scalar_case);
}

fn integer_scalar_case<E: Num>() {
    let (r, c) = (13usize, 31usize);
    let data: Vec<E> = values::<f64>(r * c, 14, -200.0, 200.0)
        .into_iter()
        .map(|v| E::from_f64(v.floor()))
        .chain([E::LOWEST, E::HIGHEST, E::ZERO])
        .skip(3)
        .collect();
    same_on_every_device::<E>("integer scalar ops", |dev| {
        let x = Tensor::from_vec(data.clone(), (r, c), dev);
        let mut out = scalar_ops(dev, &x, E::from_f64(7.0), false);
        out.extend(scalar_ops(dev, &x.t(), E::ZERO, false));
        out
    });
}

#[test]
fn integer_scalar_ops_match_the_tensor_path_and_the_cpu_exactly() {
    integer_scalar_case::<i32>();
    integer_scalar_case::<i64>();
    integer_scalar_case::<u8>();
}

/// Ops with a plain scalar on a GPU upload nothing: after a warm-up (which compiles their
/// kernels), they can be captured in a CUDA graph, where an upload would be an error, and a
/// replay gives the eager results.
#[test]
fn scalar_ops_upload_nothing_and_can_be_captured() {
    if let Err(why) = gpus() {
        println!("scalar ops in a captured graph: skipped: no CUDA device: {why}");
        return;
    }
    let dev = Device::Cuda(0);
    let n = 4099usize;
    let x = Tensor::from_vec(values::<f32>(n, 15, -3.0, 3.0), (n,), dev);
    let p = Tensor::from_vec(values::<f32>(n, 16, 0.1, 3.0), (n,), dev);
    type T = Tensor<(usize,), f32>;
    type Mask = Tensor<(usize,), bool>;
    let run = |x: &T, p: &T| -> rtx::Result<(Vec<T>, Mask)> {
        let floats = vec![
            x.try_binary::<Mul, _>(2.0)?,
            x.try_binary::<Add, _>(0.5)?,
            x.try_binary_scalar::<Sub>(2.0, true)?,
            x.try_binary_scalar::<Div>(3.0, true)?,
            x.try_binary::<Max, _>(0.0)?,
            x.try_binary::<Min, _>(0.0)?,
            p.try_binary::<Pow, _>(2.0)?,
            x.try_clamp(-1.0, 1.0)?,
            x.try_binary::<Mul, _>(1.5)?
                .try_binary::<Add, _>(0.25)?
                .try_unary::<rtx::op::markers::GeluTanh>()?,
        ];
        Ok((floats, x.try_compare::<Gt, _>(0.5)?))
    };
    let (eager, eager_mask) = run(&x, &p).unwrap_or_else(|e| panic!("eager: {e}"));
    cuda::begin_capture(0).unwrap_or_else(|e| panic!("begin capture: {e}"));
    let captured = run(&x, &p);
    let graph = cuda::end_capture(0);
    let (captured, captured_mask) = captured.unwrap_or_else(|e| panic!("while capturing: {e}"));
    let graph = graph.unwrap_or_else(|e| panic!("end capture: {e}"));
    graph.replay().unwrap_or_else(|e| panic!("replay: {e}"));
    for (i, (got, want)) in captured.iter().zip(&eager).enumerate() {
        assert_eq!(bits(got), bits(want), "captured output {i}");
    }
    assert_eq!(
        captured_mask.to_vec(),
        eager_mask.to_vec(),
        "captured comparison"
    );
}

fn compare_case<E: Float>() {
    let (r, c) = (9usize, 31usize);
    // Few distinct values, so equal pairs occur.
    let a: Vec<E> = values::<f64>(r * c, 4, 0.0, 6.0)
        .iter()
        .map(|v| E::from_f64(v.floor() * 0.5))
        .collect();
    let b: Vec<E> = values::<f64>(r * c, 5, 0.0, 6.0)
        .iter()
        .map(|v| E::from_f64(v.floor() * 0.5))
        .collect();
    on_every_device::<E>("compare", |dev| {
        let x = Tensor::from_vec(a.clone(), (r, c), dev);
        let y = Tensor::from_vec(b.clone(), (r, c), dev);
        let gt = x.gt(&y);
        vec![
            ("eq".into(), f64s(&x.eq(&y))),
            ("ne".into(), f64s(&x.ne(&y))),
            ("lt".into(), f64s(&x.lt(&y))),
            ("le".into(), f64s(&x.le(&y))),
            ("gt".into(), f64s(&gt)),
            ("ge transposed".into(), f64s(&x.t().ge(&y.t()))),
            ("where".into(), f64s(&x.where_cond(&gt, &y))),
            (
                "where scalar".into(),
                f64s(&x.where_cond(&gt, E::from_f64(-1.0))),
            ),
            (
                "masked_fill".into(),
                f64s(&x.masked_fill(&gt, E::from_f64(7.0))),
            ),
            ("bool to float".into(), f64s(&gt.cast::<E>())),
            ("float to bool".into(), f64s(&x.cast::<bool>())),
            (
                "clamp".into(),
                f64s(&x.clamp(E::from_f64(0.5), E::from_f64(2.0))),
            ),
        ]
    });
}

#[test]
fn comparisons_where_casts_and_clamp_match_the_cpu() {
    every_float!(compare_case);
}

fn affine_case<E: Float>() {
    let data = values::<E>(1001, 6, -2.0, 2.0);
    on_every_device::<E>("affine", |dev| {
        let s = Storage::from_vec(data.clone(), dev).unwrap_or_else(|e| panic!("{e}"));
        let l = Layout::contiguous(&[7, 143]);
        let t = l.transpose(0, 1);
        let out = |l: &Layout| {
            s.affine(l, E::from_f64(1.5), E::from_f64(-0.25))
                .and_then(|o| o.try_to_vec(&Layout::contiguous(l.dims())))
                .unwrap_or_else(|e| panic!("{e}"))
                .iter()
                .map(|x| x.to_f64())
                .collect::<Vec<_>>()
        };
        vec![
            ("affine".into(), out(&l)),
            ("affine transposed".into(), out(&t)),
        ]
    });
}

#[test]
fn affine_matches_the_cpu() {
    every_float!(affine_case);
}

fn copy_case<E: Float>() {
    let (r, c) = (33usize, 65usize);
    let data = values::<E>(r * c, 7, -5.0, 5.0);
    on_every_device::<E>("contiguous", |dev| {
        let x = Tensor::from_vec(data.clone(), (r, c), dev);
        vec![
            ("transposed".into(), f64s(&x.t().contiguous())),
            (
                "narrowed".into(),
                f64s(&x.narrow::<1, usize>(3, 40).contiguous()),
            ),
            ("same type cast".into(), f64s(&x.t().cast::<E>())),
            ("cast to f32".into(), f64s(&x.cast::<f32>())),
            ("cast to f64".into(), f64s(&x.cast::<f64>())),
            ("cast to f16".into(), f64s(&x.cast::<f16>())),
            (
                "cast to bf16 transposed".into(),
                f64s(&x.t().cast::<bf16>()),
            ),
        ]
    });
}

#[test]
fn strided_copies_and_casts_match_the_cpu() {
    every_float!(copy_case);
}
