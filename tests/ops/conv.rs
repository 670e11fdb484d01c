//! Convolutions and pooling against naive float64 references: several fixed (type-level)
//! settings, each over random sizes given as run-time dims, contiguous and strided inputs,
//! with and without bias, in f32, f64, f16 and bf16.

use crate::common::{assert_close, to_f64, tolerance};
use proptest::prelude::*;
use rtx::prelude::*;
use rtx::shape::conv::ConvOptions;

type D4 = (usize, usize, usize, usize);
type D3 = (usize, usize, usize);

/// Deterministic values in [-2, 2] (quarter steps) from a seed.
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % 17) as f64 / 4.0 - 2.0
        })
        .collect()
}

fn tensor<S: Shape, E: Float>(seed: u64, shape: S) -> Tensor<S, E> {
    let v: Vec<E> = values(seed, shape.numel())
        .into_iter()
        .map(E::from_f64)
        .collect();
    Tensor::from_vec(v, shape, Device::Cpu)
}

/// Settings as plain numbers: stride, padding, dilation, groups.
#[derive(Clone, Copy, Debug)]
struct Cfg {
    s: usize,
    p: usize,
    d: usize,
    g: usize,
}

fn cfg<C: rtx::shape::Dim, CG: rtx::shape::Dim, O: ConvOptions<C, CG>>() -> Cfg {
    Cfg {
        s: O::STRIDE,
        p: O::PADDING,
        d: O::DILATION,
        g: O::GROUPS,
    }
}

/// The 2-d convolution of dense `x` `[n, c, h, w]` with `wt` `[o, c/g, kh, kw]` in f64,
/// with the sum of |terms| per output for the tolerance.
#[allow(clippy::too_many_arguments)] // a reference spelled out with every conv parameter
fn naive_conv(
    x: &[f64],
    [n, c, h, w]: [usize; 4],
    wt: &[f64],
    [o, cg, kh, kw]: [usize; 4],
    bias: Option<&[f64]>,
    (sh, sw): (usize, usize),
    (ph, pw): (usize, usize),
    (dh, dw): (usize, usize),
    g: usize,
) -> (Vec<f64>, Vec<f64>, [usize; 4]) {
    let ho = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    let wo = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    let og = o / g;
    let (mut out, mut mag) = (vec![0.0; n * o * ho * wo], vec![0.0; n * o * ho * wo]);
    for b in 0..n {
        for oc in 0..o {
            let grp = oc / og;
            for y in 0..ho {
                for xo in 0..wo {
                    let at = ((b * o + oc) * ho + y) * wo + xo;
                    if let Some(bias) = bias {
                        out[at] = bias[oc];
                        mag[at] = bias[oc].abs();
                    }
                    for ci in 0..cg {
                        let ic = grp * cg + ci;
                        for i in 0..kh {
                            for j in 0..kw {
                                let iy = (y * sh + i * dh) as isize - ph as isize;
                                let ix = (xo * sw + j * dw) as isize - pw as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let v = x[((b * c + ic) * h + iy as usize) * w + ix as usize]
                                    * wt[((oc * cg + ci) * kh + i) * kw + j];
                                out[at] += v;
                                mag[at] += v.abs();
                            }
                        }
                    }
                }
            }
        }
    }
    (out, mag, [n, o, ho, wo])
}

#[track_caller]
fn check<S: Shape, E: Float>(got: &Tensor<S, E>, want: &[f64], mag: &[f64]) {
    let (atol, rtol) = tolerance(E::DTYPE);
    let scale = mag.iter().cloned().fold(1.0, f64::max);
    assert_close(&to_f64(got), want, atol * scale, rtol);
}

/// Random sizes for a conv: batch, channels per group, outputs per group, kernel, and
/// extra input beyond the smallest that fits.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    n: usize,
    cg: usize,
    og: usize,
    kh: usize,
    kw: usize,
    eh: usize,
    ew: usize,
}

fn sizes() -> impl Strategy<Value = Sizes> {
    (
        1usize..3,
        1usize..3,
        1usize..3,
        1usize..4,
        1usize..4,
        0usize..6,
        0usize..6,
    )
        .prop_map(|(n, cg, og, kh, kw, eh, ew)| Sizes {
            n,
            cg,
            og,
            kh,
            kw,
            eh,
            ew,
        })
}

/// The smallest input that fits a kernel, plus `extra`.
fn fit(k: usize, c: Cfg, extra: usize) -> usize {
    (c.d * (k - 1) + 1).saturating_sub(2 * c.p).max(1) + extra
}

