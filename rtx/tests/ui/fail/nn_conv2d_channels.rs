// A Conv2d<3, ..> takes 3 input channels, not 1.
use rtx::prelude::*;

fn main() {
    let conv = Conv2d::<3, 8, 3>::new(Device::Cpu, 0);
    let x: Tensor<Rank4<2, 1, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<2, 8, 6, 6>> = conv.forward(&x);
}
