// where_cond: a [2, 4] condition does not broadcast to [2, 3].
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let cond: Tensor<Rank2<2, 4>, bool> = Tensor::full((Const, Const), true, Device::Cpu);
    let _ = x.where_cond(&cond, 0.0);
}
