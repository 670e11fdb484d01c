// conv1d_bias: a 3-tap kernel with dilation 2 over 10 gives 6, not 8.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<1, 2, 10>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank3<4, 2, 3>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let b: Tensor<Rank1<4>> = Tensor::zeros((Const,), Device::Cpu);
    let _y: Tensor<Rank3<1, 4, 8>> = x.conv1d_bias(&w, &b, Conv::<1, 0, 2>);
}
