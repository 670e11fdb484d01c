// CausalSelfAttention<64, 4> over 32 features.
use rtx::prelude::*;

fn main() {
    let attn = CausalSelfAttention::<64, 4>::new(Device::Cpu, 0);
    let x: Tensor<Rank3<2, 5, 32>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    let _ = attn.forward(&x);
}
