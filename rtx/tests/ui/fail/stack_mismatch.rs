// stack needs tensors of one shape: [2, 3] and [2, 4] cannot be stacked.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let b: Tensor<Rank2<2, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _s = Tensor::stack::<0, 2>([&a, &b]);
}
