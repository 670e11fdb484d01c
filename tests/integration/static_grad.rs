//! The static backwards of `rtx::compile` (autograd tier 2) held to the tape (tier 1): for
//! tensor methods through `vjp1` and its kin, every static loss and every layer's `StaticForward`, the static
//! forward gives the eager output, its gradients (of the inputs, and of the parameters
//! through `Gradients::get`) equal those `loss.backward()` gives on the same inputs, and the
//! static path records nothing on the tape even when its inputs and parameters track
//! gradients. Each check runs in f64 and f32.
//!
//! The loss is `Σ y * r` for a fixed random `r`, whose gradient with respect to `y` is `r`
//! itself, so the static backward is handed `r`. Where the static path runs the same kernels
//! as the eager one the comparison is exact (`tol` 0); the norms run the fused kernels on
//! the CPU where the eager layers run their composition, so they agree to rounding.
//!
//! Every test body runs on the CPU and then on every usable CUDA GPU (there the norms run
//! the same fused kernels on both paths, so they too must agree exactly); where no GPU
//! exists, each test prints `skipped on GPUs: <reason>`.

use rtx::compile::grad::{vjp_n, vjp1, vjp2};
use rtx::compile::{Gradients, StaticForward, loss as static_loss};
use rtx::nn::{TensorKind, Visitor};
use rtx::prelude::*;

thread_local! {
    /// The device the current test body runs on.
    static DEVICE: std::cell::Cell<Device> = const { std::cell::Cell::new(Device::Cpu) };
}

/// The device the current test body runs on.
fn dev() -> Device {
    DEVICE.with(|d| d.get())
}

/// Runs `body` on the CPU, then on every usable GPU.
fn on_each_device(test: &str, body: impl Fn()) {
    DEVICE.with(|d| d.set(Device::Cpu));
    body();
    if !rtx::cuda::is_available() {
        println!("{test}: skipped on GPUs: no usable CUDA device");
        return;
    }
    for gpu in 0..rtx::cuda::device_count() {
        DEVICE.with(|d| d.set(Device::Cuda(gpu)));
        body();
    }
    DEVICE.with(|d| d.set(Device::Cpu));
}

/// Asserts `got` and `want` have the same sizes and values: exactly for `tol` 0 (NaN equal to
/// NaN), else within `tol` relative to `max(|want|, 1)`.
#[track_caller]
fn assert_values<S: Shape, E: Float>(
    what: &str,
    got: &Tensor<S, E>,
    want: &Tensor<S, E>,
    tol: f64,
) {
    assert_eq!(got.dims(), want.dims(), "{what}: sizes");
    let (g, w) = (got.to_vec(), want.to_vec());
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        let (g, w) = (g.to_f64(), w.to_f64());
        let same = if tol == 0.0 {
            g == w || (g.is_nan() && w.is_nan())
        } else {
            (g - w).abs() <= tol * w.abs().max(1.0)
        };
        assert!(same, "{what}, element {i}: static {g}, tape {w}");
    }
}

/// Compares two optional gradients: both present and equal, or both absent.
#[track_caller]
fn assert_grads<S: Shape, E: Float>(
    what: &str,
    got: Option<Tensor<S, E>>,
    want: Option<Tensor<S, E>>,
    tol: f64,
) {
    match (got, want) {
        (Some(g), Some(w)) => assert_values(what, &g, &w, tol),
        (None, None) => {}
        (g, w) => panic!(
            "{what}: static gradient present: {}, tape gradient present: {}",
            g.is_some(),
            w.is_some()
        ),
    }
}

/// Standard normal draws of `shape`.
fn randn<S: Shape, E: Float>(shape: S, seed: u64) -> Tensor<S, E> {
    Tensor::randn(shape, seed, dev())
}

/// `Σ y * r`, recorded on the tape when `y` records.
fn weighted_sum<Y: Shape, E: Float>(y: &Tensor<Y, E>, r: &Tensor<Y, E>) -> Tensor<(), E> {
    let n = y.numel();
    (y.reshape((n,)) * r.reshape((n,))).sum_all()
}

/// A one-input method: `eager` on the tape against `stat`, whose output must not record
/// though `x` tracks gradients; its backward must give the tape's gradient when asked and
/// nothing when not.
#[track_caller]
fn check1<S, Y, E, B>(
    what: &str,
    x: &Tensor<S, E>,
    eager: impl Fn(&Tensor<S, E>) -> Tensor<Y, E>,
    stat: impl Fn(&Tensor<S, E>) -> (Tensor<Y, E>, B),
) where
    S: Shape,
    Y: Shape,
    E: Float,
    B: FnOnce(&Tensor<Y, E>, [bool; 1]) -> Option<Tensor<S, E>>,
{
    let x = x.detach().requires_grad();
    let y = eager(&x);
    let r = randn(y.shape(), 99);
    let want = weighted_sum(&y, &r).backward().get(&x);
    let (ys, backward) = stat(&x);
    assert!(!ys.tracks_grad(), "{what}: the static output records");
    assert_values(&format!("{what} (output)"), &ys, &y, 0.0);
    let got = backward(&r, [true]);
    assert!(got.as_ref().is_none_or(|g| !g.tracks_grad()));
    assert_grads(&format!("{what} (gradient)"), got, want, 0.0);
    let (_, backward) = stat(&x);
    assert!(
        backward(&r, [false]).is_none(),
        "{what}: a gradient not asked for"
    );
}

