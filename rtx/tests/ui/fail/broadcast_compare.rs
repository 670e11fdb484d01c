// Comparisons broadcast like arithmetic: [3] vs [5] is a mismatch.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let y: Tensor<Rank1<5>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x.lt(&y);
}
