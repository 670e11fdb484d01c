// With the shape given explicitly, a literal of the wrong lengths is named against it.
use rtx::prelude::*;

fn main() {
    let _x = Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
}
