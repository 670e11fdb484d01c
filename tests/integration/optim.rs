//! Optimizers, schedules and clipping against PyTorch: the reference numbers below are printed
//! by tests/fixtures/optim_reference.py (PyTorch, CPU, float64) on the same tiny model.

use crate::lin_model::Lin;
use rtx::nn::{Module, TensorKind, Visitor, VisitorMut, join};
use rtx::optim::try_clip_grad_norm;
use rtx::prelude::*;

fn lin() -> Lin {
    let w = (0..3)
        .flat_map(|i| (0..2).map(move |j| ((i * 2 + j) % 5 - 2) as f64 / 8.0))
        .collect();
    let mut m = Lin {
        w: Tensor::from_vec(w, (Const, Const), Device::Cpu),
        b: Tensor::from_vec(vec![0.125, -0.25], (Const,), Device::Cpu),
    };
    m.track_gradients();
    m
}

fn loss(m: &Lin) -> Tensor<(), f64> {
    let x = (0..4)
        .flat_map(|i| (0..3).map(move |j| ((i * 3 + j * 2) % 7 - 3) as f64 / 4.0))
        .collect();
    let t = (0..4)
        .flat_map(|i| (0..2).map(move |j| ((i + j) % 3 - 1) as f64 / 2.0))
        .collect();
    let x: Tensor<Rank2<4, 3>, f64> = Tensor::from_vec(x, (Const, Const), Device::Cpu);
    let t: Tensor<Rank2<4, 2>, f64> = Tensor::from_vec(t, (Const, Const), Device::Cpu);
    let d = &(&x.matmul(&m.w) + &m.b) - &t;
    (&d * &d).sum_all()
}

