// mean is a float op: an i64 tensor must be cast first.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>, i64> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.mean::<1>();
}
