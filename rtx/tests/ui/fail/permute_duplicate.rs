// permute: axis 1 named twice is not a permutation.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _ = x.permute::<Axes3<0, 1, 1>>();
}
