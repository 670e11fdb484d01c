// Dropout scales by 1/(1-p), a float op: an i64 tensor must be cast first.
use rtx::prelude::*;

fn main() {
    let drop = Dropout::new(0.1, 0);
    let x: Tensor<Rank1<3>, i64> = Tensor::zeros((Const,), Device::Cpu);
    let _ = drop.forward(&x);
}
