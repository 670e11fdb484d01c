// The product of [2, 3] and [3, 4] is [2, 4], not [2, 5].
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let b: Tensor<Rank2<3, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _c: Tensor<Rank2<2, 5>> = a.matmul(&b);
}
