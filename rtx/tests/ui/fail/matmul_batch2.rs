// Batched matmul with two batch dims on both sides: 4 and 5 differ.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank4<2, 4, 3, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let b: Tensor<Rank4<2, 5, 8, 6>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _ = a.matmul(&b);
}
