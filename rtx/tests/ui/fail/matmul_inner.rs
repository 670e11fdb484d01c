// [B, 784] x [512, 128]: the inner dimensions 784 and 512 differ.
use rtx::prelude::*;

fn main() {
    let x: Tensor<(Dyn<'B'>, Const<784>)> = Tensor::zeros((Dyn(4), Const), Device::Cpu);
    let w: Tensor<Rank2<512, 128>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.matmul(&w);
}
