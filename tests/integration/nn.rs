//! Layers, initializers and losses of `rtx::nn`: forward values against PyTorch (numbers from
//! tests/fixtures/nn_reference.py), gradients against central finite differences in f64,
//! train/eval behaviour, attention causality and a small training loop.

use rtx::nn::init::{self, Nonlinearity, param_seed};
use rtx::nn::{TensorKind, VisitorMut};
use rtx::prelude::*;
use rtx::{Gradients, no_grad};

const CPU: Device = Device::Cpu;

/// `sin(a * (i + 1))` for `i` in `0..n`: the inputs of nn_reference.py.
fn vals(n: usize, a: f64) -> Vec<f64> {
    (0..n).map(|i| (a * (i + 1) as f64).sin()).collect()
}

fn t<S: Shape>(shape: S, a: f64) -> Tensor<S, f64> {
    Tensor::from_vec(vals(shape.numel(), a), shape, CPU)
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: {g} vs {w}\n{got:?}"
        );
    }
}

/// Asserts the tape's gradient of `f` at `x` matches central differences.
#[track_caller]
fn check_grad<S: Shape>(x: &Tensor<S, f64>, f: impl Fn(&Tensor<S, f64>) -> Tensor<(), f64>) {
    let leaf = x.clone().requires_grad();
    let got = f(&leaf).backward().get(&leaf).expect("a gradient").to_vec();
    let base = x.to_vec();
    let eps = 1e-6;
    for i in 0..base.len() {
        let (mut plus, mut minus) = (base.clone(), base.clone());
        plus[i] += eps;
        minus[i] -= eps;
        let fp = f(&Tensor::from_vec(plus, x.shape(), CPU)).item();
        let fm = f(&Tensor::from_vec(minus, x.shape(), CPU)).item();
        let want = (fp - fm) / (2.0 * eps);
        assert!(
            (got[i] - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "element {i}: tape {} vs finite difference {want}",
            got[i]
        );
    }
}

/// A fixed weighted sum, so every output element matters to the gradient.
fn probe<S: Shape>(y: &Tensor<S, f64>) -> Tensor<(), f64> {
    let n = y.numel();
    let c: Tensor<(usize,), f64> = Tensor::from_vec(vals(n, 0.77), (n,), CPU);
    (y.reshape((n,)) * c).sum_all()
}

#[test]
fn linear_matches_pytorch_and_differentiates() {
    let mut fc = Linear::<4, 3, f64>::new(CPU, 0);
    fc.weight = t((Const, Const), 0.7);
    fc.bias = Some(t((Const,), 1.3));
    let x: Tensor<Rank2<2, 4>, f64> = t((Const, Const), 0.3);
    let want = [
        2.6987614773,
        -1.4382376091,
        1.2587435802,
        3.5372425556,
        -1.9576448088,
        1.3990566368,
    ];
    assert_close(&fc.forward(&x).to_vec(), &want, 1e-9);
    check_grad(&x, |x| probe(&fc.forward(x)));
    check_grad(&fc.weight, |w| {
        let mut l = fc.clone();
        l.weight = w.clone();
        probe(&l.forward(&x))
    });
    check_grad(fc.bias.as_ref().unwrap(), |b| {
        let mut l = fc.clone();
        l.bias = Some(b.clone());
        probe(&l.forward(&x))
    });
}

#[test]
fn conv_layers_match_pytorch_and_differentiate() {
    let mut conv = Conv2d::<2, 3, 3, Conv<2, 1>, f64>::new(CPU, 0);
    conv.weight = t((Const, Const, Const, Const), 0.9);
    conv.bias = Some(t((Const,), 0.4));
    let x: Tensor<Rank4<1, 2, 5, 5>, f64> = t((Const, Const, Const, Const), 0.5);
    let y: Tensor<Rank4<1, 3, 3, 3>, f64> = conv.forward(&x);
    let want = [
        -0.0795895339,
        -3.1492823801,
        -3.3814537895,
        2.7298514348,
        1.5351778991,
        -3.5332127534,
        1.2193593348,
        3.4895006863,
        0.7684396137,
        0.3906110136,
        2.5694786405,
        4.0889116013,
        -0.3672803215,
        -1.8302433649,
        3.270066809,
        1.8209475959,
        -1.1306902309,
        0.1480013601,
        1.9770152071,
        1.2059200804,
        -1.2402813354,
        0.5035433853,
        4.2770476827,
        0.3548921761,
        -1.8432522927,
        1.0895911199,
        1.5566450085,
    ];
    assert_close(&y.to_vec(), &want, 1e-9);
    check_grad(&conv.weight, |w| {
        let mut l = conv.clone();
        l.weight = w.clone();
        let y: Tensor<Rank4<1, 3, 3, 3>, f64> = l.forward(&x);
        probe(&y)
    });

    let mut c1 = Conv1d::<2, 2, 2, Conv<1, 0, 2>, f64>::new(CPU, 0);
    c1.weight = t((Const, Const, Const), 0.8);
    c1.bias = Some(t((Const,), 0.2));
    let x1: Tensor<Rank3<1, 2, 6>, f64> = t((Const, Const, Const), 0.6);
    let y1: Tensor<Rank3<1, 2, 4>, f64> = c1.forward(&x1);
    let want = [
        1.0335435552,
        0.8858865365,
        0.4981647765,
        0.0058206408,
        -0.5478854139,
        -0.3925438495,
        0.0359596057,
        0.5879363666,
    ];
    assert_close(&y1.to_vec(), &want, 1e-9);
    check_grad(&x1, |x| {
        let y: Tensor<Rank3<1, 2, 4>, f64> = c1.forward(x);
        probe(&y)
    });
}

#[test]
fn pooling_layers() {
    let x: Tensor<Rank4<1, 1, 4, 4>, f64> = t((Const, Const, Const, Const), 0.9);
    let m: Tensor<Rank4<1, 1, 2, 2>, f64> = MaxPool2d::<2, 2>.forward(&x);
    let a: Tensor<Rank4<1, 1, 2, 2>, f64> = AvgPool2d::<2, 2>.forward(&x);
    let v = x.to_vec();
    let window = |r: usize, c: usize| {
        [
            v[r * 4 + c],
            v[r * 4 + c + 1],
            v[r * 4 + c + 4],
            v[r * 4 + c + 5],
        ]
    };
    let w = window(2, 2);
    assert_eq!(m.to_vec()[3], w.iter().cloned().fold(f64::MIN, f64::max));
    assert!((a.to_vec()[3] - w.iter().sum::<f64>() / 4.0).abs() < 1e-12);
    assert_eq!(MaxPool2d::<2, 2>.num_parameters(), 0);
}

#[test]
fn batch_norm_train_and_eval_match_pytorch() {
    let mut bn = BatchNorm2d::<2, f64>::new(CPU);
    bn.weight = Tensor::from_array([1.5, -0.5], CPU);
    bn.bias = Tensor::from_array([0.1, 0.2], CPU);
    let x: Tensor<Rank4<3, 2, 2, 2>, f64> = t((Const, Const, Const, Const), 1.1) * 2.0 + 0.5;
    let train = [
        1.914305702,
        1.7319738199,
        -0.3980552396,
        -2.1480691973,
        0.6825840706,
        0.0053591031,
        -0.4451736467,
        -0.1766684952,
        -1.058926711,
        -2.2547382494,
        -1.0415370903,
        1.2548811286,
        -0.4442439391,
        0.0109675715,
        0.6867423219,
        0.8445884228,
        -0.3787736768,
        1.7433869752,
        1.9053780652,
        -0.0698255266,
        0.8088607634,
        0.7476479785,
        0.1019483701,
        -0.4226125209,
    ];
    assert_close(&bn.forward(&x).to_vec(), &train, 1e-8);
    assert_close(
        &bn.running_mean().to_vec(),
        &[0.0636372813, 0.0538444825],
        1e-9,
    );
    assert_close(
        &bn.running_var().to_vec(),
        &[1.1020363802, 1.1460551077],
        1e-9,
    );
    assert_eq!(bn.num_batches_tracked().item(), 1.0);
    let names: Vec<(String, TensorKind)> = bn.tensor_names();
    let want_names = [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ];
    assert_eq!(
        names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        want_names
    );
    assert_eq!(names[2].1, TensorKind::Buffer);
    assert_eq!(bn.num_parameters(), 4);

    bn.set_training(false);
    let eval = [
        3.2703343341,
        3.0339686853,
        0.2727088631,
        -1.9959189794,
        0.6506703411,
        -0.299390002,
        -0.931430047,
        -0.55475153,
        -0.5840108297,
        -2.1341992374,
        -0.5614678224,
        2.4154903251,
        -0.9301257856,
        -0.2915220354,
        0.6565038379,
        0.877941806,
        0.2977044867,
        3.0487641114,
        3.2587610062,
        0.6982089355,
        0.827820452,
        0.741946714,
        -0.163887567,
        -0.899779662,
    ];
    assert_close(&bn.forward(&x).to_vec(), &eval, 1e-8);
    assert_eq!(bn.num_batches_tracked().item(), 1.0, "eval does not update");

    // Gradients through batch statistics (training) and running statistics (evaluation).
    let small: Tensor<Rank3<3, 2, 2>, f64> = t((Const, Const, Const), 0.8);
    let bn1 = BatchNorm1d::<2, f64>::new(CPU);
    check_grad(&small, |x| probe(&bn1.forward(x)));
    check_grad(&small, |x| {
        probe(&bn.forward(&x.reshape((Const::<3>, Const::<2>, Const::<2>, Const::<1>))))
    });
}

#[test]
fn norms_match_pytorch_and_differentiate() {
    let x: Tensor<Rank2<2, 4>, f64> = t((Const, Const), 0.45);
    let mut ln = LayerNorm::<4, f64>::new(CPU);
    ln.weight = t((Const,), 0.25);
    ln.bias = t((Const,), 0.35);
    let want = [
        -0.057732773,
        0.6254309704,
        1.4355800026,
        1.6796697992,
        0.6608116463,
        0.8937482224,
        0.5746257029,
        -0.1723535725,
    ];
    assert_close(&ln.forward(&x).to_vec(), &want, 1e-9);
    check_grad(&x, |x| probe(&ln.forward(x)));
    check_grad(&ln.weight, |w| {
        let mut l = ln.clone();
        l.weight = w.clone();
        probe(&l.forward(&x))
    });

    let mut rms = RMSNorm::<4, f64>::new(CPU);
    rms.weight = t((Const,), 0.25);
    rms.eps = Some(f64::from(f32::EPSILON)); // the reference ran in f32
    let want = [
        0.1309035569,
        0.4568295181,
        0.8090417981,
        0.996827662,
        0.3881246746,
        0.4131230116,
        -0.011554529,
        -0.7507867813,
    ];
    assert_close(&rms.forward(&x).to_vec(), &want, 1e-6);
    check_grad(&x, |x| probe(&rms.forward(x)));
    let err = rms.try_forward(&Tensor::<(usize, usize), f64>::zeros((4, 2), CPU));
    assert_eq!(
        err.err().unwrap().to_string(),
        "rms_norm: the last axis of input [4, 2] is not 4 long"
    );
}

#[test]
fn embedding_selects_rows_and_differentiates() {
    let emb = Embedding::<5, 3, f64>::new(CPU, 4);
    let ids: Tensor<Rank2<2, 2>, i64> = Tensor::from_array([[4, 0], [4, 2]], CPU);
    let y = emb.forward_seq(&ids);
    let w = emb.weight.to_vec();
    assert_eq!(y.to_vec()[..3], w[12..15]);
    assert_eq!(y.to_vec()[3..6], w[0..3]);
    check_grad(&emb.weight, |w| {
        let e = Embedding { weight: w.clone() };
        probe(&e.forward_seq(&ids))
    });
    let normal = Embedding::<100, 100>::new(CPU, 1).weight.to_vec();
    let var = normal.iter().map(|x| x * x).sum::<f32>() / normal.len() as f32;
    assert!((var - 1.0).abs() < 0.05, "N(0, 1) init, got variance {var}");
}

#[test]
fn activations_are_the_elementwise_ops() {
    let x: Tensor<Rank1<5>, f64> = t((Const,), 1.7) * 3.0;
    assert_eq!(ReLU.forward(&x).to_vec(), x.relu().to_vec());
    assert_eq!(
        GELU { tanh: true }.forward(&x).to_vec(),
        x.gelu_tanh().to_vec()
    );
    assert_eq!(GELU::default().forward(&x).to_vec(), x.gelu().to_vec());
    assert_eq!(SiLU.forward(&x).to_vec(), x.silu().to_vec());
    assert_eq!(Sigmoid.forward(&x).to_vec(), x.sigmoid().to_vec());
    assert_eq!(Tanh.forward(&x).to_vec(), x.tanh().to_vec());
}

#[test]
fn dropout_train_and_eval() {
    let mut drop = Dropout::new(0.25, 3);
    let x: Tensor<(usize, usize)> = Tensor::ones((40, 50), CPU);
    let a = drop.forward(&x).to_vec();
    let b = drop.forward(&x).to_vec();
    assert!(a.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
    let kept = a.iter().filter(|&&v| v != 0.0).count() as f64 / a.len() as f64;
    assert!((kept - 0.75).abs() < 0.04, "kept {kept}");
    assert_ne!(a, b, "each call draws a fresh mask");
    assert_eq!(
        Dropout::new(0.25, 3).forward(&x).to_vec(),
        a,
        "masks replay from the seed"
    );
    let leaf = x.clone().requires_grad();
    let g = drop
        .forward(&leaf)
        .sum_all()
        .backward()
        .get(&leaf)
        .unwrap()
        .to_vec();
    assert!(g.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
    drop.set_training(false);
    assert_eq!(drop.forward(&x).to_vec(), x.to_vec());
    assert!(
        Dropout::new(1.0, 0)
            .forward(&x)
            .to_vec()
            .iter()
            .all(|&v| v == 0.0)
    );
}

fn reference_attention() -> CausalSelfAttention<4, 2, f64> {
    let mut attn = CausalSelfAttention::<4, 2, f64>::new(CPU, 0);
    attn.qkv_weight = t((12, Const), 0.33);
    attn.qkv_bias = t((12,), 0.21);
    attn.proj.weight = t((Const, Const), 0.17);
    attn.proj.bias = Some(t((Const,), 0.27));
    attn
}

#[test]
fn attention_matches_pytorch_and_differentiates() {
    let attn = reference_attention();
    let names: Vec<String> = attn.tensor_names().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["qkv.weight", "qkv.bias", "proj.weight", "proj.bias"]
    );
    let x: Tensor<Rank3<1, 3, 4>, f64> = t((Const, Const, Const), 0.41);
    let want = [
        3.119649613,
        5.3142461071,
        5.3362383437,
        3.2541025103,
        2.9724337364,
        5.0246168522,
        5.0330386058,
        3.0722120763,
        -0.1802893596,
        1.3135865872,
        2.4145699168,
        2.7111427064,
    ];
    assert_close(&attn.forward(&x).to_vec(), &want, 1e-9);
    check_grad(&x, |x| probe(&attn.forward(x)));
    check_grad(&attn.qkv_weight, |w| {
        let mut a = attn.clone();
        a.qkv_weight = w.clone();
        probe(&a.forward(&x))
    });
}

#[test]
fn attention_is_causal() {
    let attn = CausalSelfAttention::<8, 2>::new(CPU, 11);
    let x: Tensor<(Dyn<'B'>, Dyn<'T'>, Const<8>)> = Tensor::rand((Dyn(2), Dyn(6), Const), 1, CPU);
    let mut changed = x.to_vec();
    for b in 0..2 {
        for i in 4 * 8..6 * 8 {
            changed[b * 48 + i] += 1.0; // positions 4 and 5
        }
    }
    let changed = Tensor::from_vec(changed, x.shape(), CPU);
    let (y, y2) = (attn.forward(&x).to_vec(), attn.forward(&changed).to_vec());
    for b in 0..2 {
        for p in 0..6 {
            let row = |v: &[f32]| v[b * 48 + p * 8..b * 48 + p * 8 + 8].to_vec();
            assert_eq!(row(&y) == row(&y2), p < 4, "batch {b}, position {p}");
        }
    }
}

/// The fused cross-entropy node by finite differences in f64: logits viewed transposed (not
/// contiguous), 5 classes, an ignored target, label smoothing, and a loss scaled before the
/// backward so the output gradient is not 1.
#[test]
fn fused_cross_entropy_differentiates_with_ignore_and_smoothing() {
    let stored: Tensor<Rank2<5, 4>, f64> = t((Const, Const), 0.41) * 4.0;
    let targets: Tensor<Rank1<4>, i64> = Tensor::from_array([4, -1, 0, 2], CPU);
    for smoothing in [0.0, 0.15, 1.0] {
        let opts = CrossEntropy {
            ignore_index: Some(-1),
            label_smoothing: smoothing,
        };
        check_grad(&stored, |s| {
            cross_entropy_with(&s.t(), &targets, opts) * 2.5
        });
    }
}

#[test]
fn losses_match_pytorch_and_differentiate() {
    let logits: Tensor<Rank2<4, 3>, f64> = t((Const, Const), 0.65) * 3.0;
    let ignored: Tensor<Rank1<4>, i64> = Tensor::from_array([2, 0, -100, 1], CPU);
    let targets: Tensor<Rank1<4>, i64> = Tensor::from_array([2, 0, 1, 1], CPU);
    let opts = CrossEntropy {
        ignore_index: Some(-100),
        label_smoothing: 0.2,
    };
    let ce = |l: &Tensor<Rank2<4, 3>, f64>| cross_entropy_with(l, &ignored, opts);
    assert_close(&[ce(&logits).item()], &[0.9114196309], 1e-9);
    assert_close(
        &[cross_entropy(&logits, &targets).item()],
        &[0.9996216019],
        1e-9,
    );
    let logp = logits.log_softmax::<1>();
    assert_close(&[nll_loss(&logp, &targets).item()], &[0.9996216019], 1e-9);
    check_grad(&logits, ce);
    check_grad(&logits, |l| cross_entropy(l, &targets));
    check_grad(&logp, |l| nll_loss(l, &targets));

    let p: Tensor<Rank2<2, 3>, f64> = t((Const, Const), 0.15) * 4.0;
    let y: Tensor<Rank2<2, 3>, f64> = t((Const, Const), 0.55);
    let prob = (&y + 1.0) / 2.0;
    assert_close(&[mse_loss(&p, &y).item()], &[3.179093356], 1e-9);
    assert_close(&[l1_loss(&p, &y).item()], &[1.3658261243], 1e-9);
    let bce = binary_cross_entropy_with_logits(&(&p * 5.0), &prob).item();
    assert_close(&[bce], &[2.5775868684], 1e-9);
    check_grad(&p, |p| mse_loss(p, &y));
    check_grad(&p, |p| l1_loss(p, &y));
    check_grad(&p, |p| binary_cross_entropy_with_logits(p, &prob));

    let err = try_nll_loss(
        &logp,
        &Tensor::<Rank1<4>, i64>::from_array([0, 3, 0, 0], CPU),
    );
    assert_eq!(
        err.err().unwrap().to_string(),
        "nll_loss: target 3 at [1] is outside 0..3"
    );
}

#[test]
fn initializers_are_seeded_by_name() {
    assert_ne!(param_seed(1, "a.weight"), param_seed(1, "b.weight"));
    // A layer's values depend only on the model seed and its own names.
    let a = Linear::<8, 8>::init_named(&CPU, 3, "layers.1.");
    let b = Linear::<8, 8>::init_named(&CPU, 3, "layers.1.");
    assert_eq!(a.weight.to_vec(), b.weight.to_vec());
    assert_ne!(
        a.weight.to_vec(),
        Linear::<8, 8>::init_named(&CPU, 3, "layers.2.")
            .weight
            .to_vec()
    );
    let w: Tensor<Rank2<400, 100>> =
        init::kaiming_uniform((Const, Const), Nonlinearity::Relu, 0, CPU);
    let bound = (2.0f32 * 3.0 / 100.0).sqrt();
    let v = w.to_vec();
    assert!(v.iter().all(|x| x.abs() <= bound));
    assert!(v.iter().any(|x| x.abs() > 0.95 * bound));
    let n: Tensor<Rank2<200, 100>> = init::xavier_normal((Const, Const), 1.0, 0, CPU);
    let var = n.to_vec().iter().map(|x| x * x).sum::<f32>() / 20_000.0;
    assert!((var - 2.0 / 300.0).abs() < 0.0005, "variance {var}");
    assert_eq!(Nonlinearity::LeakyRelu(0.0).gain(), 2f64.sqrt());
}

/// Plain SGD over every parameter: `p <- p - lr * grad`, written against `VisitorMut`.
struct Sgd<'a> {
    grads: &'a Gradients,
    lr: f64,
}

impl VisitorMut for Sgd<'_> {
    fn visit_mut<S: Shape, E: Float>(&mut self, _: &str, p: &mut Tensor<S, E>, kind: TensorKind) {
        if kind != TensorKind::Parameter {
            return;
        }
        if let Some(g) = self.grads.get(p) {
            let n = p.numel();
            let step =
                no_grad(|| p.reshape((n,)).detach() - g.reshape((n,)) * E::from_f64(self.lr));
            *p = step.reshape(p.shape()).requires_grad();
        }
    }
}

