// Only a one-element tensor reshapes to a scalar: 3 elements cannot become 1.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _s: Tensor<()> = x.reshape(());
}
