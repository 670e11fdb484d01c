// Adding [2, 3] and [4]: the smaller shape must equal the trailing dims of the larger.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let b: Tensor<Rank1<4>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x + b;
}