#[test]
fn a_small_mlp_learns() {
    let mut fc1 = Linear::<2, 16>::init_named(&CPU, 0, "fc1.");
    let mut fc2 = Linear::<16, 2>::init_named(&CPU, 0, "fc2.");
    fc1.track_gradients();
    fc2.track_gradients();
    // Two classes: the sign of x0 * x1 (XOR-like, so a hidden layer is needed).
    let x: Tensor<(usize, Const<2>)> = Tensor::rand_uniform((64, Const), -1.0, 1.0, 5, CPU);
    let labels: Vec<i64> = x
        .to_vec()
        .chunks(2)
        .map(|p| i64::from(p[0] * p[1] > 0.0))
        .collect();
    let y: Tensor<(usize,), i64> = Tensor::from_vec(labels, (64,), CPU);
    let mut losses = Vec::new();
    for _ in 0..150 {
        let loss = cross_entropy(&fc2.forward(&ReLU.forward(&fc1.forward(&x))), &y);
        losses.push(loss.item());
        let grads = loss.backward();
        let mut sgd = Sgd {
            grads: &grads,
            lr: 0.5,
        };
        fc1.visit_mut("fc1.", &mut sgd);
        fc2.visit_mut("fc2.", &mut sgd);
    }
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    assert!(last < 0.6 * first, "loss went from {first} to {last}");
}

