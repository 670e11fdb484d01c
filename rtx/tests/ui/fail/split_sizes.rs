// split2 along axis 1: 5 columns cannot become 2 + 2.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 5>> = Tensor::zeros((Const, Const), Device::Cpu);
    let (_l, _r) = a.split2::<1, Const<2>, Const<2>>(Const, Const);
}
