// A flat literal for a rank-2 shape.
use rtx::prelude::*;

fn main() {
    let _x: Tensor<Rank2<2, 2>> = Tensor::from_array([1.0, 2.0, 3.0, 4.0], Device::Cpu);
}
