//! Gradient checks: the tape's gradients against central finite differences in float64.
//! This module holds the shared machinery (the check itself, the strategies that draw shapes
//! and kink-free values, and macros that turn run-time ranks and axes into the const generics
//! the ops take) plus the fixed-shape tests of the tape's own behaviour; the `grad_*` modules
//! check each op family over random shapes and values.
//!
//! Invariant: strategies never put a value where the op is not differentiable (ties of a max,
//! zeros of `abs`, clamp bounds), so every check runs at the one tolerance of [`check`].

#![allow(dead_code)]

use crate::common::tolerance;
use proptest::prelude::*;
use rtx::prelude::*;

/// Asserts the tape's gradient of `f` at `x` matches central differences.
#[track_caller]
pub fn check<S: Shape>(x: &Tensor<S, f64>, f: impl Fn(&Tensor<S, f64>) -> Tensor<(), f64>) {
    let leaf = x.clone().requires_grad();
    let grads = f(&leaf).backward();
    let got = grads.get(&leaf).expect("a gradient for the input").to_vec();
    let base = x.to_vec();
    let eps = 1e-6;
    for i in 0..base.len() {
        let mut plus = base.clone();
        let mut minus = base.clone();
        plus[i] += eps;
        minus[i] -= eps;
        let fp = f(&Tensor::from_vec(plus, x.shape(), Device::Cpu)).item();
        let fm = f(&Tensor::from_vec(minus, x.shape(), Device::Cpu)).item();
        let want = (fp - fm) / (2.0 * eps);
        assert!(
            (got[i] - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "element {i} of {:?}: tape {} vs finite difference {want}",
            x.dims(),
            got[i]
        );
    }
}

/// A weighted sum of every element with fixed, distinct weights, so each output element
/// gets its own gradient.
pub fn wsum<S: Shape>(y: &Tensor<S, f64>) -> Tensor<(), f64> {
    let n = y.numel();
    let w: Tensor<(usize,), f64> = Tensor::from_vec(
        (0..n)
            .map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.1 + 0.05)
            .collect(),
        (n,),
        Device::Cpu,
    );
    (y.reshape((n,)) * w).sum_all()
}

/// A tensor of `shape` filled from `vals`, repeating them as needed.
pub fn filled<S: Shape>(vals: &[f64], shape: S) -> Tensor<S, f64> {
    let n = shape.numel();
    Tensor::from_vec(
        (0..n).map(|i| vals[i % vals.len()]).collect(),
        shape,
        Device::Cpu,
    )
}

/// An index tensor of `shape` from `vals`.
pub fn ix<S: Shape>(vals: Vec<i64>, shape: S) -> Tensor<S, i64> {
    Tensor::from_vec(vals, shape, Device::Cpu)
}

/// Dims of rank in `ranks`, each in `1..=max`.
pub fn dims(
    ranks: std::ops::RangeInclusive<usize>,
    max: usize,
) -> impl Strategy<Value = Vec<usize>> {
    ranks.prop_flat_map(move |r| prop::collection::vec(1..=max, r))
}

/// `n` values, pairwise at least 0.06 apart and at least 0.03 from zero: a shuffled grid of
/// step 0.1 with jitter, so maxima, minima and signs are stable under the finite difference.
pub fn distinct(n: usize) -> impl Strategy<Value = Vec<f64>> {
    let grid: Vec<usize> = (0..n).collect();
    (
        Just(grid).prop_shuffle(),
        prop::collection::vec(0.0f64..0.04, n),
    )
        .prop_map(move |(p, jitter)| {
            p.iter()
                .zip(jitter)
                .map(|(&i, j)| (i as f64 - (n / 2) as f64) * 0.1 + 0.03 + j)
                .collect()
        })
}

/// Dims drawn by `dims` with `distinct` values for them.
pub fn shaped_distinct(
    ranks: std::ops::RangeInclusive<usize>,
    max: usize,
) -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    dims(ranks, max).prop_flat_map(|d| {
        let n = d.iter().product::<usize>();
        (Just(d), distinct(n))
    })
}

/// Dims drawn by `dims` with values uniform in `lo..hi`.
pub fn shaped(
    ranks: std::ops::RangeInclusive<usize>,
    max: usize,
    lo: f64,
    hi: f64,
) -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    dims(ranks, max).prop_flat_map(move |d| {
        let n = d.iter().product::<usize>();
        (Just(d), prop::collection::vec(lo..hi, n))
    })
}

/// A random broadcast of `out` (PyTorch's trailing-dims rule): the last `rank` dims of `out`
/// (at least one), each replaced by 1 where `ones` says so.
pub fn broadcast_source(out: &[usize], rank: usize, ones: &[bool]) -> Vec<usize> {
    let rank = rank.clamp(1, out.len());
    out[out.len() - rank..]
        .iter()
        .zip(ones)
        .map(|(&d, &one)| if one { 1 } else { d })
        .collect()
}

