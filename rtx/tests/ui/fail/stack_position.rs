// stack::<3> of rank-1 tensors: a new axis may go at 0 or 1 only.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank1<2>> = Tensor::zeros((Const,), Device::Cpu);
    let _s = Tensor::stack::<3, 2>([&a, &a]);
}
