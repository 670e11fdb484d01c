// Indices are i64 tensors, not i32.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let idx: Tensor<Rank1<2>, i32> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x.index_select::<0, _>(&idx);
}
