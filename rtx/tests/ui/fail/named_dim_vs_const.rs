// A named run-time dim does not match a static one.
use rtx::prelude::*;

fn main() {
    let x: Tensor<(Dyn<'B'>, Const<8>)> = Tensor::zeros((Dyn(4), Const), Device::Cpu);
    let y: Tensor<Rank2<4, 8>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x + y;
}
