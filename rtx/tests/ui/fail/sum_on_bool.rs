// sum is arithmetic, which bool tensors do not have.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>, bool> = Tensor::full((Const,), true, Device::Cpu);
    let _ = x.sum_all();
}
