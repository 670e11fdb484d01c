// Batched matmul: batch dims 3 and 5 differ.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank3<3, 2, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let b: Tensor<Rank3<5, 4, 6>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _ = a.matmul(&b);
}
