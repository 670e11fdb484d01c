// cat::<2> of rank-2 tensors: there is no axis 2.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _c = Tensor::cat::<2, usize>(&[&a, &a]);
}
