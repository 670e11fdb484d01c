// reshape: 12 elements cannot become 10.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<3, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Tensor<Rank2<2, 5>> = x.reshape((Const, Const));
}
