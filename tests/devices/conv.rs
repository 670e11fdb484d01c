//! Convolution and 2-d pooling on every device, forward and backward (the tape's gradients of
//! `Σ y * r`): stride, padding, dilation, groups, bias, 1x1 kernels, 1-d convolutions and
//! non-contiguous inputs; max pooling with ties and a NaN, average pooling with padding.
//!
//! Inputs are multiples of 1/2 in [-1, 1], so every product and sum here is exact in each
//! float type (bf16 holds multiples of 1/4 up to 64 exactly): the devices must agree on every
//! index, whatever order or precision their sums use.

use super::*;
use rtx::Gradients;
use rtx::shape::rules::BroadcastShapes;

type D4 = (usize, usize, usize, usize);

/// Reads one tensor's gradient out of a backward pass.
type GradOf<'a> = &'a dyn Fn(&Gradients) -> Option<Vec<f64>>;

/// `n` values in {-1, -1/2, 0, 1/2, 1}.
fn halves<E: Float>(n: usize, seed: u64) -> Vec<E> {
    values::<f64>(n, seed, -1.25, 1.25)
        .into_iter()
        .map(|v| E::from_f64((v * 2.0).round() / 2.0))
        .collect()
}

/// A `[a, b, c, d]` tensor of halves on `dev`.
fn t4<E: Float>(d: [usize; 4], seed: u64, dev: Device) -> Tensor<D4, E> {
    let n = d.iter().product();
    Tensor::from_vec(halves(n, seed), (d[0], d[1], d[2], d[3]), dev)
}

