// concat along axis 1 of [B, 3] and [T, 3]: the batch and sequence dims differ.
use rtx::prelude::*;

fn main() {
    let a: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::zeros((Dyn(2), Const), Device::Cpu);
    let b: Tensor<(Dyn<'T'>, Const<3>)> = Tensor::zeros((Dyn(2), Const), Device::Cpu);
    let _c: Tensor<(Dyn<'B'>, Const<6>)> = a.concat::<1, _>(&b);
}
