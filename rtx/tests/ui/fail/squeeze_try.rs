// try_squeeze: axis 0 has size 2, not 1.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 1>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.try_squeeze::<0>();
}
