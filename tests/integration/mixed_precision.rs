//! `MixedStep` on the CPU: bit for bit the step it replaced (each tensor cast on its own, the
//! gradients cast to f32 and unscaled tensor by tensor), in bf16 and in f16 with its loss
//! scale, with its two casts costing one dispatch each however many tensors the model has.
//! On a GPU it is held to the CPU in `tests/devices/compiled.rs`.

use rtx::Gradients;
use rtx::compile::loss::cross_entropy;
use rtx::compile::{MixedStep, StaticForward};
use rtx::prelude::*;

type B = Const<16>;
type X<E> = Tensor<(B, Const<6>), E>;
type Y = Tensor<(B,), i64>;

#[model]
struct Mlp<E: Float> {
    fc1: Linear<6, 8, E>,
    fc2: Linear<8, 8, E>,
    fc3: Linear<8, 3, E>,
}

#[model]
impl<E: Float> Mlp<E> {
    fn forward(&self, x: &X<E>) -> Tensor<(B, Const<3>), E> {
        let h = self.fc1.forward(x);
        let h = h.gelu_tanh();
        let h = self.fc2.forward(&h);
        let h = h.relu();
        self.fc3.forward(&h)
    }
}

fn data<W: Float>() -> (X<W>, Y) {
    let x = Tensor::<(B, Const<6>), f32>::randn((Const, Const), 5, Device::Cpu).cast::<W>();
    let y = Tensor::from_vec((0..16).map(|i| i % 3).collect(), (Const,), Device::Cpu);
    (x, y)
}

fn models<W: Float>() -> (Mlp<f32>, Mlp<W>) {
    let mut master = Mlp::<f32>::init(&Device::Cpu, 7);
    master.track_gradients();
    let mut working = Mlp::<W>::init(&Device::Cpu, 0);
    working.track_gradients();
    (master, working)
}

/// The weights as bits.
fn bits(m: &Mlp<f32>) -> Vec<u32> {
    [
        m.fc1.weight.to_vec(),
        m.fc2.weight.to_vec(),
        m.fc3.weight.to_vec(),
        m.fc3.bias.as_ref().map_or(vec![], |b| b.to_vec()),
    ]
    .concat()
    .iter()
    .map(|x| x.to_bits())
    .collect()
}

/// The step before multi-tensor casts, by hand: `copy_from` casts each tensor, each gradient
/// is cast to f32 and multiplied by `1 / scale` on its own; with a loss scale other than 1
/// (f16) a step whose gradients are not all finite is skipped and the scale halved. Returns
/// the loss and the dispatches of the casts alone.
fn reference_step<W: Float>(
    master: &mut Mlp<f32>,
    working: &mut Mlp<W>,
    opt: &mut Adam,
    (x, y): &(X<W>, Y),
    scale: &mut f64,
) -> (W, u64) {
    let s = *scale;
    let start = rtx::launch_count(Device::Cpu);
    working.copy_from(&*master);
    let mut casts = rtx::launch_count(Device::Cpu) - start;
    let (out, backward) = StaticForward::forward_train(&*working, (x.clone(),));
    let (loss, loss_backward) = cross_entropy(&out, y);
    let seed = Tensor::full((), W::from_f64(s), Device::Cpu);
    let mut wg = Gradients::new();
    backward(loss_backward(&seed), &mut wg, false);
    let start = rtx::launch_count(Device::Cpu);
    let u = Tensor::<(), f32>::full((), (1.0 / s) as f32, Device::Cpu);
    let mut grads = Gradients::new();
    macro_rules! cast_grad {
        ($m:expr, $w:expr) => {{
            let g = wg.get($w).unwrap().cast::<f32>();
            grads.add($m, if s == 1.0 { g } else { g * &u });
        }};
    }
    macro_rules! cast_layer {
        ($m:expr, $w:expr) => {{
            cast_grad!(&$m.weight, &$w.weight);
            cast_grad!($m.bias.as_ref().unwrap(), $w.bias.as_ref().unwrap());
        }};
    }
    cast_layer!(master.fc1, working.fc1);
    cast_layer!(master.fc2, working.fc2);
    cast_layer!(master.fc3, working.fc3);
    casts += rtx::launch_count(Device::Cpu) - start;
    macro_rules! values {
        ($l:expr) => {
            [
                grads.get(&$l.weight).unwrap().to_vec(),
                grads.get($l.bias.as_ref().unwrap()).unwrap().to_vec(),
            ]
        };
    }
    let all = [
        values!(master.fc1),
        values!(master.fc2),
        values!(master.fc3),
    ];
    let finite = all.iter().flatten().flatten().all(|x| x.is_finite());
    if finite {
        opt.step(master, &grads);
    } else {
        *scale *= 0.5;
    }
    (loss.item(), casts)
}

