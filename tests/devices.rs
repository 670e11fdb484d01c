//! One test body for every device (STYLE.md 10): each op test runs on the CPU and on every
//! usable CUDA GPU, in f32, f64, f16 and bf16, with contiguous, strided and broadcast inputs,
//! and each GPU's results are held to the CPU backend's within a per-dtype tolerance. Where no
//! GPU exists, each test prints `skipped: no CUDA device: <reason>` and passes.
//!
//! Run on a GPU with `--test-threads=1 --nocapture` to see the launch counts and the bandwidth
//! figures (the allocator's statistics are per GPU, so tests running side by side share them).

use rtx::prelude::*;
use rtx_backends::{Layout, Storage, cuda, launch_count};

/// The usable GPUs, or why there are none.
fn gpus() -> std::result::Result<Vec<Device>, String> {
    if !cuda::is_available() {
        return Err(match Storage::from_vec(vec![0.0f32], Device::Cuda(0)) {
            Err(e) => e.to_string(),
            Ok(_) => "the CUDA runtime reports no usable GPU".into(),
        });
    }
    Ok((0..cuda::device_count()).map(Device::Cuda).collect())
}

/// How far a GPU result may be from the CPU's: both compute in the same type, so the gap is
/// libm's last-place differences, fused multiply-adds, summation order, and one more rounding
/// to f16 or bf16 when those tip a value across a rounding boundary.
fn tolerance(d: DType) -> (f64, f64) {
    match d {
        DType::F64 => (1e-12, 1e-12),
        DType::F32 => (2e-6, 1e-5),
        DType::F16 => (2e-3, 2e-3),
        DType::BF16 => (1.6e-2, 1.6e-2),
        _ => (0.0, 0.0),
    }
}

/// Named outputs of one test body on one device.
type Outputs = Vec<(String, Vec<f64>)>;

/// The elements of a tensor as f64 (booleans as 0 and 1).
fn f64s<S: Shape, E: Element>(t: &Tensor<S, E>) -> Vec<f64> {
    t.to_vec().into_iter().map(|x| x.to_f64()).collect()
}

/// Runs `body` on the CPU and on every GPU, and compares each GPU output with the CPU's.
#[track_caller]
fn on_every_device<E: Element>(test: &str, body: impl Fn(Device) -> Outputs) {
    let want = body(Device::Cpu);
    assert!(!want.is_empty(), "{test}: the body produced no outputs");
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("{test} ({:?}): skipped: no CUDA device: {why}", E::DTYPE);
            return;
        }
    };
    let (atol, rtol) = tolerance(E::DTYPE);
    for dev in gpus {
        let got = body(dev);
        assert_eq!(got.len(), want.len(), "{test} on {dev}: output count");
        for ((name, g), (_, w)) in got.iter().zip(&want) {
            assert_eq!(
                g.len(),
                w.len(),
                "{test} {name} ({:?}) on {dev}: length",
                E::DTYPE
            );
            for (i, (&g, &w)) in g.iter().zip(w).enumerate() {
                let close = if w.is_nan() {
                    g.is_nan()
                } else if w.is_infinite() {
                    g == w
                } else {
                    (g - w).abs() <= atol + rtol * w.abs()
                };
                assert!(
                    close,
                    "{test} {name} ({:?}) on {dev}, element {i}: got {g}, the CPU gives {w}",
                    E::DTYPE
                );
            }
        }
    }
}

/// Runs a generic test body in all four float types.
macro_rules! every_float {
    ($f:ident) => {
        $f::<f32>();
        $f::<f64>();
        $f::<f16>();
        $f::<bf16>();
    };
}

/// Reproducible values in [lo, hi) (xorshift64*), rounded to `E`.
fn values<E: Element>(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<E> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            E::from_f64(lo + (hi - lo) * r)
        })
        .collect()
}

const UNARY: [&str; 18] = [
    "neg",
    "abs",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "recip",
    "sin",
    "cos",
    "tanh",
    "erf",
    "relu",
    "sigmoid",
    "gelu",
    "gelu_tanh",
    "silu",
    "softplus",
];

fn apply<S: Shape, E: Float>(name: &str, t: &Tensor<S, E>) -> Tensor<S, E> {
    match name {
        "neg" => t.neg(),
        "abs" => t.abs(),
        "exp" => t.exp(),
        "log" => t.log(),
        "log1p" => t.log1p(),
        "sqrt" => t.sqrt(),
        "rsqrt" => t.rsqrt(),
        "recip" => t.recip(),
        "sin" => t.sin(),
        "cos" => t.cos(),
        "tanh" => t.tanh(),
        "erf" => t.erf(),
        "relu" => t.relu(),
        "sigmoid" => t.sigmoid(),
        "gelu" => t.gelu(),
        "gelu_tanh" => t.gelu_tanh(),
        "silu" => t.silu(),
        "softplus" => t.softplus(),
        other => panic!("no unary op {other}"),
    }
}

