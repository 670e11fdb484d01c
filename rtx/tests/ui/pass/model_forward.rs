// A compiled forward: a sub-model call, an elementwise chain and `#[model(eager)]` beside it.
use rtx::prelude::*;

#[model]
struct Net {
    fc: Linear<3, 2>,
}

#[model]
impl Net {
    fn forward(&self, x: &Tensor<(Dyn<'B'>, Const<3>)>) -> Tensor<(Dyn<'B'>, Const<2>)> {
        let h = self.fc.forward(x);
        (h * 2.0).relu()
    }
}

#[model]
struct Eager {
    fc: Linear<3, 2>,
}

#[model(eager)]
impl Eager {
    fn forward(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 2>> {
        let y = self.fc.forward(x);
        if y.dims()[0] > 2 { y.relu() } else { y }
    }
}

fn main() {
    let net = Net::init(&Device::Cpu, 0);
    let x: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::ones((Dyn(4), Const), Device::Cpu);
    assert_eq!(net.forward_fused(&x).to_vec(), net.forward(&x).to_vec());
    let e = Eager::init(&Device::Cpu, 0);
    let _ = e.forward(&Tensor::ones((Const, Const), Device::Cpu));
}