fn params(m: &Lin) -> Vec<f64> {
    let mut v = m.w.to_vec();
    v.extend(m.b.to_vec());
    v
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// Runs `opt` for as many steps as `want` has rows, checking the parameters after each.
#[track_caller]
fn check<O: Optimizer>(mut opt: O, want: &[[f64; 8]]) {
    let mut m = lin();
    for row in want {
        let grads = loss(&m).backward();
        opt.step(&mut m, &grads);
        assert!(m.w.tracks_grad() && m.b.tracks_grad());
        assert_close(&params(&m), row, 1e-12);
    }
}

// Printed by tests/fixtures/optim_reference.py.
#[rustfmt::skip]
const SGD_MOMENTUM: [[f64; 8]; 3] = [
    [-0.12018749999999999, -0.16009375, -0.025, 0.15775, 0.1576875, -0.253, 0.012437499999999983, -0.14675],
    [0.09333217031250003, -0.21653731328125003, -0.06773875, 0.21398596562500002, 0.007783767187499999, -0.2608486890625, -0.14460403437500005, 0.0011614281250000161],
    [0.34971798790910164, -0.28180947998294925, -0.12258772928125, 0.2867241453838282, -0.16808555551066406, -0.2761865058946094, -0.2768940520517188, 0.13486008262492188],
];
#[rustfmt::skip]
const SGD_NESTEROV: [[f64; 8]; 3] = [
    [-0.0033562499999999803, -0.191678125, -0.0475, 0.187225, 0.07460625, -0.2557, -0.08886875000000002, -0.053825],
    [0.26764049703125004, -0.259806716328125, -0.10617987499999999, 0.2650912065625, -0.11034490328124999, -0.27365196390624996, -0.21112291843750003, 0.0738066728125],
    [0.5156530931036992, -0.3181002746950254, -0.168106865759375, 0.348781753044586, -0.27055577245291795, -0.3011287416663203, -0.22282196341889066, 0.11232792648953904],
];
#[rustfmt::skip]
const SGD_PLAIN: [[f64; 8]; 3] = [
    [-0.12031249999999999, -0.16015625, -0.025, 0.1578125, 0.1578125, -0.253125, 0.012499999999999994, -0.146875],
    [-0.012919921875, -0.1878564453125, -0.0475, 0.1876171875, 0.083623046875, -0.258955078125, -0.04945312500000001, -0.08580078125],
    [0.07682635498046876, -0.21021389770507815, -0.067763671875, 0.2147208251953125, 0.02325714111328124, -0.265913330078125, -0.08208544921875, -0.0497030029296875],
];
#[rustfmt::skip]
const ADAM: [[f64; 8]; 3] = [
    [-0.24000000003818617, -0.1349999998552036, -0.009999999800000003, 0.13499999984466018, 0.24000000005351171, -0.25999999733333407, 0.1150000000441989, -0.2400000000479042],
    [-0.230008958195214, -0.14497662654555374, -0.019984546028621097, 0.14497854988833014, 0.23000961253215688, -0.2692764613098914, 0.1050238757506876, -0.2300229442490093],
    [-0.22003293533425614, -0.15491254395746235, -0.029942935163435207, 0.15492098554264325, 0.22003535826187637, -0.2767489081546565, 0.09508864758749633, -0.22008528764706659],
];
#[rustfmt::skip]
const ADAM_AMSGRAD: [[f64; 8]; 3] = [
    [-0.2400000000385542, -0.13499999985777777, -0.009999999800000003, 0.13499999984761904, 0.2400000000542373, -0.25999999840000027, 0.11500000004444444, -0.24000000004848485],
    [-0.23000449980201976, -0.14498827645050133, -0.01999260011490435, 0.14498938755151686, 0.23000482087413485, -0.26981312870338947, 0.10501271888739647, -0.23001226367197375],
    [-0.2200165880529404, -0.15495627458036662, -0.02997261485030745, 0.15496062911395328, 0.2200177796845304, -0.27920620825649545, 0.09504739534430487, -0.220045693078184],
];
#[rustfmt::skip]
const ADAMW: [[f64; 8]; 3] = [
    [-0.2397500000385542, -0.1348749998577778, -0.009999999800000003, 0.13487499984761905, 0.2397500000542373, -0.25974999840000024, 0.11487500004444444, -0.23975000004848485],
    [-0.22951484934981298, -0.14472842605959169, -0.019982600115104353, 0.14472970068052443, 0.2295152123867777, -0.26931723052708206, 0.10477305404404388, -0.22952288890501438],
    [-0.21929768570912422, -0.15455179099067884, -0.02994264366474841, 0.154556744486804, 0.21929903255438546, -0.2784921177418321, 0.09470352209064706, -0.21932781808622953],
];
#[rustfmt::skip]
const CLIP_NORM: f64 = 4.541179852541077;
#[rustfmt::skip]
const CLIPPED: [f64; 8] = [-0.5711620136310214, 0.154833075984313, 0.11010352069995592, -0.14451087091869214, 0.4060067325810875, 0.01376294008749449, 0.49546584314980163, -0.4541770228873182];
#[rustfmt::skip]
const STEP_LR: [f64; 10] = [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125];
#[rustfmt::skip]
const COSINE: [f64; 10] = [0.1, 0.09554359905560886, 0.08305704108364301, 0.06501344202803415, 0.04498655797196586, 0.026942958916356993, 0.014456400944391143, 0.01, 0.01445640094439114, 0.026942958916356986];
#[rustfmt::skip]
const WARMUP: [f64; 8] = [0.025, 0.043750000000000004, 0.06250000000000001, 0.08125000000000002, 0.10000000000000002, 0.10000000000000002, 0.10000000000000002, 0.10000000000000002];

#[test]
fn sgd_matches_pytorch() {
    check(Sgd::new(0.05), &SGD_PLAIN);
    let momentum = Sgd::new(0.05)
        .momentum(0.9)
        .dampening(0.1)
        .weight_decay(0.01);
    check(momentum, &SGD_MOMENTUM);
    let nesterov = Sgd::new(0.05)
        .momentum(0.9)
        .nesterov(true)
        .weight_decay(0.01);
    check(nesterov, &SGD_NESTEROV);
}

#[test]
fn adam_matches_pytorch() {
    let adam = Adam::new(0.01).betas(0.8, 0.99).eps(1e-8).weight_decay(0.1);
    check(adam, &ADAM);
    check(Adam::new(0.01).amsgrad(true), &ADAM_AMSGRAD);
}

#[test]
fn adamw_matches_pytorch() {
    check(AdamW::new(0.01).weight_decay(0.1), &ADAMW);
}

#[test]
fn schedules_match_pytorch() {
    let step = StepLR {
        base_lr: 0.1,
        step_size: 3,
        gamma: 0.5,
    };
    let cosine = CosineAnnealing {
        base_lr: 0.1,
        t_max: 7,
        eta_min: 0.01,
    };
    let warmup = LinearWarmup {
        warmup: 4,
        start_factor: 0.25,
        then: Constant(0.1),
    };
    let lrs = |s: &dyn Schedule, n| (0..n).map(|i| s.lr(i)).collect::<Vec<_>>();
    assert_eq!(lrs(&step, 10), STEP_LR);
    // PyTorch's schedulers update recursively; the closed forms agree to rounding.
    assert_close(&lrs(&cosine, 10), &COSINE, 1e-12);
    assert_close(&lrs(&warmup, 8), &WARMUP, 1e-12);
    // The schedule drives the optimizer through set_lr.
    let mut opt = Sgd::new(1.0);
    opt.set_lr(cosine.lr(7));
    assert_eq!(opt.lr(), 0.01);
}

#[test]
fn clipping_matches_pytorch() {
    let m = lin();
    let mut grads = loss(&m).backward();
    let norm = clip_grad_norm(&mut grads, &m, 1.0);
    assert!((norm - CLIP_NORM).abs() < 1e-12);
    let mut g = grads.get(&m.w).unwrap().to_vec();
    g.extend(grads.get(&m.b).unwrap().to_vec());
    assert_close(&g, &CLIPPED, 1e-12);

    // Below the limit nothing changes.
    let mut grads = loss(&m).backward();
    let before = grads.get(&m.w).unwrap().to_vec();
    assert_eq!(clip_grad_norm(&mut grads, &m, 10.0), norm);
    assert_eq!(grads.get(&m.w).unwrap().to_vec(), before);

    let err = try_clip_grad_norm(&mut grads, &m, -1.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "clip_grad_norm: max_norm must be >= 0, got -1"
    );
}

/// Lin plus a frozen buffer that has a gradient and a parameter the loss ignores.
struct WithExtras {
    lin: Lin,
    frozen: Tensor<Rank1<2>, f64>,
    unused: Tensor<Rank1<2>, f64>,
}

impl Module for WithExtras {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        self.lin.visit(&join(prefix, "lin."), v);
        v.visit(&join(prefix, "frozen"), &self.frozen, TensorKind::Buffer);
        self.unused.visit(&join(prefix, "unused."), v);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.lin.visit_mut(&join(prefix, "lin."), v);
        v.visit_mut(
            &join(prefix, "frozen"),
            &mut self.frozen,
            TensorKind::Buffer,
        );
        self.unused.visit_mut(&join(prefix, "unused."), v);
    }
}

