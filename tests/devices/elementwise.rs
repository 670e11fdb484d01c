//! Elementwise ops on every device: unary, binary with broadcasting, comparisons, `where`,
//! casts, clamp, affine maps and strided copies.

use super::*;
use rtx_backends::Layout;

pub(super) const UNARY: [&str; 18] = [
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

pub(super) fn apply<S: Shape, E: Float>(name: &str, t: &Tensor<S, E>) -> Tensor<S, E> {
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
