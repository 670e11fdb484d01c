// The Conv2d layer checks its output size where the user calls forward.
use rtx::prelude::*;

fn main() {
    let conv = Conv2d::<1, 6, 5>::new(Device::Cpu, 0);
    let x: Tensor<Rank4<8, 1, 28, 28>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<8, 6, 28, 28>> = conv.forward(&x);
}
