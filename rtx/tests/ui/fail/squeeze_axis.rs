// squeeze::<2> on a rank-2 tensor: there is no axis 2.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 1>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.squeeze::<2>();
}
