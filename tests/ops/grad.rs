//! Gradient checks: the tape's gradients against central finite differences in float64, for
//! the elementwise ops, broadcasting, views, reductions, matmul, convolutions, pooling,
//! indexing, joins and splits, over random values.

use crate::common::tolerance;
use proptest::prelude::*;
use rtx::prelude::*;

/// Asserts the tape's gradient of `f` at `x` matches central differences.
#[track_caller]
fn check<S: Shape>(x: &Tensor<S, f64>, f: impl Fn(&Tensor<S, f64>) -> Tensor<(), f64>) {
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
            "element {i}: tape {} vs finite difference {want}",
            got[i]
        );
    }
}

fn tensor(vals: &[f64], rows: usize, cols: usize) -> Tensor<(usize, usize), f64> {
    Tensor::from_vec(vals[..rows * cols].to_vec(), (rows, cols), Device::Cpu)
}

fn weights(rows: usize, cols: usize) -> Tensor<(usize, usize), f64> {
    Tensor::from_vec(
        (0..rows * cols).map(|i| 0.3 + 0.17 * i as f64).collect(),
        (rows, cols),
        Device::Cpu,
    )
}

proptest! {
    #[test]
    fn unary_ops(vals in prop::collection::vec(-2.0f64..2.0, 12), op in 0usize..18) {
        let x = tensor(&vals, 3, 4);
        let w = weights(3, 4);
        // Keep away from kinks (abs, relu at 0) and from log/sqrt's domain edge.
        let x = x.abs().maximum(0.05) * x.gt(0.0).cast::<f64>().where_cond(&x.gt(0.0), -1.0);
        let pos = x.abs() + 0.1;
        let loss = |t: &Tensor<(usize, usize), f64>| -> Tensor<(), f64> {
            let y = match op {
                0 => t.exp(), 1 => t.abs().log(), 2 => t.abs().log1p(), 3 => t.abs().sqrt(),
                4 => t.abs().rsqrt(), 5 => t.recip(), 6 => t.sin(), 7 => t.cos(), 8 => t.tanh(),
                9 => t.erf(), 10 => t.relu(), 11 => t.sigmoid(), 12 => t.gelu(), 13 => t.gelu_tanh(),
                14 => t.silu(), 15 => t.softplus(), 16 => t.neg(), _ => t.abs(),
            };
            (y * &w).sum_all()
        };
        check(&x, loss);
        check(&pos, |t| (t.log() * t.sqrt()).sum_all());
    }

    #[test]
    fn binary_ops_with_broadcasting(a in prop::collection::vec(0.5f64..2.0, 12), b in prop::collection::vec(0.5f64..2.0, 4), op in 0usize..7) {
        let x = tensor(&a, 3, 4);
        let row: Tensor<(usize,), f64> = Tensor::from_vec(b.clone(), (4,), Device::Cpu);
        let w = weights(3, 4);
        let f = |t: &Tensor<(usize, usize), f64>, r: &Tensor<(usize,), f64>| -> Tensor<(), f64> {
            let y = match op {
                0 => t + r, 1 => t - r, 2 => t * r, 3 => t / r,
                4 => t.maximum(r), 5 => t.minimum(r), _ => t.pow(r),
            };
            (y * &w).sum_all()
        };
        check(&x, |t| f(t, &row));
        check(&row, |r| f(&x, r));
        check(&x, |t| (2.0 - t * 3.0 + t / 4.0).sum_all());
    }

    #[test]
    fn views(vals in prop::collection::vec(-2.0f64..2.0, 24)) {
        let x: Tensor<(usize, usize, usize), f64> = Tensor::from_vec(vals, (2, 3, 4), Device::Cpu);
        let w: Tensor<(usize, usize, usize), f64> = Tensor::from_vec((0..24).map(|i| i as f64 * 0.1 - 1.0).collect(), (4, 2, 3), Device::Cpu);
        check(&x, |t| (t.permute::<Axes3<2, 0, 1>>() * &w).sum_all());
        check(&x, |t| (t.transpose::<0, 2>().contiguous().reshape((4, 2, 3)) * &w).sum_all());
        check(&x, |t| (t.narrow::<2, usize>(1, 2).exp()).sum_all());
        check(&x, |t| t.slice::<1>(1..3).unsqueeze::<0>().squeeze::<0>().tanh().sum_all());
        check(&x, |t| (t.reshape((6usize, 4usize)).broadcast_to((5usize, 6usize, 4usize)) * 0.5).exp().sum_all());
        check(&x, |t| {
            let col: Tensor<(usize, usize, usize), f64> = t.narrow::<2, usize>(0, 1);
            (col.broadcast_to((2usize, 3usize, 4usize)) * t).sum_all()
        });
    }

    #[test]
    fn reductions(vals in prop::collection::vec(-2.0f64..2.0, 12)) {
        let x = tensor(&vals, 3, 4);
        let r: Tensor<(usize,), f64> = Tensor::from_vec(vec![0.3, -1.2, 2.0], (3,), Device::Cpu);
        let c: Tensor<(usize,), f64> = Tensor::from_vec(vec![0.5, 1.0, -0.7, 0.2], (4,), Device::Cpu);
        check(&x, |t| (t.sum::<1>() * &r).sum_all());
        check(&x, |t| (t.mean::<0>() * &c).sum_all());
        check(&x, |t| (t.max::<1>() * &r).sum_all());
        check(&x, |t| (t.min::<0>() * &c).sum_all());
        check(&x, |t| (t.var::<1>(1) * &r).sum_all());
        check(&x, |t| (t.std::<0>(0) * &c).sum_all());
        check(&x, |t| (t.logsumexp::<1>() * &r).sum_all());
        check(&x, |t| (t.softmax::<1>() * weights(3, 4)).sum_all());
        check(&x, |t| (t.log_softmax::<0>() * weights(3, 4)).sum_all());
        check(&x, |t| t.mean_all() * t.max_all());
        check(&x, |t| (t.sum_keepdim::<1>().broadcast_to((3usize, 4usize)) * t).sum_all());
    }
}

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

