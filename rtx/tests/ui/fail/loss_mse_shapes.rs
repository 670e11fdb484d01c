// mse_loss compares tensors of one shape: [4, 3] against [4, 2].
use rtx::prelude::*;

fn main() {
    let pred: Tensor<Rank2<4, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let target: Tensor<Rank2<4, 2>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = mse_loss(&pred, &target);
}
