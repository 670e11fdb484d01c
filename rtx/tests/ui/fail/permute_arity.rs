// permute: three axes given for a rank-2 tensor.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = x.permute::<Axes3<0, 2, 1>>();
}