// Property-based gradient checks over random shapes: batch and sequence sizes are drawn at
// run time; feature sizes and conv settings, which are const generics of the layers, are
// drawn from a few instantiations each. Gradients of inputs and of every parameter.

use proptest::prelude::*;

/// `n` values pairwise at least 0.02 apart and at least 0.01 from zero (a shuffled grid), so
/// batch statistics never degenerate and `abs`/`relu` inside losses stay off their kinks.
fn spread(n: usize) -> impl Strategy<Value = Vec<f64>> {
    Just((0..n).collect::<Vec<usize>>())
        .prop_shuffle()
        .prop_map(move |p| {
            p.iter()
                .map(|&i| (i as f64 - (n / 2) as f64) * 0.02 + 0.01)
                .collect()
        })
}

/// A tensor of `shape` from the front of `v`.
fn take<S: Shape>(v: &[f64], shape: S) -> Tensor<S, f64> {
    Tensor::from_vec(v[..shape.numel()].to_vec(), shape, CPU)
}

/// Caps the cases at 32 (`PROPTEST_CASES` may lower it): each case checks whole layers.
fn layer_cases() -> ProptestConfig {
    ProptestConfig {
        cases: ProptestConfig::default().cases.min(32),
        ..ProptestConfig::default()
    }
}

