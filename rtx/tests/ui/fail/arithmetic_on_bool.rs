// bool tensors have no arithmetic.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>, bool> = Tensor::full((Const,), true, Device::Cpu);
    let _ = x.maximum(true);
}
