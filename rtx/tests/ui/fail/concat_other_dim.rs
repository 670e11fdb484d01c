// concat along axis 1: the rows (axis 0) must agree, and 2 is not 3.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let b: Tensor<Rank2<3, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _c: Tensor<Rank2<2, 7>> = a.concat::<1, _>(&b);
}
