// squeeze: axis 1 has size 3, not 1.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.squeeze::<1>();
}
