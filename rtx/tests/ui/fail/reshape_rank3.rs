// reshape to rank 3 with the wrong element count: 24 elements cannot become 27.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<4, 6>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Tensor<Rank3<3, 3, 3>> = x.reshape((Const, Const, Const));
}
