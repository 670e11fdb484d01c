// A rank-1 tensor has no second axis to transpose with.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x.transpose::<0, 1>();
}
