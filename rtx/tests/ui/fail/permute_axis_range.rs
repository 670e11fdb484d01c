// Axes3<0, 1, 3> names axis 3 of a rank-3 tensor.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _ = x.permute::<Axes3<0, 1, 3>>();
}
