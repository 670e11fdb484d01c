// arange counts, which bool tensors cannot.
use rtx::prelude::*;

fn main() {
    let _x: Tensor<Rank1<3>, bool> = Tensor::arange(Const, Device::Cpu);
}