/// A two-input method, as [`check1`].
#[track_caller]
#[allow(clippy::type_complexity)]
fn check2<S, R, Y, E, B>(
    what: &str,
    a: &Tensor<S, E>,
    b: &Tensor<R, E>,
    eager: impl Fn(&Tensor<S, E>, &Tensor<R, E>) -> Tensor<Y, E>,
    stat: impl Fn(&Tensor<S, E>, &Tensor<R, E>) -> (Tensor<Y, E>, B),
) where
    S: Shape,
    R: Shape,
    Y: Shape,
    E: Float,
    B: FnOnce(&Tensor<Y, E>, [bool; 2]) -> (Option<Tensor<S, E>>, Option<Tensor<R, E>>),
{
    let (a, b) = (a.detach().requires_grad(), b.detach().requires_grad());
    let y = eager(&a, &b);
    let r = randn(y.shape(), 98);
    let grads = weighted_sum(&y, &r).backward();
    let (ys, backward) = stat(&a, &b);
    assert!(!ys.tracks_grad(), "{what}: the static output records");
    assert_values(&format!("{what} (output)"), &ys, &y, 0.0);
    let (da, db) = backward(&r, [true, true]);
    assert_grads(&format!("{what} (first gradient)"), da, grads.get(&a), 0.0);
    assert_grads(&format!("{what} (second gradient)"), db, grads.get(&b), 0.0);
    let (_, backward) = stat(&a, &b);
    let (da, db) = backward(&r, [false, true]);
    assert!(da.is_none(), "{what}: a gradient not asked for");
    assert_grads(&format!("{what} (second alone)"), db, grads.get(&b), 0.0);
}

fn products<E: Float>() {
    let a: Tensor<Rank2<3, 4>, E> = randn((Const, Const), 1);
    let b: Tensor<Rank2<4, 5>, E> = randn((Const, Const), 2);
    check2(
        "matmul",
        &a,
        &b,
        |a, b| a.matmul(b),
        |a, b| vjp2(a, b, &|a, b| a.matmul(b)),
    );
    let w: Tensor<Rank2<5, 4>, E> = randn((Const, Const), 3);
    check2(
        "matmul with a transposed weight",
        &a,
        &w,
        |a, w| a.matmul(&w.t()),
        |a, w| {
            let (wt, back_t) = vjp1(w, &|x| x.t());
            let (y, back) = vjp2(a, &wt, &|a, b| a.matmul(b));
            (y, move |dy: &Tensor<Rank2<3, 5>, E>, need: [bool; 2]| {
                let (da, dwt) = back(dy, need);
                (da, dwt.and_then(|g| back_t(&g, [true])))
            })
        },
    );
    let x: Tensor<Rank3<2, 3, 4>, E> = randn((Const, Const, Const), 4);
    let y: Tensor<Rank3<2, 4, 2>, E> = randn((Const, Const, Const), 5);
    check2(
        "batched matmul",
        &x,
        &y,
        |x, y| x.matmul(y),
        |x, y| vjp2(x, y, &|a, b| a.matmul(b)),
    );
    check2(
        "matmul broadcasting a batch",
        &x,
        &b,
        |x, b| x.matmul(b),
        |x, b| vjp2(x, b, &|a, b| a.matmul(b)),
    );
    let v: Tensor<Rank1<4>, E> = randn((Const,), 6);
    check2(
        "matrix-vector",
        &a,
        &v,
        |a, v| a.matmul(v),
        |a, v| vjp2(a, v, &|a, b| a.matmul(b)),
    );
}

#[test]
fn products_match_the_tape() {
    on_each_device("products_match_the_tape", || {
        products::<f64>();
        products::<f32>();
    });
}

