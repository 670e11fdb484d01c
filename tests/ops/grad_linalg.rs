//! Gradient checks of the products over random shapes: matmul in every rank pairing it
//! accepts with random (m, k, n) and batch dims (and transposed operands), conv1d / conv2d with
//! random batch, channels, groups, kernel, stride, padding, dilation and sizes (weights and
//! biases too), and max / avg pooling with random windows, strides and padding.

use crate::grad::{check, wsum};
use proptest::prelude::*;
use rtx::prelude::*;
use rtx::shape::conv::ConvOptions;
use rtx::shape::matmul::MatmulShapes;

type D3 = (usize, usize, usize);
type D4 = (usize, usize, usize, usize);

/// A tensor of `shape` from the front of `vals` (which must be long enough).
fn take<S: Shape>(vals: &[f64], shape: S) -> Tensor<S, f64> {
    Tensor::from_vec(vals[..shape.numel()].to_vec(), shape, Device::Cpu)
}

/// The gradients of both operands of `a.matmul(b)`.
fn matmul_case<A: MatmulShapes<B>, B: Shape>(a: &Tensor<A, f64>, b: &Tensor<B, f64>) {
    check(a, |t| wsum(&t.matmul(b)));
    check(b, |t| wsum(&a.matmul(t)));
}

/// Runs `$body` with `$o` bound to `GroupedConv::<G, S, P, D>` for run-time groups `$g`,
/// stride `$s`, padding `$p` and dilation `$d`.
macro_rules! with_conv {
    ($g:expr, $s:expr, $p:expr, $d:expr, $o:ident => $body:expr) => {
        match ($g, $s, $p, $d) {
            (1, 1, 0, 1) => {
                let $o = GroupedConv::<1, 1, 0, 1>;
                $body
            }
            (1, 1, 0, 2) => {
                let $o = GroupedConv::<1, 1, 0, 2>;
                $body
            }
            (1, 1, 1, 1) => {
                let $o = GroupedConv::<1, 1, 1, 1>;
                $body
            }
            (1, 1, 1, 2) => {
                let $o = GroupedConv::<1, 1, 1, 2>;
                $body
            }
            (1, 2, 0, 1) => {
                let $o = GroupedConv::<1, 2, 0, 1>;
                $body
            }
            (1, 2, 0, 2) => {
                let $o = GroupedConv::<1, 2, 0, 2>;
                $body
            }
            (1, 2, 1, 1) => {
                let $o = GroupedConv::<1, 2, 1, 1>;
                $body
            }
            (1, 2, 1, 2) => {
                let $o = GroupedConv::<1, 2, 1, 2>;
                $body
            }
            (2, 1, 0, 1) => {
                let $o = GroupedConv::<2, 1, 0, 1>;
                $body
            }
            (2, 1, 0, 2) => {
                let $o = GroupedConv::<2, 1, 0, 2>;
                $body
            }
            (2, 1, 1, 1) => {
                let $o = GroupedConv::<2, 1, 1, 1>;
                $body
            }
            (2, 1, 1, 2) => {
                let $o = GroupedConv::<2, 1, 1, 2>;
                $body
            }
            (2, 2, 0, 1) => {
                let $o = GroupedConv::<2, 2, 0, 1>;
                $body
            }
            (2, 2, 0, 2) => {
                let $o = GroupedConv::<2, 2, 0, 2>;
                $body
            }
            (2, 2, 1, 1) => {
                let $o = GroupedConv::<2, 2, 1, 1>;
                $body
            }
            (2, 2, 1, 2) => {
                let $o = GroupedConv::<2, 2, 1, 2>;
                $body
            }
            other => panic!("conv settings {other:?} are not generated"),
        }
    };
}

