// The AvgPool2d layer: 3x3 windows with stride 1 and padding 1 keep 8x8.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 2, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 2, 6, 6>> = AvgPool2d::<3, 1, 1>.forward(&x);
}