fn conv2d_case<E: Float, O: ConvOptions<usize, usize>>(
    opts: O,
    z: Sizes,
    strided: bool,
    with_bias: bool,
    seed: u64,
) {
    let c = cfg::<usize, usize, O>();
    let (h, w) = (fit(z.kh, c, z.eh), fit(z.kw, c, z.ew));
    let (cin, o) = (z.cg * c.g, z.og * c.g);
    let x: Tensor<D4, E> = if strided {
        // The same logical input read through swapped spatial axes.
        tensor::<D4, E>(seed, (z.n, cin, w, h)).transpose::<2, 3>()
    } else {
        tensor(seed, (z.n, cin, h, w))
    };
    let wt: Tensor<D4, E> = tensor(seed + 1, (o, z.cg, z.kh, z.kw));
    let b: Tensor<(usize,), E> = tensor(seed + 2, (o,));
    let y: Tensor<D4, E> = if with_bias {
        x.conv2d_bias(&wt, &b, opts)
    } else {
        x.conv2d(&wt, opts)
    };
    let bias = to_f64(&b);
    let (want, mag, dims) = naive_conv(
        &to_f64(&x),
        [z.n, cin, h, w],
        &to_f64(&wt),
        [o, z.cg, z.kh, z.kw],
        with_bias.then_some(&bias[..]),
        (c.s, c.s),
        (c.p, c.p),
        (c.d, c.d),
        c.g,
    );
    assert_eq!(y.dims(), &dims);
    check(&y, &want, &mag);
}

fn conv1d_case<E: Float, O: ConvOptions<usize, usize>>(
    opts: O,
    z: Sizes,
    with_bias: bool,
    seed: u64,
) {
    let c = cfg::<usize, usize, O>();
    let l = fit(z.kw, c, z.ew);
    let (cin, o) = (z.cg * c.g, z.og * c.g);
    let x: Tensor<D3, E> = tensor(seed, (z.n, cin, l));
    let wt: Tensor<D3, E> = tensor(seed + 1, (o, z.cg, z.kw));
    let b: Tensor<(usize,), E> = tensor(seed + 2, (o,));
    let y: Tensor<D3, E> = if with_bias {
        x.conv1d_bias(&wt, &b, opts)
    } else {
        x.conv1d(&wt, opts)
    };
    let bias = to_f64(&b);
    let (want, mag, dims) = naive_conv(
        &to_f64(&x),
        [z.n, cin, 1, l],
        &to_f64(&wt),
        [o, z.cg, 1, z.kw],
        with_bias.then_some(&bias[..]),
        (1, c.s),
        (0, c.p),
        (1, c.d),
        c.g,
    );
    assert_eq!(y.dims(), &[dims[0], dims[1], dims[3]]);
    check(&y, &want, &mag);
}

fn conv_all_types<O: ConvOptions<usize, usize>>(
    opts: O,
    z: Sizes,
    strided: bool,
    bias: bool,
    seed: u64,
) {
    conv2d_case::<f32, O>(opts, z, strided, bias, seed);
    conv2d_case::<f64, O>(opts, z, strided, bias, seed);
    conv2d_case::<f16, O>(opts, z, strided, bias, seed);
    conv2d_case::<bf16, O>(opts, z, strided, bias, seed);
    conv1d_case::<f32, O>(opts, z, bias, seed);
    conv1d_case::<f64, O>(opts, z, bias, seed);
}

proptest! {
    #[test]
    fn conv_matches_a_float64_reference(z in sizes(), strided in any::<bool>(), bias in any::<bool>(), seed in any::<u64>()) {
        conv_all_types(Conv::<1>, z, strided, bias, seed);
        conv_all_types(Conv::<2, 1>, z, strided, bias, seed);
        conv_all_types(Conv::<1, 2, 2>, z, strided, bias, seed);
        conv_all_types(Conv::<3, 0, 2>, z, strided, bias, seed);
        conv_all_types(GroupedConv::<2, 1, 1>, z, strided, bias, seed);
        conv_all_types(GroupedConv::<3, 2, 1, 2>, z, strided, bias, seed);
        conv1d_case::<f16, _>(GroupedConv::<2, 2, 1>, z, bias, seed);
        conv1d_case::<bf16, _>(Conv::<1, 1>, z, bias, seed);
    }

    #[test]
    fn big_convs_match_a_float64_reference(n in 1usize..3, c in 1usize..9, o in 1usize..17, hw in 8usize..20, seed in any::<u64>()) {
        // Sizes where gemm blocks and items run on one thread each or one after another.
        let x: Tensor<D4> = tensor(seed, (n, c, hw, hw + 3));
        let w: Tensor<D4> = tensor(seed + 1, (o, c, 3, 3));
        let y: Tensor<D4> = x.conv2d(&w, Conv::<1, 1>);
        let (want, mag, _) = naive_conv(&to_f64(&x), [n, c, hw, hw + 3], &to_f64(&w), [o, c, 3, 3], None, (1, 1), (1, 1), (1, 1), 1);
        check(&y, &want, &mag);
    }
}

