// broadcast_to can only expand size-1 dims: [3] cannot become [2, 4].
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _y: Tensor<Rank2<2, 4>> = x.broadcast_to((Const, Const));
}
