// An f64 scalar does not combine with an f32 tensor.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>, f32> = Tensor::zeros((Const,), Device::Cpu);
    let s: f64 = 2.0;
    let _ = x * s;
}
