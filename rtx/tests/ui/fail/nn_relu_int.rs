// ReLU is a float op: an i32 tensor must be cast first.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>, i32> = Tensor::zeros((Const,), Device::Cpu);
    let _ = ReLU.forward(&x);
}
