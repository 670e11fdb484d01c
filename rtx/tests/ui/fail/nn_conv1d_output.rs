// The Conv1d layer: a 3-tap kernel with padding 1 keeps length 10, not 8.
use rtx::prelude::*;

fn main() {
    let conv = Conv1d::<2, 4, 3, Conv<1, 1>>::new(Device::Cpu, 0);
    let x: Tensor<Rank3<1, 2, 10>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank3<1, 4, 8>> = conv.forward(&x);
}