fn views<E: Float>() {
    let x: Tensor<Rank3<2, 3, 4>, E> = randn((Const, Const, Const), 10);
    let m: Tensor<Rank2<3, 4>, E> = randn((Const, Const), 11);
    check1("t", &m, |m| m.t(), |m| vjp1(m, &|x| x.t()));
    check1(
        "transpose",
        &x,
        |x| x.transpose::<0, 2>(),
        |x| vjp1(x, &|x| x.transpose::<0, 2>()),
    );
    check1(
        "permute",
        &x,
        |x| x.permute::<Axes3<2, 0, 1>>(),
        |x| vjp1(x, &|x| x.permute::<Axes3<2, 0, 1>>()),
    );
    let shape = (Const::<4>, Const::<6>);
    check1(
        "reshape",
        &x,
        |x| x.reshape(shape),
        |x| vjp1(x, &|x| x.reshape(shape)),
    );
    // A reshape of a transposed view copies; its gradient goes back through the view.
    check1(
        "reshape of a view",
        &x,
        |x| x.transpose::<1, 2>().reshape((6usize, 4usize)),
        |x| {
            let (v, back_v) = vjp1(x, &|x| x.transpose::<1, 2>());
            let (y, back_y) = vjp1(&v, &|x| x.reshape((6usize, 4usize)));
            (y, move |dy: &Tensor<(usize, usize), E>, need: [bool; 1]| {
                back_y(dy, need).and_then(|g| back_v(&g, need))
            })
        },
    );
    check1(
        "flatten",
        &x,
        |x| x.flatten::<1, 2, Rank2<2, 12>>(),
        |x| vjp1(x, &|x| x.flatten::<1, 2, Rank2<2, 12>>()),
    );
    let col: Tensor<Rank3<2, 1, 4>, E> = randn((Const, Const, Const), 12);
    check1(
        "squeeze",
        &col,
        |c| c.squeeze::<1>(),
        |c| vjp1(c, &|x| x.squeeze::<1>()),
    );
    check1(
        "unsqueeze",
        &m,
        |m| m.unsqueeze::<1>(),
        |m| vjp1(m, &|x| x.unsqueeze::<1>()),
    );
    let to = (Const::<5>, Const::<2>, Const::<3>, Const::<4>);
    check1(
        "broadcast_to",
        &col,
        |c| c.broadcast_to(to),
        |c| vjp1(c, &|x| x.broadcast_to(to)),
    );
    check1(
        "expand",
        &m,
        |m| m.expand(to),
        |m| vjp1(m, &|x| x.expand(to)),
    );
    check1(
        "narrow",
        &x,
        |x| x.narrow::<2, Const<2>>(1, Const),
        |x| vjp1(x, &|x| x.narrow::<2, Const<2>>(1, Const)),
    );
    check1(
        "slice",
        &x,
        |x| x.slice::<1>(1..3),
        |x| vjp1(x, &|x| x.slice::<1>(1..3)),
    );
    check1(
        "contiguous",
        &x,
        |x| x.transpose::<0, 1>().contiguous(),
        |x| {
            let (v, back_v) = vjp1(x, &|x| x.transpose::<0, 1>());
            let (y, back_y) = vjp1(&v, &|x| x.contiguous());
            assert!(y.is_contiguous());
            (y, move |dy: &Tensor<_, E>, need: [bool; 1]| {
                back_y(dy, need).and_then(|g| back_v(&g, need))
            })
        },
    );
    check1(
        "cast to f64",
        &m,
        |m| m.cast::<f64>().cast::<E>(),
        |m| {
            let (y64, back64) = vjp1(m, &|x| x.cast::<f64>());
            let (y, back) = vjp1(&y64, &|x| x.cast::<E>());
            (y, move |dy: &Tensor<Rank2<3, 4>, E>, need: [bool; 1]| {
                back(dy, need).and_then(|g| back64(&g, need))
            })
        },
    );
    let (_, to_int) = vjp1(&m.detach().requires_grad(), &|x| x.cast::<i64>());
    let ints: Tensor<Rank2<3, 4>, i64> = Tensor::zeros((Const, Const), dev());
    assert!(
        to_int(&ints, [true]).is_none(),
        "a cast to integers passes no gradient"
    );
    let (flat, back) = vjp1(&ints, &|x| x.reshape((Const::<12>,)));
    assert_eq!(flat.dims(), &[12]);
    assert!(
        back(&flat, [true]).is_none(),
        "integer tensors take no gradient"
    );
}

#[test]
fn views_match_the_tape() {
    on_each_device("views_match_the_tape", || {
        views::<f64>();
        views::<f32>();
    });
}