/// The output, and the gradients of `Σ y * r` with respect to each tensor in `of`.
fn with_grads<S: Shape + BroadcastShapes<S>, E: Float>(
    name: &str,
    y: &Tensor<S, E>,
    seed: u64,
    of: &[(&str, GradOf<'_>)],
) -> Outputs {
    let r = Tensor::from_vec(halves::<E>(y.numel(), seed), y.shape(), y.device());
    let grads = (y * &r).sum_all().backward();
    let mut out = vec![(name.to_string(), f64s(y))];
    for (what, get) in of {
        let g = get(&grads).unwrap_or_else(|| panic!("{name}: no gradient for {what}"));
        out.push((format!("{name} d{what}"), g));
    }
    out
}

fn grad_of<S: Shape, E: Float>(t: &Tensor<S, E>) -> impl Fn(&Gradients) -> Option<Vec<f64>> + '_ {
    move |g: &Gradients| g.get(t).map(|t| f64s(&t))
}

fn conv_case<E: Float>() {
    on_every_device::<E>("conv", |dev| {
        let mut out = Outputs::new();
        // Groups, stride 2, padding 1, dilation 2, bias; the input a transposed view.
        let x = t4::<E>([2, 4, 7, 9], 1, dev)
            .transpose::<2, 3>()
            .requires_grad();
        let w = t4::<E>([6, 2, 3, 3], 2, dev).requires_grad();
        let b = Tensor::from_vec(halves::<E>(6, 3), (6usize,), dev).requires_grad();
        let y: Tensor<D4, E> = x.conv2d_bias(&w, &b, GroupedConv::<2, 2, 1, 2>);
        assert_eq!(y.dims(), &[2, 6, 4, 3]);
        out.extend(with_grads(
            "grouped strided dilated",
            &y,
            4,
            &[
                ("x", &grad_of(&x)),
                ("w", &grad_of(&w)),
                ("b", &grad_of(&b)),
            ],
        ));

        // The common case: one group, 3x3, padding 1, several images.
        let x = t4::<E>([2, 3, 6, 5], 5, dev).requires_grad();
        let w = t4::<E>([4, 3, 3, 3], 6, dev).requires_grad();
        let y: Tensor<D4, E> = x.conv2d(&w, Conv::<1, 1>);
        out.extend(with_grads(
            "3x3 same",
            &y,
            7,
            &[("x", &grad_of(&x)), ("w", &grad_of(&w))],
        ));

        // A 1x1 kernel reads the input as its own column matrix.
        let x = t4::<E>([3, 5, 4, 4], 8, dev).requires_grad();
        let w = t4::<E>([3, 5, 1, 1], 9, dev).requires_grad();
        let b = Tensor::from_vec(halves::<E>(3, 10), (3usize,), dev).requires_grad();
        let y: Tensor<D4, E> = x.conv2d_bias(&w, &b, Conv::<1>);
        out.extend(with_grads(
            "pointwise",
            &y,
            11,
            &[
                ("x", &grad_of(&x)),
                ("w", &grad_of(&w)),
                ("b", &grad_of(&b)),
            ],
        ));

        // Depthwise (groups = channels), several images.
        let x = t4::<E>([2, 4, 5, 5], 12, dev).requires_grad();
        let w = t4::<E>([4, 1, 3, 3], 13, dev).requires_grad();
        let y: Tensor<D4, E> = x.conv2d(&w, GroupedConv::<4, 1, 1>);
        out.extend(with_grads(
            "depthwise",
            &y,
            14,
            &[("x", &grad_of(&x)), ("w", &grad_of(&w))],
        ));

        // 1-d: lifted to height 1 (a stride-0 axis), stride 2, padding 1.
        let x = Tensor::from_vec(halves::<E>(2 * 3 * 11, 15), (2usize, 3usize, 11usize), dev)
            .requires_grad();
        let w = Tensor::from_vec(halves::<E>(4 * 3 * 3, 16), (4usize, 3usize, 3usize), dev)
            .requires_grad();
        let b = Tensor::from_vec(halves::<E>(4, 17), (4usize,), dev).requires_grad();
        let y: Tensor<(usize, usize, usize), E> = x.conv1d_bias(&w, &b, Conv::<2, 1>);
        assert_eq!(y.dims(), &[2, 4, 6]);
        out.extend(with_grads(
            "conv1d",
            &y,
            18,
            &[
                ("x", &grad_of(&x)),
                ("w", &grad_of(&w)),
                ("b", &grad_of(&b)),
            ],
        ));
        out
    });
}

#[test]
fn convolutions_and_their_gradients_match_the_cpu() {
    every_float!(conv_case);
}

fn pool_case<E: Float>() {
    on_every_device::<E>("pool", |dev| {
        let mut out = Outputs::new();
        // Overlapping 3x3 windows, stride 2, padding 1, on a transposed view; halves make
        // ties, which send the gradient to the first maximum.
        let x = t4::<E>([2, 3, 8, 7], 20, dev)
            .transpose::<2, 3>()
            .requires_grad();
        let y: Tensor<D4, E> = x.max_pool2d(Pool::<3, 2, 1>);
        assert_eq!(y.dims(), &[2, 3, 4, 4]);
        out.extend(with_grads("max 3/2/1", &y, 21, &[("x", &grad_of(&x))]));

        // A NaN wins its windows and takes their gradient.
        let mut data = halves::<E>(2 * 6 * 6, 22);
        data[9] = E::from_f64(f64::NAN);
        let x = Tensor::from_vec(data, (1usize, 2usize, 6usize, 6usize), dev).requires_grad();
        let y: Tensor<D4, E> = x.max_pool2d(Pool::<2, 1>);
        let r = Tensor::from_vec(halves::<E>(y.numel(), 23), y.shape(), dev);
        let g = (&y * &r).sum_all().backward();
        out.push(("max with NaN".into(), f64s(&y)));
        out.push((
            "max with NaN dx".into(),
            grad_of(&x)(&g).unwrap_or_default(),
        ));

        let x = t4::<E>([2, 3, 7, 6], 24, dev).requires_grad();
        let y: Tensor<D4, E> = x.avg_pool2d(Pool::<3, 1, 1>);
        out.extend(with_grads("avg 3/1/1", &y, 25, &[("x", &grad_of(&x))]));
        let y: Tensor<D4, E> = x.avg_pool2d(Pool::<2, 2>);
        out.extend(with_grads("avg 2/2", &y, 26, &[("x", &grad_of(&x))]));

        // Unbatched [C, H, W] input.
        let x = Tensor::from_vec(halves::<E>(3 * 5 * 5, 27), (3usize, 5usize, 5usize), dev)
            .requires_grad();
        let y: Tensor<(usize, usize, usize), E> = x.max_pool2d(Pool::<2, 2>);
        out.extend(with_grads("max unbatched", &y, 28, &[("x", &grad_of(&x))]));
        out
    });
}

#[test]
fn pooling_and_its_gradients_match_the_cpu() {
    every_float!(pool_case);
}
