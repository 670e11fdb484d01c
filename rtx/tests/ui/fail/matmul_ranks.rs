// Two vectors have no matmul rule (a dot product is (a * b).sum_all()).
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = a.matmul(&a);
}
