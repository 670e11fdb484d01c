// rand draws floats: an i32 tensor takes randint.
use rtx::prelude::*;

fn main() {
    let _x: Tensor<Rank1<3>, i32> = Tensor::rand((Const,), 0, Device::Cpu);
}
