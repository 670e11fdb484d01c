// try_max_pool2d: a 3x3 window with stride 3 over 9x9 gives 3x3, not 4x4.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 1, 9, 9>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Result<Tensor<Rank4<1, 1, 4, 4>>> = x.try_max_pool2d(Pool::<3, 3>);
}
