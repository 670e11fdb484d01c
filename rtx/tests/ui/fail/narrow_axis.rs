// narrow: a rank-2 tensor has no axis 5.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.narrow::<5, usize>(0, 1);
}