fn reductions<E: Float>() {
    let x: Tensor<Rank2<3, 4>, E> = randn((Const, Const), 20);
    // Repeated values, so max and min split the gradient among ties.
    let ties: Tensor<Rank2<3, 4>, E> = Tensor::from_vec(
        [3., 1., 3., 0., -2., -2., 5., 5., 1., 1., 1., 1.]
            .into_iter()
            .map(E::from_f64)
            .collect(),
        (Const, Const),
        dev(),
    );
    macro_rules! axes {
        ($($name:ident),*) => {$(
            for t in [&x, &ties] {
                let what = stringify!($name);
                check1(what, t, |t| t.$name::<0>(), |t| vjp1(t, &|x| x.$name::<0>()));
                check1(what, t, |t| t.$name::<1>(), |t| vjp1(t, &|x| x.$name::<1>()));
            }
        )*};
    }
    axes!(
        sum,
        sum_keepdim,
        prod,
        prod_keepdim,
        max,
        max_keepdim,
        min,
        min_keepdim,
        mean,
        mean_keepdim,
        logsumexp,
        logsumexp_keepdim,
        softmax,
        log_softmax
    );
    for c in [0, 1] {
        check1(
            "var",
            &x,
            |t| t.var::<1>(c),
            |t| vjp1(t, &|x| x.var::<1>(c)),
        );
        check1(
            "var_keepdim",
            &x,
            |t| t.var_keepdim::<0>(c),
            |t| vjp1(t, &|x| x.var_keepdim::<0>(c)),
        );
        check1(
            "std",
            &x,
            |t| t.std::<0>(c),
            |t| vjp1(t, &|x| x.std::<0>(c)),
        );
        check1(
            "std_keepdim",
            &x,
            |t| t.std_keepdim::<1>(c),
            |t| vjp1(t, &|x| x.std_keepdim::<1>(c)),
        );
    }
    for t in [&x, &ties] {
        check1("sum_all", t, |t| t.sum_all(), |t| vjp1(t, &|x| x.sum_all()));
        check1(
            "prod_all",
            t,
            |t| t.prod_all(),
            |t| vjp1(t, &|x| x.prod_all()),
        );
        check1("max_all", t, |t| t.max_all(), |t| vjp1(t, &|x| x.max_all()));
        check1("min_all", t, |t| t.min_all(), |t| vjp1(t, &|x| x.min_all()));
        check1(
            "mean_all",
            t,
            |t| t.mean_all(),
            |t| vjp1(t, &|x| x.mean_all()),
        );
    }
    // A zero in a product: its gradient is the product of the others, not 0/0.
    let zero: Tensor<Rank1<3>, E> = Tensor::from_vec(
        vec![E::from_f64(2.0), E::from_f64(0.0), E::from_f64(-3.0)],
        (Const,),
        dev(),
    );
    check1(
        "prod with a zero",
        &zero,
        |t| t.prod::<0>(),
        |t| vjp1(t, &|x| x.prod::<0>()),
    );
}

#[test]
fn reductions_and_softmax_match_the_tape() {
    on_each_device("reductions_and_softmax_match_the_tape", || {
        reductions::<f64>();
        reductions::<f32>();
    });
}

fn masks_and_indexing<E: Float>() {
    let x: Tensor<Rank3<2, 4, 4>, E> = randn((Const, Const, Const), 30);
    // Causal attention's mask: [T, T] over [B, T, T], filled with -inf, then a softmax.
    let future = Tensor::<(usize, usize), bool>::full((4, 4), true, dev()).triu(1);
    let ninf = E::from_f64(f64::NEG_INFINITY);
    check1(
        "masked_fill then softmax",
        &x,
        |x| x.masked_fill(&future, ninf).softmax::<2>(),
        |x| {
            let (m, back_m) = vjp1(x, &|x| x.masked_fill(&future, ninf));
            let (y, back_y) = vjp1(&m, &|x| x.softmax::<2>());
            (y, move |dy: &Tensor<Rank3<2, 4, 4>, E>, need: [bool; 1]| {
                back_y(dy, need).and_then(|g| back_m(&g, need))
            })
        },
    );
    let cond = x.gt(E::from_f64(0.0));
    let other: Tensor<Rank1<4>, E> = randn((Const,), 31);
    check2(
        "where_cond with a broadcast tensor",
        &x,
        &other,
        |x, o| x.where_cond(&cond, o),
        |x, o| vjp2(x, o, &|x, o| x.where_cond(&cond, o)),
    );
    let half = E::from_f64(0.5);
    check1(
        "where_cond with a scalar",
        &x,
        |x| x.where_cond(&cond, half),
        |x| vjp1(x, &|x| x.where_cond(&cond, half)),
    );
    check1("tril", &x, |x| x.tril(0), |x| vjp1(x, &|x| x.tril(0)));
    check1("triu", &x, |x| x.triu(-1), |x| vjp1(x, &|x| x.triu(-1)));

    let table: Tensor<Rank2<5, 3>, E> = randn((Const, Const), 32);
    let ids: Tensor<Rank1<4>, i64> = Tensor::from_array([4, 0, 4, 2], dev());
    check1(
        "index_select::<0> with a repeated index",
        &table,
        |t| t.index_select::<0, _>(&ids),
        |t| vjp1(t, &|x| x.index_select::<0, _>(&ids)),
    );
    let cols: Tensor<Rank1<2>, i64> = Tensor::from_array([2, 2], dev());
    check1(
        "index_select::<1>",
        &table,
        |t| t.index_select::<1, _>(&cols),
        |t| vjp1(t, &|x| x.index_select::<1, _>(&cols)),
    );
    let picks: Tensor<Rank2<5, 2>, i64> =
        Tensor::from_array([[0, 2], [1, 1], [2, 0], [0, 0], [1, 2]], dev());
    check1(
        "gather",
        &table,
        |t| t.gather::<1, _>(&picks),
        |t| vjp1(t, &|x| x.gather::<1, _>(&picks)),
    );
}