/// Input, weight and bias gradients of a 2-d convolution with settings `opt`, on a plain and
/// on a transposed (strided) input.
fn conv2d_case<O: ConvOptions<usize, usize>>(
    opt: O,
    x: &Tensor<D4, f64>,
    w: &Tensor<D4, f64>,
    b: &Tensor<(usize,), f64>,
) {
    let conv = |x: &Tensor<D4, f64>, w: &Tensor<D4, f64>| -> Tensor<D4, f64> { x.conv2d(w, opt) };
    let biased = |x: &Tensor<D4, f64>, b: &Tensor<(usize,), f64>| -> Tensor<D4, f64> {
        x.conv2d_bias(w, b, opt)
    };
    check(x, |t| wsum(&conv(t, w)));
    check(w, |t| wsum(&conv(x, t)));
    check(b, |t| wsum(&biased(x, t)));
    let xt = x.transpose::<2, 3>().contiguous();
    check(&xt, |t| wsum(&conv(&t.transpose::<2, 3>(), w).exp()));
}

/// Input, weight and bias gradients of a 1-d convolution with settings `opt`.
fn conv1d_case<O: ConvOptions<usize, usize>>(
    opt: O,
    x: &Tensor<D3, f64>,
    w: &Tensor<D3, f64>,
    b: &Tensor<(usize,), f64>,
) {
    let conv =
        |x: &Tensor<D3, f64>, w: &Tensor<D3, f64>| -> Tensor<D3, f64> { x.conv1d_bias(w, b, opt) };
    check(x, |t| wsum(&conv(t, w)));
    check(w, |t| wsum(&conv(x, t)));
    check(b, |t| {
        let y: Tensor<D3, f64> = x.conv1d_bias(w, t, opt);
        wsum(&y)
    });
}

/// Max and average pooling gradients with window `K`, stride `S` and padding `P`, on a batch
/// `[N, C, H, W]` and on a single `[C, H, W]` input.
fn pool_case<const K: usize, const S: usize, const P: usize>(
    x4: &Tensor<D4, f64>,
    x3: &Tensor<D3, f64>,
) {
    check(x4, |t| {
        wsum(&t.max_pool2d::<usize, usize, K, S, P>(Pool::<K, S, P>))
    });
    check(x4, |t| {
        wsum(&t.avg_pool2d::<usize, usize, K, S, P>(Pool::<K, S, P>))
    });
    check(x3, |t| {
        wsum(&t.max_pool2d::<usize, usize, K, S, P>(Pool::<K, S, P>))
    });
    check(x3, |t| {
        wsum(&t.avg_pool2d::<usize, usize, K, S, P>(Pool::<K, S, P>))
    });
}

/// The smallest input size a kernel `k` with dilation `d` and padding `p` fits, plus `extra`.
fn fitting(k: usize, d: usize, p: usize, extra: usize) -> usize {
    (d * (k - 1) + 1).saturating_sub(2 * p).max(1) + extra
}