/// Input, weight and bias gradients of `Linear<I, O>` on a batch of `batch` dims (0 to 2).
fn linear_grads<const I: usize, const O: usize>(batch: &[usize], v: &[f64]) {
    let mut fc = Linear::<I, O, f64>::new(CPU, 0);
    fc.weight = take(&v[200..], (Const, Const));
    fc.bias = Some(take(&v[300..], (Const,)));
    macro_rules! all {
        ($x:expr) => {{
            let x = $x;
            check_grad(&x, |x| probe(&fc.forward(x)));
            check_grad(&fc.weight, |w| {
                let l = Linear {
                    weight: w.clone(),
                    bias: fc.bias.clone(),
                };
                probe(&l.forward(&x))
            });
            check_grad(fc.bias.as_ref().unwrap(), |b| {
                let l = Linear {
                    weight: fc.weight.clone(),
                    bias: Some(b.clone()),
                };
                probe(&l.forward(&x))
            });
        }};
    }
    match batch {
        [] => all!(take(v, (Const::<I>,))),
        [b] => all!(take(v, (*b, Const::<I>))),
        [b, t, ..] => all!(take(v, (*b, *t, Const::<I>))),
    }
}

/// Input, weight and bias gradients of `Conv1d<I, O, K, Opt>` on `[n, I, len]`.
fn conv1d_grads<const I: usize, const O: usize, const K: usize, Opt>(
    n: usize,
    len: usize,
    v: &[f64],
) where
    Opt: rtx::shape::conv::ConvOptions<Const<I>, Const<I>> + Default,
{
    let mut c = Conv1d::<I, O, K, Opt, f64>::new(CPU, 0);
    c.weight = take(&v[200..], (Const, Const, Const));
    c.bias = Some(take(&v[300..], (Const,)));
    let x = take(v, (n, Const::<I>, len));
    let fwd = |l: &Conv1d<I, O, K, Opt, f64>, x: &Tensor<(usize, Const<I>, usize), f64>| {
        let y: Tensor<(usize, Const<O>, usize), f64> = l.forward(x);
        probe(&y)
    };
    check_grad(&x, |x| fwd(&c, x));
    check_grad(&c.weight, |w| {
        let mut l = c.clone();
        l.weight = w.clone();
        fwd(&l, &x)
    });
    check_grad(c.bias.as_ref().unwrap(), |b| {
        let mut l = c.clone();
        l.bias = Some(b.clone());
        fwd(&l, &x)
    });
}

