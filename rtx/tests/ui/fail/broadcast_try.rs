// try_broadcast_to holds to the rule too: dimension 3 cannot become 5.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<1, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Result<Tensor<Rank2<4, 5>>> = x.try_broadcast_to((Const, Const));
}
