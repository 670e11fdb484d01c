// attention: queries with heads of 16 against keys with heads of 8.
use rtx::prelude::*;

fn main() {
    let q: Tensor<Rank4<1, 2, 5, 16>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let k: Tensor<Rank4<1, 2, 5, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let v: Tensor<Rank4<1, 2, 5, 16>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _ = q.attention(&k, &v, None, 0.25);
}
