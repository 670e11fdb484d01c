// tril works on matrices: a rank-1 tensor has no axis 1.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x.tril(0);
}
