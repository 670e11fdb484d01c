// Pooling padding may be at most half the window: 2 over a 3x3 window.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 1, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 1, 4, 4>> = x.max_pool2d(Pool::<3, 2, 2>);
}
