// narrow keeps the other dims: its result is [2, 2], not [3, 2].
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 5>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Tensor<Rank2<3, 2>> = x.narrow::<1, Const<2>>(0, Const);
}
