// [B, T] x [B, 8]: the inner dims are named `T` and `B`.
use rtx::prelude::*;

fn main() {
    let x: Tensor<(Dyn<'B'>, Dyn<'T'>)> = Tensor::zeros((Dyn(4), Dyn(4)), Device::Cpu);
    let w: Tensor<(Dyn<'B'>, Const<8>)> = Tensor::zeros((Dyn(4), Const), Device::Cpu);
    let _ = x.matmul(&w);
}
