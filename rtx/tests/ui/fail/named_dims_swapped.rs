// A batch dim `Dyn<'B'>` cannot stand in for a sequence dim `Dyn<'T'>`.
use rtx::prelude::*;

fn main() {
    let x: Tensor<(Dyn<'B'>, Const<8>)> = Tensor::zeros((Dyn(4), Const), Device::Cpu);
    let y: Tensor<(Dyn<'T'>, Const<8>)> = Tensor::zeros((Dyn(4), Const), Device::Cpu);
    let _ = x + y;
}
