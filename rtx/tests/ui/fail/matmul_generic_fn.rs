// A user's generic function that multiplies without stating the matmul rule.
use rtx::prelude::*;

fn project<const N: usize, const K: usize>(x: &Tensor<Rank2<N, K>>, w: &Tensor<Rank2<8, 4>>) {
    let _ = x.matmul(w);
}

fn main() {
    let x: Tensor<Rank2<2, 8>> = Tensor::zeros((Const, Const), Device::Cpu);
    let w: Tensor<Rank2<8, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    project(&x, &w);
}
