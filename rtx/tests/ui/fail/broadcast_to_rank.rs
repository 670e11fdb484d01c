// broadcast_to never drops axes: a rank-2 tensor cannot broadcast to rank 1.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<1, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Tensor<Rank1<4>> = x.broadcast_to((Const,));
}