/// A shape of `like`'s type (so of its rank) with the dims `dims`.
pub fn same_rank<S: Shape>(_like: S, dims: &[usize]) -> S {
    S::from_dims(dims).expect("dims of the same rank")
}

/// Runs `$body` with `$s` bound to a tuple of `usize` dims of the run-time rank of `$d` (1 to
/// 3), so one body covers every rank.
macro_rules! with_rank {
    ($d:expr, $s:ident => $body:expr) => {{
        let d: &[usize] = &$d;
        match d.len() {
            1 => {
                let $s = (d[0],);
                $body
            }
            2 => {
                let $s = (d[0], d[1]);
                $body
            }
            3 => {
                let $s = (d[0], d[1], d[2]);
                $body
            }
            r => panic!("rank {r} is not generated"),
        }
    }};
}
pub(crate) use with_rank;

/// Runs `$body` with `$s` bound to a tuple of the dims `$d` (rank 1 to 3) and the const `$a`
/// set to the run-time axis `$axis` (below the rank).
macro_rules! with_axis {
    ($d:expr, $axis:expr, $s:ident, $a:ident => $body:expr) => {{
        let d: &[usize] = &$d;
        match (d.len(), $axis) {
            (1, 0) => {
                const $a: usize = 0;
                let $s = (d[0],);
                $body
            }
            (2, 0) => {
                const $a: usize = 0;
                let $s = (d[0], d[1]);
                $body
            }
            (2, 1) => {
                const $a: usize = 1;
                let $s = (d[0], d[1]);
                $body
            }
            (3, 0) => {
                const $a: usize = 0;
                let $s = (d[0], d[1], d[2]);
                $body
            }
            (3, 1) => {
                const $a: usize = 1;
                let $s = (d[0], d[1], d[2]);
                $body
            }
            (3, 2) => {
                const $a: usize = 2;
                let $s = (d[0], d[1], d[2]);
                $body
            }
            (r, a) => panic!("axis {a} of rank {r} is not generated"),
        }
    }};
}
pub(crate) use with_axis;

/// Runs `$body` with `$s` bound to a tuple of the dims `$d` (rank 1 to 3) and the const `$a`
/// set to the run-time position `$axis` of a new axis (at most the rank).
macro_rules! with_new_axis {
    ($d:expr, $axis:expr, $s:ident, $a:ident => $body:expr) => {{
        let d: &[usize] = &$d;
        match (d.len(), $axis) {
            (1, 0) => {
                const $a: usize = 0;
                let $s = (d[0],);
                $body
            }
            (1, 1) => {
                const $a: usize = 1;
                let $s = (d[0],);
                $body
            }
            (2, 0) => {
                const $a: usize = 0;
                let $s = (d[0], d[1]);
                $body
            }
            (2, 1) => {
                const $a: usize = 1;
                let $s = (d[0], d[1]);
                $body
            }
            (2, 2) => {
                const $a: usize = 2;
                let $s = (d[0], d[1]);
                $body
            }
            (3, 0) => {
                const $a: usize = 0;
                let $s = (d[0], d[1], d[2]);
                $body
            }
            (3, 1) => {
                const $a: usize = 1;
                let $s = (d[0], d[1], d[2]);
                $body
            }
            (3, 2) => {
                const $a: usize = 2;
                let $s = (d[0], d[1], d[2]);
                $body
            }
            (3, 3) => {
                const $a: usize = 3;
                let $s = (d[0], d[1], d[2]);
                $body
            }
            (r, a) => panic!("new axis {a} of rank {r} is not generated"),
        }
    }};
}
pub(crate) use with_new_axis;

/// Runs `$body` with `$src` and `$out` bound to tuples of the dims `$ds` and `$do`, for every
/// pair of ranks with the source no longer than the output (what `broadcast_to` accepts).
macro_rules! with_ranks_le {
    ($ds:expr, $do:expr, $src:ident, $out:ident => $body:expr) => {{
        let (a, b): (&[usize], &[usize]) = (&$ds, &$do);
        match (a.len(), b.len()) {
            (1, 1) => {
                let ($src, $out) = ((a[0],), (b[0],));
                $body
            }
            (1, 2) => {
                let ($src, $out) = ((a[0],), (b[0], b[1]));
                $body
            }
            (1, 3) => {
                let ($src, $out) = ((a[0],), (b[0], b[1], b[2]));
                $body
            }
            (2, 2) => {
                let ($src, $out) = ((a[0], a[1]), (b[0], b[1]));
                $body
            }
            (2, 3) => {
                let ($src, $out) = ((a[0], a[1]), (b[0], b[1], b[2]));
                $body
            }
            (3, 3) => {
                let ($src, $out) = ((a[0], a[1], a[2]), (b[0], b[1], b[2]));
                $body
            }
            (r, s) => panic!("broadcast from rank {r} to rank {s} is not generated"),
        }
    }};
}
pub(crate) use with_ranks_le;