#[test]
fn buffers_and_parameters_without_gradients_are_skipped() {
    let ones = || Tensor::<Rank1<2>, f64>::ones((Const,), Device::Cpu).requires_grad();
    let mut m = WithExtras {
        lin: lin(),
        frozen: ones(),
        unused: ones(),
    };
    let mut opt = Adam::new(0.1);
    for _ in 0..2 {
        let grads = (&loss(&m.lin) + &(&m.frozen * &m.frozen).sum_all()).backward();
        assert!(grads.get(&m.frozen).is_some() && grads.get(&m.unused).is_none());
        opt.step(&mut m, &grads);
    }
    assert_eq!(m.frozen.to_vec(), vec![1.0, 1.0]);
    assert_eq!(m.unused.to_vec(), vec![1.0, 1.0]);
    let state = opt.state_dict();
    let names: Vec<&str> = state.tensors.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "state.lin.b.exp_avg",
            "state.lin.b.exp_avg_sq",
            "state.lin.w.exp_avg",
            "state.lin.w.exp_avg_sq"
        ]
    );
    assert_eq!(state.scalars["state.lin.w.step"], 2.0);
    assert_eq!(state.scalars["lr"], 0.1);
}

/// N + M steps equal N steps, an export and import into a fresh optimizer, then M steps,
/// bit for bit.
fn resume<O: Optimizer>(make: impl Fn() -> O) {
    let (n, m) = (3, 2);
    let mut straight = lin();
    let mut opt = make();
    for _ in 0..n + m {
        let grads = loss(&straight).backward();
        opt.step(&mut straight, &grads);
    }
    let mut resumed = lin();
    let mut first = make();
    for _ in 0..n {
        let grads = loss(&resumed).backward();
        first.step(&mut resumed, &grads);
    }
    let mut second = make();
    second.set_lr(123.0); // overwritten by the saved lr
    second.load_state(first.state_dict());
    assert_eq!(second.state_dict(), first.state_dict());
    for _ in 0..m {
        let grads = loss(&resumed).backward();
        second.step(&mut resumed, &grads);
    }
    let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
    assert_eq!(bits(params(&resumed)), bits(params(&straight)));
    assert_eq!(second.state_dict(), opt.state_dict());
}

