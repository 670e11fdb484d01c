// split::<2> of a rank-2 tensor: there is no axis 2.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 6>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _parts = a.split::<2>(3);
}