#[test]
fn masks_and_indexing_match_the_tape() {
    on_each_device("masks_and_indexing_match_the_tape", || {
        masks_and_indexing::<f64>();
        masks_and_indexing::<f32>();
    });
}

fn joins<E: Float>() {
    let a: Tensor<(Const<2>, usize), E> = randn((Const, 3), 40);
    let b: Tensor<(Const<2>, usize), E> = randn((Const, 2), 41);
    check2(
        "concat",
        &a,
        &b,
        |a, b| a.concat::<1, Const<5>>(b),
        |a, b| vjp2(a, b, &|a, b| a.concat::<1, Const<5>>(b)),
    );
    // cat and stack: one flag and one gradient per input.
    let (a, b) = (a.detach().requires_grad(), b.detach().requires_grad());
    let y: Tensor<(Const<2>, usize), E> = Tensor::cat::<1, usize>(&[&a, &b, &a]);
    let r = randn(y.shape(), 42);
    let grads = weighted_sum(&y, &r).backward();
    let (ys, backward) = vjp_n(&[&a, &b, &a], &|xs| Tensor::cat::<1, usize>(xs));
    assert!(!ys.tracks_grad());
    assert_values("cat (output)", &ys, &y, 0.0);
    let parts = backward(&r, &[true, true, true]);
    // `a` appears twice: the tape adds its two slices, as a caller of the static backward does.
    let da = &parts[0].clone().unwrap() + parts[2].as_ref().unwrap();
    assert_grads("cat (first)", Some(da), grads.get(&a), 0.0);
    assert_grads("cat (second)", parts[1].clone(), grads.get(&b), 0.0);

    let p: Tensor<Rank2<2, 3>, E> = randn((Const, Const), 43);
    let q: Tensor<Rank2<2, 3>, E> = randn((Const, Const), 44);
    check2(
        "stack",
        &p,
        &q,
        |p, q| Tensor::stack::<1, 2>([p, q]),
        |p, q| {
            let (y, back) = vjp_n(&[p, q], &|xs| Tensor::stack::<1, 2>([xs[0], xs[1]]));
            (y, move |dy: &Tensor<Rank3<2, 2, 3>, E>, need: [bool; 2]| {
                let mut d = back(dy, &need).into_iter();
                (d.next().flatten(), d.next().flatten())
            })
        },
    );

    // split2's parts are narrows on the tape, each with its own node and rule.
    let x: Tensor<Rank2<3, 5>, E> = randn((Const, Const), 45);
    check1(
        "split2 (left)",
        &x,
        |x| x.split2::<1, Const<2>, Const<3>>(Const, Const).0,
        |x| vjp1(x, &|x| x.split2::<1, Const<2>, Const<3>>(Const, Const).0),
    );
    check1(
        "split2 (right)",
        &x,
        |x| x.split2::<1, Const<2>, Const<3>>(Const, Const).1,
        |x| vjp1(x, &|x| x.split2::<1, Const<2>, Const<3>>(Const, Const).1),
    );
}

#[test]
fn joins_and_splits_match_the_tape() {
    on_each_device("joins_and_splits_match_the_tape", || {
        joins::<f64>();
        joins::<f32>();
    });
}

fn losses<E: Float>() {
    let logits: Tensor<(usize, Const<7>), E> = randn((6, Const), 50);
    let targets: Tensor<(usize,), i64> =
        Tensor::from_vec(vec![6, -100, 0, 3, -100, 1], (6,), dev());
    let plain: Tensor<(usize,), i64> = Tensor::from_vec(vec![6, 2, 0, 3, 5, 1], (6,), dev());
    let three = E::from_f64(3.0);
    for (t, ignore, smoothing) in [
        (&plain, None, 0.0),
        (&targets, Some(-100), 0.0),
        (&targets, Some(-100), 0.2),
        (&plain, None, 0.1),
    ] {
        let opts = CrossEntropy {
            ignore_index: ignore,
            label_smoothing: smoothing,
        };
        let x = logits.detach().requires_grad();
        let loss = cross_entropy_with(&x, t, opts);
        let want = (&loss * three).backward().get(&x);
        let (ls, backward) = static_loss::cross_entropy_with(&x, t, opts);
        assert!(!ls.tracks_grad());
        assert_values("cross_entropy_with (loss)", &ls, &loss, 0.0);
        let dy = Tensor::full((), three, dev());
        assert_grads("cross_entropy_with", Some(backward(&dy)), want, 0.0);
    }
    let x = logits.detach().requires_grad();
    let loss = cross_entropy(&x, &plain);
    let want = loss.backward().get(&x);
    let (ls, backward) = static_loss::cross_entropy(&x, &plain);
    assert_values("cross_entropy (loss)", &ls, &loss, 0.0);
    assert_grads("cross_entropy", Some(backward(&ls.ones_like())), want, 0.0);

    let logp = logits.log_softmax::<1>().detach().requires_grad();
    let loss = nll_loss(&logp, &plain);
    let want = (&loss * three).backward().get(&logp);
    let (ls, backward) = static_loss::nll_loss(&logp, &plain);
    assert!(!ls.tracks_grad());
    assert_values("nll_loss (loss)", &ls, &loss, 0.0);
    let dy = Tensor::full((), three, dev());
    assert_grads("nll_loss", Some(backward(&dy)), want, 0.0);

    let p: Tensor<Rank2<3, 4>, E> = randn((Const, Const), 51);
    let t: Tensor<Rank2<3, 4>, E> = randn((Const, Const), 52);
    let probs: Tensor<Rank2<3, 4>, E> = Tensor::rand((Const, Const), 53, dev());
    macro_rules! pair {
        ($name:ident, $target:expr) => {{
            let (p, t) = (p.detach().requires_grad(), $target.detach().requires_grad());
            let loss = $name(&p, &t);
            let grads = (&loss * three).backward();
            let (ls, backward) = static_loss::$name(&p, &t);
            assert!(!ls.tracks_grad());
            assert_values(concat!(stringify!($name), " (loss)"), &ls, &loss, 0.0);
            let dy = Tensor::full((), three, dev());
            let (dp, dt) = backward(&dy, [true, true]);
            assert_grads(stringify!($name), dp, grads.get(&p), 0.0);
            assert_grads(
                concat!(stringify!($name), " (target)"),
                dt,
                grads.get(&t),
                0.0,
            );
        }};
    }
    pair!(mse_loss, t);
    pair!(l1_loss, t);
    pair!(binary_cross_entropy_with_logits, probs);
}