/// Input, weight and bias gradients of `Conv2d<I, O, K, Opt>` on `[n, I, h, w]`.
fn conv2d_grads<const I: usize, const O: usize, const K: usize, Opt>(
    (n, h, w): (usize, usize, usize),
    v: &[f64],
) where
    Opt: rtx::shape::conv::ConvOptions<Const<I>, Const<I>> + Default,
{
    let mut c = Conv2d::<I, O, K, Opt, f64>::new(CPU, 0);
    c.weight = take(&v[200..], (Const, Const, Const, Const));
    c.bias = Some(take(&v[300..], (Const,)));
    let x = take(v, (n, Const::<I>, h, w));
    type X<const I: usize> = Tensor<(usize, Const<I>, usize, usize), f64>;
    let fwd = |l: &Conv2d<I, O, K, Opt, f64>, x: &X<I>| {
        let y: Tensor<(usize, Const<O>, usize, usize), f64> = l.forward(x);
        probe(&y)
    };
    check_grad(&x, |x| fwd(&c, x));
    check_grad(&c.weight, |w| {
        let mut l = c.clone();
        l.weight = w.clone();
        fwd(&l, &x)
    });
    check_grad(c.bias.as_ref().unwrap(), |b| {
        let mut l = c.clone();
        l.bias = Some(b.clone());
        fwd(&l, &x)
    });
}