/// Four steps of `MixedStep` and four by hand give the same losses, loss scale and weights,
/// bit for bit.
fn same_as_by_hand<W: Float>(scale: f64) {
    let d = data::<W>();
    let (mut master, mut working) = models::<W>();
    let mut opt = Adam::new(1e-2);
    let mut step = MixedStep::new(cross_entropy);
    assert_eq!(step.loss_scale(), scale);
    let mut losses = Vec::new();
    for _ in 0..4 {
        let loss = step
            .run(&mut master, &mut working, &mut opt, (d.0.clone(),), &d.1)
            .unwrap();
        losses.push(loss.item().to_f64());
    }
    assert!(!step.is_captured());
    let (mut want_master, mut want_working) = models::<W>();
    let mut want_opt = Adam::new(1e-2);
    let mut want_scale = scale;
    for (i, &loss) in losses.iter().enumerate() {
        let (want, _) = reference_step(
            &mut want_master,
            &mut want_working,
            &mut want_opt,
            &d,
            &mut want_scale,
        );
        assert_eq!(
            loss.to_bits(),
            want.to_f64().to_bits(),
            "{:?} step {i}",
            W::DTYPE
        );
    }
    assert_eq!(step.loss_scale(), want_scale, "{:?}", W::DTYPE);
    assert_eq!(bits(&master), bits(&want_master), "{:?}", W::DTYPE);
    assert!(
        losses[3] < losses[0],
        "{:?}: the loss goes down: {losses:?}",
        W::DTYPE
    );
}

#[test]
fn mixed_steps_are_the_per_tensor_steps_bit_for_bit() {
    same_as_by_hand::<bf16>(1.0);
    same_as_by_hand::<f16>(65536.0);
}

#[test]
fn the_casts_of_a_mixed_step_cost_one_dispatch_each_way() {
    let d = data::<bf16>();
    // By hand, with a cast per tensor each way: what the step costs besides its casts.
    let (mut master, mut working) = models::<bf16>();
    let mut opt = Adam::new(1e-2);
    reference_step(&mut master, &mut working, &mut opt, &d, &mut 1.0);
    let start = rtx::launch_count(Device::Cpu);
    let (_, per_tensor_casts) = reference_step(&mut master, &mut working, &mut opt, &d, &mut 1.0);
    let rest = rtx::launch_count(Device::Cpu) - start - per_tensor_casts;
    assert!(
        per_tensor_casts >= 2 * 6,
        "6 tensors, each cast both ways: {per_tensor_casts}"
    );
    // The same step through MixedStep (after a first run, as above).
    let (mut master, mut working) = models::<bf16>();
    let mut opt = Adam::new(1e-2);
    let mut step = MixedStep::new(cross_entropy);
    step.run(&mut master, &mut working, &mut opt, (d.0.clone(),), &d.1)
        .unwrap();
    let start = rtx::launch_count(Device::Cpu);
    step.run(&mut master, &mut working, &mut opt, (d.0.clone(),), &d.1)
        .unwrap();
    let mixed = rtx::launch_count(Device::Cpu) - start;
    assert_eq!(
        mixed - rest,
        2,
        "the casts of a 6-tensor model: one dispatch each way"
    );
}
