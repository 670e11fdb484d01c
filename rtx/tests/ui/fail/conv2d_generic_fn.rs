// A user's generic function that convolves and states a wrong output size.
use rtx::prelude::*;

fn features<const N: usize, const S: usize>(
    x: &Tensor<Rank4<N, 1, S, S>>,
    w: &Tensor<Rank4<4, 1, 3, 3>>,
) -> Tensor<Rank4<N, 4, S, S>> {
    x.conv2d(w, Conv::<1>)
}

fn main() {
    let x: Tensor<Rank4<2, 1, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<4, 1, 3, 3>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _ = features(&x, &w);
}