/// Input, weight and bias gradients of a training `BatchNorm<C>` on `[n, C, rest..]`, and of
/// `LayerNorm<C>` / `RMSNorm<C>` on the same values viewed as `[.., C]` rows.
fn norm_grads<const C: usize>(n: usize, rest: &[usize], v: &[f64]) {
    let mut bn = BatchNorm::<C, f64>::new(CPU);
    bn.weight = take(&v[200..], (Const,)) + 1.0;
    bn.bias = take(&v[300..], (Const,));
    macro_rules! bn_all {
        ($x:expr) => {{
            let x = $x;
            check_grad(&x, |x| probe(&bn.forward(x)));
            check_grad(&bn.weight, |w| {
                let mut l = bn.clone();
                l.weight = w.clone();
                probe(&l.forward(&x))
            });
            check_grad(&bn.bias, |b| {
                let mut l = bn.clone();
                l.bias = b.clone();
                probe(&l.forward(&x))
            });
        }};
    }
    match rest {
        [] => bn_all!(take(v, (n, Const::<C>))),
        [l] => bn_all!(take(v, (n, Const::<C>, *l))),
        [h, w, ..] => bn_all!(take(v, (n, Const::<C>, *h, *w))),
    }
    let mut ln = LayerNorm::<C, f64>::new(CPU);
    ln.weight = take(&v[200..], (Const,)) + 1.0;
    ln.bias = take(&v[300..], (Const,));
    let mut rms = RMSNorm::<C, f64>::new(CPU);
    rms.weight = take(&v[250..], (Const,)) + 1.0;
    let x = take(v, (n, rest.iter().product::<usize>(), Const::<C>));
    check_grad(&x, |x| probe(&ln.forward(x)));
    check_grad(&ln.weight, |w| {
        let l = LayerNorm {
            weight: w.clone(),
            ..ln.clone()
        };
        probe(&l.forward(&x))
    });
    check_grad(&ln.bias, |b| {
        let l = LayerNorm {
            bias: b.clone(),
            ..ln.clone()
        };
        probe(&l.forward(&x))
    });
    check_grad(&x, |x| probe(&rms.forward(x)));
    check_grad(&rms.weight, |w| {
        let l = RMSNorm {
            weight: w.clone(),
            eps: rms.eps,
        };
        probe(&l.forward(&x))
    });
}

