// try_flatten: merging axes 0..=1 of [2, 3, 4] gives 6, not 8.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y: Result<Tensor<Rank2<8, 4>>> = x.try_flatten::<0, 1, _>();
}
