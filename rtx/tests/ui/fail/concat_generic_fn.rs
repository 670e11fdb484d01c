// A user's generic function that appends a column, with a wrong result width.
use rtx::prelude::*;

fn with_bias<const N: usize, const D: usize>(x: &Tensor<Rank2<N, D>>) -> Tensor<Rank2<N, 8>> {
    let ones: Tensor<Rank2<N, 1>> = Tensor::ones((Const, Const), x.device());
    x.concat::<1, _>(&ones)
}

fn main() {
    let x: Tensor<Rank2<4, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = with_bias(&x);
}