/// Gradients of `CausalSelfAttention<D, H>` on `[b, t, D]`: the input and all four parameters.
fn attention_grads<const D: usize, const H: usize>(b: usize, t: usize, v: &[f64]) {
    let mut attn = CausalSelfAttention::<D, H, f64>::new(CPU, 0);
    attn.qkv_weight = take(&v[100..], (3 * D, Const));
    attn.qkv_bias = take(&v[250..], (3 * D,));
    attn.proj.weight = take(&v[300..], (Const, Const));
    attn.proj.bias = Some(take(&v[350..], (Const,)));
    let x = take(v, (b, t, Const::<D>));
    check_grad(&x, |x| probe(&attn.forward(x)));
    check_grad(&attn.qkv_weight, |w| {
        let a = CausalSelfAttention {
            qkv_weight: w.clone(),
            ..attn.clone()
        };
        probe(&a.forward(&x))
    });
    check_grad(&attn.qkv_bias, |w| {
        let a = CausalSelfAttention {
            qkv_bias: w.clone(),
            ..attn.clone()
        };
        probe(&a.forward(&x))
    });
    check_grad(&attn.proj.weight, |w| {
        let mut a = attn.clone();
        a.proj.weight = w.clone();
        probe(&a.forward(&x))
    });
    check_grad(attn.proj.bias.as_ref().unwrap(), |w| {
        let mut a = attn.clone();
        a.proj.bias = Some(w.clone());
        probe(&a.forward(&x))
    });
}

/// Gradients of `Embedding<5, D>` rows picked by `ids` (repeats accumulate).
fn embedding_grads<const D: usize>(ids: &[i64], (b, t): (usize, usize), v: &[f64]) {
    let emb = Embedding::<5, D, f64> {
        weight: take(v, (Const, Const)),
    };
    let seq: Tensor<(usize, usize), i64> = Tensor::from_vec(ids[..b * t].to_vec(), (b, t), CPU);
    let flat: Tensor<(usize,), i64> = Tensor::from_vec(ids[..b].to_vec(), (b,), CPU);
    check_grad(&emb.weight, |w| {
        probe(&Embedding { weight: w.clone() }.forward_seq(&seq))
    });
    check_grad(&emb.weight, |w| {
        probe(&Embedding { weight: w.clone() }.forward(&flat).exp())
    });
}

/// Prediction and target gradients of the elementwise losses on `p` and `y`.
fn regression_losses<S: Shape>(p: &Tensor<S, f64>, y: &Tensor<S, f64>) {
    let prob = no_grad(|| y.sigmoid());
    check_grad(p, |p| mse_loss(p, y));
    check_grad(y, |y| mse_loss(p, y));
    check_grad(p, |p| l1_loss(p, y));
    check_grad(y, |y| l1_loss(p, y));
    check_grad(p, |p| binary_cross_entropy_with_logits(p, &prob));
    check_grad(&prob, |q| binary_cross_entropy_with_logits(p, q));
}

