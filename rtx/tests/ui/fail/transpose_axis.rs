// transpose: a rank-2 tensor has no axis 2.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.transpose::<0, 2>();
}
