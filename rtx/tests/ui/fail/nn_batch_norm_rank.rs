// Batch norm needs a channel axis: a rank-1 input has none.
use rtx::prelude::*;

fn main() {
    let bn = BatchNorm1d::<3>::new(Device::Cpu);
    let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = bn.forward(&x);
}
