// flatten::<2, 3> on a rank-3 tensor: axis 3 does not exist.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank2<2, 12>> = x.flatten::<2, 3, _>();
}
