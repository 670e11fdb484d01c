// scatter takes an index of the input's rank: rank 1 against rank 2.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let idx: Tensor<Rank1<2>, i64> = Tensor::zeros((Const,), Device::Cpu);
    let src: Tensor<Rank2<2, 1>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.scatter::<1>(&idx, &src);
}
