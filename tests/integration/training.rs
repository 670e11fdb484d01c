//! The pieces of training fit together: a `#[model]` struct of `nn` layers, the tape, a loss
//! and an optimizer learn a small synthetic classification task.

use rtx::prelude::*;

#[model]
struct Mlp {
    hidden: Linear<4, 16>,
    out: Linear<16, 3>,
}

impl Mlp {
    fn new(seed: u64) -> Self {
        Mlp {
            hidden: Linear::new(Device::Cpu, seed),
            out: Linear::new(Device::Cpu, seed + 1),
        }
    }

    fn forward(&self, x: &Tensor<(usize, Const<4>)>) -> Tensor<(usize, Const<3>)> {
        let h = self.hidden.forward(x).relu();
        self.out.forward(&h)
    }
}

/// A batch of 4-feature inputs.
type Inputs = Tensor<(usize, Const<4>)>;
/// One class label per input.
type Labels = Tensor<(usize,), i64>;

/// Points labelled by which of three directions their first two features favour.
fn data(n: usize, seed: u64) -> (Inputs, Labels) {
    let x: Inputs = Tensor::randn((n, Const), seed, Device::Cpu);
    let v = x.to_vec();
    let labels: Vec<i64> = (0..n)
        .map(|i| {
            let (a, b) = (v[4 * i], v[4 * i + 1]);
            if a > 0.0 && a > b {
                0
            } else if b > 0.0 {
                1
            } else {
                2
            }
        })
        .collect();
    (x, Tensor::from_vec(labels, (n,), Device::Cpu))
}

#[test]
fn an_mlp_learns_with_adam() {
    let mut model = Mlp::new(7);
    assert_eq!(
        model
            .tensor_names()
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>(),
        ["hidden.weight", "hidden.bias", "out.weight", "out.bias"]
    );
    assert_eq!(model.num_parameters(), 4 * 16 + 16 + 16 * 3 + 3);
    let (x, y) = data(256, 1);
    let mut opt = Adam::new(0.05);
    model.track_gradients();
    let first = cross_entropy(&model.forward(&x), &y).item();
    let mut last = first;
    for _ in 0..60 {
        let loss = cross_entropy(&model.forward(&x), &y);
        last = loss.item();
        let grads = loss.backward();
        opt.step(&mut model, &grads);
    }
    assert!(last < 0.3 * first, "loss went from {first} to {last}");
    let (tx, ty) = data(256, 2);
    let predicted = rtx::no_grad(|| model.forward(&tx)).argmax::<1>();
    let correct = predicted.eq(&ty).cast::<f32>().mean_all().item();
    assert!(correct > 0.85, "test accuracy {correct}");
}
