// maximum broadcasts like +: [4] is not the trailing dims of [2, 3].
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let y: Tensor<Rank1<4>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x.maximum(&y);
}