fn unary_case<E: Float>() {
    // 37 x 29 = 1073 elements: vector loads and a scalar tail on the contiguous path.
    let (r, c) = (37usize, 29usize);
    for name in UNARY {
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
                (format!("{name} contiguous"), f64s(&apply(name, &x))),
                (format!("{name} transposed"), f64s(&apply(name, &x.t()))),
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

fn reduce_case<E: Float>() {
    let (r, c) = (23usize, 301usize);
    // Positive, near one: no cancellation in sums, no overflow in products.
    let data = values::<E>(r * c, 8, 0.9, 1.1);
    on_every_device::<E>("reduce", |dev| {
        let x = Tensor::from_vec(data.clone(), (r, c), dev);
        let t = x.t();
        vec![
            ("sum 0".into(), f64s(&x.sum::<0>())),
            ("sum 1".into(), f64s(&x.sum::<1>())),
            ("sum_keepdim 1".into(), f64s(&x.sum_keepdim::<1>())),
            ("sum transposed 1".into(), f64s(&t.sum::<1>())),
            ("prod 0".into(), f64s(&x.prod::<0>())),
            ("max 1".into(), f64s(&x.max::<1>())),
            ("max_keepdim 0".into(), f64s(&x.max_keepdim::<0>())),
            ("min 0".into(), f64s(&x.min::<0>())),
            ("min transposed 0".into(), f64s(&t.min::<0>())),
            ("mean 1".into(), f64s(&x.mean::<1>())),
            ("mean_keepdim 0".into(), f64s(&x.mean_keepdim::<0>())),
            ("sum_all".into(), f64s(&x.sum_all())),
            ("mean_all transposed".into(), f64s(&t.mean_all())),
            ("max_all".into(), f64s(&x.max_all())),
            ("min_all".into(), f64s(&t.min_all())),
            ("var 1".into(), f64s(&x.var::<1>(1))),
            ("var 0 population".into(), f64s(&x.var::<0>(0))),
            ("std transposed 1".into(), f64s(&t.std::<1>(1))),
            ("logsumexp 1".into(), f64s(&x.logsumexp::<1>())),
            ("logsumexp 0".into(), f64s(&x.logsumexp::<0>())),
        ]
    });
}

#[test]
fn reductions_match_the_cpu() {
    every_float!(reduce_case);
}

fn softmax_case<E: Float>() {
    let small = values::<E>(5 * 3, 9, -4.0, 4.0);
    let wide = values::<E>(7 * 2500, 10, -8.0, 8.0);
    on_every_device::<E>("softmax", |dev| {
        let s = Tensor::from_vec(small.clone(), (5usize, 3usize), dev);
        let w = Tensor::from_vec(wide.clone(), (7usize, 2500usize), dev);
        vec![
            ("softmax last".into(), f64s(&s.softmax::<1>())),
            ("softmax first".into(), f64s(&s.softmax::<0>())),
            ("softmax wide".into(), f64s(&w.softmax::<1>())),
            ("softmax transposed".into(), f64s(&s.t().softmax::<1>())),
            ("log_softmax last".into(), f64s(&s.log_softmax::<1>())),
            ("log_softmax first".into(), f64s(&s.log_softmax::<0>())),
            ("log_softmax wide".into(), f64s(&w.log_softmax::<1>())),
        ]
    });
}

#[test]
fn softmax_and_log_softmax_match_the_cpu() {
    every_float!(softmax_case);
}

fn index_case<E: Float>() {
    let (r, c) = (10usize, 7usize);
    let table = values::<E>(r * c, 14, -1.0, 1.0);
    on_every_device::<E>("index_select", |dev| {
        let x = Tensor::from_vec(table.clone(), (r, c), dev);
        let rows = Tensor::from_vec(vec![9i64, 0, 3, 3, 9], (5usize,), dev);
        let cols = Tensor::from_vec(vec![6i64, 1], (2usize,), dev);
        let bad = Tensor::from_vec(vec![1i64, 10], (2usize,), dev);
        let err = x
            .try_index_select::<0, _>(&bad)
            .err()
            .map(|e| e.to_string());
        vec![
            (
                "embedding rows".into(),
                f64s(&x.index_select::<0, _>(&rows)),
            ),
            ("columns".into(), f64s(&x.index_select::<1, _>(&cols))),
            (
                "rows of a transpose".into(),
                f64s(&x.t().index_select::<0, _>(&cols)),
            ),
            // The error is the CPU's, word for word (compared by its length and bytes).
            (
                "bad index error".into(),
                err.unwrap_or_default().bytes().map(f64::from).collect(),
            ),
        ]
    });
}

#[test]
fn index_select_matches_the_cpu() {
    every_float!(index_case);
}

#[test]
fn each_op_is_one_launch() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("each_op_is_one_launch: skipped: no CUDA device: {why}");
            return;
        }
    };
    let dev = gpus[0];
    let x = Tensor::from_vec(
        values::<f32>(64 * 96, 12, -1.0, 1.0),
        (64usize, 96usize),
        dev,
    );
    let v = Tensor::from_vec(values::<f32>(96, 13, -1.0, 1.0), (96usize,), dev);
    let launches = |f: &dyn Fn()| {
        let before = launch_count(dev);
        f();
        launch_count(dev) - before
    };
    let cases: [(&str, &dyn Fn(), u64); 9] = [
        ("cast f32 to bf16", &|| drop(x.cast::<bf16>()), 1),
        ("gelu_tanh (fused elementwise)", &|| drop(x.gelu_tanh()), 1),
        ("exp of a transposed view", &|| drop(x.t().exp()), 1),
        ("add with a broadcast row", &|| drop(&x + &v), 1),
        ("gt into bool", &|| drop(x.gt(&x.t().t())), 1),
        ("dense copy of a transpose", &|| drop(x.t().contiguous()), 1),
        ("sum along the last axis", &|| drop(x.sum::<1>()), 1),
        ("max along the first axis", &|| drop(x.max::<0>()), 1),
        ("softmax along the last axis", &|| drop(x.softmax::<1>()), 1),
    ];
    for (name, f, want) in cases {
        // The first call compiles (or loads) the kernel; count the second.
        f();
        let got = launches(f);
        println!("{name}: {got} launch(es)");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn integer_ops_without_kernels_are_errors_on_the_gpu() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("integer ops: skipped: no CUDA device: {why}");
            return;
        }
    };
    let x = Tensor::from_vec(vec![1i32, 2, 3], (3usize,), dev);
    let e = x.try_binary::<rtx::op::markers::Add, _>(&x).map(|_| ());
    let msg = e.map_err(|e| e.to_string()).err().unwrap_or_default();
    assert!(msg.contains("add") && msg.contains("cuda:0"), "{msg}");
}

