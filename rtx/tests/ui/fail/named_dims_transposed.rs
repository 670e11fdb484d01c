// [B, T] and [T, B] do not add: the named dims are in the wrong order.
use rtx::prelude::*;

fn main() {
    let x: Tensor<(Dyn<'B'>, Dyn<'T'>)> = Tensor::zeros((Dyn(4), Dyn(4)), Device::Cpu);
    let y = x.t();
    let _ = &x * &y;
}
