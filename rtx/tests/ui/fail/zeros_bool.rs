// zeros needs a numeric type; a bool tensor is made with `full`.
use rtx::prelude::*;

fn main() {
    let _x: Tensor<Rank1<3>, bool> = Tensor::zeros((Const,), Device::Cpu);
}
