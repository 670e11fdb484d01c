// concat along axis 1: 3 + 4 columns cannot become 8.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let b: Tensor<Rank2<2, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _c: Tensor<Rank2<2, 8>> = a.concat::<1, _>(&b);
}
