// conv1d: stride 2 over length 100 with a kernel of 3 gives 49, not 50.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<4, 2, 100>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank3<8, 2, 3>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank3<4, 8, 50>> = x.conv1d(&w, Conv::<2>);
}
