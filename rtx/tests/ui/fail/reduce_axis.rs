// sum along axis 2 of a rank-2 tensor: there is no axis 2.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.sum::<2>();
}
