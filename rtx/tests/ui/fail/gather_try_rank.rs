// try_gather holds to the rank rule too.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let idx: Tensor<Rank3<2, 1, 1>, i64> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _ = x.try_gather::<1, _>(&idx);
}
