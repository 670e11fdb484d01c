// [2, 3] times a vector of 4: the inner dims 3 and 4 differ.
use rtx::prelude::*;

fn main() {
    let m: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let v: Tensor<Rank1<4>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = m.matmul(&v);
}