type D4 = (usize, usize, usize, usize);
type M = (usize, usize);

#[test]
fn reuse_branches_and_accumulation() {
    let x: Tensor<Rank1<3>, f64> = Tensor::from_array([1.0, -2.0, 0.5], Device::Cpu);
    // x appears three times: d/dx (x*x + exp(x)) = 2x + exp(x).
    check(&x, |t| (t * t + t.exp()).sum_all());
    let leaf = x.clone().requires_grad();
    let g = (&leaf * &leaf + leaf.exp())
        .sum_all()
        .backward()
        .get(&leaf)
        .unwrap();
    // Exact: the tape adds 2x and rtx's own exp(x), each computed once.
    let exp = x.exp().to_vec();
    let want: Vec<f64> = x
        .to_vec()
        .iter()
        .zip(&exp)
        .map(|(v, e)| 2.0 * v + e)
        .collect();
    assert_eq!(g.to_vec(), want);
}

#[test]
fn no_grad_and_detach_stop_the_tape() {
    let w: Tensor<Rank1<2>> = Tensor::from_array([1.0, 2.0], Device::Cpu).requires_grad();
    assert!(w.tracks_grad());
    assert!(!rtx::no_grad(|| w.exp()).tracks_grad());
    assert!(rtx::is_grad_enabled());
    let loss = (w.detach() * &w).sum_all();
    // Only the second factor is tracked: d/dw = detached w.
    assert_eq!(loss.backward().get(&w).unwrap().to_vec(), vec![1.0, 2.0]);
    let untracked: Tensor<Rank1<2>> = Tensor::ones((Const,), Device::Cpu);
    assert!(untracked.sum_all().backward().is_empty());
}

#[test]
fn gradients_are_typed_like_their_parameters() {
    let w: Tensor<Rank2<2, 3>> = Tensor::ones((Const, Const), Device::Cpu).requires_grad();
    let b: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu).requires_grad();
    let loss = (&w + &b).relu().sum_all();
    let grads = loss.backward();
    let gw: Tensor<Rank2<2, 3>> = grads.get(&w).unwrap();
    let gb: Tensor<Rank1<3>> = grads.get(&b).unwrap();
    assert_eq!(gw.to_vec(), vec![1.0; 6]);
    assert_eq!(gb.to_vec(), vec![2.0; 3]);
}

#[test]
fn casts_between_floats_pass_gradients() {
    let x: Tensor<Rank1<3>, f64> =
        Tensor::from_array([1.0, -2.0, 0.5], Device::Cpu).requires_grad();
    let loss = (x.cast::<f32>() * 2.0)
        .cast::<bf16>()
        .cast::<f64>()
        .sum_all();
    assert_eq!(loss.backward().get(&x).unwrap().to_vec(), vec![2.0; 3]);
    // A cast to an integer type ends the history.
    assert!(!x.cast::<i32>().tracks_grad());
}

