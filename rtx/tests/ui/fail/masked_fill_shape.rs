// masked_fill: a [3] mask does not broadcast to [2, 4].
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank2<2, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let mask: Tensor<Rank1<3>, bool> = Tensor::full((Const,), true, Device::Cpu);
    let _ = x.masked_fill(&mask, 0.0);
}