#[test]
fn losses_match_the_tape() {
    on_each_device("losses_match_the_tape", || {
        losses::<f64>();
        losses::<f32>();
    });
}

/// The gradients a `Gradients` holds for each parameter of a layer, by name.
fn param_grads<M: Module>(layer: &M, grads: &Gradients) -> Vec<(String, Option<Vec<f64>>)> {
    struct Collect<'g>(&'g Gradients, Vec<(String, Option<Vec<f64>>)>);
    impl Visitor for Collect<'_> {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
            if kind == TensorKind::Buffer {
                return;
            }
            let g = self
                .0
                .get(t)
                .map(|g| g.to_vec().iter().map(|v| v.to_f64()).collect());
            self.1.push((name.to_string(), g));
        }
    }
    let mut c = Collect(grads, Vec::new());
    layer.visit("", &mut c);
    c.1
}

/// A layer's static forward against its eager forward on the tape: the output (within `tol`)
/// must not record though the input and the parameters track gradients, and the input's and
/// every parameter's gradient must match.
#[track_caller]
fn check_layer<L, S, Y, E, Out>(what: &str, layer: &L, x: &Tensor<S, E>, tol: f64)
where
    L: Module + StaticForward<(Tensor<S, E>,), Out, Output = Tensor<Y, E>>,
    L: StaticForward<(Tensor<S, E>,), Out, ArgGrads = (Option<Tensor<S, E>>,)>,
    S: Shape,
    Y: Shape,
    E: Float,
{
    let x = x.detach().requires_grad();
    let y = layer.forward_fused((x.clone(),));
    assert!(
        y.tracks_grad(),
        "{what}: the fused forward records as the eager one"
    );
    let r = randn(y.shape(), 97);
    let tape = weighted_sum(&y, &r).backward();
    let (ys, backward) = layer.forward_train((x.clone(),));
    assert!(!ys.tracks_grad(), "{what}: the static output records");
    assert_values(&format!("{what} (output)"), &ys, &y, tol);
    let mut grads = Gradients::new();
    let (dx,) = backward(r.clone(), &mut grads, true);
    assert_grads(&format!("{what} (input)"), dx, tape.get(&x), tol);
    let (want, got) = (param_grads(layer, &tape), param_grads(layer, &grads));
    assert_eq!(want.len(), got.len());
    for ((name, w), (_, g)) in want.iter().zip(&got) {
        let (w, g) = (w.as_ref(), g.as_ref());
        assert!(w.is_some(), "{what}: the tape gave {name} no gradient");
        let shape = (w.map_or(0, Vec::len),);
        let t = |v: Option<&Vec<f64>>| {
            v.map(|v| Tensor::<(usize,), f64>::from_vec(v.clone(), shape, dev()))
        };
        assert_grads(&format!("{what} ({name})"), t(g), t(w), tol);
    }
    let (_, backward) = layer.forward_train((x.clone(),));
    let mut grads = Gradients::new();
    assert!(backward(r, &mut grads, false).0.is_none());
    let with_grads = got.iter().filter(|(_, g)| g.is_some()).count();
    assert_eq!(
        grads.len(),
        with_grads,
        "{what}: parameters without the input's gradient"
    );
}

