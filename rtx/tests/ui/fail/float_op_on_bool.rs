// sigmoid is a float op: a bool tensor must be cast first.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>, bool> = Tensor::full((Const,), true, Device::Cpu);
    let _ = x.sigmoid();
}
