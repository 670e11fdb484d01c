// softmax along axis 3 of a rank-3 tensor: there is no axis 3.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _ = x.softmax::<3>();
}
