// Summing axis 0 of [2, 3] leaves [3], not [2].
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Tensor<Rank1<2>> = x.sum::<0>();
}
