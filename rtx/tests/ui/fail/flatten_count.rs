// flatten: merging [3, 4] gives 12, not 10.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank2<2, 10>> = x.flatten::<1, 2, _>();
}
