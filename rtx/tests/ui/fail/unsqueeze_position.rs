// unsqueeze: a rank-1 tensor takes a new axis at 0 or 1, not 3.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x.unsqueeze::<3>();
}
