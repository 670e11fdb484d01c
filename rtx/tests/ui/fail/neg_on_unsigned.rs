// u8 has no sign: neg needs a signed type.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>, u8> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x.neg();
}
