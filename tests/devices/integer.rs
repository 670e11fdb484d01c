//! Integer and bool tensors on every device: arithmetic (wrapping, division by zero giving
//! 0), comparisons, `where`, casts between every pair of element types, strided copies,
//! reductions and index_select, each compared exactly with the CPU. Integer `pow` is the one
//! op here without a GPU kernel: its error must say so.

use super::*;

/// Integers spanning the type, with its extremes, zeros, ones and minus ones.
fn ints<E: Num>(n: usize, seed: u64) -> Vec<E> {
    let lo = E::LOWEST.to_f64();
    let hi = E::HIGHEST.to_f64();
    let mut v: Vec<E> = values::<f64>(n, seed, 0.0, 1.0)
        .into_iter()
        .enumerate()
        .map(|(i, r)| match i % 7 {
            0 => E::from_f64(lo + (hi - lo) * r),
            1 => E::LOWEST,
            2 => E::HIGHEST,
            3 => E::ZERO,
            4 => E::from_i64(-1),
            _ => E::from_f64((r * 200.0).floor() - 100.0),
        })
        .collect();
    v[0] = E::ONE;
    v
}

fn arithmetic_case<E: Num>() {
    let (r, c) = (13usize, 29usize);
    let a = ints::<E>(r * c, 71);
    let b = ints::<E>(r * c, 72);
    let row = ints::<E>(c, 73);
    same_on_every_device::<E>("integer arithmetic", |dev| {
        let x = Tensor::from_vec(a.clone(), (r, c), dev);
        let y = Tensor::from_vec(b.clone(), (r, c), dev);
        let v = Tensor::from_vec(row.clone(), (c,), dev);
        let yt = Tensor::from_vec(b.clone(), (c, r), dev);
        vec![
            ("add".into(), bits(&(&x + &y))),
            ("sub with a broadcast row".into(), bits(&(&x - &v))),
            ("mul by a transpose".into(), bits(&(&x * &yt.t()))),
            ("div (zeros give 0)".into(), bits(&(&x / &y))),
            ("div of a transpose by a row".into(), bits(&(&yt.t() / &v))),
            ("maximum".into(), bits(&x.maximum(&y))),
            (
                "minimum with a scalar".into(),
                bits(&x.minimum(E::from_i64(7))),
            ),
            (
                "clamp".into(),
                bits(&x.clamp(E::from_i64(3), E::from_i64(90))),
            ),
            ("add a scalar".into(), bits(&(&x + E::from_i64(100)))),
        ]
    });
}

#[test]
fn integer_arithmetic_matches_the_cpu() {
    arithmetic_case::<i32>();
    arithmetic_case::<i64>();
    arithmetic_case::<u8>();
}

fn signed_case<E: Signed>() {
    let a = ints::<E>(5 * 9, 74);
    same_on_every_device::<E>("neg and abs", |dev| {
        let x = Tensor::from_vec(a.clone(), (5usize, 9usize), dev);
        vec![
            ("neg".into(), bits(&x.neg())),
            ("abs of a transpose".into(), bits(&x.t().abs())),
        ]
    });
}

#[test]
fn negation_and_absolute_value_wrap_like_the_cpu() {
    signed_case::<i32>();
    signed_case::<i64>();
}

fn compare_case<E: Element>(a: Vec<E>, b: Vec<E>) {
    let n = a.len();
    same_on_every_device::<E>("integer comparisons", |dev| {
        let x = Tensor::from_vec(a.clone(), (n / 4, 4usize), dev);
        let y = Tensor::from_vec(b.clone(), (n / 4, 4usize), dev);
        let first = Tensor::from_vec(b[..4].to_vec(), (4usize,), dev);
        let mask = x.lt(&y);
        vec![
            ("eq".into(), bits(&x.eq(&y))),
            ("ne with a broadcast row".into(), bits(&x.ne(&first))),
            ("lt".into(), bits(&mask)),
            ("le".into(), bits(&x.le(&y))),
            ("gt of a transpose".into(), bits(&x.t().gt(&y.t()))),
            ("ge".into(), bits(&x.ge(&y))),
            ("where".into(), bits(&x.where_cond(&mask, &y))),
            (
                "where with a broadcast row".into(),
                bits(&x.where_cond(&mask, &first)),
            ),
        ]
    });
}

#[test]
fn comparisons_and_where_match_the_cpu_for_integers_and_bools() {
    compare_case(ints::<i32>(64, 75), ints::<i32>(64, 76));
    compare_case(ints::<i64>(64, 77), ints::<i64>(64, 78));
    compare_case(ints::<u8>(64, 79), ints::<u8>(64, 80));
    let bools = |seed| {
        values::<f64>(64, seed, 0.0, 1.0)
            .into_iter()
            .map(|r| r < 0.5)
            .collect()
    };
    compare_case::<bool>(bools(81), bools(82));
}

/// Every value class a cast treats specially, in `f64`.
const SPECIAL: [f64; 20] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.7,
    2.5,
    255.0,
    255.9,
    256.0,
    -129.0,
    65504.0,
    70000.0,
    3e9,
    -3e9,
    9.3e18,
    -1e19,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
];