/// The tolerance of the static norms against the eager ones: the fused kernels against the
/// composition on the CPU, the same fused kernels on a GPU.
fn norm_tol<E: Float>() -> f64 {
    match (dev().is_cuda(), E::DTYPE) {
        (true, _) => 0.0,
        (false, DType::F64) => 1e-12,
        (false, _) => 2e-5,
    }
}

fn layers<E: Float>() {
    let x: Tensor<(usize, Const<6>), E> = randn((5, Const), 60);
    let mut fc = Linear::<6, 4, E>::new(dev(), 1);
    fc.track_gradients();
    check_layer("Linear", &fc, &x, 0.0);
    let mut fc = Linear::<6, 4, E>::new(dev(), 2).without_bias();
    fc.track_gradients();
    check_layer("Linear without bias", &fc, &x, 0.0);

    let x3: Tensor<Rank3<2, 3, 6>, E> = randn((Const, Const, Const), 61);
    let mut ln = LayerNorm::<6, E>::new(dev());
    ln.weight = randn((Const,), 62);
    ln.bias = randn((Const,), 63);
    ln.track_gradients();
    check_layer("LayerNorm", &ln, &x3, norm_tol::<E>());
    let mut rms = RMSNorm::<6, E>::new(dev());
    rms.weight = randn((Const,), 64);
    rms.track_gradients();
    check_layer("RMSNorm", &rms, &x3, norm_tol::<E>());
    rms.eps = Some(1e-3);
    check_layer("RMSNorm with eps", &rms, &x3, norm_tol::<E>());

    check_layer("ReLU", &ReLU, &x3, 0.0);
    check_layer("GELU", &GELU::default(), &x3, 0.0);
    check_layer("GELU tanh", &GELU { tanh: true }, &x3, 0.0);
    check_layer("SiLU", &SiLU, &x3, 0.0);
    check_layer("Sigmoid", &Sigmoid, &x3, 0.0);
    check_layer("Tanh", &Tanh, &x3, 0.0);

    for p in [0.3, 1.0] {
        let (eager, stat) = (Dropout::new(p, 5), Dropout::new(p, 5));
        let x = x3.detach().requires_grad();
        let y = eager.forward(&x);
        let r = randn(y.shape(), 65);
        let want = weighted_sum(&y, &r).backward().get(&x);
        let (ys, backward) = stat.forward_train((x.clone(),));
        assert!(!ys.tracks_grad());
        assert_values("Dropout (output)", &ys, &y, 0.0);
        let (dx,) = backward(r, &mut Gradients::new(), true);
        assert_grads("Dropout", dx, want, 0.0);
        // The next calls of both draw the next, and the same, mask.
        let (y2, _) = stat.forward_train((x.clone(),));
        assert_values("Dropout (second call)", &y2, &eager.forward(&x), 0.0);
    }
    for training in [true, false] {
        let (mut bn, mut twin) = (BatchNorm2d::<3, E>::new(dev()), BatchNorm2d::new(dev()));
        for b in [&mut bn, &mut twin] {
            b.weight = randn((Const,), 66);
            b.bias = randn((Const,), 67);
            b.track_gradients();
            b.set_training(training);
        }
        let x4: Tensor<Rank4<4, 3, 2, 2>, E> = randn((Const, Const, Const, Const), 68);
        check_layer("BatchNorm2d", &bn, &x4, 0.0);
        let x2: Tensor<Rank2<5, 3>, E> = randn((Const, Const), 69);
        check_layer("BatchNorm1d", &bn, &x2, 0.0);
        // The static forward moves the running statistics as the eager one does.
        let fresh = twin.clone();
        let _ = twin.forward(&x4);
        let _ = StaticForward::forward_train(&fresh, (x4.clone(),));
        let (got, want) = (fresh.running_mean(), twin.running_mean());
        assert_values("running mean", &got, &want, 0.0);
        assert_values(
            "running var",
            &fresh.running_var(),
            &twin.running_var(),
            0.0,
        );
        if training {
            assert!(
                got.to_vec() != vec![E::from_f64(0.0); 3],
                "the statistics moved"
            );
        }
    }

    let mut eval = Dropout::new(0.5, 5);
    eval.set_training(false);
    check_layer("Dropout in evaluation", &eval, &x3, 0.0);
}