/// Max (or average, counting padding) over each window, in f64.
fn naive_pool(
    x: &[f64],
    [n, c, h, w]: [usize; 4],
    k: usize,
    s: usize,
    p: usize,
    max: bool,
) -> Vec<f64> {
    let (ho, wo) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
    let mut out = Vec::new();
    for plane in 0..n * c {
        for y in 0..ho {
            for xo in 0..wo {
                let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
                for i in 0..k {
                    for j in 0..k {
                        let (iy, ix) = (
                            (y * s + i) as isize - p as isize,
                            (xo * s + j) as isize - p as isize,
                        );
                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            continue;
                        }
                        let v = x[(plane * h + iy as usize) * w + ix as usize];
                        acc = if max { acc.max(v) } else { acc + v };
                    }
                }
                out.push(if max { acc } else { acc / (k * k) as f64 });
            }
        }
    }
    out
}

fn pool_case<E: Float, const K: usize, const S: usize, const P: usize>(
    window: Pool<K, S, P>,
    (n, c, eh, ew): (usize, usize, usize, usize),
    strided: bool,
    seed: u64,
) {
    let (h, w) = ((K - 2 * P).max(1) + eh, (K - 2 * P).max(1) + ew);
    let x: Tensor<D4, E> = if strided {
        tensor::<D4, E>(seed, (n, c, w, h)).transpose::<2, 3>()
    } else {
        tensor(seed, (n, c, h, w))
    };
    let xs = to_f64(&x);
    let (atol, rtol) = tolerance(E::DTYPE);
    let mx: Tensor<D4, E> = x.max_pool2d(window);
    assert_close(
        &to_f64(&mx),
        &naive_pool(&xs, [n, c, h, w], K, S, P, true),
        0.0,
        0.0,
    );
    let av: Tensor<D4, E> = x.avg_pool2d(window);
    assert_close(
        &to_f64(&av),
        &naive_pool(&xs, [n, c, h, w], K, S, P, false),
        atol * 2.0,
        rtol,
    );
    // The unbatched [C, H, W] form gives the first image's planes.
    let first: Tensor<D3, E> = tensor(seed, (c, h, w));
    let m3: Tensor<D3, E> = first.max_pool2d(window);
    assert_close(
        &to_f64(&m3),
        &naive_pool(&to_f64(&first), [1, c, h, w], K, S, P, true),
        0.0,
        0.0,
    );
}

fn pool_all_types<const K: usize, const S: usize, const P: usize>(
    window: Pool<K, S, P>,
    z: (usize, usize, usize, usize),
    strided: bool,
    seed: u64,
) {
    pool_case::<f32, K, S, P>(window, z, strided, seed);
    pool_case::<f64, K, S, P>(window, z, strided, seed);
    pool_case::<f16, K, S, P>(window, z, strided, seed);
    pool_case::<bf16, K, S, P>(window, z, strided, seed);
}

proptest! {
    #[test]
    fn pooling_matches_a_float64_reference(z in (1usize..3, 1usize..4, 0usize..7, 0usize..7), strided in any::<bool>(), seed in any::<u64>()) {
        pool_all_types(Pool::<2, 2>, z, strided, seed);
        pool_all_types(Pool::<3, 2, 1>, z, strided, seed);
        pool_all_types(Pool::<3, 1, 1>, z, strided, seed);
        pool_all_types(Pool::<2, 1>, z, strided, seed);
        pool_all_types(Pool::<1, 3>, z, strided, seed);
    }
}

