// An Embedding<100, 16> gives rows of 16, not 32.
use rtx::prelude::*;

fn main() {
    let emb = Embedding::<100, 16>::new(Device::Cpu, 0);
    let ids: Tensor<Rank1<4>, i64> = Tensor::zeros((Const,), Device::Cpu);
    let _y: Tensor<Rank2<4, 32>> = emb.forward(&ids);
}
