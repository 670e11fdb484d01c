// expand is broadcast_to under PyTorch's name: [2, 3] cannot become [2, 6].
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Tensor<Rank2<2, 6>> = x.expand((Const, Const));
}
