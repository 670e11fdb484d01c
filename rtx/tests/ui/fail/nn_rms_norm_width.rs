// An RMSNorm<16> over rows of 8 features, through try_forward.
use rtx::prelude::*;

fn main() {
    let norm = RMSNorm::<16>::new(Device::Cpu);
    let x: Tensor<Rank3<2, 5, 8>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _ = norm.try_forward(&x);
}