#[test]
fn static_shapes_lenet_style() {
    let x: Tensor<(Dyn<'N'>, Const<1>, Const<28>, Const<28>)> =
        tensor(1, (Dyn(2), Const, Const, Const));
    let w: Tensor<Rank4<6, 1, 5, 5>> = tensor(2, (Const, Const, Const, Const));
    let b: Tensor<Rank1<6>> = tensor(3, (Const,));
    let y: Tensor<(Dyn<'N'>, Const<6>, Const<24>, Const<24>)> = x.conv2d_bias(&w, &b, Conv::<1>);
    let p: Tensor<(Dyn<'N'>, Const<6>, Const<12>, Const<12>)> = y.relu().max_pool2d(Pool::<2, 2>);
    assert_eq!(p.dims(), &[2, 6, 12, 12]);
}

#[test]
fn max_pool_propagates_nan() {
    let x: Tensor<Rank4<1, 1, 2, 2>> =
        Tensor::from_array([[[[1.0, f32::NAN], [3.0, 4.0]]]], Device::Cpu);
    let y: Tensor<Rank4<1, 1, 1, 1>> = x.max_pool2d(Pool::<2, 2>);
    assert!(y.to_vec()[0].is_nan());
}

#[test]
fn run_time_errors_name_the_shapes() {
    let x: Tensor<D4> = Tensor::zeros((1, 4, 5, 5), Device::Cpu);
    let err = |r: Result<Tensor<D4>>| r.err().unwrap().to_string();

    let w: Tensor<D4> = Tensor::zeros((6, 3, 3, 3), Device::Cpu);
    assert_eq!(
        err(x.try_conv2d(&w, Conv::<1>)),
        "conv2d: input [1, 4, 5, 5] has 4 channels, but weight [6, 3, 3, 3] expects 3"
    );
    let w: Tensor<D4> = Tensor::zeros((6, 1, 3, 3), Device::Cpu);
    assert_eq!(
        err(x.try_conv2d(&w, GroupedConv::<2>)),
        "conv2d: input [1, 4, 5, 5] has 4 channels, but weight [6, 1, 3, 3] takes 1 per group x 2 groups = 2"
    );
    let w: Tensor<D4> = Tensor::zeros((6, 1, 3, 3), Device::Cpu);
    assert_eq!(
        err(x.try_conv2d(&w, GroupedConv::<4>)),
        "conv2d: 4 groups do not divide the 6 output channels of weight [6, 1, 3, 3]"
    );
    let w: Tensor<D4> = Tensor::zeros((2, 4, 3, 7), Device::Cpu);
    assert_eq!(
        err(x.try_conv2d(&w, Conv::<1>)),
        "conv2d: the kernel width 7 (dilation 1) does not fit the input width 5 with padding 0 (input [1, 4, 5, 5], weight [2, 4, 3, 7])"
    );
    let w: Tensor<D4> = Tensor::zeros((2, 4, 3, 3), Device::Cpu);
    let b: Tensor<(usize,)> = Tensor::zeros((3,), Device::Cpu);
    assert_eq!(
        err(x.try_conv2d_bias(&w, &b, Conv::<1>)),
        "conv2d: bias [3] does not match the 2 output channels of weight [2, 4, 3, 3]"
    );
    let y: Result<Tensor<(usize, usize, Const<4>, Const<4>)>> = x.try_conv2d(&w, Conv::<1>);
    assert_eq!(
        y.err().unwrap().to_string(),
        "conv2d: input [1, 4, 5, 5] with weight [2, 4, 3, 3] gives output [1, 2, 3, 3], which does not fit the result type"
    );
    assert_eq!(
        err(x.try_max_pool2d(Pool::<6, 1>)),
        "max_pool2d: the window height 6 does not fit the input height 5 with padding 0 (input [1, 4, 5, 5])"
    );
    let s: Tensor<D3> = Tensor::zeros((1, 2, 3), Device::Cpu);
    let w1: Tensor<D3> = Tensor::zeros((1, 2, 4), Device::Cpu);
    assert_eq!(
        s.try_conv1d::<_, _, _, usize, _>(&w1, Conv::<1>)
            .err()
            .unwrap()
            .to_string(),
        "conv1d: the kernel length 4 (dilation 1) does not fit the input length 3 with padding 0 (input [1, 2, 3], weight [1, 2, 4])"
    );
}

#[test]
#[should_panic(
    expected = "avg_pool2d: input [1, 4, 5, 5] gives output [1, 4, 2, 2], which does not fit the result type"
)]
fn plain_pool_panics_with_the_message() {
    let x: Tensor<D4> = Tensor::zeros((1, 4, 5, 5), Device::Cpu);
    let _: Tensor<(usize, usize, Const<3>, usize)> = x.avg_pool2d(Pool::<2, 2>);
}