fn conv_layers<E: Float>() {
    let x: Tensor<Rank4<2, 2, 5, 5>, E> = randn((Const, Const, Const, Const), 70);
    let mut conv = Conv2d::<2, 3, 3, Conv<1, 1>, E>::new(dev(), 1);
    conv.track_gradients();
    check_layer::<_, _, Rank4<2, 3, 5, 5>, _, _>("Conv2d", &conv, &x, 0.0);
    let mut strided = Conv2d::<2, 3, 3, Conv<2, 1>, E>::new(dev(), 2).without_bias();
    strided.track_gradients();
    check_layer::<_, _, Rank4<2, 3, 3, 3>, _, _>("Conv2d strided", &strided, &x, 0.0);
    let mut grouped = Conv2d::<1, 4, 3, GroupedConv<2, 1, 1>, E>::new(dev(), 3);
    grouped.track_gradients();
    check_layer::<_, _, Rank4<2, 4, 5, 5>, _, _>("Conv2d grouped", &grouped, &x, 0.0);

    let s: Tensor<Rank3<2, 2, 7>, E> = randn((Const, Const, Const), 71);
    let mut conv1 = Conv1d::<2, 3, 3, Conv<1>, E>::new(dev(), 4);
    conv1.track_gradients();
    check_layer::<_, _, Rank3<2, 3, 5>, _, _>("Conv1d", &conv1, &s, 0.0);
    let mut dilated = Conv1d::<2, 3, 3, Conv<2, 1, 2>, E>::new(dev(), 5);
    dilated.track_gradients();
    check_layer::<_, _, Rank3<2, 3, 3>, _, _>("Conv1d dilated", &dilated, &s, 0.0);

    let p: Tensor<Rank4<2, 3, 4, 4>, E> = randn((Const, Const, Const, Const), 72);
    check_layer::<_, _, Rank4<2, 3, 2, 2>, _, _>("MaxPool2d", &MaxPool2d::<2, 2>, &p, 0.0);
    check_layer::<_, _, Rank4<2, 3, 2, 2>, _, _>("AvgPool2d", &AvgPool2d::<3, 2, 1>, &p, 0.0);
    check_layer::<_, _, Rank4<2, 3, 2, 2>, _, _>(
        "MaxPool2d padded",
        &MaxPool2d::<3, 2, 1>,
        &p,
        0.0,
    );
}

fn embedding_and_attention<E: Float>() {
    let mut emb = Embedding::<7, 3, E>::new(dev(), 1);
    emb.track_gradients();
    let ids: Tensor<Rank1<5>, i64> = Tensor::from_array([6, 0, 6, 2, 6], dev());
    let y = emb.forward(&ids);
    let r = randn(y.shape(), 80);
    let tape = weighted_sum(&y, &r).backward();
    let (ys, backward) = emb.forward_train((ids.clone(),));
    assert!(!ys.tracks_grad());
    assert_values("Embedding (output)", &ys, &y, 0.0);
    let mut grads = Gradients::new();
    let ((),) = backward(r, &mut grads, true);
    assert_grads(
        "Embedding (weight)",
        grads.get(&emb.weight),
        tape.get(&emb.weight),
        0.0,
    );

    let seq: Tensor<(Dyn<'B'>, Dyn<'T'>), i64> =
        Tensor::from_vec(vec![1, 2, 1, 0, 6, 1], (Dyn(2), Dyn(3)), dev());
    let y = emb.forward_seq(&seq);
    let r = randn(y.shape(), 81);
    let tape = weighted_sum(&y, &r).backward();
    let (ys, backward) = emb.forward_train((seq.clone(),));
    assert!(!ys.tracks_grad());
    assert_values("Embedding of sequences (output)", &ys, &y, 0.0);
    let mut grads = Gradients::new();
    let ((),) = backward(r, &mut grads, true);
    let (got, want) = (grads.get(&emb.weight), tape.get(&emb.weight));
    assert_grads("Embedding of sequences (weight)", got, want, 0.0);

    let mut attn = CausalSelfAttention::<8, 2, E>::new(dev(), 3);
    attn.track_gradients();
    let x: Tensor<(Dyn<'B'>, Dyn<'T'>, Const<8>), E> = randn((Dyn(2), Dyn(5), Const), 82);
    check_layer("CausalSelfAttention", &attn, &x, 0.0);
}

#[test]
fn layers_match_the_tape() {
    on_each_device("layers_match_the_tape", || {
        layers::<f64>();
        layers::<f32>();
    });
}

#[test]
fn conv_and_pool_layers_match_the_tape() {
    on_each_device("conv_and_pool_layers_match_the_tape", || {
        conv_layers::<f64>();
        conv_layers::<f32>();
    });
}

#[test]
fn embedding_and_attention_match_the_tape() {
    on_each_device("embedding_and_attention_match_the_tape", || {
        embedding_and_attention::<f64>();
        embedding_and_attention::<f32>();
    });
}

/// A frozen parameter gets no gradient from the static backward, as from the tape, and the
/// backward skips its product.
#[test]
fn frozen_parameters_get_no_gradient() {
    let mut fc = Linear::<3, 2, f64>::new(dev(), 0);
    fc.bias = fc.bias.map(|b| b.requires_grad());
    let x: Tensor<Rank2<4, 3>, f64> = randn((Const, Const), 90);
    let (y, backward) = fc.forward_train((x.clone(),));
    let mut grads = Gradients::new();
    let (dx,) = backward(y.ones_like(), &mut grads, false);
    assert!(dx.is_none());
    assert!(grads.get(&fc.weight).is_none());
    let bias = fc.bias.as_ref().map(|b| grads.get(b).map(|g| g.to_vec()));
    assert_eq!(bias, Some(Some(vec![4.0, 4.0])));
}