proptest! {
    #![proptest_config(layer_cases())]

    #[test]
    fn linear_grads_over_random_batches(
        batch in prop::collection::vec(1usize..=3, 0..=2),
        which in 0usize..3,
        v in prop::collection::vec(-1.0f64..1.0, 400),
    ) {
        match which {
            0 => linear_grads::<1, 2>(&batch, &v),
            1 => linear_grads::<3, 1>(&batch, &v),
            _ => linear_grads::<2, 3>(&batch, &v),
        }
    }

    #[test]
    fn conv_layer_grads(
        (n, which) in (1usize..=2, 0usize..3),
        (h, w) in (0usize..=2, 0usize..=2),
        v in prop::collection::vec(-1.0f64..1.0, 400),
    ) {
        // Sizes the kernel (with its padding and dilation) fits, plus 0 to 2.
        match which {
            0 => {
                conv1d_grads::<2, 3, 2, Conv<1>>(n, 2 + h, &v);
                conv2d_grads::<2, 2, 2, Conv<1>>((n, 2 + h, 2 + w), &v);
            }
            1 => {
                conv1d_grads::<1, 2, 3, Conv<2, 1>>(n, 1 + h, &v);
                conv2d_grads::<1, 3, 3, Conv<2, 1>>((n, 1 + h, 1 + w), &v);
            }
            _ => {
                conv1d_grads::<3, 2, 2, Conv<1, 1, 2>>(n, 1 + h, &v);
                conv2d_grads::<2, 1, 2, Conv<1, 1, 2>>((n, 1 + h, 1 + w), &v);
            }
        }
    }

    #[test]
    fn norm_grads_over_random_shapes(
        n in 1usize..=3,
        rest in prop::collection::vec(1usize..=3, 0..=2),
        which in 0usize..3,
        v in spread(400),
    ) {
        // Training batch norm needs two values per channel.
        let n = if n * rest.iter().product::<usize>() < 2 { 2 } else { n };
        match which {
            0 => norm_grads::<1>(n, &rest, &v),
            1 => norm_grads::<2>(n, &rest, &v),
            _ => norm_grads::<3>(n, &rest, &v),
        }
    }

    #[test]
    fn attention_and_embedding_grads(
        (b, t, which) in (1usize..=2, 1usize..=3, 0usize..2),
        ids in prop::collection::vec(0i64..5, 6),
        v in prop::collection::vec(-1.0f64..1.0, 400),
    ) {
        match which {
            0 => {
                attention_grads::<4, 2>(b, t, &v);
                embedding_grads::<2>(&ids, (b, t), &v);
            }
            _ => {
                attention_grads::<3, 1>(b, t, &v);
                embedding_grads::<3>(&ids, (b, t), &v);
            }
        }
    }

    #[test]
    fn loss_grads_over_random_shapes(
        (rows, classes) in (1usize..=4, 2usize..=4),
        targets in prop::collection::vec(0i64..4, 4),
        ignored in prop::collection::vec(prop::bool::weighted(0.3), 4),
        smoothing in 0.0f64..0.5,
        dims in prop::collection::vec(1usize..=3, 1..=3),
        v in spread(200),
    ) {
        let logits = take(&v, (rows, classes));
        let t: Vec<i64> = targets[..rows].iter().map(|&c| c % classes as i64).collect();
        // Ignored targets, keeping at least the first row.
        let kept: Vec<i64> = t.iter().zip(&ignored).enumerate()
            .map(|(i, (&c, &ig))| if ig && i > 0 { -100 } else { c })
            .collect();
        let (t, kept): (Tensor<(usize,), i64>, Tensor<(usize,), i64>) =
            (Tensor::from_vec(t, (rows,), CPU), Tensor::from_vec(kept, (rows,), CPU));
        let opts = CrossEntropy { ignore_index: Some(-100), label_smoothing: smoothing };
        check_grad(&logits, |l| cross_entropy_with(l, &kept, opts));
        check_grad(&logits, |l| cross_entropy(l, &t));
        let logp = logits.log_softmax::<1>();
        check_grad(&logp, |l| nll_loss(l, &t));
        // Regression losses: predictions and targets drawn apart, so |p - y| > 0.
        let n: usize = dims.iter().product();
        match dims[..] {
            [a] => regression_losses(&take(&v, (a,)), &take(&v[n..], (a,))),
            [a, b] => regression_losses(&take(&v, (a, b)), &take(&v[n..], (a, b))),
            [a, b, c, ..] => regression_losses(&take(&v, (a, b, c)), &take(&v[n..], (a, b, c))),
            [] => unreachable!("dims has rank 1 to 3"),
        }
    }
}
