// A BatchNorm2d<16> over an input with 8 channels.
use rtx::prelude::*;

fn main() {
    let bn = BatchNorm2d::<16>::new(Device::Cpu);
    let x: Tensor<Rank4<4, 8, 5, 5>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _ = bn.forward(&x);
}
