// cross_entropy: 8 rows of logits against 4 targets.
use rtx::prelude::*;

fn main() {
    let logits: Tensor<Rank2<8, 10>> = Tensor::zeros((Const, Const), Device::Cpu);
    let targets: Tensor<Rank1<4>, i64> = Tensor::zeros((Const,), Device::Cpu);
    let _ = cross_entropy(&logits, &targets);
}
