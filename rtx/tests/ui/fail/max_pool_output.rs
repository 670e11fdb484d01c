// max_pool2d with a 2x2 window and stride 2 over 24x24 gives 12x12, not 11x11.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<8, 6, 24, 24>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<8, 6, 11, 11>> = x.max_pool2d(Pool::<2, 2>);
}
