// flatten: axes 1..=2 of a rank-3 tensor give rank 2, not 3.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank3<2, 12, 1>> = x.flatten::<1, 2, _>();
}
