// Multiplying [2, 3] by [2, 4]: equal ranks need equal dims.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let y: Tensor<Rank2<2, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.maximum(&y);
}
