// var divides by the count, a float op: an i32 tensor must be cast first.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>, i32> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.var::<1>(1);
}