#[test]
fn resuming_from_exported_state_is_bitwise_exact() {
    resume(|| Sgd::new(0.05).momentum(0.9).nesterov(true));
    resume(|| Adam::new(0.01).amsgrad(true).weight_decay(0.1));
    resume(|| AdamW::new(0.01));
}

#[test]
fn state_is_checked_against_its_parameter() {
    let mut m = lin();
    let mut opt = Adam::new(0.01);
    let grads = loss(&m).backward();
    opt.step(&mut m, &grads);
    let mut state = opt.state_dict();
    state
        .tensors
        .get_mut("state.w.exp_avg")
        .unwrap()
        .dims
        .reverse();
    let mut fresh = Adam::new(0.01);
    fresh.load_state(state);
    let grads = loss(&m).backward();
    let err = fresh.try_step(&mut m, &grads).unwrap_err();
    assert_eq!(
        err.to_string(),
        "adam: loaded state `state.w.exp_avg` is a float64 tensor of dims [2, 3], but the \
         parameter is a float64 tensor of dims [3, 2]"
    );

    let grads = loss(&m).backward();
    let err = Sgd::new(0.1)
        .nesterov(true)
        .try_step(&mut m, &grads)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "sgd: Nesterov momentum needs momentum > 0 and zero dampening (momentum 0, dampening 0)"
    );
}

#[test]
fn f32_models_train_and_loss_decreases() {
    struct Small {
        w: Tensor<Rank2<3, 2>>,
    }
    impl Module for Small {
        fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
            self.w.visit(&join(prefix, "w."), v);
        }
        fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
            self.w.visit_mut(&join(prefix, "w."), v);
        }
    }
    let x: Tensor<Rank2<8, 3>> = Tensor::randn((Const, Const), 1, Device::Cpu);
    let target = x.matmul(&Tensor::<Rank2<3, 2>>::randn(
        (Const, Const),
        2,
        Device::Cpu,
    ));
    let loss = |m: &Small| {
        let d = &x.matmul(&m.w) - &target;
        (&d * &d).sum_all()
    };
    let mut m = Small {
        w: Tensor::zeros((Const, Const), Device::Cpu),
    };
    m.track_gradients();
    let mut opt = AdamW::new(0.05).weight_decay(0.0);
    let sched = LinearWarmup {
        warmup: 5,
        start_factor: 0.2,
        then: CosineAnnealing {
            base_lr: 0.05,
            t_max: 195,
            eta_min: 0.001,
        },
    };
    let start = loss(&m).item();
    for step in 0..200 {
        opt.set_lr(sched.lr(step));
        let mut grads = loss(&m).backward();
        clip_grad_norm(&mut grads, &m, 5.0);
        opt.step(&mut m, &grads);
    }
    let end = loss(&m).item();
    assert!(end < start * 1e-2, "loss {start} -> {end}");
}
