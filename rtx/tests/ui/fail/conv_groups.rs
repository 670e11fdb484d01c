// A grouped convolution needs the groups to divide the channels: 3 groups over 4 channels.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 4, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<6, 1, 3, 3>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 6, 6, 6>> = x.conv2d(&w, GroupedConv::<3>);
}