#[test]
fn max_pool_ties_send_the_gradient_to_the_first_maximum() {
    let x: Tensor<Rank4<1, 1, 2, 4>, f64> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    let leaf = x.requires_grad();
    let y: Tensor<Rank4<1, 1, 1, 2>, f64> = leaf.max_pool2d(Pool::<2, 2>);
    let g = y.sum_all().backward().get(&leaf).unwrap();
    assert_eq!(g.to_vec(), vec![1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn a_small_cnn_matches_finite_differences() {
    let vals: Vec<f64> = (0..97)
        .map(|i| ((i * 37 % 97) as f64 / 97.0 - 0.5) * 1.6)
        .collect();
    let x: Tensor<D4, f64> = filled(&vals, (2, 1, 6, 6));
    let w1: Tensor<D4, f64> = filled(&vals[5..], (3, 1, 3, 3));
    let b1: Tensor<(usize,), f64> = filled(&vals[40..], (3,));
    let w2: Tensor<(usize, usize), f64> = filled(&vals[11..], (27, 4));
    let net =
        |w1: &Tensor<D4, f64>, b1: &Tensor<(usize,), f64>, w2: &Tensor<(usize, usize), f64>| {
            let h: Tensor<D4, f64> = x.conv2d_bias(w1, b1, Conv::<1, 1>);
            let p: Tensor<D4, f64> = h.relu().max_pool2d(Pool::<2, 2>);
            let flat = p.reshape((2usize, 27usize));
            flat.matmul(w2).log_softmax::<1>().mean_all()
        };
    check(&w1, |t| net(t, &b1, &w2));
    check(&b1, |t| net(&w1, t, &w2));
    check(&w2, |t| net(&w1, &b1, t));
    // All three at once through one backward pass agree with the separate ones.
    let (l1, lb, l2) = (
        w1.clone().requires_grad(),
        b1.clone().requires_grad(),
        w2.clone().requires_grad(),
    );
    let grads = net(&l1, &lb, &l2).backward();
    assert_eq!(grads.len(), 3);
    assert!(grads.get(&l1).is_some() && grads.get(&lb).is_some() && grads.get(&l2).is_some());
}

#[test]
fn prod_gradients_are_exact_at_zeros() {
    let x: Tensor<Rank2<3, 3>, f64> = Tensor::from_array(
        [[2.0, 3.0, 4.0], [2.0, 0.0, 5.0], [0.0, 7.0, 0.0]],
        Device::Cpu,
    )
    .requires_grad();
    let g = x.prod::<1>().sum_all().backward().get(&x).unwrap();
    assert_eq!(
        g.to_vec(),
        vec![12.0, 8.0, 6.0, 0.0, 10.0, 0.0, 0.0, 0.0, 0.0]
    );
}

#[test]
fn splits_record_and_inference_records_nothing() {
    let x: Tensor<Rank2<2, 4>> = Tensor::ones((Const, Const), Device::Cpu);
    assert!(x.split::<1>(2).iter().all(|p| !p.tracks_grad()));
    let w = x.clone().requires_grad();
    assert!(w.chunk::<1>(2).iter().all(|p| p.tracks_grad()));
    let y: Tensor<Rank3<2, 2, 4>> = Tensor::stack::<0, 2>([&x, &x]);
    assert!(!y.tracks_grad());
    let y: Tensor<Rank3<2, 2, 4>> = rtx::no_grad(|| Tensor::stack::<0, 2>([&w, &x]));
    assert!(!y.tracks_grad());
    let y: Tensor<Rank3<2, 2, 4>> = Tensor::stack::<0, 2>([&x, &w]);
    let g = y.sum_all().backward().get(&w).unwrap();
    assert_eq!(g.to_vec(), vec![1.0; 8]);
}

/// The input and weight gradients of a conv -> pool -> gather -> cat -> prod chain, computed
/// in `E` and returned as float64.
fn chain_grads<E: Float>(x: &Tensor<D4, f64>, w: &Tensor<D4, f64>) -> Vec<f64> {
    let (x, w) = (x.cast::<E>().requires_grad(), w.cast::<E>().requires_grad());
    let y: Tensor<D4, E> = x.conv2d(&w, GroupedConv::<2, 1, 1>);
    let p: Tensor<D4, E> = y.max_pool2d::<usize, usize, 2, 1, 0>(Pool::<2, 1>);
    let p: Tensor<D4, E> = p.avg_pool2d(Pool::<2, 1, 1>);
    let flat = p.reshape((2usize, 16usize));
    let picked = flat.gather::<1, M>(&ix(vec![3, 0, 1, 1, 9, 2], (2, 3)));
    let joined: Tensor<M, E> = Tensor::cat::<1, usize>(&[&picked, &flat]);
    let g = joined.prod::<0>().sum_all().backward();
    let mut out = g.get(&x).expect("x grad").cast::<f64>().to_vec();
    out.extend(g.get(&w).expect("w grad").cast::<f64>().to_vec());
    out
}

#[test]
fn every_float_type_back_propagates() {
    let vals: Vec<f64> = (0..50)
        .map(|i| ((i * 13 % 50) as f64 / 50.0 - 0.5) * 1.5)
        .collect();
    let x: Tensor<D4, f64> = filled(&vals, (1, 2, 4, 4));
    let w: Tensor<D4, f64> = filled(&vals[7..], (2, 1, 3, 3));
    let want = chain_grads::<f64>(&x, &w);
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (dtype, got) in [
        (DType::F32, chain_grads::<f32>(&x, &w)),
        (DType::F16, chain_grads::<f16>(&x, &w)),
        (DType::BF16, chain_grads::<bf16>(&x, &w)),
    ] {
        // Errors of a few roundings per step, relative to the largest gradient.
        let tol = 16.0 * tolerance(dtype).0 * scale;
        for (i, (g, v)) in got.iter().zip(&want).enumerate() {
            assert!((g - v).abs() <= tol, "{dtype:?} element {i}: {g} vs {v}");
        }
    }
}

#[test]
fn clamp_passes_gradients_inside_its_bounds_included() {
    let x: Tensor<Rank1<4>, f64> =
        Tensor::from_array([-2.0, -1.0, 0.5, 3.0], Device::Cpu).requires_grad();
    let g = x.clamp(-1.0, 1.0).sum_all().backward().get(&x).unwrap();
    // PyTorch's choice at a bound: the element equals its clamp there, so it passes.
    assert_eq!(g.to_vec(), vec![0.0, 1.0, 1.0, 0.0]);
}
