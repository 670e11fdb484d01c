// A user's generic function that flattens images into rows of the wrong width.
use rtx::prelude::*;

fn rows<const N: usize, const C: usize>(x: &Tensor<Rank4<N, C, 4, 4>>) -> Tensor<Rank2<N, 32>> {
    x.flatten::<1, 3, _>()
}

fn main() {
    let x: Tensor<Rank4<8, 3, 4, 4>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _ = rows(&x);
}