proptest! {
    #[test]
    fn matmul_forms(
        form in 0usize..8,
        (m, k, n) in (1usize..=4, 1usize..=4, 1usize..=4),
        (b1, b2) in (1usize..=3, 1usize..=2),
        vals in prop::collection::vec(-2.0f64..2.0, 192),
    ) {
        let half = &vals[96..];
        match form {
            0 => matmul_case(&take(&vals, (k,)), &take(half, (k, n))),
            1 => matmul_case(&take(&vals, (m, k)), &take(half, (k,))),
            2 => {
                matmul_case(&take(&vals, (m, k)), &take(half, (k, n)));
                // Transposed (strided) operands.
                let (a, b) = (take(&vals, (k, m)), take(half, (n, k)));
                check(&a, |t| wsum(&t.t().matmul(&b.t())));
                check(&b, |t| wsum(&a.t().matmul(&t.t())));
            }
            3 => matmul_case(&take(&vals, (b1, m, k)), &take(half, (k, n))),
            4 => matmul_case(&take(&vals, (m, k)), &take(half, (b1, k, n))),
            5 => {
                matmul_case(&take(&vals, (b1, m, k)), &take(half, (b1, k, n)));
                let (a, b) = (take(&vals, (b1, k, m)), take(half, (b1, k, n)));
                check(&a, |t| wsum(&t.transpose::<1, 2>().matmul(&b)));
            }
            6 => matmul_case(&take(&vals, (b1, b2, m, k)), &take(half, (k, n))),
            _ => matmul_case(&take(&vals, (b1, b2, m, k)), &take(half, (b1, b2, k, n))),
        }
    }

    #[test]
    fn conv2d_settings(
        (n, groups, cg, og) in (1usize..=2, 1usize..=2, 1usize..=2, 1usize..=2),
        (kh, kw, stride, padding, dilation) in (1usize..=3, 1usize..=3, 1usize..=2, 0usize..=1, 1usize..=2),
        (eh, ew) in (0usize..=1, 0usize..=1),
        vals in prop::collection::vec(-1.0f64..1.0, 400),
    ) {
        let (c, o) = (groups * cg, groups * og);
        let (h, w) = (fitting(kh, dilation, padding, eh), fitting(kw, dilation, padding, ew));
        let x = take(&vals, (n, c, h, w));
        let wt = take(&vals[7..], (o, cg, kh, kw));
        let b = take(&vals[3..], (o,));
        with_conv!(groups, stride, padding, dilation, opt => conv2d_case(opt, &x, &wt, &b));
    }

    #[test]
    fn conv1d_settings(
        (n, groups, cg, og) in (1usize..=2, 1usize..=2, 1usize..=2, 1usize..=2),
        (k, stride, padding, dilation, extra) in (1usize..=3, 1usize..=2, 0usize..=1, 1usize..=2, 0usize..=2),
        vals in prop::collection::vec(-1.0f64..1.0, 100),
    ) {
        let (c, o) = (groups * cg, groups * og);
        let l = fitting(k, dilation, padding, extra);
        let x = take(&vals, (n, c, l));
        let wt = take(&vals[7..], (o, cg, k));
        let b = take(&vals[3..], (o,));
        with_conv!(groups, stride, padding, dilation, opt => conv1d_case(opt, &x, &wt, &b));
    }

    #[test]
    fn pooling_windows(
        (kernel, stride, pad) in (1usize..=3, 1usize..=3, 0usize..=1),
        (n, c, eh, ew) in (1usize..=2, 1usize..=2, 0usize..=3, 0usize..=3),
        perm in Just((0..200).collect::<Vec<usize>>()).prop_shuffle(),
    ) {
        // Padding at most half the window; distinct values so every window has one maximum.
        let pad = if kernel >= 2 { pad } else { 0 };
        let (h, w) = (fitting(kernel, 1, pad, eh), fitting(kernel, 1, pad, ew));
        let vals: Vec<f64> = perm.iter().map(|&i| (i as f64 - 100.0) * 0.01).collect();
        let x4 = take(&vals, (n, c, h, w));
        let x3 = take(&vals[3..], (c, h, w));
        match (kernel, stride, pad) {
            (1, 1, 0) => pool_case::<1, 1, 0>(&x4, &x3),
            (1, 2, 0) => pool_case::<1, 2, 0>(&x4, &x3),
            (1, 3, 0) => pool_case::<1, 3, 0>(&x4, &x3),
            (2, 1, 0) => pool_case::<2, 1, 0>(&x4, &x3),
            (2, 1, 1) => pool_case::<2, 1, 1>(&x4, &x3),
            (2, 2, 0) => pool_case::<2, 2, 0>(&x4, &x3),
            (2, 2, 1) => pool_case::<2, 2, 1>(&x4, &x3),
            (2, 3, 0) => pool_case::<2, 3, 0>(&x4, &x3),
            (2, 3, 1) => pool_case::<2, 3, 1>(&x4, &x3),
            (3, 1, 0) => pool_case::<3, 1, 0>(&x4, &x3),
            (3, 1, 1) => pool_case::<3, 1, 1>(&x4, &x3),
            (3, 2, 0) => pool_case::<3, 2, 0>(&x4, &x3),
            (3, 2, 1) => pool_case::<3, 2, 1>(&x4, &x3),
            (3, 3, 0) => pool_case::<3, 3, 0>(&x4, &x3),
            (3, 3, 1) => pool_case::<3, 3, 1>(&x4, &x3),
            other => panic!("pooling {other:?} is not generated"),
        }
    }
}
