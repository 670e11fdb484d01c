// The literal has 2 columns; the shape says 3.
use rtx::prelude::*;

fn main() {
    let _x: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
}
