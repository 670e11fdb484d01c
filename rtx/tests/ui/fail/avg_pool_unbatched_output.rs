// avg_pool2d of an unbatched [C, H, W] tensor: 2x2 windows over 6x6 give 3x3.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank3<4, 6, 6>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank3<4, 2, 2>> = x.avg_pool2d(Pool::<2, 2>);
}