proptest! {
    #[test]
    fn matmul_forms(vals in prop::collection::vec(-2.0f64..2.0, 48)) {
        let a: Tensor<(usize, usize), f64> = Tensor::from_vec(vals[..6].to_vec(), (2, 3), Device::Cpu);
        let b: Tensor<(usize, usize), f64> = Tensor::from_vec(vals[6..18].to_vec(), (3, 4), Device::Cpu);
        let w2 = weights(2, 4);
        check(&a, |t| (t.matmul(&b) * &w2).sum_all());
        check(&b, |t| (a.matmul(t) * &w2).sum_all());
        // Transposed operand, batched lhs broadcast against a plain rhs, and vectors.
        check(&b, |t| (t.t().matmul(&a.t()) * weights(4, 2)).sum_all());
        let batch: Tensor<(usize, usize, usize), f64> = Tensor::from_vec(vals[18..42].to_vec(), (2, 3, 4), Device::Cpu);
        let w3: Tensor<(usize, usize, usize), f64> = Tensor::from_vec((0..12).map(|i| 0.1 * i as f64).collect(), (2, 3, 2), Device::Cpu);
        let rhs: Tensor<(usize, usize), f64> = Tensor::from_vec(vals[40..48].to_vec(), (4, 2), Device::Cpu);
        check(&batch, |t| (t.matmul(&rhs) * &w3).sum_all());
        check(&rhs, |t| (batch.matmul(t) * &w3).sum_all());
        let v: Tensor<(usize,), f64> = Tensor::from_vec(vals[..3].to_vec(), (3,), Device::Cpu);
        check(&v, |t| (t.matmul(&b) * Tensor::from_vec(vec![1.0, -1.0, 0.5, 2.0], (4,), Device::Cpu)).sum_all());
        check(&b, |t| (t.t().matmul(&v) * Tensor::from_vec(vec![1.0, -1.0, 0.5, 2.0], (4,), Device::Cpu)).sum_all());
    }

    #[test]
    fn casts_and_selection(vals in prop::collection::vec(-2.0f64..2.0, 12)) {
        let x = tensor(&vals, 3, 4);
        let w = weights(3, 4);
        let other: Tensor<(usize,), f64> = Tensor::from_vec(vec![0.5, -0.5, 1.5, 2.0], (4,), Device::Cpu);
        let cond = x.gt(0.0);
        check(&x, |t| (t.where_cond(&cond, &other) * &w).sum_all());
        check(&other, |o| (x.where_cond(&cond, o) * &w).sum_all());
        check(&x, |t| (t.masked_fill(&cond, 3.0) * &w).sum_all());
    }
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

type D3 = (usize, usize, usize);
type D4 = (usize, usize, usize, usize);

/// A tensor of `shape` filled from `vals`, repeating them as needed.
fn filled<S: Shape>(vals: &[f64], shape: S) -> Tensor<S, f64> {
    let n = shape.numel();
    Tensor::from_vec(
        (0..n).map(|i| vals[i % vals.len()]).collect(),
        shape,
        Device::Cpu,
    )
}

/// A weighted sum of every element with fixed, distinct weights, so each output element
/// gets its own gradient.
fn wsum<S: Shape>(y: &Tensor<S, f64>) -> Tensor<(), f64> {
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn conv2d_grads(vals in prop::collection::vec(-1.0f64..1.0, 64)) {
        // Plain, strided and padded, dilated, grouped, and the pointwise (1x1) fast path.
        let x = filled(&vals, (2usize, 2usize, 5usize, 5usize));
        let w = filled(&vals[7..], (3usize, 2usize, 3usize, 3usize));
        let b = filled(&vals[3..], (3usize,));
        check(&x, |t| wsum(&t.conv2d::<_, _, _, _, usize, usize, _>(&w, Conv::<1>)));
        check(&w, |t| wsum(&x.conv2d::<_, _, _, _, usize, usize, _>(t, Conv::<2, 1>)));
        check(&x, |t| wsum(&t.conv2d_bias::<_, _, _, _, usize, usize, _>(&w, &b, Conv::<1, 2, 2>)));
        check(&w, |t| wsum(&x.conv2d_bias::<_, _, _, _, usize, usize, _>(t, &b, Conv::<1, 2, 2>)));
        check(&b, |t| wsum(&x.conv2d_bias::<_, _, _, _, usize, usize, _>(&w, t, Conv::<2, 1>)));
        let xg = filled(&vals, (2usize, 4usize, 5usize, 4usize));
        let wg = filled(&vals[5..], (4usize, 2usize, 3usize, 2usize));
        check(&xg, |t| wsum(&t.conv2d::<_, _, _, _, usize, usize, _>(&wg, GroupedConv::<2, 2, 1>)));
        check(&wg, |t| wsum(&xg.conv2d::<_, _, _, _, usize, usize, _>(t, GroupedConv::<2, 1, 1, 2>)));
        let w1 = filled(&vals[9..], (6usize, 2usize, 1usize, 1usize));
        check(&xg, |t| wsum(&t.conv2d::<_, _, _, _, usize, usize, _>(&w1, GroupedConv::<2>)));
        check(&w1, |t| wsum(&xg.conv2d::<_, _, _, _, usize, usize, _>(t, GroupedConv::<2>)));
        // A transposed (strided) input, and a strided output gradient through a permute.
        let xt = filled(&vals, (2usize, 2usize, 5usize, 5usize));
        check(&xt, |t| {
            let y: Tensor<D4, f64> = t.transpose::<2, 3>().conv2d(&w, Conv::<1, 1>);
            wsum(&y.permute::<Axes4<0, 2, 3, 1>>().exp())
        });
    }

    #[test]
    fn conv1d_grads(vals in prop::collection::vec(-1.0f64..1.0, 64)) {
        let x: Tensor<D3, f64> = filled(&vals, (2, 4, 7));
        let w: Tensor<D3, f64> = filled(&vals[3..], (4, 2, 3));
        check(&x, |t| wsum(&t.conv1d::<_, _, _, usize, _>(&w, GroupedConv::<2, 2, 1, 2>)));
        check(&w, |t| wsum(&x.conv1d::<_, _, _, usize, _>(t, GroupedConv::<2, 2, 1, 2>)));
        let w2 = filled(&vals[5..], (3usize, 4usize, 2usize));
        let b2 = filled(&vals[11..], (3usize,));
        check(&x, |t| wsum(&t.conv1d_bias::<_, _, _, usize, _>(&w2, &b2, Conv::<1, 1>)));
        check(&w2, |t| wsum(&x.conv1d_bias::<_, _, _, usize, _>(t, &b2, Conv::<2>)));
        check(&b2, |t| wsum(&x.conv1d_bias::<_, _, _, usize, _>(&w2, t, Conv::<1, 1>)));
    }

    #[test]
    fn pool_grads(vals in prop::collection::vec(-1.0f64..1.0, 64)) {
        let x = filled(&vals, (2usize, 2usize, 5usize, 6usize));
        check(&x, |t| wsum(&t.max_pool2d::<usize, usize, 2, 2, 0>(Pool::<2, 2>)));
        check(&x, |t| wsum(&t.max_pool2d::<usize, usize, 3, 2, 1>(Pool::<3, 2, 1>)));
        check(&x, |t| wsum(&t.avg_pool2d::<usize, usize, 3, 2, 1>(Pool::<3, 2, 1>)));
        check(&x, |t| wsum(&t.avg_pool2d::<usize, usize, 2, 1, 0>(Pool::<2, 1>)));
        let u = filled(&vals, (3usize, 4usize, 5usize));
        check(&u, |t| wsum(&t.max_pool2d::<usize, usize, 2, 1, 1>(Pool::<2, 1, 1>)));
        check(&u, |t| wsum(&t.transpose::<1, 2>().avg_pool2d::<usize, usize, 2, 2, 1>(Pool::<2, 2, 1>)));
    }
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

type M = (usize, usize);

fn ix<S: Shape>(vals: &[i64], shape: S) -> Tensor<S, i64> {
    Tensor::from_vec(vals.to_vec(), shape, Device::Cpu)
}

proptest! {
    #[test]
    fn indexing_grads(vals in prop::collection::vec(-2.0f64..2.0, 24)) {
        let x: Tensor<M, f64> = filled(&vals, (4, 3));
        let idx: Tensor<(usize,), i64> = ix(&[2, 0, 2], (3,));
        check(&x, |t| wsum(&t.index_select::<0, usize>(&idx)));
        check(&x, |t| wsum(&t.t().index_select::<0, usize>(&ix(&[1, 1], (2,)))));
        let x: Tensor<M, f64> = filled(&vals, (3, 4));
        // Gather with an index smaller than the input off the axis.
        let gi: Tensor<M, i64> = ix(&[3, 0, 3, 1, 2, 2], (2, 3));
        check(&x, |t| wsum(&t.gather::<1, M>(&gi)));
        // Scatter: unique targets per line; the source is larger than the index.
        let si: Tensor<M, i64> = ix(&[3, 0, 1, 2], (2, 2));
        let src: Tensor<M, f64> = filled(&vals[5..], (2, 3));
        check(&x, |t| wsum(&t.scatter::<1>(&si, &src)));
        check(&src, |s| wsum(&x.scatter::<1>(&si, s)));
        // Scatter-add with repeated targets, along axis 0.
        let ai: Tensor<M, i64> = ix(&[1, 1, 0, 2, 1, 1], (2, 3));
        let src: Tensor<M, f64> = filled(&vals[2..], (3, 4));
        check(&x, |t| wsum(&t.scatter_add::<0>(&ai, &src)));
        check(&src, |s| wsum(&x.scatter_add::<0>(&ai, s)));
        // Index-add with a repeated index.
        let x: Tensor<M, f64> = filled(&vals, (4, 3));
        let src: Tensor<M, f64> = filled(&vals[7..], (3, 3));
        check(&x, |t| wsum(&t.index_add::<0, usize>(&idx, &src)));
        check(&src, |s| wsum(&x.index_add::<0, usize>(&idx, s)));
        check(&src, |s| wsum(&x.t().index_add::<1, usize>(&idx, &s.t())));
        // Triangles, on a batch of matrices and a transposed view.
        let b: Tensor<D3, f64> = filled(&vals, (2, 3, 4));
        check(&b, |t| wsum(&t.tril(0).exp()));
        check(&b, |t| wsum(&t.triu(1).exp()));
        check(&x, |t| wsum(&t.t().tril(-1)));
    }

    #[test]
    fn join_and_split_grads(vals in prop::collection::vec(-2.0f64..2.0, 24)) {
        let a: Tensor<M, f64> = filled(&vals, (2, 3));
        let b: Tensor<M, f64> = filled(&vals[6..], (2, 2));
        check(&a, |t| wsum(&t.concat::<1, usize>(&b).exp()));
        check(&b, |t| wsum(&a.concat::<1, usize>(t).exp()));
        let c: Tensor<M, f64> = filled(&vals[10..], (3, 2));
        check(&c, |t| wsum(&t.concat::<0, usize>(&b.t())));
        check(&b, |t| wsum(&c.concat::<0, usize>(&t.t())));
        let d: Tensor<M, f64> = filled(&vals[3..], (1, 3));
        check(&a, |t| wsum(&Tensor::cat::<0, usize>(&[&d, t, &d, t]).tanh()));
        check(&d, |t| wsum(&Tensor::cat::<0, usize>(&[t, &a, t])));
        let e: Tensor<M, f64> = filled(&vals[9..], (2, 3));
        check(&a, |t| wsum(&Tensor::stack::<1, 3>([&e, t, &e]).exp()));
        check(&a, |t| wsum(&Tensor::stack::<0, 2>([t, t])));
        // Splits are views built with narrow, so they record.
        let x: Tensor<M, f64> = filled(&vals, (3, 5));
        check(&x, |t| {
            let parts = t.split::<1>(2);
            wsum(&parts[1].exp()) + wsum(&parts[2]) * 2.0
        });
        check(&x, |t| {
            let parts = t.chunk::<0>(2);
            wsum(&parts[0]) - wsum(&parts[1].sin())
        });
        check(&x, |t| {
            let (l, r) = t.split2::<1, usize, usize>(1, 4);
            wsum(&l.exp()) + wsum(&r)
        });
    }

    #[test]
    fn prod_grads(vals in prop::collection::vec(-2.0f64..2.0, 12), zeros in prop::collection::vec(0usize..12, 0..3)) {
        let mut v = vals.clone();
        for &z in &zeros {
            v[z] = 0.0;
        }
        let x: Tensor<M, f64> = filled(&v, (3, 4));
        check(&x, |t| wsum(&t.prod::<1>()));
        check(&x, |t| wsum(&t.prod_keepdim::<0>()));
        check(&x, |t| wsum(&t.t().prod::<1>()));
        let small: Tensor<(usize,), f64> = filled(&v[..5], (5,));
        check(&small, |t| t.prod_all());
    }
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
    let picked = flat.gather::<1, M>(&ix(&[3, 0, 1, 1, 9, 2], (2, 3)));
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
