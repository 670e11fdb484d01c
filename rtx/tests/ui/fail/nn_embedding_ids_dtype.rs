// Embedding looks up i64 token ids, not f32 values.
use rtx::prelude::*;

fn main() {
    let emb = Embedding::<100, 16>::new(Device::Cpu, 0);
    let ids: Tensor<Rank1<4>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = emb.forward(&ids);
}