#[test]
fn gelu_tanh_bandwidth_against_a_device_copy() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("bandwidth: skipped: no CUDA device: {why}");
            return;
        }
    };
    let n = 1usize << 28;
    let x = Tensor::from_vec(vec![0.5f32; n], (n,), dev);
    let ok = |r: rtx_backends::Result<()>| r.unwrap_or_else(|e| panic!("{e}"));
    let time = |f: &dyn Fn()| -> f64 {
        f();
        ok(cuda::synchronize(0));
        let (start, end) = match (cuda::Event::new(0), cuda::Event::new(0)) {
            (Ok(s), Ok(e)) => (s, e),
            (Err(e), _) | (_, Err(e)) => panic!("{e}"),
        };
        let reps = 10;
        ok(start.record());
        for _ in 0..reps {
            f();
        }
        ok(end.record());
        let ms = start.elapsed_ms(&end).unwrap_or_else(|e| panic!("{e}")) as f64;
        ms / 1e3 / reps as f64
    };
    let bytes = (2 * n * 4) as f64;
    let gelu = time(&|| drop(x.gelu_tanh()));
    let copy = time(&|| drop(x.to_device(dev)));
    println!(
        "2^28 f32: gelu_tanh {:.3} ms = {:.0} GB/s; device copy {:.3} ms = {:.0} GB/s; ratio {:.2}",
        gelu * 1e3,
        bytes / gelu / 1e9,
        copy * 1e3,
        bytes / copy / 1e9,
        copy / gelu
    );
    let side = 1usize << 14;
    let m = Tensor::from_vec(vec![0.5f32; n], (side, side), dev);
    let read = (n * 4) as f64;
    let sum = time(&|| drop(m.sum::<1>()));
    let softmax = time(&|| drop(m.softmax::<1>()));
    println!(
        "16384 x 16384 f32: row sums {:.3} ms = {:.0} GB/s read; softmax of rows {:.3} ms = {:.0} GB/s (read + write)",
        sum * 1e3,
        read / sum / 1e9,
        softmax * 1e3,
        2.0 * read / softmax / 1e9
    );
    let y = x.gelu_tanh().to_vec();
    assert!((y[n - 1] - 0.345_714).abs() < 1e-5, "{}", y[n - 1]);
}
