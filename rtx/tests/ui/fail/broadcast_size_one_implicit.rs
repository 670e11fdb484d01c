// A size-1 dim does not expand implicitly: [2, 3] + [2, 1] needs `broadcast_to`.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let col: Tensor<Rank2<2, 1>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = &x - &col;
}
