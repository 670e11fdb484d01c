// The MaxPool2d layer: 2x2 windows with stride 2 over 24x24 give 12x12.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 6, 24, 24>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 6, 24, 24>> = MaxPool2d::<2, 2>.forward(&x);
}