fn cast_case<S: Element>() {
    let mut data: Vec<S> = SPECIAL.iter().map(|&v| S::from_f64(v)).collect();
    // Integers past what f32 and f64 hold exactly, and every byte value mod 256.
    data.extend([1i64 << 53 | 1, (1 << 24) + 1, i64::MAX, i64::MIN, 300, -300].map(S::from_i64));
    let n = data.len();
    same_on_every_device::<S>("casts", |dev| {
        let x = Tensor::from_vec(data.clone(), (n,), dev);
        // Read through a strided view too (every other element, reversed order is not a view).
        let even = Tensor::from_vec(data.clone(), (n / 2, 2usize), dev).t();
        vec![
            ("to f32".into(), bits(&x.cast::<f32>())),
            ("to f64".into(), bits(&x.cast::<f64>())),
            ("to f16".into(), bits(&x.cast::<f16>())),
            ("to bf16".into(), bits(&x.cast::<bf16>())),
            ("to i32".into(), bits(&x.cast::<i32>())),
            ("to i64".into(), bits(&x.cast::<i64>())),
            ("to u8".into(), bits(&x.cast::<u8>())),
            ("to bool".into(), bits(&x.cast::<bool>())),
            ("strided to i64".into(), bits(&even.cast::<i64>())),
            ("strided to bf16".into(), bits(&even.cast::<bf16>())),
        ]
    });
}

#[test]
fn casts_between_every_pair_of_types_match_the_cpu() {
    every_element!(cast_case);
}

fn copy_case<E: Element>() {
    let data = values::<E>(6 * 10, 83, -50.0, 50.0);
    same_on_every_device::<E>("strided copies", |dev| {
        let x = Tensor::from_vec(data.clone(), (6usize, 10usize), dev);
        let col = Tensor::from_vec(data[..6].to_vec(), (6usize, 1usize), dev);
        let wide: Tensor<(usize, usize), E> = col.broadcast_to((6usize, 10usize));
        vec![
            ("transpose".into(), bits(&x.t().contiguous())),
            (
                "narrowed".into(),
                bits(&x.narrow::<1, usize>(3, 4).contiguous()),
            ),
            ("broadcast".into(), bits(&wide.contiguous())),
            (
                "to another device and back".into(),
                bits(&x.t().to_device(Device::Cpu)),
            ),
        ]
    });
}

#[test]
fn strided_copies_match_the_cpu_in_every_type() {
    every_element!(copy_case);
}

fn reduce_case<E: Num>() {
    let (r, c) = (11usize, 300usize);
    let a = ints::<E>(r * c, 84);
    // Small factors, so products overflow in a few steps and must wrap the same way.
    let small: Vec<E> = values::<f64>(r * c, 85, -3.0, 4.0)
        .into_iter()
        .map(|v| E::from_f64(v.floor()))
        .collect();
    // Many short rows: a warp per row on a GPU.
    let (tr, tc) = (1100usize, 3usize);
    same_on_every_device::<E>("integer reductions", |dev| {
        let x = Tensor::from_vec(a.clone(), (r, c), dev);
        let p = Tensor::from_vec(small.clone(), (r, c), dev);
        let tall = Tensor::from_vec(a.clone(), (tr, tc), dev);
        let tall_small = Tensor::from_vec(small.clone(), (tr, tc), dev);
        vec![
            ("sum 1 of many short rows".into(), bits(&tall.sum::<1>())),
            ("max 1 of many short rows".into(), bits(&tall.max::<1>())),
            (
                "prod 1 of many short rows".into(),
                bits(&tall_small.prod::<1>()),
            ),
            ("sum 1".into(), bits(&x.sum::<1>())),
            ("sum 0 of a transpose".into(), bits(&x.t().sum::<0>())),
            ("prod 1".into(), bits(&p.prod::<1>())),
            ("prod 0".into(), bits(&p.prod::<0>())),
            ("max 1".into(), bits(&x.max::<1>())),
            ("min 0".into(), bits(&x.min::<0>())),
            ("sum_all".into(), bits(&x.sum_all())),
            ("max_all of a transpose".into(), bits(&x.t().max_all())),
            ("min_all".into(), bits(&x.min_all())),
            (
                "prod_all".into(),
                bits(&p.narrow::<1, usize>(0, 20).prod_all()),
            ),
        ]
    });
}

#[test]
fn integer_reductions_match_the_cpu() {
    reduce_case::<i32>();
    reduce_case::<i64>();
    reduce_case::<u8>();
}

fn index_select_case<E: Element>() {
    let data = values::<E>(8 * 3, 86, -9.0, 9.0);
    same_on_every_device::<E>("index_select", |dev| {
        let x = Tensor::from_vec(data.clone(), (8usize, 3usize), dev);
        let rows = Tensor::from_vec(vec![7i64, 0, 3, 3], (4usize,), dev);
        vec![
            ("rows".into(), bits(&x.index_select::<0, _>(&rows))),
            (
                "rows of a transpose".into(),
                bits(&x.t().index_select::<1, _>(&rows)),
            ),
        ]
    });
}

#[test]
fn index_select_matches_the_cpu_in_every_type() {
    every_element!(index_select_case);
}

#[test]
fn integer_pow_has_no_gpu_kernel_and_says_so() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("integer pow: skipped: no CUDA device: {why}");
            return;
        }
    };
    let x = Tensor::from_vec(vec![2i32, 3, 4], (3usize,), dev);
    let msg = x
        .try_binary::<rtx::op::markers::Pow, _>(&x)
        .map(|_| ())
        .map_err(|e| e.to_string())
        .err()
        .unwrap_or_default();
    assert_eq!(
        msg,
        "`pow` has no kernel on cuda:0 yet; move the tensor to the CPU with \
         `.to_device(Device::Cpu)`"
    );
}
