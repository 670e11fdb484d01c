// try_conv1d: a 5-tap kernel over 16 gives 12, not 16.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<1, 1, 16>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank3<2, 1, 5>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y = x.try_conv1d::<_, _, _, Const<16>, _>(&w, Conv::<1>);
}
